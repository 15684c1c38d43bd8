// `aegis config`: every parameter with its value and meaning, for the defaults or a
// policy, as text or as JSON. `aegis policies`: the policies and their stage pipelines.
#include <fmt/format.h>

#include "apps/aegis/commands.h"
#include "sched/config_params.h"
#include "sched/engine.h"
#include "lifecycle/inputs.h"
#include "sched/policies.h"
#include "sim/json_report.h"
#include "sim/sim_config.h"

namespace aegis::cli {

void add_config(CLI::App& app) {
  auto* cmd = app.add_subcommand("config", "Print every engine and simulator parameter with its value and meaning");
  static std::string policy;
  static bool as_json = false;
  static std::vector<std::string> sets;
  cmd->add_option("--policy", policy, "Show the parameters of this policy (default: the engine defaults)");
  cmd->add_option("--set", sets, "Override NAME=VALUE before printing");
  cmd->add_flag("--json", as_json, "Print JSON instead of text");
  cmd->callback([] {
    EngineConfig e = policy.empty() ? EngineConfig{} : policy_config(policy);
    SimConfig s;
    for (const auto& kv : sets) {
      auto eq = kv.find('=');
      if (eq == std::string::npos) throw ConfigError("--set: expected NAME=VALUE, got '" + kv + "'");
      const std::string name = kv.substr(0, eq), value = kv.substr(eq + 1);
      if (name.rfind("sim.", 0) == 0) set_param(s, name.substr(4), value);
      else set_param(e, name, value);
    }
    validate(e);
    if (as_json) {
      Json j;
      j["engine"] = to_json(describe(e));
      j["sim"] = to_json(describe(s));
      fmt::print("{}\n", j.dump(2));
      return;
    }
    fmt::print("# engine{}\n", policy.empty() ? "" : " (policy " + policy + ")");
    for (const auto& p : describe(e)) fmt::print("{:<26} = {:<14} # {}\n", p.name, format_value(p.value), p.doc);
    fmt::print("\n# simulator (set with --set sim.NAME=VALUE)\n");
    for (const auto& p : describe(s)) fmt::print("{:<26} = {:<14} # {}\n", p.name, format_value(p.value), p.doc);
  });
}

void add_policies(CLI::App& app) {
  auto* cmd = app.add_subcommand("policies", "List the scheduling policies and the stages each one composes");
  cmd->callback([] {
    for (const auto& p : all_policies()) {
      Engine e(policy_config(p.name));
      const JobInputs needs = required_inputs(e.config());
      fmt::print("{:<12} {}\n{:<12} stages: {}\n{:<12} needs of every job: {}\n", p.name, p.summary, "", e.describe(), "",
                 needs.none() ? std::string("nothing (no estimate, or the chain with the floor last)") : describe(needs));
    }
  });
}

}  // namespace aegis::cli
