// aegis-shim: runs one job attempt for aegisd and records how it ended.
// The daemon starts it in a session of its own, holding the attempt's lock open on
// --lock-fd. The shim starts the job in a new session (its own process group) as the
// job's user, with stdout and stderr in log files owned by that user (mode 0600), waits
// for it, stops what is left of its process group, writes exit.json, and exits. SIGTERM
// (cancel) is passed to the job's process group; SIGKILL follows after --grace seconds.
// It keeps running if the daemon dies; the lock tells a restarted daemon it is alive.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <grp.h>
#include <string>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "runtime/launch/attempt_dir.h"

namespace {

struct Args {
  int lock_fd = -1;
  std::string dir, user, workdir;
  uid_t uid = 0;
  gid_t gid = 0;
  double grace = 10;
  std::vector<char*> argv;
};

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "aegis-shim: %s\n", msg.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--") {
      ++i;
      break;
    }
    if (i + 1 >= argc) die("missing value for " + k);
    const char* v = argv[++i];
    if (k == "--lock-fd") a.lock_fd = std::atoi(v);
    else if (k == "--dir") a.dir = v;
    else if (k == "--uid") a.uid = static_cast<uid_t>(std::strtoul(v, nullptr, 10));
    else if (k == "--gid") a.gid = static_cast<gid_t>(std::strtoul(v, nullptr, 10));
    else if (k == "--user") a.user = v;
    else if (k == "--workdir") a.workdir = v;
    else if (k == "--grace") a.grace = std::atof(v);
    else die("unknown option " + k);
  }
  for (; i < argc; ++i) a.argv.push_back(argv[i]);
  a.argv.push_back(nullptr);
  if (a.dir.empty() || a.argv.size() < 2) die("usage: aegis-shim --dir DIR ... -- COMMAND...");
  return a;
}

int open_log(const std::string& path, const Args& a) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) die(path + ": " + std::strerror(errno));
  if (geteuid() == 0 && fchown(fd, a.uid, a.gid) != 0) die(path + ": chown: " + std::strerror(errno));
  fchmod(fd, 0600);
  return fd;
}

double now() {
  timeval tv{};
  gettimeofday(&tv, nullptr);
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
}

// In the child, between fork and exec: become the job. It waits on `go` until the shim
// has recorded its process group, so that no job ever runs unrecorded.
[[noreturn]] void become_job(const Args& a, int out, int err, int go) {
  char byte = 0;
  if (read(go, &byte, 1) != 1) _exit(126);  // the shim died first
  close(go);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int s : {SIGHUP, SIGINT, SIGPIPE, SIGTERM}) signal(s, SIG_DFL);
  auto fail = [&](const char* what) {
    dprintf(err, "aegis: cannot start the job: %s: %s\n", what, std::strerror(errno));
    _exit(127);
  };
  if (setsid() < 0) fail("setsid");
  if (getuid() == 0) {
    // Order matters: groups and gid while still root, uid last.
    if (initgroups(a.user.c_str(), a.gid) != 0) fail("initgroups");
    if (setgid(a.gid) != 0) fail("setgid");
    if (setuid(a.uid) != 0) fail("setuid");
    if (a.uid != 0 && setuid(0) == 0) fail("could not drop root");
  }
  if (chdir(a.workdir.c_str()) != 0) fail(("working directory " + a.workdir).c_str());
  const int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, 0);
  dup2(out, 1);
  dup2(err, 2);
  execvp(a.argv[0], a.argv.data());
  dprintf(2, "aegis: cannot run %s: %s\n", a.argv[0], std::strerror(errno));
  _exit(127);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  const aegis::AttemptDir dir{a.dir};
  if (a.lock_fd >= 0) fcntl(a.lock_fd, F_SETFD, FD_CLOEXEC);  // the job does not inherit it
  // Orphaned processes of the job come to us, not to init (which in a container may never
  // reap them): we reap them, so a finished job leaves nothing, not even zombies.
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  sigset_t wait_set;
  sigemptyset(&wait_set);
  sigaddset(&wait_set, SIGCHLD);
  sigaddset(&wait_set, SIGTERM);
  sigprocmask(SIG_BLOCK, &wait_set, nullptr);
  signal(SIGHUP, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);

  const int out = open_log(dir.stdout_log(), a);
  const int err = open_log(dir.stderr_log(), a);
  int go[2];
  if (pipe2(go, O_CLOEXEC) != 0) die(std::string("pipe: ") + std::strerror(errno));
  const pid_t child = fork();
  if (child < 0) die(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    close(go[1]);
    become_job(a, out, err, go[0]);
  }
  close(go[0]);
  close(out);
  close(err);
  // Its pid is its process group and session (setsid in the child).
  aegis::write_file_atomic(dir.child(), "{\"pgid\": " + std::to_string(child) + "}\n");
  if (write(go[1], "g", 1) != 1) die("cannot start the job");
  close(go[1]);

  bool cancelled = false;
  int status = 0;
  double kill_at = -1;
  bool exited = false;
  while (!exited) {
    timespec timeout{1, 0};
    const int sig = sigtimedwait(&wait_set, nullptr, &timeout);
    if (sig == SIGTERM && !cancelled) {
      cancelled = true;
      kill(-child, SIGTERM);
      kill_at = now() + a.grace;
    }
    if (kill_at > 0 && now() >= kill_at) kill(-child, SIGKILL);
    int st = 0;
    for (pid_t r; (r = waitpid(-1, &st, WNOHANG)) > 0;)
      if (r == child) {
        status = st;
        exited = true;
      }
  }
  // The main process is gone; whatever it left behind in its group goes too.
  auto reap = [] {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  };
  if (kill(-child, SIGTERM) == 0) {
    const double until = now() + a.grace;
    while (now() < until && kill(-child, 0) == 0) {
      reap();
      usleep(20000);
    }
    kill(-child, SIGKILL);
  }
  // Reap the last of them (SIGKILLed ones, and any orphans that left the group).
  const double until = now() + 2;
  while (now() < until && waitpid(-1, nullptr, WNOHANG) >= 0) usleep(10000);
  char buf[160];
  std::snprintf(buf, sizeof buf, "{\"wait_status\": %d, \"ended_at\": %.6f, \"cancelled\": %s}\n", status, now(),
                cancelled ? "true" : "false");
  aegis::write_file_atomic(dir.exit(), buf);
  return 0;
}
