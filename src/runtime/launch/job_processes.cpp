#include "runtime/launch/job_processes.h"

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace aegis {

namespace {

std::vector<pid_t> read_pids(const std::string& file) {
  std::vector<pid_t> out;
  std::ifstream f(file);
  long v = 0;
  while (f >> v)
    if (v > 0) out.push_back(static_cast<pid_t>(v));
  return out;
}

bool write_text(const std::string& file, const std::string& text) {
  const int fd = open(file.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int err = errno;
  close(fd);
  errno = err;
  return ok;
}

// mountinfo's fields escape spaces and friends as \ooo.
std::string unescape_mount_path(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string oct = s.substr(i + 1, 3);
      if (oct.find_first_not_of("01234567") == std::string::npos) {
        out += static_cast<char>(std::stoi(oct, nullptr, 8));
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

}  // namespace

JobProcesses JobProcesses::cgroup(std::string mount, std::string path) {
  JobProcesses p;
  p.mode_ = Mode::Cgroup;
  p.mount_ = std::move(mount);
  p.path_ = std::move(path);
  return p;
}

JobProcesses JobProcesses::descendants(ProcessRef shim) {
  JobProcesses p;
  p.mode_ = Mode::Descendants;
  p.shim_ = shim;
  return p;
}

JobProcesses JobProcesses::session(pid_t sid, uid_t uid, std::uint64_t not_before_ticks) {
  JobProcesses p;
  p.mode_ = Mode::Session;
  p.sid_ = sid;
  p.uid_ = uid;
  p.not_before_ = not_before_ticks;
  return p;
}

std::vector<ProcessRef> JobProcesses::list() const {
  std::vector<ProcessRef> out;
  switch (mode_) {
    case Mode::Cgroup:
      for (pid_t pid : read_pids(mount_ + path_ + "/cgroup.procs"))
        if (auto t = process_start_ticks(pid)) out.push_back({pid, *t});
      break;
    case Mode::Descendants: {
      // One pass over /proc: the parent of every process, then the tree below the shim.
      if (process_start_ticks(shim_.pid) != shim_.start_ticks) break;
      std::multimap<pid_t, ProcessRef> children;
      for (pid_t pid : all_pids())
        if (auto st = read_proc_stat(pid); st && st->state != 'Z' && st->state != 'X')
          children.emplace(st->ppid, ProcessRef{pid, st->start_ticks});
      std::vector<pid_t> todo = {shim_.pid};
      while (!todo.empty() && out.size() < 100000) {
        const pid_t parent = todo.back();
        todo.pop_back();
        auto [lo, hi] = children.equal_range(parent);
        for (auto it = lo; it != hi; ++it) {
          out.push_back(it->second);
          todo.push_back(it->second.pid);
        }
      }
      break;
    }
    case Mode::Session:
      if (sid_ <= 1) break;
      for (pid_t pid : all_pids()) {
        const auto st = read_proc_stat(pid);
        if (!st || st->session != sid_ || st->state == 'Z' || st->start_ticks < not_before_) continue;
        if (process_uid(pid) != uid_) continue;  // a reused session number of someone else
        out.push_back({pid, st->start_ticks});
      }
      break;
  }
  return out;
}

bool JobProcesses::any() const {
  if (mode_ == Mode::Cgroup) {
    // cgroup.events says "populated 0|1" for the whole subtree.
    std::ifstream f(mount_ + path_ + "/cgroup.events");
    std::string key;
    int v = 0;
    while (f >> key >> v)
      if (key == "populated") return v != 0;
  }
  return !list().empty();
}

int JobProcesses::signal(int sig) const {
  int n = 0;
  for (const auto& p : list()) {
    // Checked again through the pidfd: still this process, and still one of the job's.
    const int fd = open_pidfd(p);
    if (fd < 0) continue;
    if (contains(p.pid) && pidfd_signal(fd, sig)) ++n;
    close(fd);
  }
  return n;
}

void JobProcesses::kill() const {
  if (mode_ == Mode::Cgroup && write_text(mount_ + path_ + "/cgroup.kill", "1")) return;
  signal(SIGKILL);
}

bool JobProcesses::contains(pid_t pid) const {
  switch (mode_) {
    case Mode::Cgroup:
      return cgroup_of(pid) == path_;
    case Mode::Descendants: {
      pid_t cur = pid;
      for (int depth = 0; depth < 256 && cur > 1; ++depth) {
        const auto st = read_proc_stat(cur);
        if (!st) return false;
        if (st->ppid == shim_.pid) return process_start_ticks(shim_.pid) == shim_.start_ticks;
        cur = st->ppid;
      }
      return false;
    }
    case Mode::Session: {
      const auto st = read_proc_stat(pid);
      return st && st->session == sid_ && sid_ > 1 && st->start_ticks >= not_before_ && process_uid(pid) == uid_;
    }
  }
  return false;
}

std::string JobProcesses::describe() const {
  switch (mode_) {
    case Mode::Cgroup: return "cgroup " + mount_ + path_;
    case Mode::Descendants: return "descendants of shim " + std::to_string(shim_.pid);
    case Mode::Session: return "session " + std::to_string(sid_);
  }
  return "";
}

std::string cgroup2_mount() {
  std::ifstream f("/proc/self/mountinfo");
  std::string line;
  while (f && std::getline(f, line)) {
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype;
    tail >> fstype;
    if (fstype != "cgroup2") continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, dev, root, mountpoint;
    head >> id >> parent >> dev >> root >> mountpoint;
    if (root != "/") continue;  // a bind mount of a subtree: not the hierarchy's root
    return unescape_mount_path(mountpoint);
  }
  return "";
}

std::string own_cgroup() { return cgroup_of(getpid()).value_or(""); }

std::optional<std::string> prepare_cgroup_base(const std::string& mount, const std::string& instance,
                                                std::string* why) {
  if (mount.empty()) {
    *why = "no cgroup v2 hierarchy is mounted";
    return std::nullopt;
  }
  std::string own = own_cgroup();
  if (own.empty()) {
    *why = "this process has no cgroup v2 path";
    return std::nullopt;
  }
  if (own == "/") own.clear();
  std::string path = own;
  for (const std::string& part : {std::string("aegis"), instance}) {
    path += "/" + part;
    if (mkdir((mount + path).c_str(), 0755) != 0 && errno != EEXIST) {
      *why = mount + path + ": " + std::strerror(errno);
      return std::nullopt;
    }
    struct stat st {};
    if (lstat((mount + path).c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
      *why = mount + path + ": not a cgroup directory owned by aegisd";
      return std::nullopt;
    }
  }
  return path;
}

bool create_cgroup(const std::string& dir) { return mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST; }

bool join_cgroup(const std::string& dir, pid_t pid) { return write_text(dir + "/cgroup.procs", std::to_string(pid)); }

bool remove_cgroup(const std::string& dir) { return rmdir(dir.c_str()) == 0 || errno == ENOENT; }

}  // namespace aegis
