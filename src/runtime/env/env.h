// All of aegisd's contact with the operating system, behind one interface (LevelDB's Env
// is the model): the clock, the GPUs, the processes of job attempts, users and files.
// The daemon's logic (src/runtime/daemon/daemon.h) runs unchanged on OsEnv (the real
// one) and on the fake environment of the unit tests (tests/test_daemon_lifecycle.cpp).
// The database is not here: it is a real SQLite file in both (src/runtime/store).
#pragma once
#include <charconv>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <utility>
#include <vector>

#include "core/units.h"
#include "runtime/gpu/gpu_source.h"
#include "runtime/launch/launch_file.h"

namespace aegis {

// A failure to prepare or start an attempt, with its errno. Transient ones (a full disk,
// no descriptors or memory left) leave the job queued; the others end it.
struct StartError : std::runtime_error {
  StartError(const std::string& what, bool transient_) : std::runtime_error(what), transient(transient_) {}
  bool transient;
};

// What the environment knows of one attempt of a job.
struct AttemptStatus {
  enum class State {
    Running,  // its shim (or, without one, its processes) still runs
    Ended,    // it recorded how it ended: `exit` below
    Gone,     // nothing runs and nothing was recorded: never started (!started) or unknown
    Unknown,  // cannot tell now (no descriptors, an I/O error): conclude nothing
  };
  State state = State::Unknown;
  bool started = false;          // the job's first process was recorded (it may have run)
  pid_t pgid = 0;                // its process group, once known (shown by `aegis show`)
  int wait_status = 0;           // Ended: as waitpid gives it
  Seconds ended_at = 0;          // Ended
  bool cancelled = false;        // Ended: a cancel reached it
  std::string start_error;       // Ended: it never ran, and why (with the errno)
  std::string why_unknown;       // Unknown: what could not be read
};

class Env {
 public:
  virtual ~Env() = default;

  // --- the clock ---------------------------------------------------------------------
  virtual Seconds now() = 0;  // wall clock, seconds since the epoch

  // --- GPUs --------------------------------------------------------------------------
  // One sample of every device (GpuSource::sample), reading the costly per-process
  // utilisation and energy only where `what` asks; throws std::runtime_error when the
  // driver does not answer (the daemon keeps the last good one and tries again). aegisd
  // calls it from its sampling thread (daemon/gpu_sampler.h), every other call from its loop.
  virtual std::vector<GpuStatus> sample_gpus(const SampleRequest& what) = 0;
  virtual std::string describe_gpus() const = 0;
  // True for processes that hold GPU memory but are not jobs (NVIDIA's MPS server).
  virtual bool is_infrastructure(pid_t pid) = 0;
  // The job attempt each GPU process belongs to (by its cgroup, else ancestry, else
  // session), among the running attempts; processes of no job are left out.
  using AttemptKey = std::pair<JobId, int>;
  virtual std::map<pid_t, AttemptKey> owners(const std::vector<pid_t>& pids, const std::vector<AttemptKey>& running) = 0;

  // --- job attempts --------------------------------------------------------------------
  // Creates the attempt's files (no process yet): the moment a full disk is met. Throws
  // StartError.
  virtual void prepare_attempt(JobId job, int attempt, const LaunchFile& launch) = 0;
  // Starts the prepared attempt's shim. Throws StartError (no process is left behind).
  virtual void start_attempt(JobId job, int attempt) = 0;
  virtual AttemptStatus attempt_status(JobId job, int attempt) = 0;
  // Asks a running attempt to stop (its shim passes SIGTERM on, SIGKILL after the grace);
  // false when that cannot be done yet (its shim is still starting): ask again later.
  virtual bool stop_attempt(JobId job, int attempt) = 0;
  // An attempt whose shim is gone but whose processes live on: SIGKILL them.
  virtual void kill_attempt(JobId job, int attempt) = 0;
  // Issue 33 item 6: what outlives a database record lost with its write-ahead log (each
  // attempt's directory, written by aegisd as root): the jobs with an id of at least `from`
  // that have one, a job's attempts there (ascending), and an attempt's launch file.
  // Environments without a state directory have none (these defaults).
  virtual std::vector<JobId> jobs_on_disk(JobId from) { return (void)from, std::vector<JobId>{}; }
  virtual std::vector<int> attempts_on_disk(JobId job) { return (void)job, std::vector<int>{}; }
  virtual std::optional<LaunchFile> launch_of(JobId job, int attempt) { return (void)job, (void)attempt, std::nullopt; }
  // Issue 32 item 1 (preemption): sends `signal` to a running attempt's processes (its
  // checkpoint warning); nothing when it runs no more.
  virtual void signal_attempt(JobId job, int attempt, int signal) = 0;
  // Makes the job's checkpoint directory `dir` (mode 0700, owned by uid/gid) unless it is
  // already there as theirs; its parent is the daemon's. Throws StartError.
  virtual void prepare_checkpoint_dir(const std::string& dir, uid_t uid, gid_t gid) = 0;
  // When `dir`/checkpointed was last modified, if it exists (looked at, never followed).
  virtual std::optional<Seconds> checkpointed_at(const std::string& dir) = 0;
  // The last `max_bytes` of an attempt's stdout or stderr ("" if none).
  virtual std::string log_tail(JobId job, int attempt, bool stderr_stream, std::size_t max_bytes) = 0;
  struct LogChunk {
    std::string data;
    std::uint64_t size = 0;  // the file's size now
  };
  virtual LogChunk read_log(JobId job, int attempt, bool stderr_stream, std::uint64_t offset,
                            std::uint64_t max_bytes) = 0;
  // How job processes are tracked ("cgroup DIR", "descendants of each job's shim").
  virtual std::string tracking() const = 0;

  // --- processes, users, files ---------------------------------------------------------
  // When a process started (clock ticks after boot), empty if it is gone.
  virtual std::optional<std::uint64_t> process_start_ticks(pid_t pid) = 0;
  virtual std::optional<std::string> user_name(uid_t uid) = 0;
  // The uid of user `name` (the gid of group `name` when `group`), for the fair-share
  // weights of the config. This default knows numbers only ("1001"); OsEnv asks the system.
  virtual std::optional<std::int64_t> id_of(std::string_view name, bool group) {
    (void)group;
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), n);
    if (ec != std::errc() || end != name.data() + name.size() || n < 0) return std::nullopt;
    return n;
  }
  // Whether `uid` (primary group `gid`) belongs to the Unix group `group`.
  virtual bool in_group(uid_t uid, gid_t gid, const std::string& group) = 0;
  // Whether `path` is a directory that `uid`/`gid` can reach (looked up as them).
  virtual bool is_directory_for(const std::string& path, uid_t uid, gid_t gid) = 0;
  // The environment variables aegisd passes on to every job (the emulated GPUs' state).
  virtual std::vector<std::pair<std::string, std::string>> passed_on() = 0;
};

}  // namespace aegis
