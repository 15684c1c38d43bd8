#include "runtime/daemon/config.h"

#include <fmt/format.h>
#include <map>
#include <toml++/toml.h>

#include "runtime/daemon/priority_levels.h"
#include "sched/config_params.h"
#include "sched/policies.h"

namespace aegis {

namespace {

constexpr double kInf = kParamInf;
#define P(...) AEGIS_PARAM(DaemonSettings, __VA_ARGS__)

// A function-local table: the policy choices come from the registry (policies.cpp), whose
// static initialisation order against this file is otherwise unspecified.
std::span<const ParamEntry<DaemonSettings>> entries() {
  static const ParamEntry<DaemonSettings> table[] = {
    P("state_dir", state_dir, 0, 0, "", "Directory of the database, job logs and attempt records"),
    P("socket", socket, 0, 0, "", "Unix socket the aegis command talks to"),
    P("socket_mode", socket_mode, 0, 0, "", "Permissions of the socket (octal); callers are identified by SO_PEERCRED"),
    P("admin_group", admin_group, 0, 0, "", "Unix group whose members may manage every job (root always may)"),
    P("gpu_backend", gpu_backend, 0, 0, "nvml,emulated", "nvml: the NVIDIA driver; emulated: emulated GPUs"),
    P("nvml_library", nvml_library, 0, 0, "", "NVML library loaded with dlopen for gpu_backend = nvml"),
    P("emulated_library", emulated_library, 0, 0, "",
      "Emulated NVML library for gpu_backend = emulated (default: next to aegisd)"),
    P("emulated_gpus", emulated_gpus, 0, 0, "", "Emulated GPUs, COUNTxMIB[,COUNTxMIB...], e.g. 3x40960"),
    P("emulated_state", emulated_state, 0, 0, "",
      "State file of the emulated GPUs (default: <state_dir>/emulated-gpus.state, which only the daemon's user can "
      "reach: give another path for other users' jobs)"),
    P("emulated_gpm", emulated_gpm, 0, 0, "",
      "Emulated GPUs report SM activity/occupancy and DRAM activity through NVML GPM, as Hopper does (false: as Ampere "
      "and older, where only DCGM has them)"),
    P("dcgm", dcgm, 0, 0, "auto,embedded,hostengine,off",
      "SM activity, SM occupancy and DRAM activity for GPUs without NVML GPM (Ampere and older) from DCGM's profiling "
      "fields: auto = a running nv-hostengine at dcgm_hostengine, else a host engine embedded in aegisd; off = those "
      "GPUs use the coarse utilization.gpu rule"),
    P("dcgm_library", dcgm_library, 0, 0, "",
      "DCGM library loaded with dlopen (\"\" = libdcgm.so.4, then .so.3, then .so; with gpu_backend = emulated the "
      "emulated libdcgm next to aegisd)"),
    P("dcgm_hostengine", dcgm_hostengine, 0, 0, "",
      "Address of nv-hostengine for dcgm = auto or hostengine: HOST[:PORT] (port 5555 by default) or a Unix socket path"),
    P("emulated_process_util", emulated_process_util, 0, 0, "",
      "Emulated GPUs give per-process utilisation samples (nvmlDeviceGetProcessUtilization)"),
    P("gpus", gpus, 0, 0, "", "GPUs to schedule: all, or a comma list of NVML indices or UUIDs"),
    P("policy", policy, 0, 0, policy_choices(),
      "Scheduling policy, from the one registry `aegis policies` lists (its preset applies before the engine keys of "
      "this file; aegisd refuses a policy that needs what it cannot give its jobs)"),
    P("metrics_port", metrics_port, 0, 65535, "", "Loopback TCP port of the Prometheus endpoint (0 = off)"),
    P("metrics_max_jobs", metrics_max_jobs, 0, 100000, "",
      "Running jobs that get per-job Prometheus series (aegis_job_*), lowest ids first; the rest are counted in "
      "aegis_job_series_dropped"),
    P("dashboard_port", dashboard_port, 0, 65535, "",
      "Loopback TCP port of the read-only web dashboard (0 = off; docs/dashboard.md)"),
    P("dashboard_socket", dashboard_socket, 0, 0, "",
      "Unix socket of the web dashboard, for a reverse proxy (\"\" = off); its directory must be root's alone"),
    P("dashboard_socket_mode", dashboard_socket_mode, 0, 0, "",
      "Permissions of the dashboard's socket (octal); it shows what `aegis queue --all` and `aegis gpus` show anyone"),
    P("dashboard_history_s", dashboard_history_s, 60, 86400, "",
      "Seconds of GPU and job samples the dashboard keeps for its charts (one per telemetry sample)"),
    P("dashboard_max_jobs", dashboard_max_jobs, 10, 100000, "",
      "Jobs the dashboard lists, the newest of `aegis queue --all` (running and queued ones are always shown)"),
    P("dashboard_max_connections", dashboard_max_connections, 2, 4096, "",
      "Dashboard connections open at once, per listener; a newcomer takes the place of the one waiting longest for its request"),
    P("dashboard_timeout_s", dashboard_timeout_s, 1, 600, "",
      "Seconds a dashboard connection may take to send its whole request, and again to read the whole reply"),
    P("kill_grace_s", kill_grace_s, 0, 3600, "", "Seconds between SIGTERM and SIGKILL when a job is cancelled"),
    P("default_time_limit_s", default_time_limit_s, 0, 365.0 * 86400, "",
      "Time limit of each attempt of a job submitted without --time, in seconds (0 = none)"),
    P("max_time_limit_s", max_time_limit_s, 0, 365.0 * 86400, "",
      "Longest --time a job may ask for, in seconds; a longer one is refused at submit (0 = no maximum)"),
    P("oom_blame_stop", oom_blame_stop, 0, 0, "",
      "Stop a job that grew past its declared memory plus memory_margin_mib when a neighbour within its own "
      "dies of OOM, and count its end as its own OOM (off: its OOM count is raised and it runs on)"),
    P("durability", durability, 0, 0, "full,normal",
      "full: fsync every commit (survives power loss); normal: survives daemon crashes only"),
    P("shim", shim, 0, 0, "", "Path of aegis-shim, which runs each job attempt (default: next to aegisd)"),
    P("learned_model", learned_model, 0, 0, "",
      "Weights of the learned memory estimator for jobs submitted with a model spec (\"\" = off)"),
    P("calibrated_model", calibrated_model, 0, 0, "",
      "Calibrated memory estimator (aegis estimate calibrate): its per-GPU-model CUDA contexts translate a job's "
      "history from a GPU model it ran on to one it did not (\"\" = history moves across unchanged)"),
    P("history_window", history_window, 1, 1000, "",
      "Completed runs per job signature and GPU model that the history estimate reads (the most recent)"),
    P("history_quantile", history_quantile, 0.5, 1, "",
      "Quantile of those runs' peaks taken as the history estimate (nearest rank, rounding up; 1 = their largest)"),
    P("history_util_min_runs", history_util_min_runs, 1, 1000, "",
      "Completed runs with a measured GPU utilisation, per job signature and on every GPU model of this server, "
      "before a job without --hint-gpu-util gets that history's figure (before the model spec's prediction)"),
    P("history_util_quantile", history_util_quantile, 0, 1, "",
      "Quantile of those runs' mean GPU utilisation taken as the job's (nearest rank, rounding up; 0.5 = median)"),
    P("tiny_util", tiny_util, 0, 1, "",
      "A job with no sharing score gets Lucid's score 0 (tiny, shares with any job) when its estimated GPU "
      "utilisation (history, else calibrated_model's prediction from its model spec) is below this, else 2"),
    P("emulated_mig", emulated_mig, 0, 0, "",
      "Emulated MIG layout: GPU:PROFILES;... e.g. 0:3g.20gb,2g.10gb,1g.5gb,1g.5gb (\"\" = none)"),
    P("sharing", sharing, 0, 0, "process,mps,auto",
      "How collocated jobs share a GPU: plain processes, MPS, or MPS when its control tool is installed"),
    P("mps_control", mps_control, 0, 0, "managed,external",
      "managed: aegisd starts one MPS control daemon per GPU (pipe <mps_pipe_dir>/<GPU UUID>); external: use running ones, one per GPU"),
    P("mps_control_binary", mps_control_binary, 0, 0, "", "The MPS control tool (looked up on PATH)"),
    P("mps_pipe_dir", mps_pipe_dir, 0, 0, "", "Where each GPU's MPS pipe directory lies, <this>/<GPU UUID> (default: mps beside the socket, which every user reaches)"),
    P("mps_log_dir", mps_log_dir, 0, 0, "", "Where each GPU's MPS log directory lies, <this>/<GPU UUID> (default: <state_dir>/mps/log)"),
    P("mps_thread_percentage", mps_thread_percentage, 0, 100, "",
      "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE given to collocated jobs (0 = not set)"),
    P("mps_check_interval_s", mps_check_interval_s, 0.1, 3600, "",
      "Seconds between checks that each managed MPS control daemon still runs (any user can quit one); a job "
      "that fails to connect to MPS triggers a check at once"),
    P("mps_restart_limit", mps_restart_limit, 1, 1000, "",
      "Failed restarts in a row of a managed MPS control daemon before aegisd gives up on it and places no job on "
      "its GPU (the queue says why) until aegisd restarts"),
    P("mps_restart_backoff_s", mps_restart_backoff_s, 0, 3600, "",
      "Seconds before the second try to restart a managed MPS control daemon; each failed try doubles it"),
    P("log_max_bytes", log_max_bytes, 0, kInf, "",
      "Bytes of output kept per job attempt and stream; past it the log says so and keeps only the last "
      "log_tail_bytes (0 = no cap)"),
    P("log_tail_bytes", log_tail_bytes, 0, 64 << 20, "",
      "Bytes of a capped log's end kept and written when the job ends (framework errors are there)"),
    P("log_min_free_bytes", log_min_free_bytes, 0, kInf, "",
      "Job output is dropped (and the log says how much) while its filesystem has fewer bytes than this free "
      "for unprivileged writers, so that no job's output can leave aegisd's database without room (0 = off)"),
    P("job_tracking", job_tracking, 0, 0, "auto,cgroup,descendants",
      "How a job's processes are found and stopped: a cgroup v2 per attempt, or the descendants of its shim "
      "(auto: cgroup where cgroup v2 is delegated to root)"),
    P("max_jobs_per_user", max_jobs_per_user, 0, kInf, "", "Jobs one user may have queued or running (0 = no limit)"),
    P("listing_string_bytes", listing_string_bytes, 64, 1 << 20, "",
      "queue and history cut each job's argv, working directory and other strings past this many bytes (marked "
      "with \u2026 and listed in the job's `cut`); `aegis show ID` has them whole"),
    P("priority_levels", priority_levels, 0, 0, "",
      "Priority levels each user may ask for with --priority: a comma list of WHO:LEVELS, WHO a user name, @group "
      "or *, LEVELS N or LO..HI (e.g. \"*:0, @ml:0..5, alice:-10..10\"); level 0 is everyone's, and a user may also "
      "use every level of every entry naming them"),
    P("preemption", preemption, 0, 0, "",
      "A waiting job that cannot start may stop running jobs of lower priority levels (warned first with their "
      "--checkpoint-signal), which go back to their place in the queue"),
    P("checkpoint_dir", checkpoint_dir, 0, 0, "",
      "Directory of the per-job checkpoint directories (AEGIS_CHECKPOINT_DIR=<this>/<job id>, owned by the job's "
      "user); aegisd's own, mode 0711 (\"\" = <state_dir>-checkpoints)"),
    P("max_connections", max_connections, 16, 1 << 20, "",
      "Client connections at once (lowered to fit the open-file limit, keeping descriptors for the daemon's own work)"),
    P("max_connections_per_user", max_connections_per_user, 1, 1 << 20, "", "Client connections one user may hold at once"),
    P("request_timeout_s", request_timeout_s, 0.1, 3600, "",
      "Seconds a client may take to send a whole request line once it has started"),
    P("client_idle_timeout_s", client_idle_timeout_s, 1, 86400, "",
      "Seconds a connection may stay open with no request in progress"),
    P("reply_timeout_s", reply_timeout_s, 1, 86400, "", "Seconds a client may take to read a reply before it is dropped"),
    // Issue 32 item 6: notifications (docs/lab-policies.md, "Notifications").
    P("notify_command", notify_command, 0, 0, "",
      "Command run for each notification a job's owner asked for (aegis submit --notify), as that user, with the JSON "
      "payload on stdin; an absolute path owned by root and writable by no one else (\"\" = none)"),
    P("notify_url", notify_url, 0, 0, "", "URL each notification's JSON payload is POSTed to, http:// or https:// (\"\" = none)"),
    P("notify_timeout_s", notify_timeout_s, 0.1, 600, "",
      "Seconds one delivery may take: the command is killed past it, the POST gives up (each of connect, write, read)"),
    P("notify_queue_max", notify_queue_max, 1, 1000000, "",
      "Notifications waiting for delivery, all users together; past it new ones are dropped (logged)"),
    P("notify_per_user_max", notify_per_user_max, 1, 1000000, "",
      "Notifications of one user's jobs waiting for delivery; past it that user's new ones are dropped (logged)"),
    P("notify_eta_slip_s", notify_eta_slip_s, 0, 86400 * 365, "",
      "A waiting job's expected start (aegis queue --eta) later than the one last told by more than this many seconds "
      "is an eta notification"),
    P("notify_eta_check_s", notify_eta_check_s, 1, 86400, "",
      "Seconds between two computations of the waiting jobs' expected starts for eta notifications (only while a "
      "waiting job asked for them)"),
  };
  return table;
}
#undef P

std::string toml_value_text(const toml::node& n, const std::string& where) {
  if (auto s = n.as_string()) return s->get();
  if (auto i = n.as_integer()) return std::to_string(i->get());
  if (auto f = n.as_floating_point()) return fmt::format("{}", f->get());
  if (auto b = n.as_boolean()) return b->get() ? "true" : "false";
  if (auto a = n.as_array()) {
    std::string out;
    for (const auto& e : *a) out += (out.empty() ? "" : ",") + toml_value_text(e, where);
    return out;
  }
  throw ConfigError(where + ": unsupported value type");
}

bool is_daemon_key(std::string_view k) {
  for (const auto& e : entries())
    if (e.name == k) return true;
  return false;
}

}  // namespace

std::span<const ParamEntry<DaemonSettings>> daemon_param_table() { return entries(); }

std::string checkpoint_root(const DaemonSettings& s) {
  if (!s.checkpoint_dir.empty()) return s.checkpoint_dir;
  std::string state = s.state_dir;
  while (state.size() > 1 && state.back() == '/') state.pop_back();
  return state + "-checkpoints";
}

DaemonConfig load_daemon_config(const std::string& path, const std::vector<std::string>& overrides) {
  // Collect NAME=VALUE from the file, then the overrides; the policy is applied first.
  std::vector<std::pair<std::string, std::string>> kv;
  if (!path.empty()) {
    toml::table t;
    try {
      t = toml::parse_file(path);
    } catch (const toml::parse_error& e) {
      throw ConfigError(fmt::format("{}:{}: {}", path, e.source().begin.line, e.description()));
    }
    for (const auto& [key, node] : t) {
      const std::string name(key.str());
      if (node.is_table()) {
        if (name != "engine") throw ConfigError(fmt::format("{}: unknown table [{}]", path, name));
        for (const auto& [k2, n2] : *node.as_table())
          kv.push_back({std::string(k2.str()), toml_value_text(n2, fmt::format("{}: engine.{}", path, k2.str()))});
        continue;
      }
      kv.push_back({name, toml_value_text(node, fmt::format("{}: {}", path, name))});
    }
  }
  for (const auto& o : overrides) {
    const auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0) throw ConfigError("--set: expected NAME=VALUE, got '" + o + "'");
    kv.push_back({o.substr(0, eq), o.substr(eq + 1)});
  }

  DaemonConfig c;
  const std::string where = path.empty() ? std::string("config") : path;
  for (const auto& [k, v] : kv)
    if (is_daemon_key(k)) {
      try {
        set_param_in<DaemonSettings>(entries(), c.daemon, k, v);
      } catch (const ConfigError& e) {
        throw ConfigError(fmt::format("{}: {}", where, e.what()));
      }
    }
  check_params<DaemonSettings>(entries(), c.daemon);
  if (auto levels = parse_priority_levels(c.daemon.priority_levels); std::holds_alternative<std::string>(levels))
    throw ConfigError(fmt::format("{}: priority_levels: {}", where, std::get<std::string>(levels)));
  // The policy as the registry defines it: nothing is rewritten behind the admin's back.
  c.engine = policy_config(c.daemon.policy);
  for (const auto& [k, v] : kv) {
    if (is_daemon_key(k)) continue;
    try {
      set_param(c.engine, k, v);
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("{}: {}", where, e.what()));
    }
  }
  return c;
}

std::string to_toml(const DaemonConfig& c) {
  auto quote = [](const ParamInfo& p) {
    const std::string v = format_value(p.value);
    if (std::holds_alternative<std::string>(p.value)) return "\"" + v + "\"";
    if (std::holds_alternative<std::vector<double>>(p.value)) return "[" + v + "]";
    return v;
  };
  std::string out = "# aegisd effective configuration\n";
  for (const auto& p : describe_params<DaemonSettings>(entries(), c.daemon))
    out += fmt::format("{} = {}  # {}\n", p.name, quote(p), p.doc);
  out += "\n# engine (names as in `aegis config`; the policy's preset is applied first)\n";
  for (const auto& p : describe(c.engine)) out += fmt::format("{} = {}  # {}\n", p.name, quote(p), p.doc);
  return out;
}

}  // namespace aegis
