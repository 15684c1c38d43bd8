// Time limits as people write them (issue 32 item 5, docs/api.md): seconds ("5400"), one
// unit ("90m", "2h", "1d", "30s"), or Slurm's clock forms "H:MM:SS" and "D-HH:MM:SS".
#include <cstdint>
#include <string>

#include "runtime/api/request.h"

namespace aegis::api {
namespace {

// The digits of `s` as a number; -1 when not all digits or too long to matter.
std::int64_t whole_of(std::string_view s) {
  if (s.empty() || s.size() > 9) return -1;
  std::int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

// "H:MM:SS" or "D-HH:MM:SS"; -1 when malformed.
std::int64_t clock_form(std::string_view s) {
  std::int64_t days = 0;
  if (const auto dash = s.find('-'); dash != std::string_view::npos) {
    days = whole_of(s.substr(0, dash));
    if (days < 0) return -1;
    s = s.substr(dash + 1);
  }
  const auto c1 = s.find(':');
  const auto c2 = c1 == std::string_view::npos ? c1 : s.find(':', c1 + 1);
  if (c2 == std::string_view::npos || s.find(':', c2 + 1) != std::string_view::npos) return -1;
  const std::string_view mm = s.substr(c1 + 1, c2 - c1 - 1), ss = s.substr(c2 + 1);
  if (mm.size() != 2 || ss.size() != 2) return -1;
  const std::int64_t h = whole_of(s.substr(0, c1)), m = whole_of(mm), sec = whole_of(ss);
  if (h < 0 || m < 0 || sec < 0 || m > 59 || sec > 59) return -1;
  return days * 86400 + h * 3600 + m * 60 + sec;
}

}  // namespace

std::optional<std::int64_t> parse_time_limit(std::string_view text) {
  std::int64_t s = -1;
  if (text.find(':') != std::string_view::npos) {
    s = clock_form(text);
  } else if (!text.empty()) {
    std::int64_t unit = 0;  // 0: no unit, seconds
    switch (text.back()) {
      case 's': unit = 1; break;
      case 'm': unit = 60; break;
      case 'h': unit = 3600; break;
      case 'd': unit = 86400; break;
      default: break;
    }
    const std::int64_t v = whole_of(unit ? text.substr(0, text.size() - 1) : text);
    if (v >= 0) s = v * (unit ? unit : 1);
  }
  if (s < 1 || s > kMaxTimeLimitS) return std::nullopt;
  return s;
}

}  // namespace aegis::api
