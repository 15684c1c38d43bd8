// Profiled training workloads (data/aegis/workloads.csv): what each job really does
// when it runs alone, and what the estimators said about it beforehand.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "core/job.h"
#include "core/units.h"
#include "sim/models/phases.h"

namespace aegis {

struct WorkloadProfile {
  std::string name;
  int num_gpus = 1;
  // The truth, measured alone on the reference GPU (A100 40 GB in the published data).
  MiB peak_mib = 0;          // per GPU
  double smact = 0;          // mean SM activity, [0,1]
  double smocc = 0;          // mean SM occupancy, [0,1]
  double drama = 0;          // mean DRAM activity, [0,1]
  double util = 0;           // mean coarse GPU utilisation, [0,1]
  Seconds solo_runtime_s = 0;
  // Its activity over an attempt (start-up, steady); without phase columns one phase at the
  // means above. The simulator's telemetry and interference read these levels.
  JobPhases phases;
  // What the scheduler may be told.
  MemoryEstimates estimates;
  ProfileHints hints;
  // Coarse utilisation predicted from the workload's model spec, its own model left out of
  // the fit (sim/workload_specs.h); absent when the spec file has no row for it.
  std::optional<double> predicted_util;
  // Why this row cannot be simulated ("" when it can), e.g. "no solo runtime".
  std::string problem;
  std::string where;  // "file:line"
};

class WorkloadCatalog {
 public:
  // Loads every row; rows with missing or out-of-range profile fields are kept with a
  // `problem` and rejected only when a trace uses them. Throws InputError for a
  // malformed file (missing columns, bad numbers, duplicate names).
  static WorkloadCatalog load(const std::string& path);

  const WorkloadProfile* find(const std::string& name) const;
  std::size_t size() const { return by_name_.size(); }
  const std::map<std::string, WorkloadProfile>& all() const { return by_name_; }
  const std::string& path() const { return path_; }

  void add(WorkloadProfile w);  // for tests and synthetic workloads
  void set_predicted_util(const std::string& name, double util);  // no-op for an unknown name

 private:
  std::map<std::string, WorkloadProfile> by_name_;
  std::string path_;
};

}  // namespace aegis
