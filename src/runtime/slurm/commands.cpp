#include "runtime/slurm/commands.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace aegis::slurm {

std::string CommandResult::first_line() const {
  std::string s = output.substr(0, output.find('\n'));
  return s.empty() ? "exit status " + std::to_string(status) : s;
}

CommandResult run_command(const std::vector<std::string>& argv) {
  CommandResult r;
  if (argv.empty()) return r;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r.output = "pipe failed";
    return r;
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    r.output = "fork failed";
    return r;
  }
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    execvp(args[0], args.data());
    const std::string msg = argv[0] + ": cannot run it (not installed?)\n";
    (void)!write(2, msg.data(), msg.size());
    _exit(127);
  }
  close(fds[1]);
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) r.output.append(buf, static_cast<std::size_t>(n));
    else if (n < 0 && errno == EINTR) continue;
    else break;
  }
  close(fds[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::optional<JobRecord> show_job(const std::string& id, std::string* error) {
  const auto r = run_command({"scontrol", "show", "job", "-o", id});
  if (!r.ok()) {
    if (error) *error = "scontrol show job " + id + ": " + r.first_line();
    return std::nullopt;
  }
  auto rec = parse_job_record(r.output.substr(0, r.output.find('\n')));
  if (!rec && error) *error = "scontrol show job " + id + ": unreadable answer: " + r.first_line();
  return rec;
}

std::string job_comment(const std::string& id) {
  const auto r = run_command({"squeue", "-h", "-j", id, "-o", "%k"});
  if (!r.ok()) return "";
  std::string c = r.output.substr(0, r.output.find('\n'));
  return c == "(null)" ? "" : c;
}

namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = std::min(text.find('\n', pos), text.size());
    std::string l = text.substr(pos, nl - pos);
    while (!l.empty() && (l.back() == ' ' || l.back() == '\r')) l.pop_back();
    if (!l.empty() && std::find(out.begin(), out.end(), l) == out.end()) out.push_back(l);
    pos = nl + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& expr) {
  if (expr.empty()) return {};
  const auto r = run_command({"scontrol", "show", "hostnames", expr});
  return r.ok() ? lines(r.output) : std::vector<std::string>{};
}

std::vector<std::string> partition_nodes(const std::string& partitions) {
  if (partitions.empty()) return {};
  const auto r = run_command({"sinfo", "-h", "-N", "-p", partitions, "-o", "%N"});
  return r.ok() ? lines(r.output) : std::vector<std::string>{};
}

CommandResult update_job(const std::string& id, const std::vector<std::string>& assignments) {
  std::vector<std::string> argv = {"scontrol", "update", "JobId=" + id};
  argv.insert(argv.end(), assignments.begin(), assignments.end());
  return run_command(argv);
}

CommandResult requeue_job(const std::string& id) { return run_command({"scontrol", "requeue", id}); }

}  // namespace aegis::slurm
