#include "runtime/daemon/daemon.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "estimate/history.h"
#include "runtime/job/classify.h"
#include "runtime/job/job_json.h"
#include "runtime/launch/attempt_dir.h"
#include "runtime/launch/launcher.h"
#include "runtime/daemon/mps.h"

extern char** environ;

namespace aegis {

namespace {

using nlohmann::json;

json error_reply(const std::string& msg) { return {{"ok", false}, {"error", msg}}; }

// Begins a transaction unless the caller (the event loop's group commit) has one open.
class Tx {
 public:
  explicit Tx(Store& s) : s_(s), own_(!s.in_transaction()) {
    if (own_) s_.begin();
  }
  ~Tx() {
    if (own_ && !done_) s_.rollback();
  }
  void commit() {
    if (own_) s_.commit();
    done_ = true;
  }

 private:
  Store& s_;
  bool own_;
  bool done_ = false;
};

std::optional<std::string> user_name(uid_t uid) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* res = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &res) != 0 || !res) return std::nullopt;
  return std::string(pw.pw_name);
}

// What listings show of a job; the environment only to those who may manage it.
json public_view(const DaemonJob& j, bool with_env) {
  json v = to_json(j);
  if (!with_env) v["request"].erase("env");
  return v;
}

double clock_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Daemon::Daemon(DaemonConfig config, std::unique_ptr<GpuSource> gpus)
    : cfg_(std::move(config)),
      store_((mkdir(cfg_.daemon.state_dir.c_str(), 0700), cfg_.daemon.state_dir + "/aegis.db"),
             cfg_.daemon.durability == "full"),
      source_(std::move(gpus)),
      engine_(cfg_.engine) {
  if (!cfg_.daemon.learned_model.empty()) {
    try {
      learned_ = LearnedModel::load(cfg_.daemon.learned_model);
    } catch (const std::exception& e) {
      throw ConfigError(std::string("learned_model: ") + e.what());
    }
  }
  history_ = store_.peaks();
  select_gpus(source_->sample());
  recover_jobs(clock_now());
}

static std::string signature_of(const DaemonJob& j) {
  return job_signature(j.request.command, j.request.workdir, j.request.gpus, j.request.tags);
}

std::size_t Daemon::running_jobs() const {
  std::size_t n = 0;
  for (const auto& [id, j] : active_) n += j.state == JobState::Running;
  return n;
}

void Daemon::select_gpus(const std::vector<GpuStatus>& all) {
  const auto cap = static_cast<std::size_t>(cfg_.engine.telemetry_window_samples);
  // A GPU in MIG mode whose instances could not be listed cannot run CUDA work at all.
  auto usable = [](const GpuStatus& s) { return !s.mig_enabled; };
  auto add = [&](const GpuStatus& s) {
    for (const auto& g : gpus_)
      if (g.uuid == s.uuid) return;
    gpus_.push_back(Gpu{s.uuid, s.index, s, RollingWindow(cap), {}});
  };
  for (const auto& s : all)
    if (!usable(s))
      fmt::print(stderr, "aegisd: GPU {} ({}) is in MIG mode but its instances could not be listed; not scheduled\n",
                 s.index, s.uuid);
  if (cfg_.daemon.gpus == "all") {
    for (const auto& s : all)
      if (usable(s)) add(s);
  } else {
    std::string list = cfg_.daemon.gpus;
    std::size_t pos = 0;
    while (pos <= list.size()) {
      const std::size_t comma = std::min(list.find(',', pos), list.size());
      const std::string tok = list.substr(pos, comma - pos);
      pos = comma + 1;
      if (tok.empty()) continue;
      // An index names a whole GPU: all of its MIG instances when it is cut into them.
      bool found = false;
      for (const auto& s : all) {
        if (s.uuid != tok && std::to_string(s.index) != tok) continue;
        if (!usable(s)) throw ConfigError("gpus: GPU '" + tok + "' is in MIG mode but its instances could not be listed");
        add(s);
        found = true;
      }
      if (!found) throw ConfigError("gpus: no GPU '" + tok + "' on this server");
    }
  }
  if (gpus_.empty()) throw ConfigError("gpus: no GPU to schedule");
}

void Daemon::recover_jobs(Seconds now) {
  // Every unfinished job comes back; running ones are checked at the first sample, where
  // attempts that still run are kept and the others are classified from their records.
  for (auto& j : store_.unfinished()) {
    if (j.state == JobState::Running && j.current()) {
      const Attempt& a = *j.current();
      store_.event(j.id, now, "recover", "daemon restarted; attempt " + std::to_string(a.number));
      if (a.ended_at && (a.outcome == "oom" || a.outcome == "failed")) {
        // It ended and was classified, but the engine had not decided yet: ask it again.
        pending_failures_.push_back(
            {running_view(j), a.outcome == "oom" ? FailureKind::Oom : FailureKind::Other, a.detail});
      } else if (j.cancel_requested && !a.ended_at) {
        cancel_signals_.push_back(j.id);  // the signal may not have been sent
      }
    }
    active_.emplace(j.id, std::move(j));
  }
  send_cancel_signals(now);
}

void Daemon::save(const DaemonJob& job, const std::string& event, const std::string& detail, Seconds now) {
  store_.update(job);
  if (!event.empty()) store_.event(job.id, now, event, detail);
}

// ---------------------------------------------------------------------------------------
// Sampling: telemetry, first activity, ended attempts.

void Daemon::sample_and_schedule(Seconds now) {
  try {
    const auto all = source_->sample();
    for (auto& g : gpus_) {
      auto it = std::find_if(all.begin(), all.end(), [&](const GpuStatus& s) { return s.uuid == g.uuid; });
      if (it == all.end()) continue;
      g.status = *it;
      g.window.push(it->sample());
      g.window.copy_to(g.window_copy);
    }
    gpu_error_.clear();
  } catch (const std::exception& e) {
    gpu_error_ = e.what();  // keep the last good telemetry; try again next tick
  }
  Tx tx(store_);
  note_activity(now);
  collect_exits(now, pending_failures_);
  cancel_orphans(now);
  tx.commit();
  send_cancel_signals(now);
  schedule(now);
}

void Daemon::note_activity(Seconds now) {
  // GPU processes belong to the job whose session they are in (its process group). A
  // job's first process seen on one of its GPUs starts its observation window; the memory
  // of its processes on a GPU, summed, gives its peak for the history estimator.
  std::map<pid_t, DaemonJob*> by_session;
  for (auto& [id, j] : active_)
    if (j.state == JobState::Running && j.current() && j.current()->pgid > 0 && !j.current()->ended_at)
      by_session[j.current()->pgid] = &j;
  if (by_session.empty()) return;
  for (const auto& g : gpus_) {
    std::map<DaemonJob*, MiB> used_here;
    for (const auto& p : g.status.processes) {
      const auto sid = session_of(static_cast<pid_t>(p.pid));
      if (!sid) continue;
      auto it = by_session.find(*sid);
      if (it == by_session.end()) continue;
      DaemonJob& j = *it->second;
      const auto& uuids = j.current()->gpu_uuids;
      if (std::find(uuids.begin(), uuids.end(), g.uuid) == uuids.end()) continue;
      used_here[&j] += p.used_mib.value_or(0);
      if (!j.current()->first_activity) {
        j.current()->first_activity = now;
        save(j, "activity", "first process on " + g.uuid, now);
      }
    }
    for (auto& [j, mib] : used_here) j->current()->peak_mib = std::max(j->current()->peak_mib, mib);
  }
}

void Daemon::collect_exits(Seconds now, std::vector<Failure>& failures) {
  std::vector<JobId> done;
  for (auto& [id, j] : active_) {
    if (j.state != JobState::Running || !j.current() || j.current()->ended_at) continue;
    Attempt& a = *j.current();
    const AttemptDir dir = attempt_dir(cfg_.daemon.state_dir, id, a.number);
    if (a.pgid == 0)
      if (auto pg = read_child_pgid(dir)) {
        a.pgid = *pg;
        save(j, "", "", now);
      }
    if (attempt_alive(dir)) continue;
    const auto exit = read_exit(dir);
    if (!exit && a.pgid > 0 && group_alive(a.pgid)) {
      // Its shim is gone but the job runs on: keep watching its process group.
      auto k = kill_at_.find(id);
      if (k != kill_at_.end() && now >= k->second) signal_group(a.pgid, SIGKILL);
      continue;
    }
    kill_at_.erase(id);
    const std::string tail = read_tail(dir.stderr_log(), 64 * 1024) + "\n" + read_tail(dir.stdout_log(), 16 * 1024);
    const auto v = classify_exit(exit ? std::optional<int>(exit->wait_status) : std::nullopt, tail,
                                 j.cancel_requested || (exit && exit->cancelled));
    const Seconds ended = exit ? exit->ended_at : now;
    switch (v.kind) {
      case ExitKind::Success:
        if (a.peak_mib > 0) {
          const std::string sig = signature_of(j);
          store_.record_peak(sig, a.peak_mib, now);
          history_[sig] = std::max(history_[sig], a.peak_mib);
        }
        learned_cache_.erase(id);
        finish_attempt(j, "completed", v.reason, ended);
        j.state = JobState::Completed;
        j.ended_at = ended;
        j.reason.clear();
        save(j, "completed", v.reason, now);
        done.push_back(id);
        break;
      case ExitKind::Cancelled:
        finish_attempt(j, "cancelled", v.reason, ended);
        j.state = JobState::Cancelled;
        j.ended_at = ended;
        if (j.reason.empty()) j.reason = "cancelled";
        save(j, "cancelled", "", now);
        done.push_back(id);
        break;
      case ExitKind::Oom:
        finish_attempt(j, "oom", v.reason, ended);
        save(j, "oom", v.reason, now);
        failures.push_back({running_view(j), FailureKind::Oom, v.reason});
        break;
      case ExitKind::Failed:
        if (!exit && a.pgid == 0) {
          // It never started (the daemon died mid-launch): run it again, in its place.
          finish_attempt(j, "lost", "never started", ended);
          j.state = JobState::Queued;
          j.reason = "requeued: its launch was interrupted";
          save(j, "requeue", j.reason, now);
        } else if (!exit) {
          // It ended while nobody watched and left no sign of running out of memory.
          finish_attempt(j, "lost", v.reason, ended);
          j.state = JobState::Queued;
          j.reason = "requeued: " + v.reason;
          save(j, "requeue", v.reason, now);
        } else {
          finish_attempt(j, "failed", v.reason, ended);
          save(j, "exit", v.reason, now);
          failures.push_back({running_view(j), FailureKind::Other, v.reason});
        }
        break;
    }
  }
  for (JobId id : done) active_.erase(id);
}

void Daemon::cancel_orphans(Seconds now) {
  // An attached job whose `aegis run` is gone has nobody waiting for it: under Slurm that
  // is a scancel, a time limit or a killed batch script, and the job must not outlive it.
  std::vector<JobId> gone;
  for (auto& [id, j] : active_) {
    if (!j.attached_to || j.cancel_requested) continue;
    if (process_start_ticks(j.attached_to->pid) == j.attached_to->start_ticks) continue;
    request_cancel(j, now, fmt::format("its client (aegis run, pid {}) is gone", j.attached_to->pid));
    if (j.state == JobState::Cancelled) gone.push_back(id);
  }
  for (JobId id : gone) active_.erase(id);
}

void Daemon::finish_attempt(DaemonJob& job, const std::string& outcome, const std::string& detail, Seconds now) {
  Attempt& a = *job.current();
  a.ended_at = now;
  a.outcome = outcome;
  a.detail = detail;
  stats_.outcomes[outcome]++;
}

// ---------------------------------------------------------------------------------------
// Scheduling: the engine decides, the daemon records and acts.

// What the engine knows of a job: its request, its memory as declared, as recorded for
// earlier runs of the same job and as the learned model puts it, and its profile hints.
JobSpec Daemon::spec_of(const DaemonJob& j) const {
  JobSpec spec;
  spec.id = j.id;
  spec.name = j.request.name;
  spec.num_gpus = j.request.gpus;
  spec.submit_time = j.submitted_at;
  spec.estimates.declared = j.request.mem_mib;
  if (auto h = history_.find(signature_of(j)); h != history_.end()) spec.estimates.history = h->second;
  if (learned_ && j.request.model) {
    auto c = learned_cache_.find(j.id);
    if (c == learned_cache_.end()) c = learned_cache_.emplace(j.id, learned_->regression(*j.request.model)).first;
    spec.estimates.learned = c->second;
  }
  spec.hints.gpu_util = j.request.hint_gpu_util;
  spec.hints.sharing_score = j.request.hint_sharing_score;
  return spec;
}

RunningJob Daemon::running_view(const DaemonJob& j) const {
  RunningJob r;
  const Attempt& a = *j.current();
  r.spec = spec_of(j);
  r.recovery = j.recovery;
  for (const auto& u : a.gpu_uuids)
    for (std::size_t i = 0; i < gpus_.size(); ++i)
      if (gpus_[i].uuid == u) r.gpus.push_back(static_cast<int>(i));
  r.launched_at = a.launched_at;
  r.first_activity = a.first_activity;
  r.exclusive = a.exclusive;
  r.admitted_mib = a.admitted_mib;
  r.free_at_placement = a.free_at_placement;
  r.gpu_total_mib = a.gpu_total_mib;
  return r;
}

QueuedJob Daemon::queued_view(const DaemonJob& j) const { return {spec_of(j), j.recovery}; }

// The GPUs as the engine sees them, from the last sample (windows point into gpus_).
std::vector<GpuView> Daemon::views() const {
  std::vector<GpuView> out;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    const auto& g = gpus_[i];
    GpuView v;
    v.index = static_cast<int>(i);
    v.uuid = g.uuid;
    v.total_mib = g.status.total_mib;
    v.free_mib = g.status.free_mib;
    v.process_count = 0;
    for (const auto& p : g.status.processes) v.process_count += is_mps_server(static_cast<pid_t>(p.pid)) ? 0 : 1;
    v.level = g.status.level();
    v.mig_instance = !g.status.parent_uuid.empty();
    v.window = g.window_copy;
    out.push_back(v);
  }
  return out;
}

void Daemon::schedule(Seconds now) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<const DaemonJob*> queued;
  std::vector<RunningJob> running;
  for (const auto& [id, j] : active_) {
    if (j.state == JobState::Queued) queued.push_back(&j);
    if (j.state == JobState::Running && j.current() && !j.current()->ended_at) running.push_back(running_view(j));
  }
  std::sort(queued.begin(), queued.end(), [](auto* a, auto* b) { return a->queue_seq < b->queue_seq; });
  JobQueue main_q, recovery_q;
  for (const auto* j : queued) (j->in_recovery_queue ? recovery_q : main_q).push_back(queued_view(*j));
  if (main_q.empty() && recovery_q.empty() && pending_failures_.empty()) return;

  const std::vector<GpuView> gpu_views = views();
  Snapshot s;
  s.now = now;
  s.main_queue = &main_q;
  s.recovery_queue = &recovery_q;
  s.gpus = gpu_views;
  s.running = running;
  s.failures = pending_failures_;
  s.state = engine_state_;
  const Decisions d = engine_.tick(s);
  const double decide = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (stats_.recent_decide_seconds.size() >= 1024) stats_.recent_decide_seconds.erase(stats_.recent_decide_seconds.begin());
  stats_.recent_decide_seconds.push_back(decide);
  pending_failures_.clear();
  engine_state_ = d.state;
  blocked_reason_ = d.blocked ? d.blocked->reason : "";
  apply(d, now);

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.ticks++;
  stats_.tick_seconds_sum += secs;
  stats_.tick_seconds_max = std::max(stats_.tick_seconds_max, secs);
  if (stats_.recent_tick_seconds.size() >= 1024) stats_.recent_tick_seconds.erase(stats_.recent_tick_seconds.begin());
  stats_.recent_tick_seconds.push_back(secs);
}

void Daemon::apply(const Decisions& d, Seconds now) {
  {
    Tx tx(store_);
    for (const auto& r : d.requeues) {
      auto it = active_.find(r.job);
      if (it == active_.end()) continue;
      DaemonJob& j = it->second;
      j.state = JobState::Queued;
      j.in_recovery_queue = true;
      j.recovery = r.recovery;
      j.queue_seq = store_.next_queue_seq();
      j.reason = r.why;
      save(j, "requeue", r.why, now);
    }
    for (const auto& st : d.stops) {
      auto it = active_.find(st.job);
      if (it == active_.end()) continue;
      DaemonJob& j = it->second;
      j.state = JobState::Failed;
      j.ended_at = now;
      j.reason = st.reason;
      save(j, "failed", st.reason, now);
      active_.erase(it);
    }
    tx.commit();
  }
  for (const auto& l : d.launches) {
    auto it = active_.find(l.job);
    if (it != active_.end()) launch(it->second, l, now);
  }
}

void Daemon::launch(DaemonJob& job, const Launch& l, Seconds now) {
  Attempt a;
  a.number = static_cast<int>(job.attempts.size()) + 1;
  a.launched_at = now;
  a.exclusive = l.exclusive;
  a.admitted_mib = l.admitted_mib;
  a.free_at_placement = l.free_at_placement;
  a.gpu_total_mib = std::numeric_limits<MiB>::max();
  for (int i : l.gpus) {
    a.gpu_uuids.push_back(gpus_[i].uuid);
    a.gpu_total_mib = std::min(a.gpu_total_mib, gpus_[i].status.total_mib);
  }
  job.attempts.push_back(a);
  job.state = JobState::Running;
  job.in_recovery_queue = false;
  job.reason.clear();
  if (!job.started_at) job.started_at = now;
  {
    // Recorded before the process exists: a crash from here on finds the attempt.
    Tx tx(store_);
    std::string gpus;
    for (const auto& u : a.gpu_uuids) gpus += (gpus.empty() ? "" : ",") + u;
    save(job, "launch", fmt::format("attempt {} on {}", a.number, gpus), now);
    tx.commit();
  }
  LaunchSpec spec;
  spec.dir = attempt_dir(cfg_.daemon.state_dir, job.id, a.number);
  spec.shim = cfg_.daemon.shim;
  spec.uid = job.uid;
  spec.gid = job.gid;
  spec.user = job.user;
  spec.workdir = job.request.workdir.empty() ? "/" : job.request.workdir;
  spec.argv = job.request.command;
  spec.env = job.request.env;
  // The emulated GPU's clients find its state through these (nothing else is passed on).
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (kv.rfind("AEGIS_EMULATED_", 0) == 0) {
      const auto eq = kv.find('=');
      spec.env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  std::string visible;
  for (const auto& u : job.current()->gpu_uuids) visible += (visible.empty() ? "" : ",") + u;
  spec.env["CUDA_VISIBLE_DEVICES"] = visible;
  for (auto& [k, v] : mps_environment(cfg_.daemon, !l.alone, static_cast<int>(l.gpus.size()),
                                      l.admitted_mib + cfg_.engine.memory_margin_mib))
    spec.env[k] = v;
  spec.env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  spec.env["AEGIS_JOB_ID"] = std::to_string(job.id);
  spec.kill_grace_s = cfg_.daemon.kill_grace_s;
  try {
    job.current()->shim_pid = launch_attempt(spec);
    Tx tx(store_);
    save(job, "", "", now);
    tx.commit();
  } catch (const std::exception& e) {
    Tx tx(store_);
    finish_attempt(job, "failed", e.what(), now);
    job.state = JobState::Failed;
    job.ended_at = now;
    job.reason = std::string("cannot start: ") + e.what();
    save(job, "failed", job.reason, now);
    tx.commit();
    active_.erase(job.id);
  }
}

// ---------------------------------------------------------------------------------------
// The API.

json Daemon::handle(const api::Request& request, const Caller& caller) {
  try {
    return std::visit(
        [&](const auto& r) -> json {
          using T = std::decay_t<decltype(r)>;
          if constexpr (std::is_same_v<T, api::SubmitRequest>) return submit(r, caller);
          else if constexpr (std::is_same_v<T, api::ListRequest>) return list(r);
          else if constexpr (std::is_same_v<T, api::ShowRequest>) return show(r, caller);
          else if constexpr (std::is_same_v<T, api::CancelRequest>) return cancel(r, caller);
          else if constexpr (std::is_same_v<T, api::LogsRequest>) return logs(r, caller);
          else if constexpr (std::is_same_v<T, api::GpusRequest>) return gpus_reply();
          else if constexpr (std::is_same_v<T, api::HistoryRequest>) {
            json jobs = json::array();
            for (const auto& j : store_.list(true, r.limit)) jobs.push_back(public_view(j, false));
            return {{"ok", true}, {"jobs", jobs}};
          } else {
            return {{"ok", true}, {"version", "aegisd 0.1.0"}};
          }
        },
        request);
  } catch (const StoreError& e) {
    return error_reply(std::string("internal: ") + e.what());
  }
}

bool Daemon::may_manage(const Caller& c, uid_t owner) const {
  if (c.uid == 0 || c.uid == owner) return true;
  if (cfg_.daemon.admin_group.empty()) return false;
  group* g = getgrnam(cfg_.daemon.admin_group.c_str());
  if (!g) return false;
  if (c.gid == g->gr_gid) return true;
  const auto name = user_name(c.uid);
  if (!name) return false;
  for (char** m = g->gr_mem; m && *m; ++m)
    if (*name == *m) return true;
  return false;
}

json Daemon::submit(const api::SubmitRequest& r, const Caller& c) {
  const auto& req = r.job;
  if (req.gpus > static_cast<int>(gpus_.size()))
    return error_reply(fmt::format("job.gpus: {} GPUs requested; this server schedules {}", req.gpus, gpus_.size()));
  if (req.gpus > 1) {
    const auto whole = std::count_if(gpus_.begin(), gpus_.end(), [](const Gpu& g) { return g.status.parent_uuid.empty(); });
    if (req.gpus > whole)
      return error_reply(fmt::format("job.gpus: {} GPUs requested; a process can use only one MIG instance and "
                                     "this server schedules {} whole GPU(s)", req.gpus, whole));
  }
  MiB largest = 0;
  for (const auto& g : gpus_) largest = std::max(largest, g.status.total_mib);
  if (req.mem_mib && *req.mem_mib > largest)
    return error_reply(fmt::format("job.mem: {} MiB per GPU requested; the largest GPU here has {} MiB", *req.mem_mib, largest));
  const auto user = user_name(c.uid);
  if (!user) return error_reply(fmt::format("caller: uid {} has no user account on this server", c.uid));
  if (geteuid() != 0 && c.uid != geteuid())
    return error_reply(fmt::format("permission denied: aegisd runs as uid {} and can only run that user's jobs", geteuid()));
  if (!req.workdir.empty()) {
    struct stat st {};
    if (stat(req.workdir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return error_reply("job.workdir: " + req.workdir + " is not a directory on this server");
  }
  DaemonJob j;
  j.uid = c.uid;
  j.gid = c.gid;
  j.user = *user;
  j.request = req;
  j.state = JobState::Queued;
  j.submitted_at = clock_now();
  j.recovery.exclusive_only = req.exclusive;
  if (r.attach) {
    const auto start = process_start_ticks(c.pid);
    if (!start) return error_reply("attach: the calling process cannot be identified (no peer pid)");
    j.attached_to = ClientProcess{c.pid, *start};
  }
  Tx tx(store_);
  store_.insert(j);
  store_.event(j.id, j.submitted_at, "submit", fmt::format("by {} (uid {})", j.user, j.uid));
  tx.commit();
  stats_.submissions++;
  const JobId id = j.id;
  active_.emplace(id, std::move(j));
  return {{"ok", true}, {"id", id}};
}

json Daemon::list(const api::ListRequest& r) {
  json jobs = json::array();
  if (r.all) {
    for (const auto& j : store_.list(true, 100000)) jobs.push_back(public_view(j, false));
    return {{"ok", true}, {"jobs", jobs}};
  }
  std::vector<const DaemonJob*> v;
  for (const auto& [id, j] : active_) v.push_back(&j);
  // Running first, then the queue in the order it will be served.
  std::sort(v.begin(), v.end(), [](auto* a, auto* b) {
    auto key = [](const DaemonJob* j) {
      return std::make_tuple(j->state == JobState::Running ? 0 : j->in_recovery_queue ? 1 : 2, j->queue_seq);
    };
    return key(a) < key(b);
  });
  for (const auto* j : v) jobs.push_back(public_view(*j, false));
  return {{"ok", true}, {"jobs", jobs}, {"waiting_because", blocked_reason_}};
}

std::optional<DaemonJob> Daemon::find(JobId id) {
  auto it = active_.find(id);
  if (it != active_.end()) return it->second;
  return store_.get(id);
}

json Daemon::show(const api::ShowRequest& r, const Caller& c) {
  const auto j = find(r.id);
  if (!j) return error_reply(fmt::format("job {}: no such job", r.id));
  json v = public_view(*j, may_manage(c, j->uid));
  json events = json::array();
  for (const auto& e : store_.events(r.id)) events.push_back({{"t", e.t}, {"kind", e.kind}, {"detail", e.detail}});
  v["events"] = events;
  return {{"ok", true}, {"job", v}};
}

void Daemon::request_cancel(DaemonJob& j, Seconds now, const std::string& why) {
  if (j.state == JobState::Queued) {
    j.state = JobState::Cancelled;
    j.ended_at = now;
    j.reason = "cancelled before it started" + (why.empty() ? "" : ": " + why);
    save(j, "cancelled", j.reason, now);
    return;
  }
  // Recorded first, signalled after the commit (send_cancel_signals).
  j.cancel_requested = true;
  j.reason = why.empty() ? "" : "cancelled: " + why;
  save(j, "cancel", why.empty() ? "requested" : why, now);
  cancel_signals_.push_back(j.id);
}

void Daemon::send_cancel_signals(Seconds now) {
  for (JobId id : cancel_signals_) {
    auto it = active_.find(id);
    if (it == active_.end() || !it->second.current()) continue;
    const Attempt& a = *it->second.current();
    if (a.ended_at) continue;
    if (attempt_alive(attempt_dir(cfg_.daemon.state_dir, id, a.number)) && a.shim_pid > 0) {
      kill(a.shim_pid, SIGTERM);  // its shim stops the job's process group, SIGKILL after the grace
    } else if (a.pgid > 0) {
      signal_group(a.pgid, SIGTERM);
      kill_at_[id] = now + cfg_.daemon.kill_grace_s;
    }
  }
  cancel_signals_.clear();
}

json Daemon::cancel(const api::CancelRequest& r, const Caller& c) {
  // All or nothing: every id must exist and be the caller's to cancel.
  std::vector<DaemonJob*> targets;
  for (JobId id : r.ids) {
    auto it = active_.find(id);
    if (it == active_.end()) {
      if (auto old = store_.get(id))
        return error_reply(fmt::format("job {}: already {}", id, to_string(old->state)));
      return error_reply(fmt::format("job {}: no such job", id));
    }
    if (!may_manage(c, it->second.uid))
      return error_reply(fmt::format("job {}: permission denied (it belongs to {})", id, it->second.user));
    targets.push_back(&it->second);
  }
  const Seconds now = clock_now();
  json ids = json::array();
  Tx tx(store_);
  for (auto* j : targets) {
    request_cancel(*j, now);
    ids.push_back(j->id);
  }
  tx.commit();
  if (!store_.in_transaction()) send_cancel_signals(now);  // else after the group commit
  std::vector<JobId> gone;
  for (auto* j : targets)
    if (j->state == JobState::Cancelled) gone.push_back(j->id);
  for (JobId id : gone) active_.erase(id);
  return {{"ok", true}, {"cancelled", ids}};
}

json Daemon::logs(const api::LogsRequest& r, const Caller& c) {
  const auto j = find(r.id);
  if (!j) return error_reply(fmt::format("job {}: no such job", r.id));
  if (!may_manage(c, j->uid)) return error_reply(fmt::format("job {}: permission denied (it belongs to {})", r.id, j->user));
  if (j->attempts.empty()) return {{"ok", true}, {"data", ""}, {"offset", 0}, {"eof", is_final(j->state)}};
  const AttemptDir dir = attempt_dir(cfg_.daemon.state_dir, j->id, j->current()->number);
  const std::string path = r.stderr_stream ? dir.stderr_log() : dir.stdout_log();
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  std::uint64_t size = f ? static_cast<std::uint64_t>(f.tellg()) : 0;
  const std::uint64_t from = std::min(r.offset, size);
  const std::uint64_t n = std::min<std::uint64_t>(r.max_bytes, size - from);
  std::string data(n, '\0');
  if (f && n > 0) {
    f.seekg(static_cast<std::streamoff>(from));
    f.read(data.data(), static_cast<std::streamsize>(n));
  }
  const bool attempt_over = j->current()->ended_at.has_value() || is_final(j->state);
  return {{"ok", true},
          {"data", data},
          {"offset", from + n},
          {"attempt", j->current()->number},
          {"eof", attempt_over && from + n >= size}};
}

json Daemon::gpus_reply() const {
  const std::vector<GpuView> gpu_views = views();
  std::vector<RunningJob> running;
  std::map<int, std::vector<JobId>> jobs_on;
  for (const auto& [id, j] : active_)
    if (j.state == JobState::Running && j.current()) {
      running.push_back(running_view(j));
      for (int g : running.back().gpus) jobs_on[g].push_back(id);
    }
  Snapshot s;
  s.now = clock_now();
  s.gpus = gpu_views;
  s.running = running;
  const auto reports = engine_.report(s);
  json out = json::array();
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    const auto& st = gpus_[i].status;
    const auto& r = reports[i];
    auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
    out.push_back({{"index", i},
                   {"nvml_index", st.index},
                   {"uuid", st.uuid},
                   {"name", st.name},
                   {"memory_total_mib", st.total_mib},
                   {"memory_used_mib", st.used_mib},
                   {"memory_free_mib", st.free_mib},
                   {"utilization", opt(st.util)},
                   {"smact", opt(st.smact)},
                   {"smocc", opt(st.smocc)},
                   {"drama", opt(st.drama)},
                   {"power_w", opt(st.power_w)},
                   {"telemetry", st.level() == TelemetryLevel::Full     ? "full"
                                 : st.level() == TelemetryLevel::Coarse ? "coarse"
                                                                        : "memory-only"},
                   {"risk", {{"smact", r.risk_smact}, {"smocc", r.risk_smocc}, {"drama", r.risk_drama}, {"util", r.risk_util}}},
                   {"observing", r.observing},
                   {"opens_at", r.opens_at ? json(*r.opens_at) : json(nullptr)},
                   {"jobs", jobs_on[static_cast<int>(i)]},
                   {"processes", st.processes.size()}});
  }
  return {{"ok", true}, {"gpus", out}, {"source", source_->describe()}, {"error", gpu_error_}};
}

// ---------------------------------------------------------------------------------------
// Metrics (Prometheus text format 0.0.4).

std::string Daemon::metrics_text() const {
  std::string o;
  auto line = [&](const std::string& s) { o += s + "\n"; };
  line("# HELP aegis_gpu_memory_used_mib GPU memory in use (NVML)");
  line("# TYPE aegis_gpu_memory_used_mib gauge");
  for (const auto& g : gpus_) line(fmt::format("aegis_gpu_memory_used_mib{{gpu=\"{}\"}} {}", g.uuid, g.status.used_mib));
  line("# HELP aegis_gpu_memory_total_mib GPU memory capacity (NVML)");
  line("# TYPE aegis_gpu_memory_total_mib gauge");
  for (const auto& g : gpus_) line(fmt::format("aegis_gpu_memory_total_mib{{gpu=\"{}\"}} {}", g.uuid, g.status.total_mib));
  const auto reply = gpus_reply();
  line("# HELP aegis_gpu_risk Risk score of the telemetry window per metric (engine's pressure filter input)");
  line("# TYPE aegis_gpu_risk gauge");
  for (const auto& g : reply["gpus"])
    for (const char* m : {"smact", "smocc", "drama", "util"})
      line(fmt::format("aegis_gpu_risk{{gpu=\"{}\",metric=\"{}\"}} {}", g["uuid"].get<std::string>(), m,
                       g["risk"][m].get<double>()));
  line("# HELP aegis_gpu_jobs Jobs running on the GPU");
  line("# TYPE aegis_gpu_jobs gauge");
  for (const auto& g : reply["gpus"])
    line(fmt::format("aegis_gpu_jobs{{gpu=\"{}\"}} {}", g["uuid"].get<std::string>(), g["jobs"].size()));
  line("# HELP aegis_gpu_observing 1 while the GPU's observation window is closed");
  line("# TYPE aegis_gpu_observing gauge");
  for (const auto& g : reply["gpus"])
    line(fmt::format("aegis_gpu_observing{{gpu=\"{}\"}} {}", g["uuid"].get<std::string>(), g["observing"].get<bool>() ? 1 : 0));
  std::int64_t main_q = 0, rec_q = 0, running = 0;
  for (const auto& [id, j] : active_) {
    if (j.state == JobState::Running) ++running;
    else if (j.in_recovery_queue) ++rec_q;
    else ++main_q;
  }
  line("# HELP aegis_queue_length Jobs waiting, per queue");
  line("# TYPE aegis_queue_length gauge");
  line(fmt::format("aegis_queue_length{{queue=\"main\"}} {}", main_q));
  line(fmt::format("aegis_queue_length{{queue=\"recovery\"}} {}", rec_q));
  line("# HELP aegis_jobs_running Jobs running");
  line("# TYPE aegis_jobs_running gauge");
  line(fmt::format("aegis_jobs_running {}", running));
  line("# HELP aegis_attempts_total Job attempts that ended, by outcome (since the daemon started)");
  line("# TYPE aegis_attempts_total counter");
  for (const char* k : {"completed", "oom", "failed", "cancelled", "lost"})
    line(fmt::format("aegis_attempts_total{{outcome=\"{}\"}} {}", k, stats_.outcomes.count(k) ? stats_.outcomes.at(k) : 0));
  line("# HELP aegis_oom_attempts_total Attempts that died of out-of-memory");
  line("# TYPE aegis_oom_attempts_total counter");
  line(fmt::format("aegis_oom_attempts_total {}", stats_.outcomes.count("oom") ? stats_.outcomes.at("oom") : 0));
  line("# HELP aegis_submissions_total Jobs accepted");
  line("# TYPE aegis_submissions_total counter");
  line(fmt::format("aegis_submissions_total {}", stats_.submissions));
  std::vector<double> v = stats_.recent_tick_seconds, e = stats_.recent_decide_seconds;
  std::sort(v.begin(), v.end());
  std::sort(e.begin(), e.end());
  auto quant = [](const std::vector<double>& x, double p) {
    return x.empty() ? 0.0 : x[static_cast<std::size_t>(p * static_cast<double>(x.size() - 1))];
  };
  auto q = [&](double p) { return quant(v, p); };
  line("# HELP aegis_decide_seconds Snapshot building and engine tick (no actions), recent passes");
  line("# TYPE aegis_decide_seconds summary");
  line(fmt::format("aegis_decide_seconds{{quantile=\"0.5\"}} {:.9f}", quant(e, 0.5)));
  line(fmt::format("aegis_decide_seconds{{quantile=\"0.99\"}} {:.9f}", quant(e, 0.99)));
  line(fmt::format("aegis_decide_seconds_count {}", e.size()));
  line("# HELP aegis_tick_seconds Scheduling pass latency (engine tick and actions), recent passes");
  line("# TYPE aegis_tick_seconds summary");
  line(fmt::format("aegis_tick_seconds{{quantile=\"0.5\"}} {:.9f}", q(0.5)));
  line(fmt::format("aegis_tick_seconds{{quantile=\"0.99\"}} {:.9f}", q(0.99)));
  line(fmt::format("aegis_tick_seconds_sum {:.9f}", stats_.tick_seconds_sum));
  line(fmt::format("aegis_tick_seconds_count {}", stats_.ticks));
  return o;
}

}  // namespace aegis
