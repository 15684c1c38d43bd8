#include "runtime/daemon/mps.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "core/param_table.h"
#include "runtime/daemon/secure_paths.h"

namespace aegis {

namespace {

bool exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0;
}

std::string on_path(const std::string& tool) {
  if (tool.find('/') != std::string::npos) return access(tool.c_str(), X_OK) == 0 ? tool : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  std::size_t pos = 0;
  while (pos <= dirs.size()) {
    const std::size_t colon = std::min(dirs.find(':', pos), dirs.size());
    const std::string cand = dirs.substr(pos, colon - pos) + "/" + tool;
    if (access(cand.c_str(), X_OK) == 0) return cand;
    pos = colon + 1;
  }
  return "";
}

// "" when users other than root can reach `dir` (every directory down to it searchable by
// others), else the first that is not, with its mode. A job's MPS client runs as its user:
// a pipe directory it cannot reach means a job without MPS and without its memory limit.
std::string unreachable_part(const std::string& dir) {
  for (std::size_t p = 1; p <= dir.size(); ++p) {
    if (p != dir.size() && dir[p] != '/') continue;
    const std::string part = dir.substr(0, p);
    struct stat st {};
    if (stat(part.c_str(), &st) != 0) return part + " (missing)";
    if ((st.st_mode & S_IXOTH) == 0) return fmt::format("{} (mode {:04o})", part, st.st_mode & 07777);
  }
  return "";
}

void mkdirs(const std::string& dir) {
  for (std::size_t p = 1; p <= dir.size(); ++p)
    if (p == dir.size() || dir[p] == '/') mkdir(dir.substr(0, p).c_str(), 0755);
}

// Runs the control tool with the MPS directories set; `input` goes to its stdin.
int run_control(const DaemonSettings& s, const std::string& tool, const char* arg, const std::string& input) {
  int in[2];
  if (pipe(in) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(in[0], 0);
    close(in[0]);
    close(in[1]);
    setenv("CUDA_MPS_PIPE_DIRECTORY", s.mps_pipe_dir.c_str(), 1);
    setenv("CUDA_MPS_LOG_DIRECTORY", s.mps_log_dir.c_str(), 1);
    if (arg) execl(tool.c_str(), tool.c_str(), arg, static_cast<char*>(nullptr));
    else execl(tool.c_str(), tool.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(in[0]);
  if (!input.empty()) (void)!write(in[1], input.data(), input.size());
  close(in[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

bool setup_mps(DaemonSettings& s) {
  // Beside the socket, which every user reaches; not in the state directory (0700).
  const std::string socket_dir = s.socket.substr(0, std::max<std::size_t>(s.socket.rfind('/'), 1));
  if (s.mps_pipe_dir.empty()) s.mps_pipe_dir = socket_dir + "/mps";
  if (s.mps_log_dir.empty()) s.mps_log_dir = s.state_dir + "/mps/log";
  const std::string control = s.mps_pipe_dir + "/control";
  const std::string tool = on_path(s.mps_control_binary);
  if (s.sharing == "auto") s.sharing = (!tool.empty() || exists(control)) ? "mps" : "process";
  if (s.sharing != "mps") return false;
  if (exists(control)) return false;  // a control daemon already listens there
  if (s.mps_control == "external")
    throw ConfigError("sharing = mps: no MPS control daemon at " + control +
                      "; start one with CUDA_MPS_PIPE_DIRECTORY=" + s.mps_pipe_dir + " or set mps_control = \"managed\"");
  if (tool.empty())
    throw ConfigError("sharing = mps: " + s.mps_control_binary + " is not on PATH (install the NVIDIA driver's MPS tools)");
  // Root's control daemon writes there: a directory of root's own, open to others' reads.
  if (auto e = check_daemon_dir("mps_pipe_dir", s.mps_pipe_dir, false); !e.empty()) throw ConfigError(e);
  chmod(s.mps_pipe_dir.c_str(), 0755);
  if (auto part = unreachable_part(s.mps_pipe_dir); !part.empty())
    throw ConfigError("mps_pipe_dir: " + s.mps_pipe_dir + " cannot be reached by other users through " + part +
                      ": their jobs would run without MPS and without their memory limit");
  mkdirs(s.mps_log_dir);
  const int rc = run_control(s, tool, "-d", "");
  for (int i = 0; i < 50 && !exists(control); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (rc != 0 || !exists(control))
    throw ConfigError(fmt::format("sharing = mps: {} -d did not start (exit {}); see {}", tool, rc, s.mps_log_dir));
  return true;
}

void stop_mps(const DaemonSettings& s) {
  if (s.sharing != "mps" || s.mps_control != "managed") return;
  const std::string tool = on_path(s.mps_control_binary);
  if (!tool.empty()) run_control(s, tool, nullptr, "quit\n");
}

std::map<std::string, std::string> mps_environment(const DaemonSettings& s, std::optional<MiB> limit_mib, int ngpus) {
  std::map<std::string, std::string> env;
  if (s.sharing != "mps") return env;
  env["CUDA_MPS_PIPE_DIRECTORY"] = s.mps_pipe_dir;
  env["CUDA_MPS_LOG_DIRECTORY"] = s.mps_log_dir;
  if (!limit_mib) return env;  // placed exclusive: the whole memory is its own (the lifecycle's rule)
  // Device indices are relative to the job's CUDA_VISIBLE_DEVICES.
  std::string limits;
  for (int i = 0; i < ngpus; ++i) limits += fmt::format("{}{}={}M", i ? "," : "", i, *limit_mib);
  env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = limits;
  if (s.mps_thread_percentage > 0) env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(s.mps_thread_percentage);
  return env;
}

}  // namespace aegis
