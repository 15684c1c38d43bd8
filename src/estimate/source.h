// Names of the memory-estimate sources and how a policy picks one from a job.
// Estimators that compute values (analytical, learned, history) fill MemoryEstimates
// before the engine runs; the engine only selects the one its policy names.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "core/job.h"

namespace aegis {

enum class EstimateSource {
  None,        // estimator-free: the job is admitted against a free-memory floor
  Declared,    // the user's own figure
  Profiled,    // measured solo peak (an oracle in simulation)
  Analytical,  // Horus formula
  FakeTensor,
  Learned,
  History,
  Auto,        // the daemon's chain: declared, else history, else learned, else none
};

// Parses "none", "declared", "profiled" (alias "peak"), "analytical" (alias "horus"),
// "faketensor", "learned" (alias "gpumemnet"), "history", "auto". Empty if unknown.
std::optional<EstimateSource> parse_estimate_source(std::string_view name);
std::string_view to_string(EstimateSource s);
// All accepted names, comma separated, for error messages and help.
std::string_view estimate_source_names();

// The estimate the source gives for this job; empty when the source cannot tell.
std::optional<MiB> select_estimate(const MemoryEstimates& e, EstimateSource s);

}  // namespace aegis
