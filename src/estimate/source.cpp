#include "estimate/source.h"

namespace aegis {

std::optional<EstimateSource> parse_estimate_source(std::string_view n) {
  if (n == "none") return EstimateSource::None;
  if (n == "declared") return EstimateSource::Declared;
  if (n == "profiled" || n == "peak") return EstimateSource::Profiled;
  if (n == "analytical" || n == "horus") return EstimateSource::Analytical;
  if (n == "faketensor") return EstimateSource::FakeTensor;
  if (n == "learned" || n == "gpumemnet") return EstimateSource::Learned;
  if (n == "history") return EstimateSource::History;
  if (n == "auto") return EstimateSource::Auto;
  return std::nullopt;
}

std::string_view to_string(EstimateSource s) {
  switch (s) {
    case EstimateSource::None: return "none";
    case EstimateSource::Declared: return "declared";
    case EstimateSource::Profiled: return "profiled";
    case EstimateSource::Analytical: return "analytical";
    case EstimateSource::FakeTensor: return "faketensor";
    case EstimateSource::Learned: return "learned";
    case EstimateSource::History: return "history";
    case EstimateSource::Auto: return "auto";
  }
  return "none";
}

std::string_view estimate_source_names() {
  return "none, declared, profiled (peak), analytical (horus), faketensor, learned (gpumemnet), "
         "history, auto (declared, else history, else learned)";
}

std::optional<MiB> select_estimate(const MemoryEstimates& e, EstimateSource s) {
  switch (s) {
    case EstimateSource::None: return std::nullopt;
    case EstimateSource::Declared: return e.declared;
    case EstimateSource::Profiled: return e.profiled;
    case EstimateSource::Analytical: return e.analytical;
    case EstimateSource::FakeTensor: return e.faketensor;
    case EstimateSource::Learned: return e.learned;
    case EstimateSource::History: return e.history;
    case EstimateSource::Auto:
      // What the user says wins; then what this job used last time; then the model.
      if (e.declared) return e.declared;
      if (e.history) return e.history;
      return e.learned;
  }
  return std::nullopt;
}

}  // namespace aegis
