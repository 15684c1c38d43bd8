#include "runtime/launch/proc.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <sys/syscall.h>
#include <unistd.h>

namespace aegis {

std::optional<ProcStat> read_proc_stat(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!f || !std::getline(f, stat)) return std::nullopt;
  // Fields after the command name (which may hold spaces and parentheses): state (3),
  // ppid, pgrp, session (6), ..., starttime (22).
  const auto close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) return std::nullopt;
  ProcStat p;
  long ppid = 0, pgrp = 0, session = 0;
  unsigned long long start = 0;
  if (std::sscanf(stat.c_str() + close_paren + 1,
                  " %c %ld %ld %ld %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu", &p.state, &ppid,
                  &pgrp, &session, &start) != 5)
    return std::nullopt;
  p.ppid = static_cast<pid_t>(ppid);
  p.pgrp = static_cast<pid_t>(pgrp);
  p.session = static_cast<pid_t>(session);
  p.start_ticks = start;
  return p;
}

std::optional<pid_t> session_of(pid_t pid) {
  const auto p = read_proc_stat(pid);
  if (!p) return std::nullopt;
  return p->session;
}

std::optional<std::uint64_t> process_start_ticks(pid_t pid) {
  const auto p = read_proc_stat(pid);
  if (!p || p->state == 'Z' || p->state == 'X') return std::nullopt;
  return p->start_ticks;
}

std::optional<uid_t> process_uid(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (f && std::getline(f, line))
    if (line.rfind("Uid:", 0) == 0) return static_cast<uid_t>(std::strtoul(line.c_str() + 4, nullptr, 10));
  return std::nullopt;
}

std::optional<std::string> cgroup_of(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream f("/proc/" + std::to_string(pid) + "/cgroup");
  std::string line;
  while (f && std::getline(f, line))
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return std::nullopt;
}

std::vector<pid_t> all_pids() {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long v = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && v > 0) out.push_back(static_cast<pid_t>(v));
  }
  closedir(d);
  return out;
}

int open_pidfd(const ProcessRef& p) {
  if (p.pid <= 0) return -1;
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, p.pid, 0));
  if (fd < 0) return -1;
  // Opened first, checked second: if the pid was reused before the open, the start time
  // read now is the newcomer's and differs; if it is reused after, the descriptor still
  // names the process it was opened on, which we just saw was `p`.
  if (process_start_ticks(p.pid) != p.start_ticks) {
    close(fd);
    return -1;
  }
  return fd;
}

bool pidfd_signal(int pidfd, int sig) {
  return pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) == 0;
}

bool signal_process(const ProcessRef& p, int sig) {
  const int fd = open_pidfd(p);
  if (fd < 0) return false;
  const bool ok = pidfd_signal(fd, sig);
  close(fd);
  return ok;
}

}  // namespace aegis
