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
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "estimate/history.h"
#include "runtime/job/classify.h"
#include "runtime/job/job_json.h"
#include "runtime/launch/attempt_dir.h"
#include "runtime/launch/launcher.h"
#include "runtime/launch/proc.h"
#include "runtime/daemon/mps.h"
#include "runtime/store/id_floor.h"

extern char** environ;

namespace aegis {

namespace {

using nlohmann::json;

json error_reply(const std::string& msg) { return {{"ok", false}, {"error", msg}}; }

// An attempt whose shim ended before starting the job goes back to the queue; this many
// in a row end the job instead (something is wrong with the host, not with the job).
constexpr int kMaxUnstartedAttempts = 3;
// After a launch failed for want of disk, descriptors or memory, launches wait this long.
constexpr double kLaunchBackoffS = 5;
// Listings are sent in pages of this many jobs; `queue --all` lists this many at most.
constexpr std::size_t kListPage = 256;
constexpr std::int64_t kMaxListed = 100000;
// The id watermark on disk (id_floor.h) runs this far ahead of the ids given out.
constexpr JobId kIdFloorStep = 1000;
// A `logs` reply carries at most this much of a log (the client reads on): with JSON's
// escaping, one reply stays under a few MiB however the request's max_bytes is set.
constexpr std::uint64_t kMaxLogReply = 256 << 10;

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

// Whether `path` is a directory as the caller sees it: looked up with the caller's
// file-system identity (setfsuid), so that a root daemon tells no one whether a path they
// cannot reach exists.
bool is_directory_for(const std::string& path, const Caller& c) {
  const bool switch_id = geteuid() == 0 && c.uid != 0;
  if (switch_id) {
    setfsgid(c.gid);
    setfsuid(c.uid);
  }
  struct stat st {};
  const bool ok = stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  if (switch_id) {
    setfsuid(geteuid());
    setfsgid(getegid());
  }
  return ok;
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
  // Ids are never reused on this host, even if the database was lost (id_floor.h).
  id_floor_recorded_ = highest_job_id_on_disk(cfg_.daemon.state_dir);
  store_.reserve_ids_above(id_floor_recorded_);
  if (!cfg_.daemon.learned_model.empty()) {
    try {
      learned_ = LearnedModel::load(cfg_.daemon.learned_model);
    } catch (const std::exception& e) {
      throw ConfigError(std::string("learned_model: ") + e.what());
    }
  }
  history_ = store_.peaks();
  select_gpus(source_->sample());
  setup_tracking();
  recover_jobs(clock_now(), true);
}

Daemon::~Daemon() {
  for (const auto& [id, fd] : shim_pidfds_) close(fd);
  if (!cgroup_base_.empty()) remove_cgroup(cgroup_mount_ + cgroup_base_);  // fails while jobs run: fine
}

void Daemon::setup_tracking() {
  const std::string& mode = cfg_.daemon.job_tracking;
  if (mode == "descendants") return;
  // One directory per daemon, named after its state directory (several daemons may share
  // a host, as in the tests): <own cgroup>/aegis/<device>-<inode>.
  struct stat st {};
  if (stat(cfg_.daemon.state_dir.c_str(), &st) != 0)
    throw ConfigError("state_dir: " + cfg_.daemon.state_dir + ": " + std::strerror(errno));
  std::string why;
  const std::string mount = cgroup2_mount();
  const auto base = prepare_cgroup_base(mount, fmt::format("{}-{}", st.st_dev, st.st_ino), &why);
  if (base) {
    cgroup_mount_ = mount;
    cgroup_base_ = *base;
    return;
  }
  if (mode == "cgroup") throw ConfigError("job_tracking = cgroup: " + why);
  fmt::print(stderr, "aegisd: no cgroup for jobs ({}); tracking each job as its shim's descendants\n", why);
}

std::string Daemon::tracking() const {
  return cgroup_base_.empty() ? "descendants of each job's shim" : "cgroup " + cgroup_mount_ + cgroup_base_;
}

void Daemon::reload_after_store_error(Seconds now, const std::string& what) {
  if (what != storage_error_) fmt::print(stderr, "aegisd: storage: {}; state reloaded from the database\n", what);
  storage_error_ = what;
  // Nothing that failed to commit was acted on: cancels are signalled after their commit,
  // launches are recorded before their shim starts. So the database is the truth.
  if (store_.in_transaction()) store_.rollback();
  active_.clear();
  cancel_signals_.clear();
  pending_failures_.clear();
  learned_cache_.clear();
  try {
    recover_jobs(now, false);
  } catch (const std::exception& e) {
    fmt::print(stderr, "aegisd: storage: cannot reload the jobs: {}\n", e.what());
  }
}

// A job's history is its user's alone: another user running the same command must not
// change the estimate this user's jobs are admitted with.
static std::string signature_of(const DaemonJob& j) {
  return "uid " + std::to_string(j.uid) + ": " +
         job_signature(j.request.command, j.request.workdir, j.request.gpus, j.request.tags);
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

void Daemon::recover_jobs(Seconds now, bool restarted) {
  // Every unfinished job comes back; running ones are checked at the first sample, where
  // attempts that still run are kept and the others are classified from their records.
  for (auto& j : store_.unfinished()) {
    if (j.state == JobState::Running && j.current()) {
      const Attempt& a = *j.current();
      try {  // a note for `aegis show`; not worth failing a start on a full disk
        if (restarted) store_.event(j.id, now, "recover", "daemon restarted; attempt " + std::to_string(a.number));
      } catch (const StoreError&) {
      }
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
  for (const auto& q : store_.last_quarantined())
    fmt::print(stderr, "aegisd: warning: job {}: unreadable record set aside (table quarantine): {}\n", q.id, q.reason);
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
  // GPU processes belong to the job whose cgroup they are in (else: whose shim they
  // descend from), however they got there (double fork, setsid). A job's first process
  // seen on one of its GPUs starts its observation window; the memory of all its
  // processes on a GPU, summed, gives its peak for the history estimator.
  bool any = false;
  for (const auto& [id, j] : active_) any |= j.state == JobState::Running && j.current() && !j.current()->ended_at;
  if (!any) return;
  std::map<std::string, DaemonJob*> by_cgroup;
  for (const auto& g : gpus_) {
    std::map<DaemonJob*, MiB> used_here;
    for (const auto& p : g.status.processes) {
      DaemonJob* owner = owner_of_gpu_process(static_cast<pid_t>(p.pid), by_cgroup);
      if (!owner) continue;
      DaemonJob& j = *owner;
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

DaemonJob* Daemon::owner_of_gpu_process(pid_t pid, std::map<std::string, DaemonJob*>& by_cgroup) {
  // Built once per sample: each running attempt's cgroup, as its shim recorded it.
  if (by_cgroup.empty()) {
    by_cgroup[""] = nullptr;
    for (auto& [id, j] : active_)
      if (j.state == JobState::Running && j.current() && !j.current()->ended_at)
        if (const auto c = read_child(attempt_dir(cfg_.daemon.state_dir, id, j.current()->number));
            c.written() && !c.value.cgroup.empty())
          by_cgroup[c.value.cgroup] = &j;
  }
  if (const auto cg = cgroup_of(pid)) {
    auto it = by_cgroup.find(*cg);
    if (it != by_cgroup.end() && it->second) return it->second;
  }
  for (auto& [id, j] : active_) {
    if (j.state != JobState::Running || !j.current() || j.current()->ended_at) continue;
    if (auto procs = processes_of(j); procs && procs->contains(pid)) return &j;
  }
  return nullptr;
}

// The processes of a job's current attempt, from what its shim recorded; empty while it
// has recorded nothing (then the job has not started).
std::optional<JobProcesses> Daemon::processes_of(const DaemonJob& j) const {
  const Attempt& a = *j.current();
  const auto child = read_child(attempt_dir(cfg_.daemon.state_dir, j.id, a.number));
  if (!child.written()) return std::nullopt;
  const ChildRecord& c = child.value;
  if (!c.cgroup.empty()) return JobProcesses::cgroup(c.cgroup_mount, c.cgroup);
  // Without cgroups: the shim's descendants while it lives, else the job's session (of
  // its user only, started after its shim: a reused session number is someone else's).
  if (c.shim.pid > 0 && process_start_ticks(c.shim.pid) == c.shim.start_ticks) return JobProcesses::descendants(c.shim);
  return JobProcesses::session(c.pgid, j.uid, c.shim.start_ticks);
}

void Daemon::collect_exits(Seconds now, std::vector<Failure>& failures) {
  std::vector<JobId> done;
  for (auto& [id, j] : active_) {
    if (j.state != JobState::Running || !j.current() || j.current()->ended_at) continue;
    Attempt& a = *j.current();
    const AttemptDir dir = attempt_dir(cfg_.daemon.state_dir, id, a.number);
    const Liveness live = attempt_liveness(dir);
    const auto child = read_child(dir);
    if (a.pgid == 0 && child.written()) {  // shown by `aegis show`
      a.pgid = child.value.pgid;
      save(j, "", "", now);
    }
    if (live == Liveness::Alive) continue;
    const auto exit = read_exit(dir);
    // Out of file descriptors, an I/O error: we cannot tell now, so we conclude nothing.
    if (live == Liveness::Unknown || child.status == Record<ChildRecord>::Unreadable ||
        exit.status == Record<ExitRecord>::Unreadable) {
      note_io_trouble(fmt::format("job {}: cannot read its attempt's records ({}); trying again",
                                  id, std::strerror(exit.error ? exit.error : child.error ? child.error : EIO)));
      continue;
    }
    if (!exit.written()) {
      if (const auto procs = processes_of(j); procs && procs->any()) {
        // Its shim is gone but the job runs on: keep watching it (and finish a cancel).
        auto k = kill_at_.find(id);
        if (k != kill_at_.end() && now >= k->second) procs->kill();
        continue;
      }
      kill_at_.erase(id);
      end_without_record(j, child.written(), now);
      if (is_final(j.state)) done.push_back(id);
      continue;
    }
    kill_at_.erase(id);
    if (auto fd = shim_pidfds_.find(id); fd != shim_pidfds_.end()) {
      close(fd->second);
      shim_pidfds_.erase(fd);
    }
    const ExitRecord& e = exit.value;
    if (!e.start_error.empty()) {
      // It never ran (exec failed, no such working directory, ...): running it again
      // would fail the same way, so it ends here, with the reason.
      const std::string why = "failed to start: " + e.start_error;
      finish_attempt(j, "failed", why, e.ended_at);
      save(j, "exit", why, now);
      failures.push_back({running_view(j), FailureKind::Other, why});
      continue;
    }
    const std::string tail = read_tail(dir.stderr_log(), 64 * 1024) + "\n" + read_tail(dir.stdout_log(), 16 * 1024);
    // Cancelled only if the cancel reached it: a job that ended on its own before the
    // cancel arrived keeps its real outcome.
    const bool killed = WIFSIGNALED(e.wait_status) && (WTERMSIG(e.wait_status) == SIGTERM || WTERMSIG(e.wait_status) == SIGKILL);
    const auto v = classify_exit(e.wait_status, tail, e.cancelled || (j.cancel_requested && killed));
    switch (v.kind) {
      case ExitKind::Success:
        if (a.peak_mib > 0) {
          const std::string sig = signature_of(j);
          store_.record_peak(sig, a.peak_mib, now);
          history_[sig] = std::max(history_[sig], a.peak_mib);
        }
        learned_cache_.erase(id);
        finish_attempt(j, "completed", v.reason, e.ended_at);
        j.state = JobState::Completed;
        j.ended_at = e.ended_at;
        j.reason.clear();
        save(j, "completed", v.reason, now);
        done.push_back(id);
        break;
      case ExitKind::Cancelled:
        finish_attempt(j, "cancelled", v.reason, e.ended_at);
        j.state = JobState::Cancelled;
        j.ended_at = e.ended_at;
        if (j.reason.empty()) j.reason = "cancelled";
        save(j, "cancelled", "", now);
        done.push_back(id);
        break;
      case ExitKind::Oom:
        finish_attempt(j, "oom", v.reason, e.ended_at);
        save(j, "oom", v.reason, now);
        failures.push_back({running_view(j), FailureKind::Oom, v.reason});
        break;
      case ExitKind::Failed:
        finish_attempt(j, "failed", v.reason, e.ended_at);
        save(j, "exit", v.reason, now);
        failures.push_back({running_view(j), FailureKind::Other, v.reason});
        break;
    }
  }
  for (JobId id : done) active_.erase(id);
}

// An attempt whose shim is gone without saying how the job ended. If the job never
// started it goes back to its place in the queue (a few times at most). If it may have
// run, it is never run again behind its user's back: it ends, with the reason, unless it
// was submitted as restartable (`aegis submit --restartable`).
void Daemon::end_without_record(DaemonJob& j, bool started, Seconds now) {
  const int number = j.current()->number;
  if (!started) {
    int never = 0;
    for (auto it = j.attempts.rbegin(); it != j.attempts.rend() && it->outcome == "lost" && it->detail == "never started"; ++it)
      ++never;
    finish_attempt(j, "lost", "never started", now);
    if (never + 1 >= kMaxUnstartedAttempts) {
      j.state = JobState::Failed;
      j.ended_at = now;
      j.reason = fmt::format("could not be started: its shim ended before starting it {} times in a row "
                             "(see aegisd's log)", never + 1);
      save(j, "failed", j.reason, now);
      return;
    }
    j.state = JobState::Queued;
    j.reason = "requeued: its launch was interrupted";
    save(j, "requeue", j.reason, now);
    return;
  }
  const std::string what = fmt::format(
      "outcome unknown: attempt {} ended without an exit record (its shim was killed, or its disk failed)", number);
  finish_attempt(j, "unknown", what, now);
  if (j.cancel_requested) {
    j.state = JobState::Cancelled;
    j.ended_at = now;
    if (j.reason.empty()) j.reason = "cancelled";
    save(j, "cancelled", what, now);
  } else if (j.request.restartable) {
    j.state = JobState::Queued;
    j.reason = "requeued (restartable): " + what;
    save(j, "requeue", j.reason, now);
  } else {
    j.state = JobState::Failed;
    j.ended_at = now;
    j.reason = what + "; not run again, as it might have run already (submit with --restartable to allow it)";
    save(j, "failed", j.reason, now);
  }
}

void Daemon::note_io_trouble(const std::string& what) {
  if (what != io_trouble_) fmt::print(stderr, "aegisd: {}\n", what);
  io_trouble_ = what;
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
  if (now < launch_backoff_until_) return;  // stays queued; the engine asks again later
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

  // What the shim will run: the job's argv and environment as data (launch_file.h).
  LaunchFile f;
  f.uid = job.uid;
  f.gid = job.gid;
  f.user = job.user;
  f.workdir = job.request.workdir.empty() ? "/" : job.request.workdir;
  f.argv = job.request.command;
  std::map<std::string, std::string> env = job.request.env;
  // The emulated GPU's clients find its state through these (nothing else is passed on).
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (kv.rfind("AEGIS_EMULATED_", 0) == 0) {
      const auto eq = kv.find('=');
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  std::string visible;
  for (const auto& u : a.gpu_uuids) visible += (visible.empty() ? "" : ",") + u;
  env["CUDA_VISIBLE_DEVICES"] = visible;
  for (auto& [k, v] : mps_environment(cfg_.daemon, !l.alone, static_cast<int>(l.gpus.size()),
                                      l.admitted_mib + cfg_.engine.memory_margin_mib))
    env[k] = v;
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  env["AEGIS_JOB_ID"] = std::to_string(job.id);
  for (const auto& [k, v] : env) f.env.push_back(k + "=" + v);
  f.kill_grace_s = cfg_.daemon.kill_grace_s;
  f.log_max_bytes = static_cast<std::uint64_t>(cfg_.daemon.log_max_bytes);
  f.log_tail_bytes = static_cast<std::uint64_t>(cfg_.daemon.log_tail_bytes);
  if (!cgroup_base_.empty()) {
    f.cgroup_mount = cgroup_mount_;
    f.cgroup = cgroup_base_ + fmt::format("/job-{}-{}", job.id, a.number);
  }

  // 1. Its files, before anything is recorded: a full disk stops us here, with the job
  //    still queued and nothing to undo.
  const AttemptDir dir = attempt_dir(cfg_.daemon.state_dir, job.id, a.number);
  try {
    prepare_attempt(dir, f);
  } catch (const LaunchError& e) {
    if (e.transient()) {
      launch_backoff_until_ = now + kLaunchBackoffS;
      job.reason = std::string("waiting: cannot prepare its launch: ") + e.what();
      note_io_trouble(fmt::format("job {}: {}; launches wait {} s", job.id, e.what(), kLaunchBackoffS));
      return;
    }
    Tx tx(store_);
    job.state = JobState::Failed;
    job.ended_at = now;
    job.reason = std::string("cannot start: ") + e.what();
    save(job, "failed", job.reason, now);
    tx.commit();
    active_.erase(job.id);
    return;
  }
  // 2. The attempt, recorded before the process exists: a crash from here on finds it.
  job.attempts.push_back(a);
  job.state = JobState::Running;
  job.in_recovery_queue = false;
  job.reason.clear();
  if (!job.started_at) job.started_at = now;
  {
    Tx tx(store_);
    save(job, "launch", fmt::format("attempt {} on {}", a.number, visible), now);
    tx.commit();
  }
  // 3. The shim.
  try {
    const StartedShim shim = start_shim(cfg_.daemon.shim, dir);
    job.current()->shim_pid = shim.pid;
    if (shim.pidfd >= 0) shim_pidfds_[job.id] = shim.pidfd;
    Tx tx(store_);
    save(job, "", "", now);
    tx.commit();
  } catch (const LaunchError& e) {
    // No process exists: the attempt never started.
    Tx tx(store_);
    if (e.transient()) {
      launch_backoff_until_ = now + kLaunchBackoffS;
      finish_attempt(job, "lost", "never started", now);
      job.state = JobState::Queued;
      job.reason = std::string("requeued: cannot start its shim: ") + e.what();
      save(job, "requeue", job.reason, now);
    } else {
      finish_attempt(job, "failed", e.what(), now);
      job.state = JobState::Failed;
      job.ended_at = now;
      job.reason = std::string("cannot start: ") + e.what();
      save(job, "failed", job.reason, now);
    }
    tx.commit();
    if (job.state == JobState::Failed) active_.erase(job.id);
  }
}

// ---------------------------------------------------------------------------------------
// The API.

void Daemon::storage_recovered() {
  if (!storage_error_.empty()) fmt::print(stderr, "aegisd: storage: writing works again\n");
  storage_error_.clear();
}

Reply Daemon::respond(const api::Request& request, const Caller& caller) {
  if (const auto* l = std::get_if<api::ListRequest>(&request)) return list(*l, caller);
  if (const auto* h = std::get_if<api::HistoryRequest>(&request)) return history(*h);
  Reply r;
  r.object = handle(request, caller);
  return r;
}

namespace {

// A listing sent in parts: `{"ok":true,"jobs":[`, then pages of jobs as the client reads
// them, then `],` the closing fields `}`. A page that fails to read (a damaged database)
// ends the listing early with "incomplete": the reason (the reply was already "ok").
Reply stream_jobs(std::function<std::vector<json>()> next_page, json tail) {
  struct State {
    bool started = false, first = true;
  };
  auto st = std::make_shared<State>();
  Reply r;
  r.more = [st, next_page = std::move(next_page), tail = std::move(tail)](std::string& out) mutable {
    auto dump = [](const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };
    if (!st->started) {
      st->started = true;
      out += "{\"ok\":true,\"jobs\":[";
      return true;
    }
    std::vector<json> page;
    try {
      page = next_page();
    } catch (const std::exception& e) {
      tail["incomplete"] = e.what();
    }
    if (page.empty()) {
      out += "]";
      for (auto it = tail.begin(); it != tail.end(); ++it) out += "," + dump(it.key()) + ":" + dump(it.value());
      out += "}\n";
      return false;
    }
    for (const auto& j : page) {
      if (!st->first) out += ",";
      st->first = false;
      out += dump(j);
    }
    return true;
  };
  return r;
}

}  // namespace

json Daemon::handle(const api::Request& request, const Caller& caller) {
  try {
    return std::visit(
        [&](const auto& r) -> json {
          using T = std::decay_t<decltype(r)>;
          if constexpr (std::is_same_v<T, api::SubmitRequest>) return submit(r, caller);
          else if constexpr (std::is_same_v<T, api::ListRequest>) return error_reply("internal: listings stream");
          else if constexpr (std::is_same_v<T, api::ShowRequest>) return show(r, caller);
          else if constexpr (std::is_same_v<T, api::CancelRequest>) return cancel(r, caller);
          else if constexpr (std::is_same_v<T, api::LogsRequest>) return logs(r, caller);
          else if constexpr (std::is_same_v<T, api::GpusRequest>) return gpus_reply();
          else if constexpr (std::is_same_v<T, api::HistoryRequest>) return error_reply("internal: listings stream");
          else {
            return {{"ok", true}, {"version", "aegisd 0.1.0"}};
          }
        },
        request);
  } catch (const StoreError& e) {
    // A damaged database or a full disk fails this request, not the daemon.
    return error_reply(e.what());
  } catch (const std::exception& e) {
    return error_reply(std::string("internal error: ") + e.what());
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
  if (!req.workdir.empty() && !is_directory_for(req.workdir, c))
    return error_reply("job.workdir: " + req.workdir + " is not a directory on this server (that you can reach)");
  if (cfg_.daemon.max_jobs_per_user > 0) {
    std::int64_t mine = 0;
    for (const auto& [id, j] : active_) mine += j.uid == c.uid;
    if (mine >= cfg_.daemon.max_jobs_per_user)
      return error_reply(fmt::format("job: {} has {} jobs queued or running, the most one user may have "
                                     "(max_jobs_per_user); submit more when some have ended",
                                     *user, mine));
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
  // The watermark first: nothing is inserted when it cannot be written (a full disk).
  if (const JobId next = store_.next_id(); next > id_floor_recorded_) {
    record_id_floor(cfg_.daemon.state_dir, next + kIdFloorStep - 1);
    id_floor_recorded_ = next + kIdFloorStep - 1;
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

// Everyone's jobs, as squeue shows them: users see where they stand. `mine` keeps the
// caller's own (the uid from the socket, never from the request).
// `queue`: everyone's queued and running jobs (running first, then the queue in the order
// it will be served), or with `all` every job, newest first; `mine`: the caller's only.
Reply Daemon::list(const api::ListRequest& r, const Caller& c) {
  const std::optional<uid_t> only = r.mine ? std::optional<uid_t>(c.uid) : std::nullopt;
  if (r.all) return jobs_from_store(kMaxListed, only, json::object());
  std::vector<std::pair<std::tuple<int, std::int64_t>, JobId>> order;
  for (const auto& [id, j] : active_)
    if (!only || j.uid == *only)
      order.push_back({{j.state == JobState::Running ? 0 : j.in_recovery_queue ? 1 : 2, j.queue_seq}, id});
  std::sort(order.begin(), order.end());
  auto ids = std::make_shared<std::vector<JobId>>();
  for (const auto& o : order) ids->push_back(o.second);
  auto pos = std::make_shared<std::size_t>(0);
  // Built as the client reads: a job that ended meanwhile is shown as it is by then.
  return stream_jobs(
      [this, ids, pos] {
        std::vector<json> page;
        for (; *pos < ids->size() && page.size() < kListPage; ++*pos) {
          const JobId id = (*ids)[*pos];
          if (auto it = active_.find(id); it != active_.end()) page.push_back(public_view(it->second, false));
          else if (auto j = store_.get(id)) page.push_back(public_view(*j, false));
        }
        return page;
      },
      json{{"waiting_because", blocked_reason_}});
}

Reply Daemon::history(const api::HistoryRequest& r) { return jobs_from_store(r.limit, std::nullopt, json::object()); }

// The newest `limit` jobs of the store (only `uid`'s when given), a page at a time.
Reply Daemon::jobs_from_store(std::int64_t limit, std::optional<uid_t> uid, json tail) {
  auto before = std::make_shared<JobId>(0);
  auto left = std::make_shared<std::int64_t>(limit);
  return stream_jobs(
      [this, before, left, uid] {
        std::vector<json> page;
        if (*left <= 0) return page;
        for (const auto& j : store_.list_page(*before, std::min<std::int64_t>(*left, kListPage), uid)) {
          page.push_back(public_view(j, false));
          *before = j.id;
        }
        *left = page.empty() ? 0 : *left - static_cast<std::int64_t>(page.size());
        return page;
      },
      std::move(tail));
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
  // Each signal goes through a pidfd, which names one process for good: the shim this
  // daemon started (or, after a restart, the one its record names, checked by start
  // time), else the job's own processes. Never a pid or process group read earlier.
  std::vector<JobId> later;
  for (JobId id : cancel_signals_) {
    auto it = active_.find(id);
    if (it == active_.end() || !it->second.current()) continue;
    const DaemonJob& j = it->second;
    const Attempt& a = *j.current();
    if (a.ended_at) continue;
    const AttemptDir dir = attempt_dir(cfg_.daemon.state_dir, id, a.number);
    if (auto fd = shim_pidfds_.find(id); fd != shim_pidfds_.end() && pidfd_signal(fd->second, SIGTERM)) continue;
    const auto child = read_child(dir);
    if (child.written() && child.value.shim.pid > 0 && signal_process(child.value.shim, SIGTERM)) continue;
    if (attempt_liveness(dir) == Liveness::Alive && !child.written()) {
      later.push_back(id);  // its shim is starting up: ask again at the next pass
      continue;
    }
    // The shim is gone: stop the job's processes ourselves, SIGKILL after the grace.
    if (const auto procs = processes_of(j); procs && procs->any()) {
      procs->signal(SIGTERM);
      kill_at_[id] = now + cfg_.daemon.kill_grace_s;
    }
  }
  cancel_signals_ = std::move(later);
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
  const std::uint64_t n = std::min<std::uint64_t>({r.max_bytes, kMaxLogReply, size - from});
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
  for (const char* k : {"completed", "oom", "failed", "cancelled", "lost", "unknown"})
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
