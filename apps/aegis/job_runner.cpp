#include "apps/aegis/job_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <optional>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "apps/aegis/client.h"
#include "runtime/slurm/commands.h"
#include "runtime/slurm/give_back.h"
#include "runtime/slurm/gres.h"
#include "sched/config.h"

namespace aegis::cli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::atomic<int> g_signal{0};
extern "C" void on_signal(int sig) { g_signal = sig; }

// Single-quoted for /bin/sh.
std::string sh_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The status to end with for a failed job, from how its last attempt's process ended
// (the job's `exit_code` and `signal`, docs/api.md): its exit status, else 128 + the
// signal that killed it (as a shell reports it), else 1 (it never ran, or its end is
// unknown). Never 0: the job failed.
int exit_status_of(const json& j) {
  const auto field = [&](const char* key) -> std::optional<int> {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer()) return std::nullopt;
    return it->get<int>();
  };
  if (const auto code = field("exit_code"); code && *code > 0 && *code < 256) return *code;
  if (const auto sig = field("signal"); sig && *sig > 0 && *sig < 128) return 128 + *sig;
  return 1;
}

// Requests to aegisd that ride out a daemon restart: retried while it cannot be reached,
// or does not answer within `timeout_s` (hung, overloaded), for up to `wait_s`. A submit
// is retried only when it cannot have arrived, so that a job is never queued twice.
class Daemon {
 public:
  Daemon(std::string socket, double wait_s, double timeout_s)
      : socket_(std::move(socket)), wait_s_(wait_s), timeout_s_(timeout_s) {}

  json call(const json& request) {
    const bool idempotent = request["op"] != "submit";
    auto since = Clock::time_point::max();
    while (true) {
      try {
        json r = cli::call(socket_, request, timeout_s_);
        if (since != Clock::time_point::max()) fmt::print(stderr, "aegis: aegisd is back\n");
        return r;
      } catch (const ConnectionError& e) {
        if (e.maybe_received && !idempotent) throw;
        if (since == Clock::time_point::max()) {
          since = Clock::now();
          fmt::print(stderr, "aegis: {}; retrying for {:.0f} s\n", e.what(), wait_s_);
        } else if (Clock::now() - since > std::chrono::duration<double>(wait_s_)) {
          throw;
        }
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    }
  }

 private:
  std::string socket_;
  double wait_s_;
  double timeout_s_;
};

// Prints what the job wrote since `offset`; returns the new offset. A reply carries at
// most 1 MiB: read until the log has nothing more, so that a chatty job's output neither
// lags behind nor is cut when it ends.
std::uint64_t pump(Daemon& d, std::int64_t id, bool err, std::uint64_t offset) {
  while (true) {
    const auto r = d.call({{"op", "logs"}, {"id", id}, {"stream", err ? "stderr" : "stdout"}, {"offset", offset}});
    const std::string data = r["data"];
    std::fwrite(data.data(), 1, data.size(), err ? stderr : stdout);
    std::fflush(err ? stderr : stdout);
    offset = r["offset"].get<std::uint64_t>();
    if (data.empty() || r["eof"].get<bool>() || g_signal) return offset;  // a signal: cancel first
  }
}

// Cancels the job; one that ended meanwhile has nothing to cancel.
void cancel(Daemon& d, std::int64_t id) {
  try {
    d.call({{"op", "cancel"}, {"ids", {id}}});
  } catch (const ConnectionError&) {
    throw;
  } catch (const ClientError&) {
  }
}

// The Slurm job this `aegis run` is part of, when it is inside one.
struct SlurmContext {
  std::string job_id;
  std::string node;
  slurm::JobRecord record;
  std::string comment;
};

std::optional<SlurmContext> slurm_context() {
  const char* id = std::getenv("SLURM_JOB_ID");
  if (!id || !*id) return std::nullopt;
  std::string error;
  auto rec = slurm::show_job(id, &error);
  if (!rec) {
    fmt::print(stderr, "aegis: inside Slurm job {}, but {}; going on without Slurm\n", id, error);
    return std::nullopt;
  }
  SlurmContext c;
  c.job_id = id;
  if (const char* n = std::getenv("SLURMD_NODENAME"); n && *n) c.node = n;
  else c.node = rec->nodes;
  c.record = std::move(*rec);
  c.comment = slurm::job_comment(id);
  return c;
}

// Under Slurm: a job given back earlier runs alone; a job with no declared memory takes
// what it booked in Slurm; an aegisd name that says which Slurm job it is.
void adapt_to_slurm(api::JobRequest& job, const SlurmContext& s, const RunArgs& args) {
  if (slurm::marked_alone(s.comment) && !job.exclusive) {
    job.exclusive = true;
    fmt::print(stderr, "aegis: Slurm job {} was given back after OOMs; it runs alone on a GPU\n", s.job_id);
  }
  const auto booked = slurm::booked_mib(slurm::parse_gres_list(s.record.tres_per_node), args.gres);
  if (args.mem_from_slurm && !job.mem_mib && !job.exclusive && booked && *booked > 0) {
    job.mem_mib = std::max<MiB>(1, *booked / job.gpus);
    fmt::print(stderr, "aegis: declared GPU memory {} MiB per GPU, from the Slurm booking ({})\n", *job.mem_mib,
               s.record.tres_per_node);
  } else if (job.mem_mib && booked && *job.mem_mib * job.gpus > *booked) {
    fmt::print(stderr, "aegis: warning: the job declares {} MiB x {} GPU(s) but Slurm booked {} MiB ({})\n",
               *job.mem_mib, job.gpus, *booked, s.record.tres_per_node);
  }
  if (job.name.empty()) job.name = "slurm-" + s.job_id;
}

MiB largest_gpu_mib(Daemon& d) {
  MiB largest = 0;
  const json reply = d.call({{"op", "gpus"}});  // kept: a range-for over a temporary's member dangles
  for (const auto& g : reply["gpus"]) largest = std::max(largest, g["memory_total_mib"].get<MiB>());
  return largest;
}

// Hands the Slurm job back: marks it to run alone, requeues it, cancels the aegisd job
// and books a whole GPU's memory away from this node. False (with the reason printed)
// when it stays here and waits.
bool give_back(const SlurmContext& s, Daemon& d, std::int64_t id, const json& job, const RunArgs& args) {
  std::string error;
  const auto rec = slurm::show_job(s.job_id, &error);
  if (!rec) {
    fmt::print(stderr, "aegis: job {} waits to run alone; cannot give it back to Slurm: {}\n", id, error);
    return false;
  }
  slurm::GiveBackInput in;
  in.job = *rec;
  in.comment = slurm::job_comment(s.job_id);
  in.this_node = s.node;
  in.excluded = slurm::expand_hostlist(rec->excluded_nodes);
  in.partition_nodes = slurm::partition_nodes(rec->partition);
  in.whole_gpu_mib = largest_gpu_mib(d);
  in.gpus = job["gpus"].get<int>();
  in.oom_count = job["recovery"]["oom_count"].get<int>();
  in.gres_name = args.gres;
  const auto plan = slurm::plan_give_back(in);
  if (!plan.go) {
    fmt::print(stderr, "aegis: job {} waits to run alone; it stays on {}: {}\n", id, s.node, plan.why_not);
    return false;
  }
  if (auto r = slurm::update_job(s.job_id, {"Comment=" + plan.comment}); !r.ok()) {
    fmt::print(stderr, "aegis: job {} waits to run alone; cannot mark Slurm job {}: {}\n", id, s.job_id, r.first_line());
    return false;
  }
  // The requeue signals this step; from here on we finish the hand-over, whatever comes.
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) std::signal(sig, SIG_IGN);
  if (auto r = slurm::requeue_job(s.job_id); !r.ok()) {
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) std::signal(sig, on_signal);
    fmt::print(stderr, "aegis: job {} waits to run alone; scontrol requeue {} failed: {}\n", id, s.job_id, r.first_line());
    return false;
  }
  cancel(d, id);
  // Slurm holds a requeued batch job back for a while (about 2 minutes in 22.05) once its
  // processes, this one included, are gone; nothing here can shorten that.
  const auto r = slurm::update_job(s.job_id, {"Gres=" + plan.gres, "ExcNodeList=" + plan.exclude});
  fmt::print(stderr, "aegis: job {} needs a GPU alone and {} cannot give it one soon: Slurm job {} requeued{}\n", id,
             s.node, s.job_id,
             r.ok() ? fmt::format(" with Gres={} ExcNodeList={}", plan.gres, plan.exclude)
                    : fmt::format(" (its booking stays as it was: {})", r.first_line()));
  return true;
}

// Submits the job attached to this process. A submit that may have arrived is not tried
// again (the job would be queued twice); if it was queued, the daemon cancels it once
// this process is gone, since it is attached to it.
std::int64_t submit(Daemon& d, const api::JobRequest& req) {
  try {
    return d.call({{"op", "submit"}, {"job", json::parse(api::to_json(req))}, {"attach", true}})["id"].get<std::int64_t>();
  } catch (const ConnectionError& e) {
    if (!e.maybe_received) throw;
    throw ConnectionError(std::string(e.what()) + "; if the job was queued, aegisd cancels it once this aegis run has ended",
                          true);
  }
}

}  // namespace

int run_and_wait(api::JobRequest req, const RunArgs& args, const std::string& socket, double timeout_s) {
  for (int s : {SIGTERM, SIGINT, SIGHUP}) std::signal(s, on_signal);
  Daemon d(socket, args.daemon_wait_s, timeout_s);
  const auto slurm = slurm_context();
  if (slurm) adapt_to_slurm(req, *slurm, args);
  const std::int64_t id = submit(d, req);
  fmt::print(stderr, "aegis: job {} submitted to {}'s aegisd\n", id, slurm ? slurm->node : std::string("this node"));
  std::uint64_t out_off = 0, err_off = 0;
  int attempt = 0;
  bool cancel_sent = false, give_back_tried = false;
  auto waiting_alone_since = Clock::time_point::max();
  while (true) {
    if (g_signal && !cancel_sent) {
      // Slurm's scancel, a time limit, Ctrl-C: the GPU job goes too.
      fmt::print(stderr, "aegis: signal {}: cancelling job {}\n", g_signal.load(), id);
      cancel(d, id);
      cancel_sent = true;
    }
    const auto j = d.call({{"op", "show"}, {"id", id}})["job"];
    const int now_attempt = j["attempts"].get<int>();
    if (now_attempt != attempt && now_attempt > 0) {
      if (attempt > 0) {
        out_off = pump(d, id, false, out_off);
        fmt::print(stderr, "aegis: job {} attempt {} ({})\n", id, now_attempt, j.value("reason", std::string()));
      }
      attempt = now_attempt;
      out_off = err_off = 0;
    }
    if (attempt > 0) {
      out_off = pump(d, id, false, out_off);
      err_off = pump(d, id, true, err_off);
    }
    const std::string state = j["state"];
    if (state == "completed") return 0;
    if (state == "cancelled") return 143;
    if (state == "failed") {
      fmt::print(stderr, "aegis: job {} failed: {}\n", id, j.value("reason", std::string()));
      return exit_status_of(j);
    }
    // After OOMs it may only run alone; if this node cannot give it a GPU soon, Slurm can.
    const bool waits_alone = state == "queued" && j["recovery"]["exclusive_only"].get<bool>() &&
                             (j["recovery"]["oom_count"].get<int>() > 0 || (slurm && slurm::marked_alone(slurm->comment)));
    if (!waits_alone) {
      waiting_alone_since = Clock::time_point::max();
    } else if (waiting_alone_since == Clock::time_point::max()) {
      waiting_alone_since = Clock::now();
    } else if (slurm && !give_back_tried && !cancel_sent && args.requeue_after_s > 0 &&
               Clock::now() - waiting_alone_since > std::chrono::duration<double>(args.requeue_after_s)) {
      give_back_tried = true;
      if (give_back(*slurm, d, id, j, args)) return 75;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(cancel_sent ? 200 : 500));
  }
}

std::string sbatch_script(const api::JobRequest& job, const SlurmArgs& args, MiB default_mib) {
  // Slurm books GPU memory per node, in bytes: what the job declares on each of its GPUs.
  const MiB per_gpu = job.mem_mib.value_or(default_mib);
  std::string s = "#!/bin/sh\n";
  s += fmt::format("#SBATCH --job-name={}\n", job.name.empty() ? "aegis" : job.name);
  s += fmt::format("#SBATCH --gres={}:{}\n", args.gres, slurm::mib_count(per_gpu * job.gpus));
  s += fmt::format("#SBATCH --chdir={}\n", job.workdir);
  s += "#SBATCH --requeue\n";
  s += "#SBATCH --open-mode=append\n";  // a requeued job adds to its output, as aegis run reports why
  for (const auto& a : args.args) s += "#SBATCH " + a + "\n";
  s += "# Written by `aegis submit --slurm`: Slurm picks the node, the node's aegisd the GPU.\n";
  s += fmt::format("cd {} || exit 1\n", sh_quote(job.workdir));
  std::string run = "exec " + sh_quote(args.aegis_binary.empty() ? "aegis" : args.aegis_binary) + " run";
  // Files are read again on the node (a shared file system, as for the working directory).
  if (!args.spec.empty()) run += " --spec " + sh_quote(args.spec);
  if (!args.model_spec.empty()) run += " --model-spec " + sh_quote(args.model_spec);
  run += fmt::format(" --gpus {}", job.gpus);
  if (job.mem_mib) run += fmt::format(" --mem {}", *job.mem_mib);
  else run += " --no-slurm-mem";  // the booking above is a default, not the user's figure
  if (args.gres != "aegis_mem") run += " --slurm-gres " + sh_quote(args.gres);
  if (!job.name.empty()) run += " --name " + sh_quote(job.name);
  if (job.exclusive) run += " --exclusive";
  if (job.restartable) run += " --restartable";
  if (job.time_limit_s) run += fmt::format(" --time {}", *job.time_limit_s);  // issue 32 item 5
  // Issue 32 item 1: the node's aegisd checks the level against the user's allowance there.
  if (job.priority != 0) run += fmt::format(" --priority {}", job.priority);
  if (job.checkpoint_signal != 0)
    run += " --checkpoint-signal " + sh_quote(api::checkpoint_signal_text(job.checkpoint_signal, job.checkpoint_lead_s));
  for (const auto& t : job.tags) run += " --tag " + sh_quote(t);
  // sbatch carries this shell's environment to the node; what the job sets beyond it goes
  // with the command (a spec's environment comes with the spec).
  if (args.spec.empty())
    for (const auto& [k, v] : job.env) {
      const char* here = std::getenv(k.c_str());
      if (!here || v != here) run += " --env " + sh_quote(k + "=" + v);
    }
  run += " --";
  for (const auto& a : job.command) run += " " + sh_quote(a);
  return s + run + "\n";
}

std::string submit_to_slurm(const api::JobRequest& job, const SlurmArgs& given) {
  SlurmArgs args = given;
  if (args.aegis_binary.empty()) {
    // The same install path on every node is the usual cluster layout.
    char self[PATH_MAX] = {};
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) args.aegis_binary.assign(self, static_cast<std::size_t>(n));
  }
  if (job.exclusive && !job.mem_mib)
    fmt::print(stderr, "aegis: note: the job runs alone but books only {} MiB in Slurm; give --mem a whole GPU's "
                       "memory so that Slurm counts what it takes\n", EngineConfig{}.estimator_free_floor_mib);
  const std::string dir = job.workdir + "/.aegis";
  mkdir(dir.c_str(), 0755);
  const std::string path = fmt::format("{}/{}-{}.sbatch", dir, job.name.empty() ? "job" : job.name, getpid());
  {
    std::ofstream f(path);
    if (!f) throw ClientError(path + ": cannot write the sbatch script");
    f << sbatch_script(job, args, EngineConfig{}.estimator_free_floor_mib);
  }
  // The job's environment goes with it (sbatch's default is to export the caller's).
  const auto r = slurm::run_command({"sbatch", "--parsable", path});
  if (!r.ok()) throw ClientError("sbatch refused the job: " + r.first_line());
  return r.output.substr(0, r.output.find_first_of(";\n"));
}

}  // namespace aegis::cli
