#include "runtime/daemon/notifier.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <httplib.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "runtime/daemon/secure_paths.h"
#include "runtime/launch/launcher.h"

namespace aegis {

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// clone3's arguments, version 0 (linux/sched.h's struct clone_args, spelt out: that header
// redefines glibc's CLONE_* macros).
struct CloneArgs {
  std::uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

// The hook's groups, looked up before the clone (the child may not allocate).
std::vector<gid_t> groups_of(const std::string& user, gid_t gid) {
  int n = 64;
  std::vector<gid_t> g(static_cast<std::size_t>(n));
  if (getgrouplist(user.c_str(), gid, g.data(), &n) < 0) {
    g.resize(static_cast<std::size_t>(std::min(n, 65536)));
    n = static_cast<int>(g.size());
    if (getgrouplist(user.c_str(), gid, g.data(), &n) < 0) n = 0;
  }
  g.resize(static_cast<std::size_t>(std::max(n, 0)));
  if (g.empty()) g.push_back(gid);
  return g;
}

}  // namespace

NotifierSettings NotifierSettings::from(const DaemonSettings& s) {
  NotifierSettings n;
  n.command = s.notify_command;
  n.url = s.notify_url;
  n.timeout_s = s.notify_timeout_s;
  n.queue_max = s.notify_queue_max;
  n.per_user_max = s.notify_per_user_max;
  return n;
}

std::string check_notify_settings(const DaemonSettings& s) {
  if (const std::string& c = s.notify_command; !c.empty()) {
    if (c.front() != '/') return "notify_command: " + c + " is not an absolute path";
    struct stat st{};
    if (stat(c.c_str(), &st) != 0) return "notify_command: " + c + ": " + std::strerror(errno);
    if (!S_ISREG(st.st_mode) || !(st.st_mode & S_IXUSR)) return "notify_command: " + c + " is not an executable file";
    // It runs as every notified user: whoever may change it runs code as them.
    if (st.st_uid != 0 && st.st_uid != geteuid())
      return "notify_command: " + c + " must be owned by root (it runs as every notified job's owner)";
    if (st.st_mode & (S_IWGRP | S_IWOTH)) return "notify_command: " + c + " is writable by group or others";
    const auto slash = c.rfind('/');
    if (auto e = check_daemon_dir("notify_command", slash == 0 ? "/" : c.substr(0, slash), false); !e.empty())
      return e;
  }
  if (const std::string& u = s.notify_url; !u.empty()) {
    const auto scheme = u.find("://");
    const std::string name = scheme == std::string::npos ? "" : u.substr(0, scheme);
    if ((name != "http" && name != "https") || u.size() == scheme + 3 || u[scheme + 3] == '/')
      return "notify_url: expected http://HOST[:PORT][/PATH] or https://..., got '" + u + "'";
  }
  return "";
}

std::string deliver_command(const std::string& command, const Notice& n, double timeout_s) {
  // Everything the child needs, made before the clone: it only makes system calls.
  const std::vector<gid_t> groups = groups_of(n.user, n.gid);
  std::vector<std::string> arg_strings = {command, n.event};
  std::vector<std::string> env_strings = root_environment();
  {
    // HOME from the user database (the hook may hand over to a script of the user's).
    struct passwd pw{}, *found = nullptr;
    std::vector<char> buf(16384);
    if (getpwuid_r(n.uid, &pw, buf.data(), buf.size(), &found) == 0 && found && pw.pw_dir)
      env_strings.push_back(std::string("HOME=") + pw.pw_dir);
  }
  env_strings.push_back("USER=" + n.user);
  env_strings.push_back("LOGNAME=" + n.user);
  env_strings.push_back("AEGIS_NOTIFY_EVENT=" + n.event);
  env_strings.push_back("AEGIS_JOB_ID=" + std::to_string(n.job));
  std::vector<char*> argv, envp;
  for (auto& a : arg_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return std::string("socketpair: ") + std::strerror(errno);
  const int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) {
    close(sv[0]);
    close(sv[1]);
    return std::string("/dev/null: ") + std::strerror(errno);
  }
  const uid_t uid = n.uid;
  const gid_t gid = n.gid;
  // A child that sends no signal when it ends: aegisd's event loop reaps its shims with
  // waitpid(-1), which never takes such a child (only __WALL or __WCLONE do), so its status
  // is ours to read.
  int pidfd = -1;
  CloneArgs args{};
  args.flags = CLONE_PIDFD;
  args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
  args.exit_signal = 0;
  const long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) {
    // The child: raw system calls only (glibc's set*id would signal the parent's threads,
    // which do not exist here).
    syscall(SYS_setsid);
    std::uint64_t none = 0;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, nullptr, sizeof none);
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // ignored ones (SIGPIPE) survive exec
    if (dup2(sv[1], 0) < 0 || dup2(devnull, 1) < 0 || dup2(devnull, 2) < 0) syscall(SYS_exit_group, 126);
    syscall(SYS_close_range, 3U, ~0U, 0U);
    if (syscall(SYS_setgroups, groups.size(), groups.data()) != 0) syscall(SYS_exit_group, 126);
    if (syscall(SYS_setresgid, gid, gid, gid) != 0) syscall(SYS_exit_group, 126);
    if (syscall(SYS_setresuid, uid, uid, uid) != 0) syscall(SYS_exit_group, 126);
    if (uid != 0 && syscall(SYS_setresuid, 0, 0, 0) == 0) syscall(SYS_exit_group, 126);
    if (syscall(SYS_chdir, "/") != 0) syscall(SYS_exit_group, 126);
    syscall(SYS_execve, argv[0], argv.data(), envp.data());
    syscall(SYS_exit_group, 127);
  }
  close(sv[1]);
  close(devnull);
  if (pid < 0) {
    const int err = errno;
    close(sv[0]);
    return std::string("clone3: ") + std::strerror(err);
  }
  const double deadline = steady_seconds() + timeout_s;
  auto left_ms = [&] { return static_cast<int>(std::max(0.0, (deadline - steady_seconds()) * 1000)); };
  // The payload (a few hundred bytes: far below the socket's buffer); a hook that does not
  // read it still ends normally.
  std::size_t sent = 0;
  while (sent < n.payload.size()) {
    const ssize_t w = send(sv[0], n.payload.data() + sent, n.payload.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      sent += static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      pollfd p{sv[0], POLLOUT, 0};
      if (poll(&p, 1, left_ms()) > 0) continue;
    }
    break;  // it closed its stdin, or the time is up: its exit status says the rest
  }
  close(sv[0]);
  std::string why;
  pollfd p{pidfd, POLLIN, 0};
  int r;
  do r = poll(&p, 1, left_ms());
  while (r < 0 && errno == EINTR);
  if (r == 0) {
    // Its session, while its leader is unreaped (so the group id is still its own).
    kill(-static_cast<pid_t>(pid), SIGKILL);
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
    why = fmt::format("{}: still running after {} s (notify_timeout_s); killed", command, timeout_s);
  }
  siginfo_t info{};
  while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | __WALL) != 0 && errno == EINTR) {
  }
  close(pidfd);
  if (!why.empty()) return why;
  if (info.si_code == CLD_EXITED && info.si_status == 0) return "";
  if (info.si_code == CLD_EXITED)
    return fmt::format("{}: exit status {}{}", command, info.si_status,
                       info.si_status == 127 ? " (it could not be run)" : info.si_status == 126 ? " (could not become the job's user)" : "");
  return fmt::format("{}: killed by signal {}", command, info.si_status);
}

std::string deliver_http(const std::string& url, const Notice& n, double timeout_s) {
  const auto scheme = url.find("://");
  const auto slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  const std::string base = url.substr(0, slash);
  const std::string path = slash == std::string::npos ? "/" : url.substr(slash);
  httplib::Client client(base);
  if (!client.is_valid()) return "POST " + url + ": not a URL this build can reach";
  const auto secs = static_cast<time_t>(timeout_s);
  const auto usecs = static_cast<time_t>((timeout_s - static_cast<double>(secs)) * 1e6);
  client.set_connection_timeout(secs, usecs);
  client.set_read_timeout(secs, usecs);
  client.set_write_timeout(secs, usecs);
  client.set_follow_location(false);
  const httplib::Headers headers = {{"X-Aegis-Event", n.event}};
  auto res = client.Post(path, headers, n.payload, "application/json");
  if (!res) return "POST " + url + ": " + httplib::to_string(res.error());
  if (res->status / 100 != 2) return fmt::format("POST {}: answered {}", url, res->status);
  return "";
}

Notifier::Notifier(NotifierSettings s) : s_(std::move(s)) {
  if (s_.command.empty() && s_.url.empty()) return;
  deliver_ = [cmd = s_.command, url = s_.url, t = s_.timeout_s](const Notice& n) {
    std::string why;
    if (!cmd.empty()) why = deliver_command(cmd, n, t);
    if (!url.empty()) {
      const std::string w = deliver_http(url, n, t);
      if (!w.empty()) why += (why.empty() ? "" : "; ") + w;
    }
    return why;
  };
  worker_ = std::thread([this] { run(); });
}

Notifier::Notifier(NotifierSettings s, Deliver deliver) : s_(std::move(s)), deliver_(std::move(deliver)) {
  if (deliver_) worker_ = std::thread([this] { run(); });
}

Notifier::~Notifier() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

bool Notifier::post(Notice n) {
  if (!deliver_) return false;
  {
    std::lock_guard lock(mu_);
    auto& mine = waiting_[n.uid];
    if (total_ < static_cast<std::size_t>(s_.queue_max) && mine.size() < static_cast<std::size_t>(s_.per_user_max)) {
      mine.push_back(std::move(n));
      ++total_;
      wake_.notify_one();
      return true;
    }
    const std::size_t theirs = mine.size();
    if (mine.empty()) waiting_.erase(n.uid);
    ++dropped_;
    // Logged at most every 10 s: a flood must not become a flood of log lines.
    const double now = steady_seconds();
    if (now - last_drop_log_ >= 10) {
      last_drop_log_ = now;
      fmt::print(stderr,
                 "aegisd: notify: job {} ({}) {}: not sent, the queue is full ({} waiting, {} of user {}; "
                 "notify_queue_max, notify_per_user_max); {} dropped so far\n",
                 n.job, n.user, n.event, total_, theirs, n.uid, dropped_);
    }
  }
  return false;
}

Notifier::Counts Notifier::counts() const {
  std::lock_guard lock(mu_);
  return {delivered_, failed_, dropped_, static_cast<std::int64_t>(total_)};
}

bool Notifier::wait_idle(double seconds) {
  std::unique_lock lock(mu_);
  return idle_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return total_ == 0 && !busy_; });
}

void Notifier::run() {
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || total_ > 0; });
    if (stop_) return;
    // Round robin: the first user after the one served last.
    auto it = served_any_ ? waiting_.upper_bound(last_served_) : waiting_.begin();
    if (it == waiting_.end()) it = waiting_.begin();
    Notice n = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) waiting_.erase(it);
    --total_;
    last_served_ = n.uid;
    served_any_ = true;
    busy_ = true;
    lock.unlock();
    const std::string why = deliver_(n);
    if (!why.empty())
      fmt::print(stderr, "aegisd: notify: job {} ({}) {}: not delivered: {}\n", n.job, n.user, n.event, why);
    lock.lock();
    busy_ = false;
    (why.empty() ? delivered_ : failed_)++;
    if (total_ == 0) idle_.notify_all();
  }
}

}  // namespace aegis
