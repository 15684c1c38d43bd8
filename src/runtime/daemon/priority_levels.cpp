#include "runtime/daemon/priority_levels.h"

#include <charconv>
#include <fmt/format.h>

#include "runtime/api/request.h"

namespace aegis {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<int> level(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v < api::kMinPriority || v > api::kMaxPriority) return {};
  return v;
}

std::string range_text(int lo, int hi) { return lo == hi ? std::to_string(lo) : fmt::format("{}..{}", lo, hi); }

}  // namespace

std::variant<std::vector<LevelRule>, std::string> parse_priority_levels(std::string_view text) {
  std::vector<LevelRule> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view entry = trim(text.substr(pos, comma - pos));
    pos = comma + 1;
    if (entry.empty()) continue;
    const auto colon = entry.rfind(':');
    if (colon == std::string_view::npos || colon == 0)
      return fmt::format("'{}': expected WHO:LEVELS (WHO a user, @group or *; LEVELS N or LO..HI)", entry);
    LevelRule r;
    const std::string_view who = trim(entry.substr(0, colon)), levels = trim(entry.substr(colon + 1));
    if (who == "*") {
      r.who = LevelRule::Who::Anyone;
    } else if (who.starts_with('@') && who.size() > 1) {
      r.who = LevelRule::Who::Group;
      r.name = std::string(who.substr(1));
    } else {
      r.who = LevelRule::Who::User;
      r.name = std::string(who);
    }
    const auto dots = levels.find("..");
    const auto lo = level(dots == std::string_view::npos ? levels : levels.substr(0, dots));
    const auto hi = level(dots == std::string_view::npos ? levels : levels.substr(dots + 2));
    if (!lo || !hi || *lo > *hi)
      return fmt::format("'{}': LEVELS must be N or LO..HI with {} <= LO <= HI <= {}", entry, api::kMinPriority,
                         api::kMaxPriority);
    r.lo = *lo;
    r.hi = *hi;
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<std::string> why_priority_refused(const std::vector<LevelRule>& rules, int lvl, const std::string& user,
                                                const std::function<bool(const std::string&)>& in_group) {
  // Level 0 is everyone's: this setting grants levels, it never locks anybody out.
  if (lvl == 0) return std::nullopt;
  std::string allowed = "0";
  for (const auto& r : rules) {
    const bool names = r.who == LevelRule::Who::Anyone || (r.who == LevelRule::Who::User && r.name == user) ||
                       (r.who == LevelRule::Who::Group && in_group(r.name));
    if (!names) continue;
    if (lvl >= r.lo && lvl <= r.hi) return std::nullopt;
    if (r.lo != 0 || r.hi != 0) allowed += ", " + range_text(r.lo, r.hi);
  }
  return fmt::format("--priority {}: {} may use level{} {} (the admin's priority_levels)", lvl, user,
                     allowed == "0" ? "" : "s", allowed);
}

}  // namespace aegis
