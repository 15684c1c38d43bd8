#include "runtime/env/os_env.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <grp.h>
#include <pwd.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/param_table.h"
#include "runtime/launch/attempt_dir.h"
#include "runtime/launch/launcher.h"
#include "runtime/launch/proc.h"

extern char** environ;

namespace aegis {

OsEnv::OsEnv(OsEnvOptions options, std::unique_ptr<GpuSource> gpus) : opt_(std::move(options)), gpus_(std::move(gpus)) {
  if (opt_.job_tracking == "descendants") {
    no_cgroup_why_ = "job_tracking = descendants";
    return;
  }
  // One directory per daemon, named after its state directory (several daemons may share
  // a host, as in the tests): <own cgroup>/aegis/<device>-<inode>.
  struct stat st {};
  if (stat(opt_.state_dir.c_str(), &st) != 0)
    throw ConfigError("state_dir: " + opt_.state_dir + ": " + std::strerror(errno));
  std::string why;
  const std::string mount = cgroup2_mount();
  if (const auto base = prepare_cgroup_base(mount, fmt::format("{}-{}", st.st_dev, st.st_ino), &why)) {
    cgroup_mount_ = mount;
    cgroup_base_ = *base;
    return;
  }
  if (opt_.job_tracking == "cgroup") throw ConfigError("job_tracking = cgroup: " + why);
  no_cgroup_why_ = why;
  fmt::print(stderr, "aegisd: no cgroup for jobs ({}); tracking each job as its shim's descendants, else its session\n", why);
}

OsEnv::~OsEnv() {
  for (const auto& [key, fd] : shim_pidfds_) close(fd);
  if (!cgroup_base_.empty()) remove_cgroup(cgroup_mount_ + cgroup_base_);  // fails while jobs run: fine
}

Seconds OsEnv::now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::vector<GpuStatus> OsEnv::sample_gpus(const SampleRequest& what) { return gpus_->sample(what); }
std::string OsEnv::describe_gpus() const { return gpus_->describe(); }
// NVIDIA's MPS server processes hold GPU memory but are not jobs.
bool OsEnv::is_infrastructure(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  std::getline(f, comm);
  return comm.rfind("nvidia-cuda-mps", 0) == 0;  // nvidia-cuda-mps-server (comm is cut at 15 chars)
}

std::string OsEnv::tracking() const {
  // Without a cgroup, a process that left the job's session after its shim is gone is
  // lost to it (docs/security.md): `aegis gpus` says so.
  return cgroup_base_.empty() ? "descendants of each job's shim, else its session (no cgroup: " + no_cgroup_why_ + ")"
                              : "cgroup " + cgroup_mount_ + cgroup_base_;
}

std::string OsEnv::cgroup_for(JobId job, int attempt) const {
  return cgroup_base_.empty() ? "" : cgroup_base_ + fmt::format("/job-{}-{}", job, attempt);
}

// The processes of an attempt, from what its shim recorded; empty while it recorded
// nothing. Without cgroups: the shim's descendants while it lives, else the job's session
// (of its user only, started after its shim: a reused session number is someone else's).
std::optional<JobProcesses> OsEnv::processes_of(JobId job, int attempt, uid_t uid) const {
  const auto child = read_child(attempt_dir(opt_.state_dir, job, attempt));
  if (!child.written()) return std::nullopt;
  const ChildRecord& c = child.value;
  if (!c.cgroup.empty()) return JobProcesses::cgroup(c.cgroup_mount, c.cgroup);
  if (c.shim.pid > 0 && aegis::process_start_ticks(c.shim.pid) == c.shim.start_ticks) return JobProcesses::descendants(c.shim);
  return JobProcesses::session(c.pgid, uid, c.shim.start_ticks);
}

std::map<pid_t, Env::AttemptKey> OsEnv::owners(const std::vector<pid_t>& pids, const std::vector<AttemptKey>& running) {
  std::map<pid_t, AttemptKey> out;
  if (pids.empty() || running.empty()) return out;
  std::map<std::string, AttemptKey> by_cgroup;
  std::vector<std::pair<AttemptKey, JobProcesses>> others;
  for (const auto& key : running) {
    const auto c = read_child(attempt_dir(opt_.state_dir, key.first, key.second));
    if (!c.written()) continue;
    if (!c.value.cgroup.empty()) by_cgroup[c.value.cgroup] = key;
    else if (auto p = processes_of(key.first, key.second, uid_of_.count(key) ? uid_of_.at(key) : 0)) others.push_back({key, *p});
  }
  for (pid_t pid : pids) {
    if (const auto cg = cgroup_of(pid))
      if (auto it = by_cgroup.find(*cg); it != by_cgroup.end()) {
        out[pid] = it->second;
        continue;
      }
    for (const auto& [key, procs] : others)
      if (procs.contains(pid)) {
        out[pid] = key;
        break;
      }
  }
  return out;
}

void OsEnv::prepare_attempt(JobId job, int attempt, const LaunchFile& launch) {
  LaunchFile f = launch;
  f.cgroup_mount = cgroup_base_.empty() ? "" : cgroup_mount_;
  f.cgroup = cgroup_for(job, attempt);
  try {
    aegis::prepare_attempt(attempt_dir(opt_.state_dir, job, attempt), f);
  } catch (const LaunchError& e) {
    throw StartError(e.what(), e.transient());
  }
  uid_of_[{job, attempt}] = f.uid;
}

void OsEnv::start_attempt(JobId job, int attempt) {
  try {
    const StartedShim shim = start_shim(opt_.shim, attempt_dir(opt_.state_dir, job, attempt));
    if (shim.pidfd >= 0) shim_pidfds_[{job, attempt}] = shim.pidfd;
  } catch (const LaunchError& e) {
    throw StartError(e.what(), e.transient());
  }
}

AttemptStatus OsEnv::attempt_status(JobId job, int attempt) {
  AttemptStatus s;
  const AttemptKey key{job, attempt};
  const AttemptDir dir = attempt_dir(opt_.state_dir, job, attempt);
  const Liveness live = attempt_liveness(dir);
  const auto child = read_child(dir);
  s.started = child.written();
  if (child.written()) s.pgid = child.value.pgid;
  if (live == Liveness::Alive) {
    s.state = AttemptStatus::State::Running;
    return s;
  }
  const auto exit = read_exit(dir);
  // Out of file descriptors, an I/O error: we cannot tell now, so we conclude nothing.
  if (live == Liveness::Unknown || child.status == Record<ChildRecord>::Unreadable ||
      exit.status == Record<ExitRecord>::Unreadable) {
    s.state = AttemptStatus::State::Unknown;
    s.why_unknown = fmt::format("cannot read its records ({})",
                                std::strerror(exit.error ? exit.error : child.error ? child.error : EIO));
    return s;
  }
  if (exit.written()) {
    if (auto fd = shim_pidfds_.find(key); fd != shim_pidfds_.end()) {
      close(fd->second);
      shim_pidfds_.erase(fd);
    }
    kill_at_.erase(key);
    s.state = AttemptStatus::State::Ended;
    s.wait_status = exit.value.wait_status;
    s.ended_at = exit.value.ended_at;
    s.cancelled = exit.value.cancelled;
    s.start_error = exit.value.start_error;
    return s;
  }
  const uid_t uid = uid_of_.count(key) ? uid_of_.at(key) : [&] {
    const int fd = open(dir.launch().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    std::string data;
    char buf[65536];
    ssize_t n;
    while (fd >= 0 && (n = read(fd, buf, sizeof buf)) > 0) data.append(buf, static_cast<std::size_t>(n));
    if (fd >= 0) close(fd);
    const auto f = decode_launch_file(data);
    return std::holds_alternative<LaunchFile>(f) ? std::get<LaunchFile>(f).uid : uid_t{0};
  }();
  uid_of_[key] = uid;
  if (const auto procs = processes_of(job, attempt, uid); procs && procs->any()) {
    // Its shim is gone but the job runs on: keep watching it (and finish a stop).
    if (auto k = kill_at_.find(key); k != kill_at_.end() && now() >= k->second) procs->kill();
    s.state = AttemptStatus::State::Running;
    return s;
  }
  kill_at_.erase(key);
  s.state = AttemptStatus::State::Gone;
  return s;
}

bool OsEnv::stop_attempt(JobId job, int attempt) {
  // Each signal goes through a pidfd, which names one process for good: the shim started
  // here (or, after a restart, the one its record names, checked by start time), else
  // the job's own processes. Never a pid or process group read earlier.
  const AttemptKey key{job, attempt};
  if (auto fd = shim_pidfds_.find(key); fd != shim_pidfds_.end() && pidfd_signal(fd->second, SIGTERM)) return true;
  const AttemptDir dir = attempt_dir(opt_.state_dir, job, attempt);
  const auto child = read_child(dir);
  if (child.written() && child.value.shim.pid > 0 && signal_process(child.value.shim, SIGTERM)) return true;
  if (attempt_liveness(dir) == Liveness::Alive && !child.written()) return false;  // its shim is starting up
  // The shim is gone: stop the job's processes ourselves, SIGKILL after the grace.
  if (const auto procs = processes_of(job, attempt, uid_of_.count(key) ? uid_of_.at(key) : 0); procs && procs->any()) {
    procs->signal(SIGTERM);
    kill_at_[key] = now() + opt_.kill_grace_s;
  }
  return true;
}

void OsEnv::kill_attempt(JobId job, int attempt) {
  const AttemptKey key{job, attempt};
  if (const auto procs = processes_of(job, attempt, uid_of_.count(key) ? uid_of_.at(key) : 0)) procs->kill();
}

std::vector<JobId> OsEnv::jobs_on_disk(JobId from) { return job_dirs(opt_.state_dir, from); }
std::vector<int> OsEnv::attempts_on_disk(JobId job) { return attempt_numbers(opt_.state_dir, job); }
std::optional<LaunchFile> OsEnv::launch_of(JobId job, int attempt) {
  return read_launch(attempt_dir(opt_.state_dir, job, attempt));
}

// Issue 32 item 1: a preemption's warning goes to the job's first process (the command
// aegis started, as Slurm's --signal=B:), which passes it on as it sees fit: its helpers
// (data-loader workers, a wrapper's children) would die of a signal they do not expect.
// Only when that process is gone do the others get it. Never the shim (it would take it
// as a stop); every signal through a pidfd checked after it was opened.
void OsEnv::signal_attempt(JobId job, int attempt, int sig) {
  const AttemptKey key{job, attempt};
  const auto procs = processes_of(job, attempt, uid_of_.count(key) ? uid_of_.at(key) : 0);
  if (!procs) return;
  const auto child = read_child(attempt_dir(opt_.state_dir, job, attempt));
  for (const ProcessRef& p : procs->list())
    if (child.written() && p.pid == child.value.pgid) {
      signal_process(p, sig);
      return;
    }
  procs->signal(sig);
}

// The job's checkpoint directory, made by root in root's checkpoint_dir (0711: others may
// pass, not list or write), so that nobody can have put a link or a file of theirs in its
// place; then given to the job's user. A later attempt finds it theirs already.
void OsEnv::prepare_checkpoint_dir(const std::string& dir, uid_t uid, gid_t gid) {
  auto error = [&](const std::string& what, int err) {
    throw StartError(fmt::format("checkpoint directory {}: {}: {}", dir, what, std::strerror(err)),
                     LaunchError("", err).transient());
  };
  const auto slash = dir.rfind('/');
  if (slash == std::string::npos || slash + 1 == dir.size()) error("not an absolute path", EINVAL);
  const std::string parent = slash == 0 ? "/" : dir.substr(0, slash), name = dir.substr(slash + 1);
  const int pfd = open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (pfd < 0) error("cannot open its parent", errno);
  struct stat st {};
  int err = 0;
  if (mkdirat(pfd, name.c_str(), 0700) != 0 && errno != EEXIST) err = errno;
  if (!err && fstatat(pfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) err = errno;
  if (!err && !S_ISDIR(st.st_mode)) err = ENOTDIR;
  if (!err && st.st_uid != uid) {
    if (st.st_uid != geteuid()) err = EPERM;  // another user's: never handed over
    else if (fchownat(pfd, name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0) err = errno;
  }
  close(pfd);
  if (err) error("cannot make it the job's", err);
}

std::optional<Seconds> OsEnv::checkpointed_at(const std::string& dir) {
  struct stat st {};
  // The last component is never followed: a link there is the job's own statement.
  if (fstatat(AT_FDCWD, (dir + "/checkpointed").c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  return static_cast<Seconds>(st.st_mtim.tv_sec) + static_cast<Seconds>(st.st_mtim.tv_nsec) * 1e-9;
}

std::string OsEnv::log_tail(JobId job, int attempt, bool stderr_stream, std::size_t max_bytes) {
  const AttemptDir dir = attempt_dir(opt_.state_dir, job, attempt);
  return read_tail(stderr_stream ? dir.stderr_log() : dir.stdout_log(), max_bytes);
}

Env::LogChunk OsEnv::read_log(JobId job, int attempt, bool stderr_stream, std::uint64_t offset,
                              std::uint64_t max_bytes) {
  const AttemptDir dir = attempt_dir(opt_.state_dir, job, attempt);
  std::ifstream f(stderr_stream ? dir.stderr_log() : dir.stdout_log(), std::ios::binary | std::ios::ate);
  LogChunk c;
  c.size = f ? static_cast<std::uint64_t>(f.tellg()) : 0;
  const std::uint64_t from = std::min(offset, c.size);
  const std::uint64_t n = std::min(max_bytes, c.size - from);
  c.data.assign(n, '\0');
  if (f && n > 0) {
    f.seekg(static_cast<std::streamoff>(from));
    f.read(c.data.data(), static_cast<std::streamsize>(n));
  }
  return c;
}

std::optional<std::uint64_t> OsEnv::process_start_ticks(pid_t pid) { return aegis::process_start_ticks(pid); }

std::optional<std::string> OsEnv::user_name(uid_t uid) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* res = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &res) != 0 || !res) return std::nullopt;
  return std::string(pw.pw_name);
}

std::optional<std::int64_t> OsEnv::id_of(std::string_view name, bool is_group) {
  if (auto n = Env::id_of(name, is_group)) return n;
  std::vector<char> buf(16384);
  const std::string s(name);
  if (is_group) {
    group g{};
    group* res = nullptr;
    if (getgrnam_r(s.c_str(), &g, buf.data(), buf.size(), &res) != 0 || !res) return std::nullopt;
    return static_cast<std::int64_t>(g.gr_gid);
  }
  passwd pw{};
  passwd* res = nullptr;
  if (getpwnam_r(s.c_str(), &pw, buf.data(), buf.size(), &res) != 0 || !res) return std::nullopt;
  return static_cast<std::int64_t>(pw.pw_uid);
}

bool OsEnv::in_group(uid_t uid, gid_t gid, const std::string& name) {
  group* g = getgrnam(name.c_str());
  if (!g) return false;
  if (gid == g->gr_gid) return true;
  const auto user = user_name(uid);
  if (!user) return false;
  for (char** m = g->gr_mem; m && *m; ++m)
    if (*user == *m) return true;
  return false;
}

// Looked up with the caller's file-system identity (setfsuid), so that a root daemon
// tells no one whether a path they cannot reach exists.
bool OsEnv::is_directory_for(const std::string& path, uid_t uid, gid_t gid) {
  const bool switch_id = geteuid() == 0 && uid != 0;
  if (switch_id) {
    setfsgid(gid);
    setfsuid(uid);
  }
  struct stat st {};
  const bool ok = stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  if (switch_id) {
    setfsuid(geteuid());
    setfsgid(getegid());
  }
  return ok;
}

std::vector<std::pair<std::string, std::string>> OsEnv::passed_on() {
  // The emulated GPU's clients find its state through these (nothing else is passed on).
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (kv.rfind("AEGIS_EMULATED_", 0) == 0) {
      const auto eq = kv.find('=');
      out.push_back({kv.substr(0, eq), kv.substr(eq + 1)});
    }
  }
  return out;
}

}  // namespace aegis
