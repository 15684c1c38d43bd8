// A job that holds GPUs now, and a job that has just failed.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/gpu_indices.h"
#include "core/job.h"
#include "core/units.h"

namespace aegis {

struct RunningJob {
  JobSpec spec;
  RecoveryState recovery;
  GpuIndices gpus;                        // GpuView::index values
  Seconds launched_at = 0;
  std::optional<Seconds> first_activity;  // first time its process was seen active on a GPU
  bool exclusive = false;
  MiB admitted_mib = 0;
  MiB free_at_placement = 0;
  MiB gpu_total_mib = 0;                  // capacity of the (smallest of) its GPUs
};

enum class FailureKind { Oom, Other };

struct Failure {
  RunningJob job;
  FailureKind kind = FailureKind::Other;
  std::string detail;  // e.g. the matching log line
};

}  // namespace aegis
