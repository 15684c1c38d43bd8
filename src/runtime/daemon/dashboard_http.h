// The little HTTP/1.1 the dashboard speaks (dashboard_server.cpp): a request head of at
// most kMaxHead bytes parsed into method, path and query, and a whole reply formatted with
// the dashboard's headers and `Connection: close`. No request body, keep-alive or chunking.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <string_view>

namespace aegis::dashboard_http {

// A request head (request line and headers) longer than this is answered 431. Browsers
// send well under 2 KiB to a page without cookies; 8 KiB is what common servers allow.
inline constexpr std::size_t kMaxHead = 8192;

// The length of the head at the start of `buf` (through its blank line), or 0 while the
// blank line has not arrived.
std::size_t head_length(std::string_view buf);

struct Request {
  int error = 0;  // 0, or the status to answer: 400, 405 (not GET or HEAD), 413 (a body), 505
  std::string method, path;
  std::map<std::string, std::string> query;  // the first value of each name, decoded
};
Request parse_head(std::string_view head);

// The reply's bytes: the status line, the dashboard's security headers, the type, the
// length, `Connection: close`, then `body` unless `head_only` (a HEAD request).
std::string format_reply(int status, std::string_view type, std::string_view body, bool head_only);

// A JSON error body, as the dashboard's endpoints send them.
std::string error_json(std::string_view message);

}  // namespace aegis::dashboard_http
