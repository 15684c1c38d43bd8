// Which priority levels a user may ask for (issue 32 item 1): aegisd's `priority_levels`
// (runtime/daemon/priority_levels.h), its parse errors and the one line a refusal gives.
#include <gtest/gtest.h>

#include "runtime/daemon/config.h"
#include "runtime/daemon/priority_levels.h"

namespace aegis {
namespace {

std::vector<LevelRule> rules(std::string_view text) {
  auto r = parse_priority_levels(text);
  if (auto* e = std::get_if<std::string>(&r)) ADD_FAILURE() << text << ": " << *e;
  return std::holds_alternative<std::vector<LevelRule>>(r) ? std::get<std::vector<LevelRule>>(r) : std::vector<LevelRule>{};
}

std::string error(std::string_view text) {
  auto r = parse_priority_levels(text);
  return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : "<accepted>";
}

TEST(PriorityLevels, EveryoneZeroByDefault) {
  const auto def = rules(DaemonSettings{}.priority_levels);
  auto no_group = [](const std::string&) { return false; };
  EXPECT_FALSE(why_priority_refused(def, 0, "ann", no_group));
  EXPECT_EQ(why_priority_refused(def, 1, "ann", no_group).value_or(""),
            "--priority 1: ann may use level 0 (the admin's priority_levels)");
  EXPECT_TRUE(why_priority_refused(def, -1, "ann", no_group));
}

TEST(PriorityLevels, UsersAndGroupsGetTheUnionOfTheirEntries) {
  const auto r = rules("*:0, @ml:0..5, alice:-10..2");
  auto in_ml = [](const std::string& g) { return g == "ml"; };
  auto none = [](const std::string&) { return false; };
  EXPECT_FALSE(why_priority_refused(r, 5, "bob", in_ml));
  EXPECT_EQ(why_priority_refused(r, 6, "bob", in_ml).value_or(""),
            "--priority 6: bob may use levels 0, 0..5 (the admin's priority_levels)");
  EXPECT_TRUE(why_priority_refused(r, 5, "bob", none));
  EXPECT_FALSE(why_priority_refused(r, -10, "alice", none));
  EXPECT_FALSE(why_priority_refused(r, 4, "alice", in_ml));
  // Level 0 is everyone's, whatever the entries say: the setting grants, never locks out.
  const auto only_alice = rules("alice:1");
  EXPECT_FALSE(why_priority_refused(only_alice, 0, "bob", none));
  EXPECT_EQ(why_priority_refused(only_alice, 1, "bob", none).value_or(""),
            "--priority 1: bob may use level 0 (the admin's priority_levels)");
}

TEST(PriorityLevels, MalformedEntriesAreNamed) {
  EXPECT_EQ(error("alice"), "'alice': expected WHO:LEVELS (WHO a user, @group or *; LEVELS N or LO..HI)");
  EXPECT_EQ(error("*:5..1"), "'*:5..1': LEVELS must be N or LO..HI with -1000 <= LO <= HI <= 1000");
  EXPECT_EQ(error("*:x"), "'*:x': LEVELS must be N or LO..HI with -1000 <= LO <= HI <= 1000");
  EXPECT_EQ(error("*:0..2000"), "'*:0..2000': LEVELS must be N or LO..HI with -1000 <= LO <= HI <= 1000");
  EXPECT_EQ(error(""), "<accepted>");  // level 0 only, for everyone
  EXPECT_THROW(load_daemon_config("", {"priority_levels=alice"}), ConfigError);
  EXPECT_EQ(load_daemon_config("", {"priority_levels=*:0..3", "preemption=true"}).daemon.preemption, true);
}

}  // namespace
}  // namespace aegis
