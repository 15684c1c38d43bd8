// Event-driven replay of a trace on a simulated cluster of servers, each driving its own
// instance of the scheduling engine; a simple cluster dispatcher (dispatcher.md) stands in
// for the cluster engine (Slurm) and picks a server for each job.
// Simulated time with nothing happening costs nothing: the engine is asked at events
// (arrival, first GPU activity, memory growth, completion, OOM), when a gate it reported
// opens, and, while the head job waits on the pressure filter, at each telemetry sample
// whose window still changes. Telemetry windows are synthesised only when the engine looks.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "sched/config.h"
#include "sim/rare_text.h"
#include "sim/sim_config.h"
#include "core/small_list.h"
#include "sim/trace.h"
#include "sim/workload.h"

namespace aegis {

// One schedulable device: a whole GPU, or a MIG instance with a fraction of its SMs.
struct DeviceSpec {
  MiB memory_mib = 40960;
  double sm_fraction = 1.0;  // MIG: the instance's SMs / the whole GPU's
  std::string profile;       // "" for a whole GPU, e.g. "3g.20gb"
};

struct ServerSpec {
  int gpus = 3;
  MiB gpu_memory_mib = 40960;
  std::vector<DeviceSpec> devices;  // when set (MIG), the server's devices instead
};

struct ClusterSpec {
  std::vector<ServerSpec> servers{ServerSpec{}};

  static ClusterSpec uniform(int servers, int gpus_per_server, MiB gpu_memory_mib);
  // "2x8x40960,4x8x81920": 2 servers of 8 GPUs with 40960 MiB, then 4 of 8 with 81920.
  // Throws InputError naming the bad part.
  static ClusterSpec parse(const std::string& spec);
  int total_gpus() const;
  int max_gpus_per_server() const;
  std::string describe() const;  // "64 x 8 x 40960 MiB"

  // Cuts every GPU into MIG instances: "3g.20gb,2g.10gb,1g.5gb,1g.5gb" for every GPU, or
  // per-GPU lists separated by ';' (used in turn). A GPU's memory names its model
  // (core/mig_models.h: 40960 MiB is an A100-40GB); its profiles, with their real memory
  // and SMs, and only layouts NVIDIA allows. Throws InputError with one line otherwise.
  ClusterSpec with_mig(const std::string& layout) const;
};

enum class SimOutcome { Completed, Oom, Stopped, Preempted };

// Cluster-wide GPU ids of an attempt: up to 2 inline, in the place of the heap pointer
// (95 % of Philly's jobs ask for 1 or 2 GPUs), more on the heap. 16 bytes: an
// AttemptRecord is 64.
using GpuIds = SmallList<int, 2>;

struct AttemptRecord {
  Seconds launch = 0;
  Seconds first_activity = -1;  // -1: never became active
  Seconds end = 0;
  GpuIds gpus;                  // cluster-wide GPU ids (see SimResult::gpu_server)
  MiB floor_mib = 0;
  MiB admitted_mib = 0;   // memory the engine booked per GPU for this attempt
  SimOutcome outcome = SimOutcome::Completed;
  bool exclusive = false;
  // An OOM death of a job that was not the one placed last on its GPU: a neighbour taken
  // down by someone else's growth (the blast radius of sharing without memory isolation).
  bool neighbour_oom = false;
  bool mps_limit = false;  // died at its own MPS memory limit
  bool backfilled = false;  // started ahead of a waiting head, within its reservation (issue 32 item 5)
};

struct JobRecord {
  std::int64_t trace_index = 0;
  WorkloadName workload;
  int num_gpus = 1;
  bool completed = false;
  Seconds submit = 0;
  Seconds first_launch = -1;
  Seconds end = -1;
  RareText stop_reason;           // why the engine stopped it (empty unless stopped)
  Seconds solo_runtime = 0;       // its own runtime alone (trace duration or workload's)
  // In launch order. Most jobs run once: that attempt lies in the record itself.
  SmallList<AttemptRecord, 1> attempts;
};

// A change of one GPU's state, for timelines in reports.
struct GpuPoint {
  Seconds t = 0;
  MiB used_mib = 0;
  double smact = 0;
  int jobs = 0;
  // The rest of what the engine sees of the GPU (for replaying a run elsewhere, e.g.
  // through aegisd's logic in the driver-equivalence test).
  double smocc = 0, drama = 0, util = 0;
  int active = 0;  // jobs that have shown activity (the GPU's processes)
};

// What the lab policies of issue 32 did in a run, when on: kept by the simulator's result
// and its summary (RunMetrics) alike.
struct LabCounts {
  // Preemption (issue 32 item 1; sim.preemption): running jobs stopped for a higher level
  // (the lifecycle's count) and the work they lost, GPU-seconds at solo speed (each
  // stopped attempt's work since its last checkpoint times its GPUs).
  bool preemption = false;
  std::int64_t preemptions = 0;
  double work_lost_gpu_s = 0;
  // Attempts stopped by preemption, by their job's level (victims that ended otherwise
  // during their warning are in `preemptions` only): which levels paid.
  std::map<int, std::int64_t> preempted_by_level;
  // Backfill (issue 32 item 5), when on: the heads given a reservation, and those that
  // started after the first one they were given (a job that outran its predicted duration,
  // or what the reservation cannot count under sharing): how many, and by how much.
  bool backfill = false;
  std::int64_t reserved_heads = 0, late_heads = 0;
  double late_mean_s = 0, late_max_s = 0;
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
  std::vector<MiB> gpu_total_mib;   // per cluster-wide GPU id
  std::vector<int> gpu_server;      // server of each GPU id
  std::vector<std::vector<GpuPoint>> gpu_timeline;         // per GPU, when recorded
  std::vector<std::pair<Seconds, int>> queue_timeline;     // jobs waiting, when recorded
  // Backfill (issue 32 item 5), when recorded: (job, its reserved start, the pass's time) at
  // each pass where the head of the queue waited with a reservation; the job is the trace
  // position.
  struct Reservation {
    std::int64_t job = 0;
    Seconds reserved_start = 0;
    Seconds pass = 0;
  };
  std::vector<Reservation> reservations;
  // Backfill: each job's first reserved start as the waiting head, by record (-1: never);
  // empty with backfill off (kept out of JobRecord, which a 1M-job run holds a million of).
  std::vector<Seconds> head_reserved;
  // Work counts (deterministic, for tests that guard speed without a clock): events
  // handled, engine asks, and visits: servers the dispatcher considered, GPUs each engine
  // ask was shown, GPUs whose activity was recomputed.
  std::uint64_t events = 0;
  std::uint64_t ticks = 0;
  std::uint64_t visits = 0;
  // A trace with users: each one's charged GPU-seconds (fair share's measure: its booked
  // share of each GPU x time, docs/lab-policies.md), in the order of their numbers.
  std::vector<std::pair<std::string, double>> user_gpu_seconds;
  LabCounts lab;  // preemption and backfill, when on (issue 32)
};

struct SimError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct SimOptions {
  std::string policy_name;     // for the record only
  EngineConfig engine;
  SimConfig sim;
  ClusterSpec cluster;
  std::uint64_t seed = 1;
  bool record_timeline = false;   // fill gpu_timeline and queue_timeline (for reports)
  bool record_reservations = false;  // fill SimResult::reservations (backfill's, issue 32 item 5)
  // Called now and then with the fraction of jobs finished, for progress bars.
  std::function<void(double)> progress;
};

// Runs the whole trace. Throws SimError if the trace cannot finish (a job that can
// never be placed), InputError if a job needs more GPUs than the server has.
SimResult simulate(const WorkloadCatalog& catalog, const Trace& trace, const SimOptions& options);

}  // namespace aegis
