// Event-driven replay of a trace on one simulated server, driving the scheduling engine.
// Simulated time with nothing happening costs nothing: the engine is asked at events
// (arrival, first GPU activity, memory growth, completion, OOM), when a gate it reported
// opens, and, while the head job waits on the pressure filter, at each telemetry sample
// whose window still changes. Telemetry windows are synthesised only when the engine looks.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sched/config.h"
#include "sim/sim_config.h"
#include "sim/trace.h"
#include "sim/workload.h"

namespace aegis {

struct ServerSpec {
  int gpus = 3;
  MiB gpu_memory_mib = 40960;
};

enum class AttemptOutcome { Completed, Oom, Stopped };

struct AttemptRecord {
  Seconds launch = 0;
  Seconds first_activity = -1;  // -1: never became active
  Seconds end = 0;
  std::vector<int> gpus;
  bool exclusive = false;
  MiB floor_mib = 0;
  MiB admitted_mib = 0;   // memory the engine booked per GPU for this attempt
  AttemptOutcome outcome = AttemptOutcome::Completed;
};

struct JobRecord {
  std::int64_t trace_index = 0;
  std::string workload;
  int num_gpus = 1;
  Seconds submit = 0;
  Seconds first_launch = -1;
  Seconds end = -1;
  bool completed = false;
  std::string stop_reason;
  Seconds solo_runtime = 0;
  std::vector<AttemptRecord> attempts;
};

// A change of one GPU's state, for timelines in reports.
struct GpuPoint {
  Seconds t = 0;
  MiB used_mib = 0;
  double smact = 0;
  int jobs = 0;
};

struct SimResult {
  std::string policy;
  std::string trace;
  std::string engine;          // Engine::describe()
  std::vector<JobRecord> jobs;  // in trace order
  Seconds start = 0;            // first arrival
  Seconds end = 0;              // last job end
  double energy_j = 0;
  double gpu_mem_util_mean = 0;  // time-average of used/total over GPUs, [start, end]
  double sm_util_mean = 0;       // time-average of SM activity over GPUs
  std::vector<std::vector<GpuPoint>> gpu_timeline;  // per GPU, when recorded
  std::uint64_t events = 0;
  std::uint64_t ticks = 0;
};

struct SimError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct SimOptions {
  std::string policy_name;     // for the record only
  EngineConfig engine;
  SimConfig sim;
  ServerSpec server;
  std::uint64_t seed = 1;
  bool record_timeline = false;
};

// Runs the whole trace. Throws SimError if the trace cannot finish (a job that can
// never be placed), InputError if a job needs more GPUs than the server has.
SimResult simulate(const WorkloadCatalog& catalog, const Trace& trace, const SimOptions& options);

}  // namespace aegis
