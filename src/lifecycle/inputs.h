// What a policy reads of a job that a driver must supply (a memory estimate from a named
// source, profile hints), and what a driver can supply. A daemon whose policy needs an
// input it cannot provide refuses to start; a job that lacks a required input is refused
// at submit, naming the field. Nothing falls back silently to the estimator-free floor.
#pragma once
#include <bitset>
#include <optional>
#include <string>
#include <string_view>

#include "core/job.h"
#include "sched/config.h"

namespace aegis {

enum class JobInput {
  Declared,          // the user's memory figure (--mem)
  Profiled,          // a measured solo peak
  Analytical,        // the Horus formula over a model spec
  FakeTensor,        // PyTorch FakeTensor's figure
  Learned,           // the learned model over a model spec
  History,           // the peak of earlier runs of the same job
  GpuUtilHint,       // expected GPU utilisation (Horus' cap, the lpu order)
  SharingScoreHint,  // Lucid's sharing score
};
inline constexpr std::size_t kJobInputs = 8;
using JobInputs = std::bitset<kJobInputs>;

JobInputs inputs(std::initializer_list<JobInput> list);
// "the profiled memory estimate and the sharing score hint"
std::string describe(JobInputs inputs);

// What the engine configured by `c` needs of every job. The estimator "auto" needs
// nothing: it is the documented chain declared, else history, else learned, else the
// estimator-free floor.
JobInputs required_inputs(const EngineConfig& c);

// What a job carries.
JobInputs inputs_of(const JobSpec& spec);

// One line when `provided` lacks something `c` needs (policy `name`), else nothing.
std::optional<std::string> missing_for_policy(std::string_view name, const EngineConfig& c, JobInputs provided);

// One line naming what the job lacks and how to give it, else nothing. `how` names, per
// input, the flag or field that supplies it (the daemon's CLI flags).
std::optional<std::string> missing_for_job(std::string_view policy, const EngineConfig& c, const JobSpec& spec);

}  // namespace aegis
