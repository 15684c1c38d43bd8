// The engine config as a table of named, documented, range-checked parameters
// (core/param_table.h). Drivers use it to apply overrides and to record the config.
#pragma once
#include <span>
#include <string_view>
#include <vector>

#include "core/param_table.h"
#include "sched/config.h"

namespace aegis {

std::span<const ParamEntry<EngineConfig>> engine_param_table();

// Every parameter with its current value, in the documented order.
std::vector<ParamInfo> describe(const EngineConfig& c);

// Sets one parameter from text ("0.5", "true", "magm", "0.25,0.5,0.75"), then validates.
// Throws ConfigError naming the parameter on an unknown name or a bad value.
void set_param(EngineConfig& c, std::string_view name, std::string_view text);

// Ranges, choices and cross-field checks. Throws ConfigError naming the field.
void validate(const EngineConfig& c);

}  // namespace aegis
