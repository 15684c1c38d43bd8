// What the scheduler knows about a job: its request and the hints a policy may use.
// The truth about a job (its real memory peak, its real activity) is not here: the
// simulator and the real GPU own that. A job knows only what was declared or profiled.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/units.h"

namespace aegis {

// Memory estimates from the different sources; a policy picks one by name
// (see sched/estimate_source.h). Absent = that estimator could not tell.
struct MemoryEstimates {
  std::optional<MiB> declared;     // the user's --mem
  std::optional<MiB> profiled;     // measured peak from a solo profile
  std::optional<MiB> analytical;   // Horus formula
  std::optional<MiB> faketensor;   // PyTorch FakeTensor
  std::optional<MiB> learned;      // GPUMemNet-style model
  std::optional<MiB> history;      // peak recorded for the same job signature
};

// Profile-derived hints used by the profile-based baselines (Lucid, Horus).
// A job without one counts as the most demanding: it cannot share.
struct ProfileHints {
  std::optional<double> gpu_util;      // mean coarse GPU utilisation alone, in [0,1]
  std::optional<int> sharing_score;    // Lucid's sharing score 0, 1 or 2
  double util_or_most() const { return gpu_util.value_or(1.0); }
  int score_or_most() const { return sharing_score.value_or(2); }
};

struct JobSpec {
  JobId id = 0;
  std::string name;        // workload or command name, for humans
  int num_gpus = 1;
  Seconds submit_time = 0;
  std::int64_t owner = -1;  // the submitting user (aegisd: uid; a trace: its user column); -1 unknown
  MemoryEstimates estimates;
  ProfileHints hints;
  // Mean coarse GPU utilisation alone as the utilisation regression predicts it from the
  // job's model spec (docs/estimators.md), in [0,1]: a prediction, never a measurement.
  std::optional<double> predicted_util;

  // Lab scheduling (issue 32, docs/lab-policies.md). The defaults keep the published loop:
  // one level, no group, no array, no limit.
  int priority = 0;                   // its level; a higher level is served first
  std::int64_t group = -1;            // the submitting user's group (aegisd: gid; a trace: its group column); -1 unknown
  std::optional<JobId> array_id;      // the array it is an element of (the id of element 0)
  int array_index = -1;               // its index in that array; -1 when not an element
  std::optional<Seconds> time_limit;  // wall-clock limit of each attempt; none: unlimited
  // How long an attempt is expected to run, from its signature's completed runs (the driver's
  // estimate chain, lifecycle/estimate_chain.h); backfill counts it (lifecycle/backfill.h).
  std::optional<Seconds> predicted_duration;
  // Preemption warning (issue 32 item 1, lifecycle/preemption.h): the signal a job asks for
  // before it is preempted (0: none, stopped at once) and how long it may take to checkpoint.
  int checkpoint_signal = 0;
  Seconds checkpoint_lead_s = 0;
};

// Where a job stands on the OOM recovery path.
struct RecoveryState {
  MiB floor_mib = 0;           // free-memory floor a GPU must offer; 0 = policy default
  bool exclusive_only = false; // must run alone on idle GPUs
  int oom_count = 0;           // OOM failures so far
};

struct QueuedJob {
  JobSpec spec;
  RecoveryState recovery;
};

}  // namespace aegis
