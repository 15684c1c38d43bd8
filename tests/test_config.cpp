// The engine config: published defaults, the guard, overrides from text and their errors.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "sched/config_params.h"
#include "sched/policies.h"
#include "sim/sim_config.h"

namespace aegis {
namespace {

TEST(Config, PublishedDefaults) {
  const EngineConfig c;
  EXPECT_EQ(c.memory_margin_mib, 2048);
  EXPECT_EQ(c.estimator_free_floor_mib, 5120);
  EXPECT_EQ(c.observation_window_s, 30);
  EXPECT_EQ(c.telemetry_window_samples, 30);
  EXPECT_DOUBLE_EQ(c.smact_threshold, 0.65);
  EXPECT_DOUBLE_EQ(c.smocc_threshold, 0.35);
  EXPECT_DOUBLE_EQ(c.drama_threshold, 0.50);
  EXPECT_DOUBLE_EQ(c.util_threshold, 0.70);
  EXPECT_EQ(c.order, "magm");
  EXPECT_EQ(c.ladder_max_step_mib, 8192);
  EXPECT_TRUE(c.exclusive_first);
  EXPECT_TRUE(c.strict_head_of_line);
}

TEST(Config, GuardIs512OnA40GiBGpuAndOnePercentAbove) {
  const EngineConfig c;
  EXPECT_EQ(c.memory_guard(40960), 512);
  EXPECT_EQ(c.memory_guard(51200), 512);
  EXPECT_EQ(c.memory_guard(81920), 820);  // ceil(819.2)
  EXPECT_EQ(c.memory_guard(143771), 1438);
}

TEST(Config, SetParamFromText) {
  EngineConfig c;
  set_param(c, "smact_threshold", "0.5");
  set_param(c, "order", "bf");
  set_param(c, "observation", "false");
  set_param(c, "ladder_fractions", "0.2,0.4,0.8");
  set_param(c, "memory_margin_mib", "1024");
  EXPECT_DOUBLE_EQ(c.smact_threshold, 0.5);
  EXPECT_EQ(c.order, "bf");
  EXPECT_FALSE(c.observation);
  EXPECT_EQ(c.ladder_fractions, (std::vector<double>{0.2, 0.4, 0.8}));
  EXPECT_EQ(c.memory_margin_mib, 1024);
}

std::string error_of(const std::string& name, const std::string& value) {
  EngineConfig c;
  try {
    set_param(c, name, value);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, BadValuesNameTheField) {
  EXPECT_EQ(error_of("smact_threshold", "high"), "smact_threshold: expected a number, got 'high'");
  EXPECT_EQ(error_of("order", "fastest"), "order: 'fastest' is not one of magm,bf,lug,ff,rr,lpu,lpa");
  EXPECT_EQ(error_of("memory_margin_mib", "-1"), "memory_margin_mib: -1 is out of range [0, inf]");
  EXPECT_EQ(error_of("memory_margin_mib", "1.5"), "memory_margin_mib: expected a whole number, got '1.5'");
  EXPECT_EQ(error_of("ladder_fractions", "0.5,0.25"), "ladder_fractions: must be strictly ascending");
  EXPECT_EQ(error_of("ladder_fractions", "0.5,1.5"), "ladder_fractions: 1.5 is not in (0,1)");
  EXPECT_EQ(error_of("observation", "maybe"), "observation: expected true or false, got 'maybe'");
  EXPECT_NE(error_of("no_such_knob", "1").find("unknown parameter 'no_such_knob'"), std::string::npos);
}

TEST(Config, DescribeListsEveryParameterWithADoc) {
  const auto params = describe(EngineConfig{});
  EXPECT_GE(params.size(), 30u);
  for (const auto& p : params) EXPECT_FALSE(p.doc.empty()) << p.name;
  for (const auto& p : describe(SimConfig{})) EXPECT_FALSE(p.doc.empty()) << p.name;
}

TEST(Config, EveryPolicyIsAValidConfig) {
  for (const auto& p : all_policies()) EXPECT_NO_THROW(validate(policy_config(p.name))) << p.name;
  EXPECT_THROW(policy_config("gandiva"), ConfigError);
}

TEST(Config, SimConfigChecksCrossFields) {
  SimConfig s;
  EXPECT_THROW(set_param(s, "first_activity_p95_s", "1"), ConfigError);
  EXPECT_THROW(set_param(s, "power_idle_w", "500"), ConfigError);
  EXPECT_THROW(set_param(s, "no_such", "1"), ConfigError);
  EXPECT_EQ(s.first_activity_p95_s, 20.6);  // a rejected value changes nothing
  set_param(s, "memory_ramp_s", "5");
  EXPECT_EQ(s.memory_ramp_s, 5);
}

}  // namespace
}  // namespace aegis

namespace aegis {
namespace {

// docs/config.md must document every parameter the tables know.
TEST(Config, EveryParameterIsDocumented) {
  std::ifstream f(std::string(AEGIS_SOURCE_DIR) + "/docs/config.md");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  for (const auto& p : describe(EngineConfig{})) {
    const std::string name(p.name);
    const bool risk = name.rfind("risk_weight_", 0) == 0;  // documented as one row
    EXPECT_TRUE(doc.find("`" + name + "`") != std::string::npos || risk) << name;
  }
  for (const auto& p : describe(SimConfig{})) EXPECT_NE(doc.find("`" + std::string(p.name) + "`"), std::string::npos) << p.name;
  for (const auto& p : all_policies()) EXPECT_NE(doc.find("`" + std::string(p.name) + "`"), std::string::npos) << p.name;
}

}  // namespace
}  // namespace aegis
