#include "runtime/daemon/mps.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <csignal>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <string_view>
#include <vector>

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

// Runs the control tool for one GPU's daemon (its directories, and the GPU it may see);
// `input` goes to its stdin.
int run_control(const std::string& tool, const std::string& pipe_dir, const std::string& log_dir,
                const std::string& gpu_uuid, const char* arg, const std::string& input) {
  // The child's environment is built here, before fork: aegisd has a sampling thread, and
  // after a fork only async-signal-safe calls are allowed (setenv may take a lock that the
  // other thread held at the fork, or allocate).
  std::vector<std::string> env_text;
  for (char** e = environ; *e; ++e) {
    const std::string_view v(*e);
    if (v.rfind("CUDA_MPS_PIPE_DIRECTORY=", 0) != 0 && v.rfind("CUDA_MPS_LOG_DIRECTORY=", 0) != 0 &&
        v.rfind("CUDA_VISIBLE_DEVICES=", 0) != 0)
      env_text.emplace_back(v);
  }
  env_text.push_back("CUDA_MPS_PIPE_DIRECTORY=" + pipe_dir);
  env_text.push_back("CUDA_MPS_LOG_DIRECTORY=" + log_dir);
  // Its MPS servers see this GPU alone (NVIDIA's MPS docs, "Starting MPS control daemon").
  env_text.push_back("CUDA_VISIBLE_DEVICES=" + gpu_uuid);
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string tool_arg0 = tool, arg_text = arg ? arg : "";
  std::vector<char*> argv{tool_arg0.data()};
  if (arg) argv.push_back(arg_text.data());
  argv.push_back(nullptr);
  int in[2];
  if (pipe(in) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(in[0], 0);
    close(in[0]);
    close(in[1]);
    execve(tool.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  close(in[0]);
  if (!input.empty()) (void)!write(in[1], input.data(), input.size());
  close(in[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A directory name for a device: its UUID, with the '/' of older MIG UUIDs made '_'.
std::string device_dir_name(const std::string& uuid) {
  std::string name = uuid;
  for (char& c : name)
    if (c == '/') c = '_';
  return name;
}

// Whether some control daemon's pipe lies in `dir` or one level below (external MPS).
bool any_control_below(const std::string& dir) {
  if (exists(dir + "/control")) return true;
  DIR* d = opendir(dir.c_str());
  if (!d) return false;
  bool found = false;
  while (const dirent* e = readdir(d))
    if (e->d_name[0] != '.' && exists(dir + "/" + e->d_name + "/control")) found = true;
  closedir(d);
  return found;
}

}  // namespace

void setup_mps(DaemonSettings& s) {
  // Beside the socket, which every user reaches; not in the state directory (0700).
  const std::string socket_dir = s.socket.substr(0, std::max<std::size_t>(s.socket.rfind('/'), 1));
  if (s.mps_pipe_dir.empty()) s.mps_pipe_dir = socket_dir + "/mps";
  if (s.mps_log_dir.empty()) s.mps_log_dir = s.state_dir + "/mps/log";
  const std::string tool = on_path(s.mps_control_binary);
  if (s.sharing == "auto") s.sharing = (!tool.empty() || any_control_below(s.mps_pipe_dir)) ? "mps" : "process";
  if (s.sharing != "mps" || s.mps_control == "external") return;
  if (tool.empty())
    throw ConfigError("sharing = mps: " + s.mps_control_binary + " is not on PATH (install the NVIDIA driver's MPS tools)");
  // Root's control daemons write there: a directory of root's own, open to others' reads.
  if (auto e = check_daemon_dir("mps_pipe_dir", s.mps_pipe_dir, false); !e.empty()) throw ConfigError(e);
  chmod(s.mps_pipe_dir.c_str(), 0755);
  if (auto part = unreachable_part(s.mps_pipe_dir); !part.empty())
    throw ConfigError("mps_pipe_dir: " + s.mps_pipe_dir + " cannot be reached by other users through " + part +
                      ": their jobs would run without MPS and without their memory limit");
}

std::string mps_pipe_dir_of(const DaemonSettings& s, const std::string& gpu_uuid) {
  return s.mps_pipe_dir + "/" + device_dir_name(gpu_uuid);
}

namespace {

// The pid in the control daemon's pid file, 0 when there is none.
pid_t control_pid(const std::string& pipe_dir) {
  std::ifstream in(pipe_dir + "/nvidia-cuda-mps-control.pid");
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return 0;
  return static_cast<pid_t>(pid);
}

}  // namespace

bool mps_daemon_alive(const DaemonSettings& s, const std::string& gpu_uuid) {
  const std::string pipe_dir = mps_pipe_dir_of(s, gpu_uuid);
  if (!exists(pipe_dir + "/control")) return false;
  // A killed daemon leaves its FIFO: its pid tells. Without a pid file the FIFO is all we have.
  const pid_t pid = control_pid(pipe_dir);
  return pid == 0 || kill(pid, 0) == 0 || errno == EPERM;
}

std::string restart_mps_daemon(const DaemonSettings& s, const std::string& gpu_uuid) {
  const std::string tool = on_path(s.mps_control_binary);
  if (tool.empty()) return s.mps_control_binary + " is no longer on PATH";
  const std::string pipe_dir = mps_pipe_dir_of(s, gpu_uuid);
  const std::string control = pipe_dir + "/control";
  if (!mps_daemon_alive(s, gpu_uuid)) {  // what a killed one left would make `-d` think it runs
    unlink(control.c_str());
    unlink((pipe_dir + "/nvidia-cuda-mps-control.pid").c_str());
  }
  mkdir(pipe_dir.c_str(), 0755);
  chmod(pipe_dir.c_str(), 0755);
  const std::string log_dir = s.mps_log_dir + "/" + device_dir_name(gpu_uuid);
  mkdirs(log_dir);
  const int rc = run_control(tool, pipe_dir, log_dir, gpu_uuid, "-d", "");
  for (int i = 0; i < 50 && !exists(control); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (rc != 0 || !exists(control)) return fmt::format("{} -d exited {}; see {}", tool, rc, log_dir);
  return "";
}

bool start_mps(const DaemonSettings& s, const std::vector<std::string>& gpu_uuids) {
  if (s.sharing != "mps") return false;
  const std::string tool = on_path(s.mps_control_binary);
  bool started = false;
  for (const auto& uuid : gpu_uuids) {
    const std::string pipe_dir = mps_pipe_dir_of(s, uuid);
    const std::string control = pipe_dir + "/control";
    if (exists(control)) continue;  // a control daemon already listens there
    const std::string how = "CUDA_VISIBLE_DEVICES=" + uuid + " CUDA_MPS_PIPE_DIRECTORY=" + pipe_dir + " " +
                            s.mps_control_binary + " -d";
    if (s.mps_control == "external") {
      if (exists(s.mps_pipe_dir + "/control"))
        throw ConfigError("sharing = mps: the control daemon at " + s.mps_pipe_dir +
                          "/control serves every GPU, so a second user's job on another GPU would wait for the "
                          "first user's MPS server; start one per GPU (" + how + ")");
      throw ConfigError("sharing = mps: no MPS control daemon for GPU " + uuid + " at " + control + "; start one (" +
                        how + ") or set mps_control = \"managed\"");
    }
    mkdir(pipe_dir.c_str(), 0755);
    chmod(pipe_dir.c_str(), 0755);  // clients of every user open the daemon's pipes there
    const std::string log_dir = s.mps_log_dir + "/" + device_dir_name(uuid);
    mkdirs(log_dir);
    const int rc = run_control(tool, pipe_dir, log_dir, uuid, "-d", "");
    for (int i = 0; i < 50 && !exists(control); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (rc != 0 || !exists(control)) {
      if (started) stop_mps(s, gpu_uuids);  // all or none
      throw ConfigError(fmt::format("sharing = mps: {} -d for GPU {} did not start (exit {}); see {}", tool, uuid, rc,
                                    log_dir));
    }
    started = true;
  }
  return started;
}

void stop_mps(const DaemonSettings& s, const std::vector<std::string>& gpu_uuids) {
  if (s.sharing != "mps" || s.mps_control != "managed") return;
  const std::string tool = on_path(s.mps_control_binary);
  if (tool.empty()) return;
  for (const auto& uuid : gpu_uuids) {
    const std::string pipe_dir = mps_pipe_dir_of(s, uuid);
    if (exists(pipe_dir + "/control"))
      run_control(tool, pipe_dir, s.mps_log_dir + "/" + device_dir_name(uuid), uuid, nullptr, "quit\n");
  }
}

std::map<std::string, std::string> mps_environment(const DaemonSettings& s, std::optional<MiB> limit_mib,
                                                   const std::vector<std::string>& gpu_uuids) {
  std::map<std::string, std::string> env;
  // A job on several GPUs runs without MPS (exclusive; lifecycle/mps_limit.h).
  if (s.sharing != "mps" || gpu_uuids.size() != 1) return env;
  env["CUDA_MPS_PIPE_DIRECTORY"] = mps_pipe_dir_of(s, gpu_uuids.front());
  env["CUDA_MPS_LOG_DIRECTORY"] = s.mps_log_dir + "/" + device_dir_name(gpu_uuids.front());
  if (!limit_mib) return env;  // placed exclusive: the whole memory is its own (the lifecycle's rule)
  // Device 0 of the client is its one GPU (its CUDA_VISIBLE_DEVICES names it by UUID, as the
  // daemon's does: NVIDIA's MPS docs, "CUDA_VISIBLE_DEVICES").
  env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = fmt::format("0={}M", *limit_mib);
  if (s.mps_thread_percentage > 0) env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(s.mps_thread_percentage);
  return env;
}

}  // namespace aegis
