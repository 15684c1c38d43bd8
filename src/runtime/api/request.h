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
// Issue 32 items 3-4 (docs/api.md): an array has at most this many elements, indices up to
// kMaxArrayIndex; a job at most kMaxAfter dependencies.
inline constexpr std::size_t kMaxArrayElements = 1000;
inline constexpr int kMaxArrayIndex = 999999;
inline constexpr std::size_t kMaxAfter = 64;

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
  // Issue 32 item 3: an array, "0-49%8" or "1,3,5-9" (parse_array); empty: one job. Each
  // element is a job of its own (element_request: {i} in argv, AEGIS_ARRAY_INDEX).
  std::string array;
  // Issue 32 item 4: dependencies, "ID[:ok|any|failed]" each (parse_after).
  std::vector<std::string> after;
  // Issue 32 item 5: `time` (--time), each attempt's wall-clock limit in seconds
  // (1..kMaxTimeLimitS); none: the daemon's default_time_limit applies.
  std::optional<std::int64_t> time_limit_s;
  // Priorities and preemption (issue 32 item 1, docs/lab-policies.md): its level, which the
  // daemon checks against what the admin allows the caller (priority_levels), and the
  // warning it wants before a preemption: a signal and the seconds it may take to save a
  // checkpoint (`--checkpoint-signal USR1@120`; 0 and 0: none, stopped at once).
  int priority = 0;                          // kMinPriority..kMaxPriority
  int checkpoint_signal = 0;                 // a signal number of kCheckpointSignals; 0: none
  double checkpoint_lead_s = 0;              // 1..kMaxCheckpointLeadS when a signal is given
  // Issue 32 item 6 (notifications): the events its owner is told of (notify_set.h);
  // JSON/YAML `notify`: a list of event names or one comma list. Default: none.
  NotifySet notify;
};

// Priority levels and checkpoint warnings (issue 32 item 1).
inline constexpr int kMinPriority = -1000, kMaxPriority = 1000;
inline constexpr double kMaxCheckpointLeadS = 86400;
// "USR1@120", "SIGUSR2@30", "10@60": a signal a job can catch (HUP INT QUIT USR1 USR2 ALRM
// TERM CONT URG WINCH, by name or number) and a whole number of seconds; empty string and
// the pair on success, else the error (without the field's name).
struct CheckpointSignal {
  int signal = 0;
  double lead_s = 0;
};
std::variant<CheckpointSignal, std::string> parse_checkpoint_signal(std::string_view text);
// Back to text: "USR1@120".
std::string checkpoint_signal_text(int signal, double lead_s);

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
  bool eta = false;  // issue 32 item 5: each waiting job's expected start (lifecycle/eta.h)
  // Issue 33 item 1: the job fields the client prints (kListingFields; `id` always comes);
  // empty: all of them.
  std::vector<std::string> fields;
};
struct ShowRequest { std::int64_t id = 0; };
// Issue 32 item 3: the parsed --array: its indices, ascending, and its cap (%N; 0: none).
struct ArraySpec {
  std::vector<int> indices;
  int limit = 0;
};
// Issue 32 item 4: one parsed --after.
struct AfterRef {
  std::int64_t id = 0;
  std::string kind = "ok";  // ok | any | failed
};
struct CancelRequest { std::vector<std::int64_t> ids; };
struct LogsRequest {
  std::int64_t id = 0;
  bool stderr_stream = false;
  std::uint64_t offset = 0;      // byte offset to read from
  std::uint64_t max_bytes = 1 << 20;
};
struct GpusRequest {};
struct HistoryRequest {
  std::int64_t limit = 100;         // 1..100000
  std::vector<std::string> fields;  // as ListRequest's
};
// The job fields a `queue` or `history` request may ask for (`fields`), docs/api.md.
inline constexpr const char* kListingFields[] = {
    "id", "name", "user", "uid", "gid", "state", "gpus", "gpu_uuids", "attempts", "submitted_at", "started_at",
    "ended_at", "reason", "queue", "queue_seq", "cancel_requested", "recovery", "request", "attempt_log",
    "attached_to", "exit_code", "signal", "array_id", "array_index", "array_limit", "after", "never_starts",
    "fair_share", "eta", "cut"};
struct PingRequest {};
// Issue 32 item 4, op "wait": the state of each job (an array's id: of each element), so that
// `aegis wait` can tell when all are final. Answers at once; the client asks again.
struct WaitRequest { std::vector<std::int64_t> ids; };

using Request = std::variant<SubmitRequest, ListRequest, ShowRequest, CancelRequest, LogsRequest, GpusRequest,
                             HistoryRequest, PingRequest, WaitRequest>;

struct ParseError {
  std::string message;  // one line, names the field: "job.gpus: must be between 1 and 64"
};

// Parses one request line (JSON). Never throws; rejects anything malformed.
std::variant<Request, ParseError> parse_request(std::string_view line);

// Validates a job request built elsewhere (CLI flags, YAML); empty when valid.
std::optional<ParseError> validate(const JobRequest& job);

// Issue 32: "0-49%8", "1,3,5-9" (ranges ascending, no index twice, at most
// kMaxArrayElements, indices 0..kMaxArrayIndex, %N at least 1); the error names `field`.
std::variant<ArraySpec, ParseError> parse_array(std::string_view text, std::string_view field = "array");
// Issue 32: "ID", "ID:ok", "ID:any", "ID:failed" (ID a positive integer).
std::variant<AfterRef, ParseError> parse_after(std::string_view text, std::string_view field = "after");
// The request of an array's element: "{i}" in each argv entry replaced by the index, the
// environment given AEGIS_ARRAY_INDEX; no array field left.
JobRequest element_request(const JobRequest& job, int index);

// The name a job gets when it has none: from its command's argv[0].
std::string default_job_name(std::string_view argv0);

// The JSON object of a job request, as parse_request reads it back under "job".
std::string to_json(const JobRequest& job);
// Issue 33 item 1: the request as a listing shows it: no environment, and the argv (all its
// strings together) and the working directory cut to `max_bytes` each, ending with
// kCutMarker, model features larger than that left out; the names of the fields cut
// ("request.command", "request.model") are added to `cut`.
inline constexpr const char* kCutMarker = "\u2026";  // "…"
std::string to_listing_json(const JobRequest& job, std::size_t max_bytes, std::vector<std::string>& cut);
// `s` cut to at most `max_bytes` bytes plus the marker, at a UTF-8 character boundary.
std::string cut_string(const std::string& s, std::size_t max_bytes);

// Memory sizes: "12000" (MiB), "12000M", "12000MiB", "12G", "12GiB", "1.5G", "1T".
// Empty when malformed, zero or negative, or above 1 PiB.
std::optional<MiB> parse_mem_size(std::string_view text);

// Time limits (issue 32 item 5): "5400" (seconds), "90m", "2h", "1d", "30s", "H:MM:SS",
// "D-HH:MM:SS". Empty when malformed, zero, or over kMaxTimeLimitS.
inline constexpr std::int64_t kMaxTimeLimitS = 365LL * 86400;
std::optional<std::int64_t> parse_time_limit(std::string_view text);

// A YAML job spec (docs/api.md): the JobRequest fields, with `mem` as a size string or
// `mem_mib` as a number. Throws nothing; returns the error naming the field.
std::variant<JobRequest, ParseError> parse_job_spec_yaml(std::string_view yaml);

}  // namespace aegis::api
