// aegis-shim: runs one job attempt for aegisd and records how it ended.
// It runs as root with a fixed environment and two arguments (--lock-fd, --dir), holding the
// attempt's lock on --lock-fd; what to run comes from DIR/launch (launch_file.h), as data.
// It starts the job in a new session as the job's user, inside the attempt's cgroup (or,
// without cgroups, as its subreaper descendants), with stdout and stderr through pipes into
// capped log files; the job's own environment is applied only after the child has become
// the user. When the job's first process ends, whatever it left behind is stopped
// (SIGTERM, SIGKILL after the grace). SIGTERM from aegisd (a cancel) is passed to every
// process of the job. It keeps running if the daemon dies; the lock tells a restarted
// daemon it is alive, and DIR/child.json and DIR/exit.json (fixed-size records written in
// place) tell it what happened.
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <grp.h>
#include <memory>
#include <poll.h>
#include <string>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "runtime/launch/attempt_dir.h"
#include "runtime/launch/capped_log.h"
#include "runtime/launch/job_processes.h"
#include "runtime/launch/launch_file.h"

namespace {

using aegis::LaunchFile;

struct Args {
  int lock_fd = -1;
  std::string dir;
};

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "aegis-shim: %s\n", msg.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) die("missing value for " + k);
    const char* v = argv[++i];
    if (k == "--lock-fd") a.lock_fd = std::atoi(v);
    else if (k == "--dir") a.dir = v;
    else die("unknown option " + k);
  }
  if (a.dir.empty()) die("usage: aegis-shim --lock-fd FD --dir ATTEMPT_DIR");
  return a;
}

double now() {
  timeval tv{};
  gettimeofday(&tv, nullptr);
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
}

// "Argument list too long (E2BIG)": the message and the name a person can search for.
std::string errno_text(int err) {
  const char* name = strerrorname_np(err);
  return std::string(std::strerror(err)) + (name ? std::string(" (") + name + ")" : "");
}

// Records how the attempt ended. The record was made by aegisd at full size, so this is
// an in-place write; it is retried a while in case the file system is briefly unwell.
void record_exit(const aegis::AttemptDir& dir, const aegis::ExitRecord& r) {
  const std::string text = aegis::exit_record_text(r);
  for (int i = 0; i < 30; ++i) {
    if (aegis::write_record(dir.exit(), text)) return;
    std::fprintf(stderr, "aegis-shim: %s: %s; retrying\n", dir.exit().c_str(), std::strerror(errno));
    sleep(1);
  }
  die(dir.exit() + ": cannot record how the job ended");
}

std::string read_launch_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) die(path + ": " + std::strerror(errno));
  std::string data;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) data.append(buf, static_cast<std::size_t>(n));
  close(fd);
  if (n < 0) die(path + ": " + std::strerror(errno));
  return data;
}

// What the child reports through the CLOEXEC pipe when it cannot start the job.
struct StartFailure {
  int stage;  // index into kStages
  int error;
};
constexpr const char* kStages[] = {"setsid", "initgroups", "setgid", "setuid", "could not drop root",
                                   "working directory", "cannot run"};

// In the child, between fork and exec: become the job. It waits on `go` until the shim
// has recorded it (and put it in its cgroup), so that no job ever runs unrecorded.
[[noreturn]] void become_job(const LaunchFile& f, int out, int err, int go, int report, std::vector<char*>& argv,
                             std::vector<char*>& envp) {
  char byte = 0;
  if (read(go, &byte, 1) != 1) _exit(126);  // the shim died first, or gave up on us
  close(go);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int s : {SIGHUP, SIGINT, SIGPIPE, SIGTERM, SIGCHLD}) signal(s, SIG_DFL);
  const int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, 0);
  dup2(out, 1);
  dup2(err, 2);
  auto fail = [&](int stage) {
    const StartFailure sf{stage, errno};
    dprintf(2, "aegis: cannot start the job: %s%s%s: %s\n", kStages[stage], stage >= 5 ? " " : "",
            stage == 5 ? f.workdir.c_str() : stage == 6 ? argv[0] : "", std::strerror(sf.error));
    (void)!write(report, &sf, sizeof sf);
    _exit(127);
  };
  if (setsid() < 0) fail(0);
  if (getuid() == 0) {
    // Order matters: groups and gid while still root, uid last.
    if (initgroups(f.user.c_str(), f.gid) != 0) fail(1);
    if (setgid(f.gid) != 0) fail(2);
    if (setuid(f.uid) != 0) fail(3);
    if (f.uid != 0 && setuid(0) == 0) fail(4);
  }
  // Only now, as the user: the working directory (their permissions), then their
  // environment, which execvp's search for the command uses too (their PATH).
  if (chdir(f.workdir.c_str()) != 0) fail(5);
  environ = envp.data();
  execvp(argv[0], argv.data());
  fail(6);
  _exit(127);
}

class Shim {
 public:
  Shim(const aegis::AttemptDir& dir, LaunchFile f) : dir_(dir), f_(std::move(f)) {}
  int run();

 private:
  void pump(int timeout_ms);
  void reap();
  aegis::JobProcesses processes() const;
  void stop_leftovers();

  aegis::AttemptDir dir_;
  LaunchFile f_;
  int sigfd_ = -1;
  int out_r_ = -1, err_r_ = -1;
  std::unique_ptr<aegis::CappedLog> out_log_, err_log_;
  int out_fd_ = -1, err_fd_ = -1;
  pid_t child_ = 0;
  bool child_exited_ = false;
  int status_ = 0;
  bool cancelled_ = false;
  double kill_at_ = -1;
  std::uint64_t self_start_ = 0;
};

aegis::JobProcesses Shim::processes() const {
  if (!f_.cgroup.empty()) return aegis::JobProcesses::cgroup(f_.cgroup_mount, f_.cgroup);
  return aegis::JobProcesses::descendants({getpid(), self_start_});
}

// Copies what the job printed into the logs, and handles signals, for up to `timeout_ms`.
void Shim::pump(int timeout_ms) {
  pollfd fds[3] = {{sigfd_, POLLIN, 0}, {out_r_, POLLIN, 0}, {err_r_, POLLIN, 0}};
  if (poll(fds, 3, timeout_ms) < 0 && errno != EINTR) return;
  if (fds[0].revents & POLLIN) {
    signalfd_siginfo si{};
    while (read(sigfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      if (si.ssi_signo == SIGTERM && !cancelled_) {
        cancelled_ = true;  // a cancel: every process of the job, then SIGKILL after the grace
        processes().signal(SIGTERM);
        kill_at_ = now() + f_.kill_grace_s;
      }
    }
  }
  char buf[65536];
  for (int i : {1, 2}) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    int& fd = i == 1 ? out_r_ : err_r_;
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      (i == 1 ? out_log_ : err_log_)->write(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      close(fd);  // every writer is gone
      fd = -1;
    }
  }
  reap();
}

void Shim::reap() {
  int st = 0;
  for (pid_t r; (r = waitpid(-1, &st, WNOHANG)) > 0;)
    if (r == child_) {
      status_ = st;
      child_exited_ = true;
    }
}

// The job's first process is gone: whatever it left behind goes too, escaped or not.
void Shim::stop_leftovers() {
  const auto procs = processes();
  if (procs.any()) {
    procs.signal(SIGTERM);
    const double until = now() + f_.kill_grace_s;
    while (now() < until && procs.any()) pump(50);
  }
  for (int i = 0; i < 100 && procs.any(); ++i) {
    procs.kill();
    pump(50);
  }
  // The output still in the pipes, unless something we could not stop holds them open.
  const double drain_until = now() + 2;
  while ((out_r_ >= 0 || err_r_ >= 0) && now() < drain_until) pump(50);
  // Our reaped orphans, the last of them.
  reap();
}

int Shim::run() {
  self_start_ = aegis::process_start_ticks(getpid()).value_or(0);
  // Orphaned processes of the job come to us, not to init: we reap them, and without
  // cgroups they are still our descendants, so we can find and stop them.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGTERM}) sigaddset(&set, s);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  signal(SIGHUP, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  sigfd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sigfd_ < 0) die(std::string("signalfd: ") + std::strerror(errno));

  auto start_failed = [&](const std::string& why) {
    aegis::ExitRecord r;
    r.wait_status = 127 << 8;
    r.ended_at = now();
    r.start_error = why;
    if (err_fd_ >= 0) dprintf(err_fd_, "aegis: cannot start the job: %s\n", why.c_str());
    record_exit(dir_, r);
    return 0;
  };
  // aegisd made the logs (owned by the user); we only append.
  out_fd_ = open(dir_.stdout_log().c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  err_fd_ = open(dir_.stderr_log().c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  if (out_fd_ < 0 || err_fd_ < 0) return start_failed("logs: " + errno_text(errno));
  out_log_ = std::make_unique<aegis::CappedLog>(out_fd_, f_.log_max_bytes, f_.log_tail_bytes, f_.log_min_free_bytes);
  err_log_ = std::make_unique<aegis::CappedLog>(err_fd_, f_.log_max_bytes, f_.log_tail_bytes, f_.log_min_free_bytes);
  if (!f_.cgroup.empty() && !aegis::create_cgroup(f_.cgroup_mount + f_.cgroup))
    return start_failed("cgroup " + f_.cgroup_mount + f_.cgroup + ": " + errno_text(errno));

  int out[2], err[2], go[2], report[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(go, O_CLOEXEC) != 0 ||
      pipe2(report, O_CLOEXEC) != 0)
    return start_failed("pipe: " + errno_text(errno));
  std::vector<char*> argv, envp;
  for (auto& a : f_.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : f_.env) envp.push_back(e.data());
  envp.push_back(nullptr);

  child_ = fork();
  if (child_ < 0) return start_failed("fork: " + errno_text(errno));
  if (child_ == 0) become_job(f_, out[1], err[1], go[0], report[1], argv, envp);
  close(out[1]);
  close(err[1]);
  close(go[0]);
  close(report[1]);
  out_r_ = out[0];
  err_r_ = err[0];
  fcntl(out_r_, F_SETFL, O_NONBLOCK);
  fcntl(err_r_, F_SETFL, O_NONBLOCK);

  // Into its cgroup before it runs anything of the user's: nothing it starts can leave.
  if (!f_.cgroup.empty() && !aegis::join_cgroup(f_.cgroup_mount + f_.cgroup, child_)) {
    const std::string why = "cgroup " + f_.cgroup + ": " + errno_text(errno);
    kill(child_, SIGKILL);
    waitpid(child_, nullptr, 0);
    return start_failed(why);
  }
  // Its pid is its process group and session (setsid in the child).
  aegis::ChildRecord cr;
  cr.pgid = child_;
  cr.shim = {getpid(), self_start_};
  cr.cgroup_mount = f_.cgroup_mount;
  cr.cgroup = f_.cgroup;
  if (!aegis::write_record(dir_.child(), aegis::child_record_text(cr))) {
    const std::string why = "cannot record the job's process: " + errno_text(errno);
    kill(child_, SIGKILL);
    waitpid(child_, nullptr, 0);
    return start_failed(why);
  }
  if (write(go[1], "g", 1) != 1) die("cannot start the job");
  close(go[1]);

  // A good exec closes the report pipe; a failed start writes to it.
  aegis::ExitRecord r;
  StartFailure sf{};
  ssize_t n;
  do n = read(report[0], &sf, sizeof sf);
  while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == static_cast<ssize_t>(sizeof sf) && sf.stage >= 0 && sf.stage < 7) {
    r.start_error = std::string(kStages[sf.stage]) +
                    (sf.stage == 5 ? " " + f_.workdir : sf.stage == 6 ? " '" + f_.argv[0].substr(0, 200) + "'" : "") +
                    ": " + errno_text(sf.error);
  }

  while (!child_exited_) {
    int timeout = 1000;
    if (kill_at_ > 0) {
      if (now() >= kill_at_) {
        processes().kill();
        kill_at_ = now() + 1;  // and again, for anything forked meanwhile
      }
      timeout = 200;
    }
    pump(timeout);
  }
  stop_leftovers();
  out_log_->finish();
  err_log_->finish();
  if (!f_.cgroup.empty()) aegis::remove_cgroup(f_.cgroup_mount + f_.cgroup);
  r.wait_status = status_;
  r.ended_at = now();
  r.cancelled = cancelled_;
  r.log_dropped_bytes = out_log_->dropped() + err_log_->dropped();
  record_exit(dir_, r);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (a.lock_fd >= 0) fcntl(a.lock_fd, F_SETFD, FD_CLOEXEC);  // the job does not inherit it
  const aegis::AttemptDir dir{a.dir};
  auto parsed = aegis::decode_launch_file(read_launch_file(dir.launch()));
  if (auto* e = std::get_if<std::string>(&parsed)) {
    aegis::ExitRecord r;
    r.wait_status = 127 << 8;
    r.ended_at = now();
    r.start_error = *e;
    record_exit(dir, r);
    return 0;
  }
  Shim shim(dir, std::move(std::get<LaunchFile>(parsed)));
  return shim.run();
}
