// Named policies: each is a composition of stages, written as settings of the one
// engine config on top of the defaults. `aegis sim --policies a,b` and aegisd's
// `policy = "..."` pick them by name; `--set` overrides apply after the preset.
#pragma once
#include <span>
#include <string>
#include <string_view>

#include "sched/config.h"

namespace aegis {

struct PolicyInfo {
  std::string_view name;
  std::string_view summary;
  void (*apply)(EngineConfig&);
  // The simulator gives its jobs the catalog's published estimate columns (Horus',
  // GPUMemNet's) rather than this project's estimators on their specs. aegisd computes
  // every estimate itself: there it runs as the policy without the mark.
  bool published_estimates = false;
};

// The registry's entry named `name`, or null.
const PolicyInfo* find_policy(std::string_view name);

std::span<const PolicyInfo> all_policies();

// The config of policy `name` applied over `base`. Throws ConfigError for an unknown
// name, listing the known ones.
EngineConfig policy_config(std::string_view name, const EngineConfig& base = {});

std::string policy_names();  // "exclusive, aegis, ..."
std::string_view policy_choices();  // "exclusive,aegis,...": for parameter tables

}  // namespace aegis
