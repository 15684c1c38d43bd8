#include "lifecycle/inputs.h"

#include <array>
#include <fmt/format.h>

#include "estimate/source.h"

namespace aegis {

namespace {

struct InputInfo {
  std::string_view what;  // for "needs ..."
  std::string_view how;   // how a user of aegisd supplies it
};

constexpr std::array<InputInfo, kJobInputs> kInfo = {{
    {"the declared memory", "give it with --mem (API: mem_mib)"},
    {"a profiled memory peak", "give the measured peak with --profiled-mem (API: profiled_mib)"},
    {"the analytical memory estimate", "give a model spec with --model-spec (API: model)"},
    {"the FakeTensor memory estimate", "give it with --faketensor-mem (API: faketensor_mib)"},
    {"the learned memory estimate", "give a model spec with --model-spec (API: model)"},
    {"a memory peak of earlier runs", "run the same job once first (history)"},
    {"the GPU utilisation hint", "give it with --hint-gpu-util (API: hints.gpu_util)"},
    {"the sharing score hint", "give it with --hint-sharing-score (API: hints.sharing_score)"},
}};

}  // namespace

JobInputs inputs(std::initializer_list<JobInput> list) {
  JobInputs s;
  for (JobInput i : list) s.set(static_cast<std::size_t>(i));
  return s;
}

std::string describe(JobInputs in) {
  std::string out;
  std::size_t n = 0, total = in.count();
  for (std::size_t i = 0; i < kJobInputs; ++i) {
    if (!in.test(i)) continue;
    ++n;
    out += (n == 1 ? "" : n == total ? " and " : ", ") + std::string(kInfo[i].what);
  }
  return out.empty() ? "nothing" : out;
}

JobInputs required_inputs(const EngineConfig& c) {
  JobInputs need;
  switch (parse_estimate_source(c.estimator).value_or(EstimateSource::None)) {
    case EstimateSource::Declared: need |= inputs({JobInput::Declared}); break;
    case EstimateSource::Profiled: need |= inputs({JobInput::Profiled}); break;
    case EstimateSource::Analytical: need |= inputs({JobInput::Analytical}); break;
    case EstimateSource::FakeTensor: need |= inputs({JobInput::FakeTensor}); break;
    case EstimateSource::Learned: need |= inputs({JobInput::Learned}); break;
    case EstimateSource::History: need |= inputs({JobInput::History}); break;
    case EstimateSource::None:
    case EstimateSource::Auto: break;
  }
  // Stages that read a hint of the job being placed (engine.cpp fills defaults only for
  // jobs already running, whose hints were checked when they were submitted).
  if (c.collocate && (c.util_cap > 0 || c.order == "lpu")) need |= inputs({JobInput::GpuUtilHint});
  if (c.collocate && c.sharing_score_cap >= 0) need |= inputs({JobInput::SharingScoreHint});
  return need;
}

JobInputs inputs_of(const JobSpec& s) {
  JobInputs in;
  auto put = [&](bool has, JobInput i) {
    if (has) in.set(static_cast<std::size_t>(i));
  };
  put(s.estimates.declared.has_value(), JobInput::Declared);
  put(s.estimates.profiled.has_value(), JobInput::Profiled);
  put(s.estimates.analytical.has_value(), JobInput::Analytical);
  put(s.estimates.faketensor.has_value(), JobInput::FakeTensor);
  put(s.estimates.learned.has_value(), JobInput::Learned);
  put(s.estimates.history.has_value(), JobInput::History);
  put(s.hints.gpu_util.has_value(), JobInput::GpuUtilHint);
  put(s.hints.sharing_score.has_value(), JobInput::SharingScoreHint);
  return in;
}

std::optional<std::string> missing_for_policy(std::string_view name, const EngineConfig& c, JobInputs provided) {
  const JobInputs lacking = required_inputs(c) & ~provided;
  if (lacking.none()) return std::nullopt;
  return fmt::format("policy {} needs {} of every job, which this driver cannot provide (it provides {})", name,
                     describe(lacking), describe(provided));
}

std::optional<std::string> missing_for_job(std::string_view policy, const EngineConfig& c, const JobSpec& spec) {
  const JobInputs lacking = required_inputs(c) & ~inputs_of(spec);
  for (std::size_t i = 0; i < kJobInputs; ++i)
    if (lacking.test(i))
      return fmt::format("job: policy {} admits jobs by {}; this job has none: {}", policy, kInfo[i].what,
                         kInfo[i].how);
  return std::nullopt;
}

}  // namespace aegis
