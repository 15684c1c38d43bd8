// The daemon's API: one JSON object per line over a Unix stream socket (docs/api.md).
// Parsing and validation are pure functions: every field of every request is checked, and
// bad input gets one line naming the field. Fuzzed (fuzz/).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/units.h"
#include "estimate/features.h"
#include "runtime/api/notify_set.h"

namespace aegis::api {

// Limits (every number has a home; see docs/api.md).
inline constexpr std::size_t kMaxRequestBytes = 4 << 20;   // one request line
inline constexpr std::size_t kMaxCommandBytes = 1 << 20;   // all argv strings together
inline constexpr std::size_t kMaxArgs = 4096;
inline constexpr std::size_t kMaxEnvEntries = 1024;
inline constexpr std::size_t kMaxNameLength = 128;
inline constexpr int kMaxGpus = 64;
inline constexpr std::size_t kMaxIdsPerRequest = 1000;

// What a user asks to run. The same fields come from `aegis submit` flags, a YAML job
// spec, or the JSON API.
struct JobRequest {
  std::string name;                          // [A-Za-z0-9._-]{1,128}; default from argv[0]
  std::vector<std::string> command;          // argv, non-empty, valid UTF-8, no NUL
  std::string workdir;                       // absolute path
  std::map<std::string, std::string> env;    // names [A-Za-z_][A-Za-z0-9_]*
  int gpus = 1;                              // 1..kMaxGpus
  std::optional<MiB> mem_mib;                // declared memory need per GPU (> 0)
  std::optional<MiB> profiled_mib;           // a measured solo peak per GPU (a profiling run's)
  std::optional<MiB> faketensor_mib;         // PyTorch FakeTensor's figure per GPU
  bool exclusive = false;                    // run alone on its GPUs
  // May run again when an attempt's outcome is unknown (its shim killed, its disk
  // failed): only for jobs that are safe to run twice. Default false: never behind the
  // user's back.
  bool restartable = false;
  std::vector<std::string> tags;             // free-form labels for the history estimator
  std::optional<double> hint_gpu_util;       // [0,1]
  std::optional<int> hint_sharing_score;     // 0, 1 or 2
  std::optional<ModelFeatures> model;        // for the learned estimator (aegis submit --model-spec)
  // Issue 32 item 6 (notifications): the events its owner is told of (notify_set.h);
  // JSON/YAML `notify`: a list of event names or one comma list. Default: none.
  NotifySet notify;
};

struct SubmitRequest {
  JobRequest job;
  // The job belongs to the calling process (`aegis run`): if that process ends before
  // the job does, the daemon cancels the job (Slurm's scancel, a killed batch script).
  bool attach = false;
};
// op "queue": every user's queued and running jobs (like squeue); `all` adds finished
// ones, `mine` keeps only the caller's.
struct ListRequest {
  bool all = false;
  bool mine = false;
};
struct ShowRequest { std::int64_t id = 0; };
struct CancelRequest { std::vector<std::int64_t> ids; };
struct LogsRequest {
  std::int64_t id = 0;
  bool stderr_stream = false;
  std::uint64_t offset = 0;      // byte offset to read from
  std::uint64_t max_bytes = 1 << 20;
};
struct GpusRequest {};
struct HistoryRequest { std::int64_t limit = 100; };      // 1..100000
struct PingRequest {};

using Request = std::variant<SubmitRequest, ListRequest, ShowRequest, CancelRequest, LogsRequest, GpusRequest,
                             HistoryRequest, PingRequest>;

struct ParseError {
  std::string message;  // one line, names the field: "job.gpus: must be between 1 and 64"
};

// Parses one request line (JSON). Never throws; rejects anything malformed.
std::variant<Request, ParseError> parse_request(std::string_view line);

// Validates a job request built elsewhere (CLI flags, YAML); empty when valid.
std::optional<ParseError> validate(const JobRequest& job);

// The name a job gets when it has none: from its command's argv[0].
std::string default_job_name(std::string_view argv0);

// The JSON object of a job request, as parse_request reads it back under "job".
std::string to_json(const JobRequest& job);

// Memory sizes: "12000" (MiB), "12000M", "12000MiB", "12G", "12GiB", "1.5G", "1T".
// Empty when malformed, zero or negative, or above 1 PiB.
std::optional<MiB> parse_mem_size(std::string_view text);

// A YAML job spec (docs/api.md): the JobRequest fields, with `mem` as a size string or
// `mem_mib` as a number. Throws nothing; returns the error naming the field.
std::variant<JobRequest, ParseError> parse_job_spec_yaml(std::string_view yaml);

}  // namespace aegis::api
