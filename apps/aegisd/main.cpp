// aegisd: the GPU-sharing scheduler daemon of one server. It drives the same engine as
// `aegis sim` with real processes, NVML telemetry (or emulated GPUs) and a durable queue.
#include <memory>
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/daemon/config.h"
#include "runtime/daemon/config_reload.h"
#include "runtime/daemon/daemon.h"
#include "runtime/daemon/dashboard_server.h"
#include "runtime/daemon/mps.h"
#include "runtime/daemon/secure_paths.h"
#include "runtime/daemon/server.h"
#include "runtime/env/os_env.h"
#include "runtime/gpu/telemetry_select.h"

namespace {

std::string exe_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<std::size_t>(n));
  return p.substr(0, p.rfind('/'));
}

bool exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0;
}

// Installed layout first (the package's private directories, found relative to aegisd
// so that any install prefix works), then the build tree.
std::string default_emulated_library() {
  const std::string installed = exe_dir() + "/" + AEGIS_EMULATED_NVML_INSTALLED;
  for (const std::string& p : {installed, std::string(AEGIS_EMULATED_NVML_BUILD)})
    if (exists(p)) return p;
  return installed;
}

// The emulated libdcgm, found as the emulated NVML library is.
std::string default_emulated_dcgm() {
  const std::string installed = exe_dir() + "/" + AEGIS_EMULATED_DCGM_INSTALLED;
  for (const std::string& p : {installed, std::string(AEGIS_EMULATED_DCGM_BUILD)})
    if (exists(p)) return p;
  return installed;
}

std::string default_shim() {
  const std::string installed = exe_dir() + "/" + AEGIS_SHIM_INSTALLED;
  return exists(installed) ? installed : exe_dir() + "/aegis-shim";
}

// Fills in the defaults that depend on where aegisd is.
aegis::DaemonConfig load_config(const std::string& path, const std::vector<std::string>& sets) {
  aegis::DaemonConfig cfg = aegis::load_daemon_config(path, sets);
  if (cfg.daemon.shim.empty()) cfg.daemon.shim = default_shim();
  if (cfg.daemon.emulated_library.empty()) cfg.daemon.emulated_library = default_emulated_library();
  return cfg;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aegisd: shares the GPUs of this server between training jobs safely"};
  std::string config_path;
  std::vector<std::string> sets;
  bool print = false, print_default = false;
  std::string state_dir, socket;
  app.add_option("--config", config_path, "TOML configuration file (see docs/daemon.md)");
  app.add_option("--set", sets, "Override a setting or engine parameter: NAME=VALUE (repeatable)");
  app.add_option("--state-dir", state_dir, "Same as --set state_dir=DIR");
  app.add_option("--socket", socket, "Same as --set socket=PATH");
  app.add_flag("--print-config", print, "Print the effective configuration as TOML and exit");
  app.add_flag("--print-default-config", print_default,
               "Print every setting with its meaning and default, commented out (the installed "
               "/etc/aegis/aegisd.toml), and exit");
  app.footer("Signals: SIGTERM or SIGINT stop aegisd (running jobs continue and are re-adopted at the next "
             "start); SIGHUP reads the configuration again and applies the settings marked [reload] in "
             "--print-default-config, saying in one line which others need a restart.");
  app.set_version_flag("--version", "aegisd 0.1.0");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (print_default) {
      fmt::print("{}", aegis::config_file_template());
      return 0;
    }
    if (!state_dir.empty()) sets.push_back("state_dir=" + state_dir);
    if (!socket.empty()) sets.push_back("socket=" + socket);
    aegis::DaemonConfig cfg = load_config(config_path, sets);
    if (print) {
      fmt::print("{}", aegis::to_toml(cfg));
      return 0;
    }
    if (!exists(cfg.daemon.shim)) throw std::runtime_error("shim: " + cfg.daemon.shim + " not found");
    // Before anything is created or opened: the places we write must be ours alone.
    if (auto e = aegis::check_daemon_dir("state_dir", cfg.daemon.state_dir, true); !e.empty())
      throw aegis::ConfigError(e);
    const auto slash = cfg.daemon.socket.rfind('/');
    const std::string socket_dir = slash == 0 ? "/" : cfg.daemon.socket.substr(0, slash);
    if (slash == std::string::npos) throw aegis::ConfigError("socket: " + cfg.daemon.socket + " is not an absolute path");
    if (auto e = aegis::check_daemon_dir("socket", socket_dir, false); !e.empty()) throw aegis::ConfigError(e);
    // Each job's checkpoint directory goes there (issue 32 item 1): ours, others may pass only.
    const std::string checkpoints = aegis::checkpoint_root(cfg.daemon);
    if (auto e = aegis::check_daemon_dir("checkpoint_dir", checkpoints, false); !e.empty()) throw aegis::ConfigError(e);
    if (chmod(checkpoints.c_str(), 0711) != 0)
      throw aegis::ConfigError("checkpoint_dir: " + checkpoints + ": cannot set its mode 0711");
    if (auto e = aegis::check_dashboard_settings(cfg.daemon); !e.empty()) throw aegis::ConfigError(e);
    if (auto e = aegis::check_notify_settings(cfg.daemon); !e.empty()) throw aegis::ConfigError(e);  // issue 32 item 6
    if (const auto& dash = cfg.daemon.dashboard_socket; !dash.empty())
      if (auto e = aegis::check_daemon_dir("dashboard_socket", dash.substr(0, std::max<std::size_t>(dash.rfind('/'), 1)), false);
          !e.empty())
        throw aegis::ConfigError(e);

    std::string library = cfg.daemon.nvml_library, dcgm_library = cfg.daemon.dcgm_library;
    if (cfg.daemon.gpu_backend == "emulated") {
      // The emulated library reads these at nvmlInit; jobs inherit them to find its state.
      setenv("AEGIS_EMULATED_GPUS", cfg.daemon.emulated_gpus.c_str(), 1);
      const std::string state =
          cfg.daemon.emulated_state.empty() ? cfg.daemon.state_dir + "/emulated-gpus.state" : cfg.daemon.emulated_state;
      setenv("AEGIS_EMULATED_STATE", state.c_str(), 1);
      setenv("AEGIS_EMULATED_GPM", cfg.daemon.emulated_gpm ? "1" : "0", 1);
      setenv("AEGIS_EMULATED_PROCESS_UTIL", cfg.daemon.emulated_process_util ? "1" : "0", 1);
      // Empty means no MIG: a value inherited from the shell must not cut the GPUs.
      if (!cfg.daemon.emulated_mig.empty()) setenv("AEGIS_EMULATED_MIG", cfg.daemon.emulated_mig.c_str(), 1);
      else unsetenv("AEGIS_EMULATED_MIG");
      library = cfg.daemon.emulated_library;
      if (dcgm_library.empty()) dcgm_library = default_emulated_dcgm();
    }
    aegis::DaemonConfig loaded = cfg;  // as read, before setup_mps resolves its defaults: what SIGHUP compares
    std::string error;
    const aegis::DcgmOptions dcgm{cfg.daemon.dcgm, dcgm_library, cfg.daemon.dcgm_hostengine,
                                  1.0 / cfg.engine.telemetry_sample_hz};
    auto source = aegis::open_gpus(library, dcgm, &error);
    if (!source) throw std::runtime_error("GPUs: " + error);
    aegis::setup_mps(cfg.daemon);  // resolves sharing = auto: the engine's MPS rules follow from it
    fmt::print(stderr, "aegisd: {}; policy {}; sharing {}; state in {}; socket {}\n", source->describe(),
               cfg.daemon.policy, cfg.daemon.sharing, cfg.daemon.state_dir, cfg.daemon.socket);
    std::unique_ptr<aegis::OsEnv> env;
    std::unique_ptr<aegis::Daemon> daemon;
    std::unique_ptr<aegis::Server> server;
    std::unique_ptr<aegis::DashboardFeed> feed;
    std::unique_ptr<aegis::DashboardServer> dashboard;
    bool mps_started = false;
    std::vector<std::string> mps_gpus;  // one MPS control daemon each (docs/sharing.md)
    try {
      env = std::make_unique<aegis::OsEnv>(
          aegis::OsEnvOptions{cfg.daemon.state_dir, cfg.daemon.shim, cfg.daemon.job_tracking, cfg.daemon.kill_grace_s},
          std::move(source));
      daemon = std::make_unique<aegis::Daemon>(cfg, *env);
      // Once the daemon knows its GPUs, before any job starts; a failed start below stops them.
      mps_gpus = daemon->gpu_uuids();
      mps_started = aegis::start_mps(cfg.daemon, mps_gpus);
      daemon->supervise_mps();  // any user can quit them through their pipes (docs/security.md)
      server = std::make_unique<aegis::Server>(*daemon);
      if (cfg.daemon.dashboard_port > 0 || !cfg.daemon.dashboard_socket.empty()) {
        // One frame per telemetry sample over dashboard_history_s.
        const double hz = cfg.engine.telemetry_sample_hz;
        feed = std::make_unique<aegis::DashboardFeed>(
            static_cast<std::size_t>(std::ceil(cfg.daemon.dashboard_history_s * hz)), cfg.daemon.dashboard_max_jobs);
        dashboard = std::make_unique<aegis::DashboardServer>(cfg.daemon, *feed, 1 / hz);
        server->on_tick([&](double now) { feed->publish(*daemon, now); });
        fmt::print(stderr, "aegisd: dashboard on {} (read-only)\n", dashboard->describe());
      }
    } catch (...) {
      if (mps_started) aegis::stop_mps(cfg.daemon, mps_gpus);  // no job of ours uses them yet
      throw;
    }
    fmt::print(stderr, "aegisd: {} unfinished job(s) recovered; engine: {}; job processes: {}; up to {} client "
               "connections\n", daemon->active_jobs(), aegis::Engine(cfg.engine).describe(), daemon->tracking(),
               server->max_connections());
    // SIGHUP: the file and --set flags again; a file that no longer reads keeps what runs.
    server->on_hangup([&] {
      try {
        const auto outcome = aegis::reload_config(loaded, load_config(config_path, sets));
        daemon->set_live_settings(outcome.config.daemon);
        loaded = outcome.config;
        fmt::print(stderr, "{}\n", aegis::reload_summary(outcome));
      } catch (const std::exception& e) {
        fmt::print(stderr, "aegisd: reload: error: {}; the running configuration is kept\n", e.what());
      }
    });
    server->run();
    if (daemon->running_jobs() == 0) aegis::stop_mps(cfg.daemon, mps_gpus);  // clients would lose their server
    fmt::print(stderr, "aegisd: stopping; running jobs continue and are re-adopted at the next start\n");
  } catch (const aegis::ConfigError& e) {
    fmt::print(stderr, "aegisd: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "aegisd: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
