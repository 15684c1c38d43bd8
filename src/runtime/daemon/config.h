// aegisd's configuration: its own settings plus every engine parameter, from a TOML file
// and command-line overrides. `aegisd --print-config` shows the result as TOML.
// Precedence: engine defaults < the policy's preset < the file < --set flags.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/param_table.h"
#include "lifecycle/estimate_chain.h"
#include "sched/config.h"

namespace aegis {

struct DaemonSettings {
  std::string state_dir = "/var/lib/aegis";
  std::string socket = "/run/aegis/aegisd.sock";
  std::string socket_mode = "0666";       // anyone may connect; SO_PEERCRED says who they are
  std::string admin_group;                // members may manage every job ("" = root only)
  std::string gpu_backend = "nvml";       // nvml | emulated
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string emulated_library;           // default: next to aegisd (lib/libaegis-nvml-emulated.so)
  std::string emulated_gpus = "3x40960";
  std::string emulated_state;             // the emulated GPUs' state file; default: <state_dir>/emulated-gpus.state
  bool emulated_gpm = true;
  std::string dcgm = "auto";              // auto | embedded | hostengine | off: DCGM for GPUs without GPM
  std::string dcgm_library;               // "" = libdcgm.so.4, .so.3, .so (emulated: the emulated libdcgm next to aegisd)
  std::string dcgm_hostengine = "127.0.0.1";  // nv-hostengine's address (HOST[:PORT] or a Unix socket path)
  bool emulated_process_util = true;  // emulated GPUs give per-process utilisation samples
  std::string gpus = "all";               // "all" or a comma list of NVML indices or UUIDs
  std::string policy = "aegis-auto";     // aegis with the estimate chain a server can give
  std::int64_t metrics_port = 0;          // loopback HTTP port for Prometheus (0 = off)
  std::int64_t metrics_max_jobs = 256;    // running jobs with per-job series (bounds their cardinality)
  // The read-only web dashboard (docs/dashboard.md): off unless a port or socket is set.
  std::int64_t dashboard_port = 0;        // loopback TCP port (0 = off)
  std::string dashboard_socket;           // Unix socket for a reverse proxy ("" = off)
  std::string dashboard_socket_mode = "0666";  // who may connect: `aegis queue --all` is everyone's too
  double dashboard_history_s = 3600;      // the charts' span: GPU and job samples kept this long
  std::int64_t dashboard_max_jobs = 200;  // the newest jobs of `queue --all` it lists (the loop builds them)
  std::int64_t dashboard_max_connections = 32;  // open at once, per listener (the newcomer wins)
  double dashboard_timeout_s = 10;        // a dashboard request's whole head; again its whole reply
  double kill_grace_s = 10;
  // Issue 32 item 5: time limits (docs/config.md): a job given none gets the default; one
  // over the maximum is refused at submit. 0 = none.
  double default_time_limit_s = 0;
  double max_time_limit_s = 0;
  // A job that grew past its declared memory plus the margin, beside a job that died of OOM
  // within its own, is stopped and its end counted as its own OOM (lifecycle_blame.cpp).
  bool oom_blame_stop = true;
  std::string durability = "full";        // full: fsync every commit; normal: survive crashes only
  std::string shim;                       // default: aegis-shim next to aegisd
  std::string learned_model;              // learned estimator weights (JSON); "" = off
  std::string calibrated_model;           // calibrated estimator (JSON): per-GPU-model contexts; "" = off
  // The estimate chain's numbers: their defaults live in EstimateChainConfig (one home).
  std::int64_t history_window = EstimateChainConfig{}.history_window;  // runs per signature and GPU model read
  double history_quantile = EstimateChainConfig{}.history_quantile;    // the quantile of their peaks (nearest rank, up)
  std::int64_t history_util_min_runs = EstimateChainConfig{}.history_util_min_runs;  // runs with a utilisation first
  double history_util_quantile = EstimateChainConfig{}.history_util_quantile;  // of their utilisation (nearest rank, up)
  double tiny_util = 0.5;                 // estimated utilisation below it: Lucid's score 0, else 2
  std::string emulated_mig;               // emulated MIG layout, e.g. "0:3g.20gb,2g.10gb,1g.5gb,1g.5gb"
  std::string sharing = "process";        // process | mps | auto
  std::string mps_control = "managed";    // managed: aegisd starts one MPS control daemon per GPU; external
  std::string mps_control_binary = "nvidia-cuda-mps-control";
  std::string mps_pipe_dir;               // default: <socket dir>/mps (reachable by every user); a GPU's: <this>/<UUID>
  std::string mps_log_dir;                // default: <state_dir>/mps/log
  std::int64_t mps_thread_percentage = 0; // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE for collocated jobs (0 = unset)
  // Supervision of managed control daemons (docs/daemon.md, "MPS supervision").
  double mps_check_interval_s = 5;        // how often each is checked alive (a stat and a /proc read)
  std::int64_t mps_restart_limit = 5;     // failed restarts in a row before aegisd stops placing on that GPU
  double mps_restart_backoff_s = 1;       // before the 2nd restart try; doubles each failed try
  // Defences against one user harming the others (docs/security.md).
  std::int64_t log_max_bytes = 128 << 20; // per job attempt and stream; past it only the tail is kept (0 = no cap)
  std::int64_t log_tail_bytes = 1 << 20;  // kept past the cap and written when the job ends
  std::int64_t log_min_free_bytes = 64 << 20;  // logs stop below this free space on their filesystem (0 = off)
  std::string job_tracking = "auto";      // auto | cgroup | descendants: how a job's processes are found
  std::int64_t max_jobs_per_user = 1000;  // queued and running, per user (0 = no limit)
  std::int64_t listing_string_bytes = 512; // issue 33 item 1: a listing cuts each job's longer strings (`aegis show` has them)
  // Priorities and preemption (issue 32 item 1, docs/config.md "Priorities and preemption").
  std::string priority_levels = "*:0";    // WHO:LEVELS, comma list; WHO = user, @group or *; LEVELS = N or LO..HI
  bool preemption = false;                // a waiting head may stop running jobs of lower levels
  std::string checkpoint_dir;             // per-job checkpoint directories (AEGIS_CHECKPOINT_DIR); "" = <state_dir>-checkpoints
  std::int64_t max_connections = 1024;    // client connections at once (lowered to fit the fd limit)
  std::int64_t max_connections_per_user = 16;
  double request_timeout_s = 30;          // a request line must be complete within this
  double client_idle_timeout_s = 300;     // a connection with nothing to do is closed after this
  double reply_timeout_s = 60;            // a reply the client does not read within this is dropped
  // Issue 32 item 6, notifications (`aegis submit --notify`; docs/lab-policies.md, "Notifications").
  std::string notify_command;             // run as the job's owner, payload on stdin ("" = none)
  std::string notify_url;                 // the payload POSTed here ("" = none)
  double notify_timeout_s = 10;           // each delivery; a command still running is killed
  std::int64_t notify_queue_max = 1000;   // notices waiting for delivery, all users
  std::int64_t notify_per_user_max = 100; // of which one user's
  double notify_eta_slip_s = 600;         // an expected start later by more than this is an `eta` event
  double notify_eta_check_s = 60;         // how often waiting jobs' expected starts are computed for it
};

struct DaemonConfig {
  DaemonSettings daemon;
  EngineConfig engine;
};

std::span<const ParamEntry<DaemonSettings>> daemon_param_table();

// Where the per-job checkpoint directories go (issue 32 item 1): checkpoint_dir, else beside
// the state directory (which is root's alone, 0700: a job could not reach a directory in it).
std::string checkpoint_root(const DaemonSettings& s);

// Builds the config from an optional TOML file and NAME=VALUE overrides (daemon or engine
// names). Throws ConfigError naming the file, key and problem.
DaemonConfig load_daemon_config(const std::string& toml_path, const std::vector<std::string>& overrides);

// The effective config as TOML, each key with its meaning as a comment.
std::string to_toml(const DaemonConfig& c);

// The installed /etc/aegis/aegisd.toml: every setting and engine parameter with its meaning
// and its default, commented out, those a SIGHUP applies marked (config_template.cpp).
std::string config_file_template();

}  // namespace aegis
