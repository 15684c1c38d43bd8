// Which priority levels a user may ask for (issue 32 item 1): the daemon's
// `priority_levels` setting (docs/config.md), read once, asked at every submit.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace aegis {

struct LevelRule {
  enum class Who { Anyone, User, Group } who = Who::Anyone;
  std::string name;  // the user or group
  int lo = 0, hi = 0;
};

// "*:0, @ml:0..5, alice:-10..10"; one line naming the entry when it is malformed.
std::variant<std::vector<LevelRule>, std::string> parse_priority_levels(std::string_view text);

// Why `user` may not use `level` (one line naming --priority and the levels they may
// use), or nothing. Level 0 is everyone's; the rules grant the others: every level of every
// entry naming the user. `in_group(name)`: whether the user belongs to that Unix group.
std::optional<std::string> why_priority_refused(const std::vector<LevelRule>& rules, int level, const std::string& user,
                                                const std::function<bool(const std::string&)>& in_group);

}  // namespace aegis
