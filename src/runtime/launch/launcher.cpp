#include "runtime/launch/launcher.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <sys/file.h>
#include <unistd.h>

namespace aegis {

pid_t launch_attempt(const LaunchSpec& s) {
  make_attempt_dir(s.dir);
  // The lock is taken here and inherited by the shim: from now until the shim and its
  // job are gone, attempt_alive() says so, even if this daemon dies mid-launch.
  const int lock = open(s.dir.lock().c_str(), O_RDWR | O_CREAT, 0600);
  if (lock < 0) throw std::runtime_error(s.dir.lock() + ": " + std::strerror(errno));
  if (flock(lock, LOCK_EX | LOCK_NB) != 0) {
    close(lock);
    throw std::runtime_error(s.dir.lock() + ": attempt already running");
  }

  // Everything the child needs is prepared before fork: no allocation after it.
  std::vector<std::string> args = {s.shim,
                                   "--lock-fd", std::to_string(lock),
                                   "--dir", s.dir.dir,
                                   "--uid", std::to_string(s.uid),
                                   "--gid", std::to_string(s.gid),
                                   "--user", s.user,
                                   "--workdir", s.workdir,
                                   "--grace", std::to_string(s.kill_grace_s),
                                   "--"};
  args.insert(args.end(), s.argv.begin(), s.argv.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : s.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) {
    close(lock);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // The shim's own session: the daemon's death or its terminal's hang-up do not reach it.
    setsid();
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(lock);
  return pid;
}

bool signal_group(pid_t pgid, int sig) {
  if (pgid <= 1) return false;
  return kill(-pgid, sig) == 0;
}

bool group_alive(pid_t pgid) {
  if (pgid <= 1) return false;
  return kill(-pgid, 0) == 0 || errno == EPERM;
}

namespace {

struct ProcStat {
  char state = 0;
  long session = 0;
  unsigned long long start_ticks = 0;
};

std::optional<ProcStat> read_proc_stat(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!f || !std::getline(f, stat)) return std::nullopt;
  // Fields after the command name (which may hold spaces and parentheses): state (3),
  // ppid, pgrp, session (6), ..., starttime (22).
  const auto close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) return std::nullopt;
  ProcStat p;
  long ppid = 0, pgrp = 0;
  if (std::sscanf(stat.c_str() + close_paren + 1,
                  " %c %ld %ld %ld %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu", &p.state, &ppid,
                  &pgrp, &p.session, &p.start_ticks) != 5)
    return std::nullopt;
  return p;
}

}  // namespace

std::optional<pid_t> session_of(pid_t pid) {
  const auto p = read_proc_stat(pid);
  if (!p) return std::nullopt;
  return static_cast<pid_t>(p->session);
}

std::optional<std::uint64_t> process_start_ticks(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  const auto p = read_proc_stat(pid);
  if (!p || p->state == 'Z' || p->state == 'X') return std::nullopt;
  return p->start_ticks;
}

}  // namespace aegis
