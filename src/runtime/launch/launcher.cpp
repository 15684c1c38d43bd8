#include "runtime/launch/launcher.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace aegis {

const std::vector<std::string>& root_environment() {
  static const std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  return env;
}

StartedShim start_shim(const std::string& shim, const AttemptDir& d) {
  // The lock is taken here and inherited by the shim: from now until the shim and its
  // job are gone, attempt_liveness() says so, even if this daemon dies mid-launch.
  const int lock = open(d.lock().c_str(), O_RDWR | O_NOFOLLOW);
  if (lock < 0) throw LaunchError(d.lock() + ": " + std::strerror(errno), errno);
  if (flock(lock, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    close(lock);
    throw LaunchError(d.lock() + ": attempt already running", err == EWOULDBLOCK ? EEXIST : err);
  }
  int report[2];  // the child writes its errno here if exec fails; closed by a good exec
  if (pipe2(report, O_CLOEXEC) != 0) {
    const int err = errno;
    close(lock);
    throw LaunchError(std::string("pipe: ") + std::strerror(err), err);
  }

  // Everything the child needs is prepared before fork: no allocation after it. The
  // lock becomes fd 3 and the report pipe fd 4; every other descriptor is closed.
  std::vector<std::string> args = {shim, "--lock-fd", "3", "--dir", d.dir};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = root_environment();
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(lock);
    close(report[0]);
    close(report[1]);
    throw LaunchError(std::string("fork: ") + std::strerror(err), err);
  }
  if (pid == 0) {
    // The shim's own session: the daemon's death or its terminal's hang-up do not reach it.
    setsid();
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int s = 1; s < NSIG; ++s) signal(s, SIG_DFL);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0 && null_fd != 0) {
      dup2(null_fd, 0);
      close(null_fd);
    }
    int err_fd = report[1];
    if (err_fd == 3 || err_fd == 4) err_fd = fcntl(err_fd, F_DUPFD_CLOEXEC, 5);
    int lock_fd = lock;
    if (lock_fd == 4) lock_fd = fcntl(lock_fd, F_DUPFD, 5);
    if (lock_fd != 3 && dup2(lock_fd, 3) < 0) _exit(127);
    if (dup2(err_fd, 4) < 0 || fcntl(4, F_SETFD, FD_CLOEXEC) != 0) _exit(127);
    syscall(SYS_close_range, 5U, ~0U, 0U);
    execve(argv[0], argv.data(), envp.data());
    const int err = errno;
    (void)!write(4, &err, sizeof err);
    _exit(127);
  }
  close(lock);
  close(report[1]);
  int child_err = 0;
  ssize_t n;
  do n = read(report[0], &child_err, sizeof child_err);
  while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == static_cast<ssize_t>(sizeof child_err)) {
    waitpid(pid, nullptr, 0);
    throw LaunchError(shim + ": " + std::strerror(child_err), child_err);
  }
  StartedShim s;
  s.pid = pid;
  // Not reaped yet (we are its parent and have not waited): the pid is still the shim's.
  s.pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  return s;
}

}  // namespace aegis
