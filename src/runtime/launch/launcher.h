// Starts a job attempt: the daemon forks the attempt's shim (`aegis-shim`) in a session of
// its own, holding the attempt's lock across the fork so that there is never a moment
// when the attempt runs and its lock is free. The shim starts the job as its user and
// records how it ended (apps/aegisd/shim.cpp).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "runtime/launch/attempt_dir.h"

namespace aegis {

struct LaunchSpec {
  AttemptDir dir;
  std::string shim;                        // path of aegis-shim
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user;
  std::string workdir;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // the job's whole environment
  double kill_grace_s = 10;
};

// Returns the shim's pid. Throws std::runtime_error if it cannot fork.
pid_t launch_attempt(const LaunchSpec& spec);

// Signals every process of a job's process group; false if none is left.
bool signal_group(pid_t pgid, int sig);
bool group_alive(pid_t pgid);

// Session id of a process (from /proc), empty if it is gone.
std::optional<pid_t> session_of(pid_t pid);

// When a process started (clock ticks after boot, from /proc), empty if it is gone or a
// zombie: with the pid it names one process for good, as pids are reused.
std::optional<std::uint64_t> process_start_ticks(pid_t pid);

}  // namespace aegis
