// A job trace: when each job arrives, how many GPUs it asks for, which profiled workload
// it behaves like, and (for production traces) how long it really ran.
// Formats (docs/traces.md):
//   aegis   job_index,submit_time_s,workload_name,num_gpus   (the published evaluation)
//   philly  timestamp,duration,num_gpus,gpu_time,cluster      (Microsoft Philly, 2017)
//   alibaba name,...,num_gpu,gpu_milli,...,creation_time,deletion_time,scheduled_time
//           (Alibaba GPU-sharing trace 2023)
// Production traces carry no GPU memory or activity: each job borrows the profile of a
// workload of the catalog (see workload_mapping.h) and keeps its own arrival, GPU count
// and duration.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/units.h"
#include "sim/workload.h"
#include "sim/workload_name.h"

namespace aegis {

// 72 bytes: a million-job trace (--repeat) holds a million of these for the whole run, so
// the id in the source trace is a number into its Trace's table, not a string of its own.
struct TraceJob {
  std::int64_t index = 0;                // position or id in the source trace
  Seconds submit_time = 0;               // seconds from the trace's first arrival
  WorkloadName workload;                 // catalog workload whose profile it runs with
  std::optional<Seconds> duration_s;     // its own runtime alone; absent = the workload's
  double gpu_fraction = 1.0;             // Alibaba gpu_milli / 1000 for fractional requests
  std::int16_t num_gpus = 1;             // 1 to 1024 (every reader's bound)
  std::int16_t priority = 0;             // issue 32 item 1: its `priority` column (absent or empty: 0)
  std::uint32_t line = 0;                // line of the source file it came from (0: not from a file)
  std::uint32_t source = 0;              // its id in the source trace: Trace::source_ids[source]
  std::int32_t owner = -1;               // its user, numbered in order of appearance (-1: no user column)
  std::int32_t group = -1;               // its group, likewise (-1: no group column; fair share, issue 32)
  float time_limit_s = 0;                // issue 32 item 5: its `time_limit_s` column (0: none given)
};
static_assert(sizeof(TraceJob) == 72);

// Issue 32 items 3-4: a job's array and dependencies, from the aegis format's optional
// `array_id` (the job_index of its array's first element; elements in order of appearance),
// `array_limit` (the array's %N, on any element) and `after` ("ID[:ok|any|failed]",
// space-separated job_index values) columns. Kept beside the jobs, only for jobs that have
// them: a trace without those columns is read and run exactly as before.
struct TraceLinks {
  std::optional<std::int64_t> array;  // job_index of its array's first element
  int array_index = -1;
  int array_limit = 0;
  std::vector<std::pair<std::int64_t, std::string>> after;  // (job_index, ok|any|failed)
};

enum class TraceFormat { Aegis, Philly, Alibaba };

// What a production trace's team column stands for in fair share: nothing (the default),
// each job's user (also who may share a GPU under MPS) or each job's group.
enum class TraceColumnRole { None, User, Group };

// How production traces borrow workload profiles and which duration a job runs.
struct TraceOptions {
  std::optional<TraceFormat> format;  // empty = detect from the header (error if ambiguous)
  std::uint64_t seed = 42;            // the published mapping used seed 42
  bool workload_runtime = false;      // true: run for the workload's solo runtime instead
  std::size_t max_jobs = 0;           // keep only the first N jobs by submit time (0 = all)
  double load = 1.0;                  // divide inter-arrival times by this (1.5 = 50 % more demand)
  // Replay the (cut, mapped, loaded) trace this many times back to back, each copy shifted
  // by the trace's span plus one second, for scaling studies (1 = once). Copies keep their
  // workloads and durations; their indices continue after the original's largest.
  std::size_t repeat = 1;
  // Issue 32, off by default (every job level 0, no users): the production columns that say
  // whose a job is or how urgent. Each applies to its format only; docs/traces.md.
  bool alibaba_qos_priority = false;  // Alibaba `qos` as the pod's level (alibaba_qos_level)
  TraceColumnRole philly_cluster_as = TraceColumnRole::None;  // Philly `cluster` (a team)
};

struct Trace {
  std::string name;  // file stem, e.g. "trace_philly"
  std::string path;
  TraceFormat format = TraceFormat::Aegis;
  std::vector<TraceJob> jobs;  // sorted by submit time, then index; first arrival at 0
  // What was left out and why (CPU-only pods, pods never scheduled, ...): reason -> count.
  std::map<std::string, std::int64_t> skipped;
  std::string mapping_method;  // how workloads were assigned, for the record
  // Ids of the jobs in the source trace (pod name, Philly cluster, ...), each distinct one
  // once, in the order its loader met them; [0] is the empty id, a job's without one.
  std::vector<std::string> source_ids{std::string()};
  std::map<std::int64_t, TraceLinks> links;  // issue 32: by job index, only jobs with links
  // The names of its users and groups: [n] is TraceJob::owner (group) n. Empty without the
  // column. Fair-share weights name them (docs/lab-policies.md).
  std::vector<std::string> user_names, group_names;

  const std::string& source_id(const TraceJob& j) const { return source_ids[j.source]; }
  // The number of `id` in source_ids (added if new; "" is 0). `seen` remembers the ids
  // added so far: one per loader, dropped with it.
  std::uint32_t keep_source_id(std::string_view id, std::map<std::string, std::uint32_t, std::less<>>& seen);

  // "file:line" of a job, for error messages ("trace" when it came from no file).
  std::string where(const TraceJob& j) const;
};

std::optional<TraceFormat> parse_trace_format(const std::string& name);  // "aegis", "philly", "alibaba"
std::string to_string(TraceFormat f);
std::optional<TraceColumnRole> parse_column_role(const std::string& name);  // "none", "user", "group"
std::string to_string(TraceColumnRole r);

// Loads and validates a trace in any format against the catalog: every workload must exist
// and be fully profiled. Throws InputError naming file, line and field.
Trace load_trace(const std::string& path, const WorkloadCatalog& catalog, const TraceOptions& options = {});

// The published evaluation format (kept for callers that know the format).
Trace load_aegis_trace(const std::string& path, const WorkloadCatalog& catalog);

// Applies TraceOptions::max_jobs and ::load to a loaded trace (shared by every format).
void shape_trace(Trace& t, const TraceOptions& options);
// Applies TraceOptions::repeat (after the workload mapping: copies behave alike).
void repeat_trace(Trace& t, std::size_t copies);

}  // namespace aegis
