#include "runtime/api/notify_set.h"

#include "runtime/api/detail.h"

namespace aegis::api {

std::variant<NotifySet, std::string> parse_notify(std::string_view text) {
  NotifySet s;
  if (text.empty() || text == "none") return s;
  std::size_t from = 0;
  while (from <= text.size()) {
    const std::size_t comma = text.find(',', from);
    const std::string_view word = text.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from);
    bool known = false;
    if (word == "all") {
      for (std::size_t i = 0; i < kNotifyEventNames.size(); ++i) s.add(static_cast<NotifyEvent>(i));
      known = true;
    }
    for (std::size_t i = 0; i < kNotifyEventNames.size() && !known; ++i)
      if (word == kNotifyEventNames[i]) {
        s.add(static_cast<NotifyEvent>(i));
        known = true;
      }
    if (!known)
      return "unknown event '" + detail::printable(word.substr(0, 40)) +
             "' (expected a comma list of start, oom, end, fail, cancel, eta, or all or none)";
    if (comma == std::string_view::npos) break;
    from = comma + 1;
  }
  return s;
}

std::string to_string(NotifySet s) {
  std::string out;
  for (std::size_t i = 0; i < kNotifyEventNames.size(); ++i)
    if (s.has(static_cast<NotifyEvent>(i))) {
      if (!out.empty()) out += ',';
      out += kNotifyEventNames[i];
    }
  return out;
}

}  // namespace aegis::api
