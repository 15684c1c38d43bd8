#include "runtime/daemon/dashboard_http.h"

#include <cctype>
#include <fmt/format.h>

namespace aegis::dashboard_http {

namespace {

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX and '+' (a query's space); a malformed escape stays as it is.
std::string decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
  }
}

}  // namespace

std::size_t head_length(std::string_view buf) {
  // Lines end in CRLF; a bare LF is accepted too (RFC 9112 2.2), so "\n\r\n" and "\n\n" end a head.
  for (std::size_t i = buf.find('\n'); i != std::string_view::npos; i = buf.find('\n', i + 1)) {
    if (i + 1 < buf.size() && buf[i + 1] == '\n') return i + 2;
    if (i + 2 < buf.size() && buf[i + 1] == '\r' && buf[i + 2] == '\n') return i + 3;
  }
  return 0;
}

Request parse_head(std::string_view head) {
  Request r;
  const auto bad = [&r](int status) {
    r.error = status;
    return r;
  };
  const std::size_t eol = head.find('\n');
  std::string_view line = trim(head.substr(0, eol));
  head.remove_prefix(eol == std::string_view::npos ? head.size() : eol + 1);
  const std::size_t a = line.find(' '), b = line.rfind(' ');
  if (a == std::string_view::npos || a == b) return bad(400);
  r.method = std::string(line.substr(0, a));
  const std::string_view target = line.substr(a + 1, b - a - 1), version = line.substr(b + 1);
  if (target.empty() || target.front() != '/' || target.find(' ') != std::string_view::npos) return bad(400);
  if (version.substr(0, 5) != "HTTP/") return bad(400);
  if (version.substr(0, 7) != "HTTP/1.") return bad(505);
  for (char c : r.method)
    if (c < 'A' || c > 'Z') return bad(400);
  // Headers: only a body matters (the dashboard accepts none), and a malformed line.
  while (!head.empty()) {
    const std::size_t e = head.find('\n');
    std::string_view h = head.substr(0, e);
    head.remove_prefix(e == std::string_view::npos ? head.size() : e + 1);
    if (!h.empty() && h.back() == '\r') h.remove_suffix(1);
    if (h.empty()) break;
    const std::size_t colon = h.find(':');
    if (colon == 0 || colon == std::string_view::npos || h.front() == ' ' || h.front() == '\t') return bad(400);
    const std::string_view name = h.substr(0, colon), value = trim(h.substr(colon + 1));
    if (name.find_first_of(" \t") != std::string_view::npos) return bad(400);
    if ((iequals(name, "content-length") && value != "0") || iequals(name, "transfer-encoding")) r.error = 413;
  }
  if (r.method != "GET" && r.method != "HEAD") r.error = 405;
  if (r.error) return r;
  const std::size_t q = target.find('?');
  r.path = std::string(target.substr(0, q));
  if (q == std::string_view::npos) return r;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query.remove_prefix(amp == std::string_view::npos ? query.size() : amp + 1);
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    r.query.emplace(decode(pair.substr(0, eq)), eq == std::string_view::npos ? "" : decode(pair.substr(eq + 1)));
  }
  return r;
}

// The page's script and styles are inline and it loads nothing else: the policy forbids
// every other load, and the endpoints send JSON that is never interpreted as a page.
std::string format_reply(int status, std::string_view type, std::string_view body, bool head_only) {
  std::string out = fmt::format(
      "HTTP/1.1 {} {}\r\n"
      "Cache-Control: no-store\r\n"
      "X-Content-Type-Options: nosniff\r\n"
      "Referrer-Policy: no-referrer\r\n"
      "Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
      "img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n",
      status, reason(status));
  if (status == 405) out += "Allow: GET, HEAD\r\n";
  if (!type.empty()) out += fmt::format("Content-Type: {}\r\n", type);
  out += fmt::format("Content-Length: {}\r\nConnection: close\r\n\r\n", body.size());
  if (!head_only) out += body;
  return out;
}

std::string error_json(std::string_view message) {
  std::string out = "{\"ok\":false,\"error\":\"";
  for (char c : message) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"}";
}

}  // namespace aegis::dashboard_http
