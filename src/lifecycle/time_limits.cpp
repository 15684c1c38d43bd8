#include "lifecycle/time_limits.h"

#include <cmath>
#include <fmt/format.h>

namespace aegis {

void Deadlines::take_due(Seconds now, std::vector<Due>& out) {
  while (!heap_.empty() && heap_.top().at <= now) {
    out.push_back(heap_.top());
    heap_.pop();
  }
}

std::optional<Seconds> Deadlines::next() const {
  if (heap_.empty()) return std::nullopt;
  return heap_.top().at;
}

std::string format_time_limit(Seconds s) {
  auto left = static_cast<long long>(std::llround(s));
  const long long d = left / 86400, h = left % 86400 / 3600, m = left % 3600 / 60, sec = left % 60;
  std::string out;
  if (d) out += fmt::format("{}d", d);
  if (h) out += fmt::format("{}h", h);
  if (m) out += fmt::format("{}m", m);
  if (sec || out.empty()) out += fmt::format("{}s", sec);
  return out;
}

}  // namespace aegis
