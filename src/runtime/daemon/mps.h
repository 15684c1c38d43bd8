// MPS for aegisd: deciding whether to use it, starting NVIDIA's MPS control daemon when
// aegisd manages it, and the environment a job gets to run as an MPS client. aegisd never
// changes a GPU's compute mode or MIG layout; it only reads them (docs/sharing.md).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "core/units.h"
#include "runtime/daemon/config.h"

namespace aegis {

// One control daemon per GPU (docs/sharing.md, "MPS"): NVIDIA's control daemon runs one MPS
// server per user at a time for all the GPUs it sees, so with one daemon for the whole
// server a second user's job on *another* GPU would wait for the first user's server to
// exit. Each GPU's daemon is started with CUDA_VISIBLE_DEVICES = that GPU's UUID and its
// own pipe and log directories, <mps_pipe_dir>/<device> and <mps_log_dir>/<device>.

// Resolves `sharing = "auto"` (MPS when the control tool is on PATH or an external control
// daemon's pipe exists), fills the default pipe and log directories and checks that every
// user reaches the pipe directory. Starts nothing: it runs before the daemon is built,
// whose engine takes its MPS rules from the outcome. Throws ConfigError.
void setup_mps(DaemonSettings& s);

// The control daemons of these GPUs (aegisd's, by UUID). Managed: starts each one not yet
// running; external: checks that each runs, and refuses a single control daemon for all
// GPUs. Throws ConfigError naming what is missing; true when it started any.
bool start_mps(const DaemonSettings& s, const std::vector<std::string>& gpu_uuids);

// Whether the managed control daemon of this GPU still runs: its FIFO is there and the pid
// its pid file names is alive. Cheap (a stat, a small read, kill 0): the supervisor calls it
// every mps_check_interval_s (mps_supervisor.h). The pipe directory is root's, 0755.
bool mps_daemon_alive(const DaemonSettings& s, const std::string& gpu_uuid);

// Starts the managed control daemon of one GPU again after it stopped (a user's `quit`, a
// crash): removes what a killed one left (its FIFO, its pid file), then runs `-d`. "" when it
// listens, else why not (one line).
std::string restart_mps_daemon(const DaemonSettings& s, const std::string& gpu_uuid);

// Stops the control daemons of managed MPS, when no job runs (clients would lose them).
void stop_mps(const DaemonSettings& s, const std::vector<std::string>& gpu_uuids);

// The pipe directory of one GPU's control daemon: <mps_pipe_dir>/<its UUID, '/' made '_'>.
std::string mps_pipe_dir_of(const DaemonSettings& s, const std::string& gpu_uuid);

// The environment of a job attempt under MPS on these GPUs: its GPU's pipe directory, and,
// when the lifecycle gave it one (every job not placed exclusive), its memory limit and the
// optional SM share. A job on several GPUs gets none (the lifecycle runs it alone, without
// MPS: a client reaches one control daemon, which sees one GPU).
std::map<std::string, std::string> mps_environment(const DaemonSettings& s, std::optional<MiB> limit_mib,
                                                   const std::vector<std::string>& gpu_uuids);

}  // namespace aegis
