#include "apps/aegis/job_runner.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "apps/aegis/client.h"

namespace aegis::cli {

namespace {

using nlohmann::json;

std::atomic<int> g_signal{0};
extern "C" void on_signal(int sig) { g_signal = sig; }

// Single-quoted for /bin/sh.
std::string sh_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs argv, returns (exit status, stdout+stderr).
std::pair<int, std::string> capture(const std::vector<std::string>& argv) {
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + sh_quote(a);
  cmd += " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "cannot run " + argv.front()};
  std::string out;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

// The job's exit status from the daemon's reason ("exit status 3"), else 1.
int exit_status_of(const json& j) {
  const std::string r = j.value("reason", std::string());
  int code = 1;
  if (std::sscanf(r.c_str(), "exit status %d", &code) == 1 && code > 0 && code < 256) return code;
  return 1;
}

// Prints what the job wrote since `offset`; returns the new offset.
std::uint64_t pump(const std::string& socket, std::int64_t id, bool err, std::uint64_t offset, bool* eof) {
  const auto r = call(socket, {{"op", "logs"}, {"id", id}, {"stream", err ? "stderr" : "stdout"}, {"offset", offset}});
  const std::string data = r["data"];
  std::fwrite(data.data(), 1, data.size(), err ? stderr : stdout);
  std::fflush(err ? stderr : stdout);
  if (eof) *eof = r["eof"].get<bool>();
  return r["offset"].get<std::uint64_t>();
}

}  // namespace

int run_and_wait(const api::JobRequest& req, const RunArgs& args, const std::string& socket) {
  for (int s : {SIGTERM, SIGINT, SIGHUP}) std::signal(s, on_signal);
  const auto submitted = call(socket, {{"op", "submit"}, {"job", json::parse(api::to_json(req))}});
  const std::int64_t id = submitted["id"].get<std::int64_t>();
  fmt::print(stderr, "aegis: job {} submitted to this node's aegisd\n", id);
  const char* slurm_job = std::getenv("SLURM_JOB_ID");
  std::uint64_t out_off = 0, err_off = 0;
  int attempt = 0;
  bool cancel_sent = false;
  auto waiting_alone_since = std::chrono::steady_clock::time_point::max();
  while (true) {
    if (g_signal && !cancel_sent) {
      // Slurm's scancel (or Ctrl-C): the GPU job goes too.
      fmt::print(stderr, "aegis: signal {}: cancelling job {}\n", g_signal.load(), id);
      call(socket, {{"op", "cancel"}, {"ids", {id}}});
      cancel_sent = true;
    }
    const auto j = call(socket, {{"op", "show"}, {"id", id}})["job"];
    const int now_attempt = j["attempts"].get<int>();
    if (now_attempt != attempt && now_attempt > 0) {
      if (attempt > 0) {
        bool eof = false;
        out_off = pump(socket, id, false, out_off, &eof);
        fmt::print(stderr, "aegis: job {} attempt {} ({})\n", id, now_attempt, j.value("reason", std::string()));
      }
      attempt = now_attempt;
      out_off = err_off = 0;
    }
    if (attempt > 0) {
      out_off = pump(socket, id, false, out_off, nullptr);
      err_off = pump(socket, id, true, err_off, nullptr);
    }
    const std::string state = j["state"];
    if (state == "completed") return 0;
    if (state == "cancelled") return 143;
    if (state == "failed") {
      fmt::print(stderr, "aegis: job {} failed: {}\n", id, j.value("reason", std::string()));
      return exit_status_of(j);
    }
    // After OOMs it may only run alone; if this node cannot give it a GPU soon, Slurm can.
    const bool waits_alone = state == "queued" && j["recovery"]["exclusive_only"].get<bool>();
    if (!waits_alone) {
      waiting_alone_since = std::chrono::steady_clock::time_point::max();
    } else if (waiting_alone_since == std::chrono::steady_clock::time_point::max()) {
      waiting_alone_since = std::chrono::steady_clock::now();
    } else if (slurm_job && args.requeue_after_s > 0 &&
               std::chrono::steady_clock::now() - waiting_alone_since > std::chrono::duration<double>(args.requeue_after_s)) {
      call(socket, {{"op", "cancel"}, {"ids", {id}}});
      const auto [rc, out] = capture({"scontrol", "requeue", slurm_job});
      fmt::print(stderr, "aegis: job {} needs a GPU alone; given back to Slurm (scontrol requeue {}: {})\n", id,
                 slurm_job, rc == 0 ? "ok" : out);
      return 75;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(cancel_sent ? 200 : 500));
  }
}

std::string sbatch_script(const api::JobRequest& job, const SlurmArgs& args) {
  const MiB mem = job.mem_mib.value_or(0);
  // Slurm books GPU memory in whole GiB per node: what the job declares, on each of its GPUs.
  const long gib = mem > 0 ? static_cast<long>(std::ceil(static_cast<double>(mem) / 1024.0)) * job.gpus : 1;
  std::string s = "#!/bin/sh\n";
  s += fmt::format("#SBATCH --job-name={}\n", job.name.empty() ? "aegis" : job.name);
  s += fmt::format("#SBATCH --gres={}:{}\n", args.gres, gib);
  s += "#SBATCH --requeue\n";
  for (const auto& a : args.args) s += "#SBATCH " + a + "\n";
  s += "# Written by `aegis submit --slurm`: the node's aegisd picks the GPU.\n";
  s += fmt::format("cd {} || exit 1\n", sh_quote(job.workdir));
  std::string run = "exec aegis run";
  run += fmt::format(" --gpus {}", job.gpus);
  if (mem > 0) run += fmt::format(" --mem {}", mem);
  if (!job.name.empty()) run += " --name " + sh_quote(job.name);
  if (job.exclusive) run += " --exclusive";
  for (const auto& t : job.tags) run += " --tag " + sh_quote(t);
  run += " --";
  for (const auto& a : job.command) run += " " + sh_quote(a);
  return s + run + "\n";
}

std::string submit_to_slurm(const api::JobRequest& job, const SlurmArgs& args) {
  const std::string dir = job.workdir + "/.aegis";
  mkdir(dir.c_str(), 0755);
  const std::string path = fmt::format("{}/{}-{}.sbatch", dir, job.name.empty() ? "job" : job.name, getpid());
  {
    std::ofstream f(path);
    if (!f) throw ClientError(path + ": cannot write the sbatch script");
    f << sbatch_script(job, args);
  }
  // The job's environment goes with it (sbatch's default is to export the caller's).
  const auto [rc, out] = capture({"sbatch", "--parsable", path});
  if (rc != 0) throw ClientError("sbatch refused the job: " + out.substr(0, out.find('\n')));
  return out.substr(0, out.find_first_of(";\n"));
}

}  // namespace aegis::cli
