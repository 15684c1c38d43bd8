// What /proc says about a process, and a process named for good: a pid with its start time
// (a pid alone is reused by the kernel; the pair is not). Used by the daemon and the shim
// to find a job's processes without ever acting on a recycled number.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace aegis {

struct ProcStat {
  char state = 0;                 // R, S, D, Z, ...
  pid_t ppid = 0, pgrp = 0, session = 0;
  std::uint64_t start_ticks = 0;  // field 22: clock ticks after boot
};

// Empty when the process is gone (or /proc cannot be read).
std::optional<ProcStat> read_proc_stat(pid_t pid);

// Session id of a process, empty if it is gone.
std::optional<pid_t> session_of(pid_t pid);

// When a process started (clock ticks after boot), empty if it is gone or a zombie: with
// the pid it names one process for good, as pids are reused.
std::optional<std::uint64_t> process_start_ticks(pid_t pid);

// The real uid of a process (from /proc/PID/status), empty if it is gone.
std::optional<uid_t> process_uid(pid_t pid);

// The process's cgroup v2 path, relative to the hierarchy's root ("/a/b"), from the "0::"
// line of /proc/PID/cgroup; empty if it is gone or has none.
std::optional<std::string> cgroup_of(pid_t pid);

// Every pid in /proc now.
std::vector<pid_t> all_pids();

// A pid and its start time: one process, never another that later gets the same pid.
struct ProcessRef {
  pid_t pid = 0;
  std::uint64_t start_ticks = 0;
  bool operator==(const ProcessRef&) const = default;
};

// A pidfd (pidfd_open) for `p` if it is still that process, else -1. The check follows the
// open, so the descriptor can only refer to `p`: signals sent through it never reach a
// process that reused the pid. Close it with close().
int open_pidfd(const ProcessRef& p);

// Sends `sig` through a pidfd; false if the process is gone.
bool pidfd_signal(int pidfd, int sig);

// Sends `sig` to `p` if it is still that process (open_pidfd, then pidfd_signal).
bool signal_process(const ProcessRef& p, int sig);

}  // namespace aegis
