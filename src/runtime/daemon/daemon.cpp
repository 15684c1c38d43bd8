// The daemon's core: events from the Env into the lifecycle, effects back out, every change
// written before it is acted on. The API handlers are in daemon_api.cpp, the metrics in
// daemon_metrics.cpp.
#include "runtime/daemon/daemon.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <set>
#include <sys/wait.h>

#include "estimate/analytical.h"
#include "estimate/history.h"
#include "estimate/utilisation.h"
#include "lifecycle/eta.h"
#include "runtime/daemon/daemon_util.h"
#include "runtime/daemon/mps.h"
#include "runtime/job/classify.h"
#include "runtime/store/id_floor.h"

namespace aegis {

Daemon::Daemon(DaemonConfig config, Env& env)
    : cfg_(with_sharing(std::move(config))),
      env_(env),
      store_(cfg_.daemon.state_dir + "/aegis.db", cfg_.daemon.durability == "full"),
      engine_(cfg_.engine),
      life_(cfg_.engine, lifecycle_options(cfg_, env)),
      notifier_(std::make_unique<Notifier>(NotifierSettings::from(cfg_.daemon))),
      eta_watch_(cfg_.daemon.notify_eta_slip_s) {
  // Ids are never reused on this host, even if the database was lost (id_floor.h).
  first_unknown_id_ = store_.next_id();  // issue 33 item 6: ids above it have no record
  id_floor_recorded_ = highest_job_id_on_disk(cfg_.daemon.state_dir);
  store_.reserve_ids_above(id_floor_recorded_);
  chain_ = EstimateChain(EstimateChainConfig{static_cast<int>(cfg_.daemon.history_window), cfg_.daemon.history_quantile,
                                             cfg_.daemon.history_util_quantile,
                                             static_cast<int>(cfg_.daemon.history_util_min_runs),
                                             cfg_.engine.backfill_history_runs, cfg_.engine.backfill_history_quantile});
  if (!cfg_.daemon.learned_model.empty()) {
    try {
      chain_.set_learned(LearnedModel::load(cfg_.daemon.learned_model));
    } catch (const std::exception& e) {
      throw ConfigError(std::string("learned_model: ") + e.what());
    }
  }
  // A policy whose inputs this server cannot give its jobs is refused, not run on the floor.
  if (auto why = missing_for_policy(cfg_.daemon.policy, cfg_.engine, provided_inputs(cfg_)))
    throw ConfigError(*why + (cfg_.daemon.learned_model.empty() && required_inputs(cfg_.engine).test(
                                                                       static_cast<std::size_t>(JobInput::Learned))
                                  ? "; set learned_model to the learned estimator's weights (or calibrated_model)"
                                  : ""));
  if (!cfg_.daemon.calibrated_model.empty()) {
    try {
      std::ifstream in(cfg_.daemon.calibrated_model);
      if (!in) throw std::runtime_error("cannot open " + cfg_.daemon.calibrated_model);
      const auto j = nlohmann::json::parse(in);
      chain_.set_calibrated(CalibratedModel::from_json(j), j.contains("utilisation")
                                                               ? utilisation_from_json(j.at("utilisation"))
                                                               : std::map<std::string, UtilisationModel>{});
    } catch (const std::exception& e) {
      throw ConfigError(std::string("calibrated_model: ") + e.what());
    }
  }
  auto runs = store_.history_runs();
  chain_.restore(store_.peaks(), std::move(runs.peaks), std::move(runs.utils));
  if (chain_.predicts_durations()) {  // backfill's durations survive a restart (issue 32)
    std::vector<PastRun> past;  // each signature's last history_window only (store/schema.h, schema 4)
    for (auto& r : store_.recent_successful_runs(static_cast<int>(cfg_.daemon.history_window)))
      past.push_back({std::move(r.signature), r.launched_at, r.ended_at});
    chain_.restore_durations(std::move(past));
  }
  // The first sample asks per-process utilisation everywhere, to learn where the driver
  // has it (`aegis gpus`); later ones only where a job awaits its anchor.
  SampleRequest first;
  first.energy = false;
  select_gpus(env_.sample_gpus(first));
  chain_.set_server_models(server_models());
  recover_jobs(env_.now(), true);
}

DaemonConfig Daemon::with_sharing(DaemonConfig c) {
  c.engine.mps = c.daemon.sharing == "mps";  // the MPS rules of the engine apply
  return c;
}

LifecycleOptions Daemon::lifecycle_options(const DaemonConfig& c, Env& env) {
  LifecycleOptions o;
  // Fair-share weights name users and groups (issue 32 item 2): resolved once, at start
  // (a name the system does not know has no job here). A name given is checked at start.
  o.share_weights =
      resolve_share_weights(c.engine, [&env](std::string_view name, bool group) { return env.id_of(name, group); });
  o.mps_limits = c.daemon.sharing == "mps";
  o.max_unstarted_attempts = kMaxUnstartedAttempts;
  o.preemption = c.daemon.preemption;  // issue 32 item 1
  o.oom_blame_stop = c.daemon.oom_blame_stop;
  return o;
}

JobInputs Daemon::provided_inputs(const DaemonConfig& c) {
  // The user's figures (declared, a profiled peak, FakeTensor's), the history of earlier
  // runs, the analytical formula and (with weights) the learned or calibrated model over a
  // model spec, and the hints given at submit.
  JobInputs in = inputs({JobInput::Declared, JobInput::Profiled, JobInput::FakeTensor, JobInput::History,
                         JobInput::Analytical, JobInput::GpuUtilHint, JobInput::SharingScoreHint});
  // The calibrated model answers for every spec (flagged where it extrapolates): it fills
  // the learned slot where the learned model is absent or refuses.
  if (!c.daemon.learned_model.empty() || !c.daemon.calibrated_model.empty()) in |= inputs({JobInput::Learned});
  return in;
}

std::size_t Daemon::running_jobs() const { return life_.holding_gpus().size(); }

std::vector<std::string> Daemon::gpu_uuids() const {
  std::vector<std::string> out;
  for (const auto& g : gpus_) out.push_back(g.uuid);
  return out;
}

void Daemon::supervise_mps() { mps_.emplace(cfg_.daemon, gpu_uuids(), env_.now()); }

void Daemon::check_mps(Seconds now, bool force) {
  if (!mps_ || !mps_->active()) return;
  for (const auto& line : mps_->check(now, force)) fmt::print(stderr, "aegisd: {}\n", line);
}

void Daemon::select_gpus(const std::vector<GpuStatus>& all) {
  const auto cap = static_cast<std::size_t>(cfg_.engine.telemetry_window_samples);
  // A GPU in MIG mode whose instances could not be listed cannot run CUDA work at all.
  auto usable = [](const GpuStatus& s) { return !s.mig_enabled; };
  auto add = [&](const GpuStatus& s) {
    for (const auto& g : gpus_)
      if (g.uuid == s.uuid) return;
    gpus_.push_back(Gpu{s.uuid, s.index, s, RollingWindow(cap), {}, {}, s.process_samples, std::nullopt, ""});
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
  if (restarted) account_for_lost_records(now);  // issue 33 item 6
  // Every unfinished job comes back: queued ones in their places, running ones with their
  // attempt, which the next tick checks (still running, ended, or gone).
  for (auto& rec : store_.unfinished()) {
    if (restarted && newer_attempts_on_disk(rec, now)) continue;  // ended as lost
    const bool running = rec.state == JobState::Running && rec.current();
    if (running && restarted) {
      try {  // a note for `aegis show`; not worth failing a start on a full disk
        store_.event(rec.id, now, "recover", "daemon restarted; attempt " + std::to_string(rec.current()->number));
      } catch (const StoreError&) {
      }
    }
    if (running && rec.cancel_requested && !rec.current()->ended_at) stop_signals_.push_back(rec.id);  // maybe unsent
    // A preemption's stop, maybe unsent; a warning maybe unsent too: sent again (a job
    // that asked for a checkpoint signal saves again, which loses nothing).
    if (running && rec.preempted_for && !rec.current()->ended_at) {
      if (rec.preempt_stopping) stop_signals_.push_back(rec.id);
      else if (rec.request.checkpoint_signal != 0)
        warnings_.push_back({rec.id, rec.current()->number, rec.request.checkpoint_signal});
    }
    life_.restore(life_of(rec), links_of(rec));  // issue 32: with its array and dependencies
    records_.emplace(rec.id, std::move(rec));
  }
  restore_finals();  // issue 32: what the restored jobs' dependencies and arrays ended as
  // Fair share's usage is recomputed from the attempts the store keeps (no table of its
  // own): those that ended within 10 half-lives (older ones weigh under 2^-10), all of
  // them when usage does not decay, replayed with the running ones (issue 32 item 2,
  // docs/lab-policies.md). A GPU no longer here keeps a key of its own.
  if (life_.fair_share().orders()) {
    const Seconds half = cfg_.engine.fair_share_half_life_s;
    std::map<std::string, int> gone;
    auto index_of = [&](const std::string& uuid) {
      for (std::size_t i = 0; i < gpus_.size(); ++i)
        if (gpus_[i].uuid == uuid) return static_cast<int>(i);
      return static_cast<int>(gpus_.size()) + gone.try_emplace(uuid, static_cast<int>(gone.size())).first->second;
    };
    std::vector<PastHold> ended;
    for (const auto& a : store_.attempts_ended_since(half > 0 ? now - kUsageHorizonHalfLives * half : 0)) {
      PastHold h{a.uid, a.gid, {}, a.launched_at, a.ended_at};
      for (int k = 0; k < a.gpus; ++k) {
        const int gpu = k < static_cast<int>(a.gpu_uuids.size()) ? index_of(a.gpu_uuids[static_cast<std::size_t>(k)])
                                                                 : index_of("unknown-" + std::to_string(k));
        h.gpus.push_back({0, gpu, a.admitted_mib, a.gpu_total_mib, a.exclusive});
      }
      ended.push_back(std::move(h));
    }
    life_.rebuild_usage(std::move(ended));
  }
  for (const auto& q : store_.last_quarantined())
    fmt::print(stderr, "aegisd: warning: job {}: unreadable record set aside (table quarantine): {}\n", q.id, q.reason);
  send_stop_signals();
  send_warnings();
}

void Daemon::reload_after_store_error(Seconds now, const std::string& what) {
  if (what != storage_error_) fmt::print(stderr, "aegisd: storage: {}; state reloaded from the database\n", what);
  storage_error_ = what;
  // Nothing that failed to commit was acted on: stops are signalled after their commit,
  // launches are recorded before their shim starts. So the database is the truth.
  if (store_.in_transaction()) store_.rollback();
  pending_notices_.clear();  // their changes were not committed: never told
  records_.clear();
  stop_signals_.clear();
  warnings_.clear();
  life_ = Lifecycle(cfg_.engine, lifecycle_options(cfg_, env_));
  try {
    recover_jobs(now, false);
  } catch (const std::exception& e) {
    fmt::print(stderr, "aegisd: storage: cannot reload the jobs: {}\n", e.what());
  }
}

void Daemon::storage_recovered() {
  if (!storage_error_.empty()) fmt::print(stderr, "aegisd: storage: writing works again\n");
  storage_error_.clear();
}

// ---------------------------------------------------------------------------------------
// A job's three faces: its record (what the store keeps and the API shows), its spec
// (what the engine knows), and its life (what the lifecycle keeps).

JobSpec Daemon::spec_of(const DaemonJob& j) const {
  JobSpec spec;
  spec.id = j.id;
  spec.name = j.request.name;
  spec.num_gpus = j.request.gpus;
  spec.submit_time = j.submitted_at;
  spec.owner = j.uid;  // MPS serves one user per GPU at a time (filters/mps_one_user.cpp)
  spec.group = j.gid;  // fair share's group weights (lifecycle/fair_share.h)
  // The estimate chain: whatever this server can know of the job's memory; the policy's
  // estimator picks one (estimate/source.h), and a job lacking what it needs was refused.
  const ChainJob chain = chain_job(j);
  spec.estimates = chain_.estimates(chain);
  const UtilisationEstimate u = utilisation_of(j);
  spec.hints.gpu_util = u.gpu_util;
  spec.hints.sharing_score = u.sharing_score;
  // Made once, at submission (submit()), and stored with the job: a restart reads it back.
  spec.predicted_util = j.predicted_util;
  spec.array_id = j.array_id;  // issue 32: an array's element
  spec.array_index = j.array_index;
  if (j.request.time_limit_s) spec.time_limit = static_cast<Seconds>(*j.request.time_limit_s);  // item 5
  spec.predicted_duration = chain_.predicted_duration(chain.signature);  // item 5: backfill's, from history
  spec.priority = j.request.priority;  // issue 32 item 1
  spec.checkpoint_signal = j.request.checkpoint_signal;
  spec.checkpoint_lead_s = j.request.checkpoint_lead_s;
  return spec;
}

// What this server predicts of the job's utilisation, whatever its user typed: the mean
// utilisation of its signature's earlier runs on this server's GPU models
// (history_util_min_runs on each; history_util_quantile of them), else, with a model spec,
// the calibrated model's prediction (docs/estimators.md, "Utilisation from history").
Daemon::PredictedUtilisation Daemon::predicted_utilisation_of(const DaemonJob& j) const {
  const auto p = chain_.predicted_utilisation(chain_job(j));
  if (!p.value) return {};
  return {p.value, p.source == "history" ? "history" : "model-spec"};
}

ChainJob Daemon::chain_job(const DaemonJob& j) const {
  ChainJob c;
  c.signature = signature_of(j);
  c.declared = j.request.mem_mib;
  c.profiled = j.request.profiled_mib;
  c.faketensor = j.request.faketensor_mib;
  c.model = j.request.model;
  return c;
}

bool Daemon::predict_utilisation(DaemonJob& j) const {
  const PredictedUtilisation p = predicted_utilisation_of(j);
  // A run only adds history: a prediction is replaced, never dropped.
  if (!p.value || !std::isfinite(*p.value)) return false;
  const double u = std::clamp(*p.value, 0.0, 1.0);
  if (j.predicted_util == u && j.predicted_util_source == p.source) return false;
  j.predicted_util = u;
  j.predicted_util_source = p.source;
  return true;
}

// The hints the profile-based policies read: the user's, else the prediction above. Horus'
// cap and the lpu order read it as they would the user's figure; Lucid's sharing score,
// when not typed, comes from it: tiny (0) below tiny_util, else 2 (docs/estimators.md,
// "Sharing score").
Daemon::UtilisationEstimate Daemon::utilisation_of(const DaemonJob& j) const {
  const PredictedUtilisation predicted = predicted_utilisation_of(j);
  UtilisationEstimate u;
  if (j.request.hint_gpu_util) {
    u.gpu_util = j.request.hint_gpu_util;
    u.gpu_util_source = "hint";
  } else if (predicted.value) {
    u.gpu_util = predicted.value;
    u.gpu_util_source = predicted.source;
  }
  if (j.request.hint_sharing_score) {
    u.sharing_score = j.request.hint_sharing_score;
    u.sharing_score_source = "hint";
  } else if (predicted.value) {
    u.sharing_score = sharing_score_from_util(*predicted.value, cfg_.daemon.tiny_util);
    u.sharing_score_source = predicted.source;
  }
  return u;
}

std::vector<std::string> Daemon::server_models() const {
  std::vector<std::string> models;
  for (const auto& g : gpus_)
    if (std::find(models.begin(), models.end(), g.status.name) == models.end()) models.push_back(g.status.name);
  return models;
}

// A completed run's peak and mean activity, on the GPU model of its first GPU (a job's
// GPUs are alike).
void Daemon::record_history(const std::string& signature, const std::vector<std::string>& gpu_uuids, MiB peak,
                            const RunActivity& activity, Seconds now) {
  std::string model = "unknown";
  for (const auto& g : gpus_)
    if (!gpu_uuids.empty() && g.uuid == gpu_uuids.front()) model = g.status.name;
  store_.record_peak(signature, peak, now);  // what an older aegisd reads
  store_.record_run_peak(signature, model, peak, activity, now, static_cast<int>(cfg_.daemon.history_window));
  chain_.completed({signature, model, peak, activity.gpu_util});
  refresh_estimates(signature);
}

// A successful run's duration (issue 32 item 5): the queued jobs of its signature wait
// with the new prediction. Not stored apart: a restart rebuilds them from the store's
// successful attempts (constructor, EstimateChain::restore_durations).
void Daemon::record_duration(const std::string& signature, Seconds seconds) {
  const auto before = chain_.predicted_duration(signature);
  chain_.completed_duration(signature, seconds);
  if (chain_.predicted_duration(signature) != before) refresh_estimates(signature);
}

// A run of `signature` was recorded: the queued jobs of that signature wait with its
// peak, with its utilisation where they have no hint, and with the lpa order's prediction
// from it (stored, as at submission).
void Daemon::refresh_estimates(const std::string& signature) {
  for (auto& [id, rec] : records_)
    if (rec.state == JobState::Queued && signature_of(rec) == signature) {
      if (predict_utilisation(rec)) store_.update(rec);
      const JobSpec spec = spec_of(rec);
      life_.set_estimates(id, spec.estimates);
      life_.set_hints(id, spec.hints);
      life_.set_predicted_util(id, spec.predicted_util);
      life_.set_predicted_duration(id, spec.predicted_duration);
    }
}

LifeJob Daemon::life_of(const DaemonJob& j) const {
  LifeJob l;
  l.queued.spec = spec_of(j);
  l.queued.recovery = j.recovery;
  l.state = j.state;
  l.queue = j.state != JobState::Queued ? QueueName::None : j.in_recovery_queue ? QueueName::Recovery : QueueName::Main;
  l.queue_seq = j.queue_seq;
  l.cancel_requested = j.cancel_requested;
  l.restartable = j.request.restartable;
  l.reason = j.reason;
  l.started_at = j.started_at;
  l.ended_at = j.ended_at;
  l.preempted_for = j.preempted_for;  // issue 32 item 1
  l.preempt_warned_at = j.preempt_warned_at;
  l.preempt_stop_at = j.preempt_stop_at;
  l.preempt_stopping = j.preempt_stopping;
  for (const auto& a : j.attempts) {
    LifeAttempt la;
    la.number = a.number;
    Placement::Part part;
    part.launch.job = j.id;
    for (const auto& u : a.gpu_uuids)
      for (std::size_t i = 0; i < gpus_.size(); ++i)
        if (gpus_[i].uuid == u) part.launch.gpus.push_back(static_cast<int>(i));
    part.launch.exclusive = a.exclusive;
    part.launch.admitted_mib = a.admitted_mib;
    part.launch.free_at_placement = a.free_at_placement;
    part.gpu_total_mib = a.gpu_total_mib;
    la.placement.parts.push_back(std::move(part));
    la.launched_at = a.launched_at;
    la.first_activity = a.first_activity;
    la.anchor = parse_anchor(a.anchor).value_or(a.first_activity ? Anchor::Reported : Anchor::None);
    la.context_at = a.context_at;
    la.ended_at = a.ended_at;
    la.outcome = a.outcome;
    la.detail = a.detail;
    l.attempts.push_back(std::move(la));
  }
  return l;
}

// The record follows the lifecycle: its state and the scheduling side of its attempts.
void Daemon::sync(DaemonJob& rec) {
  const LifeJob* l = life_.find(rec.id);
  if (!l) return;
  rec.state = l->state;
  rec.in_recovery_queue = l->queue == QueueName::Recovery;
  rec.queue_seq = l->queue_seq;
  rec.recovery = l->queued.recovery;
  rec.cancel_requested = l->cancel_requested;
  rec.reason = l->reason;
  rec.started_at = l->started_at;
  rec.ended_at = l->ended_at;
  rec.preempted_for = l->preempted_for;  // issue 32 item 1
  rec.preempt_warned_at = l->preempt_warned_at;
  rec.preempt_stop_at = l->preempt_stop_at;
  rec.preempt_stopping = l->preempt_stopping;
  rec.attempts.resize(l->attempts.size());
  for (std::size_t i = 0; i < l->attempts.size(); ++i) {
    const LifeAttempt& la = l->attempts[i];
    Attempt& a = rec.attempts[i];
    if (a.number != la.number) {  // new: where it runs
      a = Attempt{};
      a.number = la.number;
      const auto& part = la.placement.parts.front();
      for (int g : part.launch.gpus) a.gpu_uuids.push_back(gpus_[static_cast<std::size_t>(g)].uuid);
      a.exclusive = part.launch.exclusive;
      a.admitted_mib = part.launch.admitted_mib;
      a.free_at_placement = part.launch.free_at_placement;
      a.gpu_total_mib = part.gpu_total_mib;
      a.launched_at = la.launched_at;
    }
    a.first_activity = la.first_activity;
    a.anchor = std::string(to_string(la.anchor));
    a.context_at = la.context_at;
    a.ended_at = la.ended_at;
    if (la.outcome != AttemptOutcome::Running && a.outcome != la.outcome)
      stats_.outcomes[std::string(to_string(la.outcome))]++;
    a.outcome = la.outcome;
    a.detail = la.detail;
  }
}

// ---------------------------------------------------------------------------------------
// Events in: samples, first activity, ended attempts, gone clients.

void Daemon::tick(Seconds now, bool sample) {
  GpuReading r;
  r.asked = sample_request();
  try {
    r.gpus = env_.sample_gpus(r.asked);
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  use_sample(r, sample);
  after_sample(now, true);
}

void Daemon::tick_with(Seconds now, const GpuReading* fresh) {
  if (fresh) use_sample(*fresh, true);
  after_sample(now, fresh != nullptr);
}

SampleRequest Daemon::sample_request() const {
  SampleRequest r = SampleRequest::cheap();
  for (JobId id : life_.holding_gpus()) {
    const LifeJob* l = life_.find(id);
    const auto rec = records_.find(id);
    if (!l || !l->current() || l->current()->first_activity || rec == records_.end() || !rec->second.current()) continue;
    for (const auto& u : rec->second.current()->gpu_uuids)
      if (std::ranges::count(r.process_util, u) == 0) r.process_util.push_back(u);
  }
  return r;
}

void Daemon::use_sample(const GpuReading& r, bool to_windows) {
  if (!r.error.empty()) {
    gpu_error_ = r.error;  // keep the last good telemetry; try again next tick
    return;
  }
  note_usable(r.gpus);
  for (auto& g : gpus_) {
    auto it = std::find_if(r.gpus.begin(), r.gpus.end(), [&](const GpuStatus& s) { return s.uuid == g.uuid; });
    if (it == r.gpus.end()) continue;
    g.status = *it;
    if (r.asked.process_util_on(g.uuid)) g.process_samples = it->process_samples;
    if (!to_windows) continue;
    g.window.push(it->sample());
    g.window.copy_to(g.window_copy);
  }
  gpu_error_.clear();
}

void Daemon::after_sample(Seconds now, bool observe) {
  check_mps(now, false);  // first: an attempt that ended in an outage is told by it (collect_ends)
  {
    Tx tx(store_);
    if (observe) note_activity(now);
    note_checkpoints(now);  // issue 32 item 1
    collect_ends(now);
    cancel_orphans(now);
    tx.commit();
  }
  apply(life_.expire(now), now);  // attempts past their time limit are stopped (item 5)
  send_stop_signals();
  send_warnings();
  watch_lost_attempts();  // issue 33 item 6
  schedule(now);
  watch_etas(now);
}

void Daemon::watch_etas(Seconds now) {
  if (!notifier_->enabled() || now < next_eta_check_) return;
  next_eta_check_ = now + cfg_.daemon.notify_eta_check_s;
  const bool asked = std::ranges::any_of(records_, [](const auto& r) {
    return r.second.state == JobState::Queued && r.second.request.notify.has(api::NotifyEvent::Eta);
  });
  if (!asked) return;
  OneServerPlacer placer(engine_);
  placer.server.views = views();
  std::map<JobId, Seconds> etas;
  for (const auto& [id, at] : estimate_starts(life_, now, placer.server_gpus()).starts)
    if (at) etas[id] = *at;
  note_etas(etas, now);
}

void Daemon::note_usable(const std::vector<GpuStatus>& all) {
  // A GPU a sample no longer lists (fallen off the bus) or shows cut into MIG instances
  // since aegisd started can take no job (docs/daemon.md, "Jobs that can never start").
  for (auto& g : gpus_) {
    auto it = std::find_if(all.begin(), all.end(), [&](const GpuStatus& s) { return s.uuid == g.uuid; });
    const std::string unusable = it == all.end() ? "no longer listed by the driver"
                                 : it->mig_enabled ? "switched to MIG mode" : "";
    if (unusable != g.unusable)
      fmt::print(stderr, "aegisd: GPU {} ({}) {}\n", g.nvml_index, g.uuid,
                 unusable.empty() ? "is usable again" : unusable + "; not scheduled");
    g.unusable = unusable;
  }
}

void Daemon::note_activity(Seconds now) {
  // GPU processes belong to the attempt whose cgroup (else ancestry, else session) they
  // are in, however they got there. What they show on the job's GPUs (memory, their
  // utilisation samples) and each GPU's activity go to the lifecycle, which decides when
  // the job's first activity was (lifecycle/activity_anchor.h); the memory of all its
  // processes on a GPU, summed, gives its peak for the history estimator.
  // A process of no job on one of its GPUs is foreign: shown by `aegis gpus`, and its
  // memory is never handed out (GpuView::foreign_mib).
  std::vector<Env::AttemptKey> running;
  for (JobId id : life_.holding_gpus()) running.push_back({id, life_.find(id)->current()->number});
  job_memory_now_.clear();
  std::vector<pid_t> pids;
  for (const auto& g : gpus_)
    for (const auto& p : g.status.processes) pids.push_back(static_cast<pid_t>(p.pid));
  const auto owners = running.empty() ? std::map<pid_t, Env::AttemptKey>{} : env_.owners(pids, running);
  ActivityReadings readings;
  std::vector<char> held_by_job(gpus_.size(), 0);
  for (const auto& r : life_.running_on(0))
    for (int gi : r.gpus)
      if (gi >= 0 && gi < static_cast<int>(gpus_.size())) held_by_job[static_cast<std::size_t>(gi)] = 1;
  for (std::size_t gi = 0; gi < gpus_.size(); ++gi) {
    auto& g = gpus_[gi];
    g.foreign.clear();
    for (const auto& p : g.status.processes) {
      const auto it = owners.find(static_cast<pid_t>(p.pid));
      const auto rec = it == owners.end() ? records_.end() : records_.find(it->second.first);
      const bool its_gpu = rec != records_.end() && rec->second.current() &&
                           std::ranges::count(rec->second.current()->gpu_uuids, g.uuid) > 0;
      if (!its_gpu && !env_.is_infrastructure(static_cast<pid_t>(p.pid))) g.foreign.push_back(p);
    }
    // What the GPU keeps with no job of aegis and no foreign process counted: the driver's
    // own, MPS's server (DeviceInfo::held_mib). Measured while no job of aegis is there.
    if (!held_by_job[gi] && g.unusable.empty()) {
      MiB foreign = 0;
      for (const auto& p : g.foreign) foreign += p.used_mib.value_or(0);
      g.held_idle_mib = std::max<MiB>(0, g.status.total_mib - g.status.free_mib - foreign);
    }
    const int index = static_cast<int>(gi);
    readings.gpu_activity[index] = g.status.smact ? g.status.smact : g.status.util;
    if (g.unusable.empty()) readings.gpu_free_mib[index] = g.status.free_mib;
    std::map<JobId, JobGpuReading> here;
    // Under MPS the driver reports every client's work against its server's pid: a job's
    // client processes have no sample of their own, and the server's is the job's only
    // while the job's processes are the only clients there (docs/daemon.md, "MPS").
    std::set<JobId> client_jobs;
    bool foreign_client = false;
    std::optional<double> server_util;
    for (const auto& p : g.status.processes) {
      const auto it = owners.find(static_cast<pid_t>(p.pid));
      if (p.mps_client) {
        if (it == owners.end()) foreign_client = true;
        else client_jobs.insert(it->second.first);
      } else if (it == owners.end() && p.sm_util && env_.is_infrastructure(static_cast<pid_t>(p.pid))) {
        server_util = std::max(server_util.value_or(0), *p.sm_util);
      }
    }
    for (const auto& p : g.status.processes) {
      auto it = owners.find(static_cast<pid_t>(p.pid));
      if (it == owners.end()) continue;
      const JobId id = it->second.first;
      auto rec = records_.find(id);
      if (rec == records_.end() || !rec->second.current()) continue;
      const auto& uuids = rec->second.current()->gpu_uuids;
      if (std::find(uuids.begin(), uuids.end(), g.uuid) == uuids.end()) continue;
      JobGpuReading& r = here[id];
      r.gpu = index;
      r.mib += p.used_mib.value_or(0);
      if (g.status.process_samples && p.sm_util) r.own_util = std::max(r.own_util.value_or(0), *p.sm_util);
    }
    for (auto& [id, r] : here) {
      if (!client_jobs.contains(id) || !g.status.process_samples) continue;
      const bool sole_client = client_jobs.size() == 1 && !foreign_client;
      // The server ran no kernel since the last read: none of its clients did either.
      if (sole_client) r.own_util = std::max(r.own_util.value_or(0), server_util.value_or(0));
      else r.own_util.reset();  // its work is mixed with another client's: unknown, not 0
    }
    // The job's activity for its history (run_activity.h): whole-GPU figures only while
    // nothing else runs here.
    const bool alone = here.size() == 1 && g.foreign.empty();
    for (const auto& [id, r] : here) {
      const int attempt = records_.at(id).current()->number;
      auto& totals = activity_[id];
      if (totals.attempt != attempt) {  // a new attempt starts from no samples
        totals = RunActivityTotals{};
        totals.attempt = attempt;
      }
      // Per-process samples are read only while some job here awaits its first activity
      // (sample_request), so they would give a shared job's history its start-up alone:
      // its figures come from whole-GPU samples while it is alone, else none.
      totals.add(g.status, std::nullopt, alone);
    }
    for (const auto& [id, r] : here) {
      readings.jobs[id].push_back(r);
      if (auto rec = records_.find(id); rec != records_.end()) {
        rec->second.current()->peak_mib = std::max(rec->second.current()->peak_mib, r.mib);
        job_memory_now_[id][g.uuid] = r.mib;
      }
    }
  }
  Effects fx = life_.observe(readings, now);
  // A context seen for the first time is recorded even before activity (aegis show).
  for (const auto& [id, seen] : readings.jobs) {
    auto rec = records_.find(id);
    const LifeJob* l = life_.find(id);
    if (rec == records_.end() || !l || !l->current() || rec->second.current()->context_at) continue;
    rec->second.current()->context_at = l->current()->context_at;
    if (std::none_of(fx.changes.begin(), fx.changes.end(), [&](const Effects::Change& c) { return c.job == id; }))
      store_.update(rec->second);
  }
  apply(std::move(fx), now);
}

void Daemon::collect_ends(Seconds now) {
  for (JobId id : life_.holding_gpus()) {
    auto rit = records_.find(id);
    if (rit == records_.end()) continue;
    DaemonJob& rec = rit->second;
    Attempt& a = *rec.current();
    const AttemptStatus st = env_.attempt_status(id, a.number);
    if (a.pgid == 0 && st.pgid > 0) {  // shown by `aegis show`
      a.pgid = st.pgid;
      store_.update(rec);
    }
    Ended e;
    Seconds at = now;
    switch (st.state) {
      case AttemptStatus::State::Running:
        continue;
      case AttemptStatus::State::Unknown:
        note_io_trouble(fmt::format("job {}: {}; trying again", id, st.why_unknown));
        continue;
      case AttemptStatus::State::Gone:
        // Nothing runs and nothing was recorded: it never started, or nobody knows.
        e.outcome = st.started ? AttemptOutcome::Unknown : AttemptOutcome::Lost;
        e.detail = st.started ? fmt::format("outcome unknown: attempt {} ended without an exit record (its shim was "
                                            "killed, or its disk failed)", a.number)
                              : "never started";
        break;
      case AttemptStatus::State::Ended: {
        at = st.ended_at;
        if (WIFEXITED(st.wait_status)) a.exit_code = WEXITSTATUS(st.wait_status);
        if (WIFSIGNALED(st.wait_status)) a.signal = WTERMSIG(st.wait_status);
        if (!st.start_error.empty()) {
          // It never ran (exec failed, no such working directory, ...): running it again
          // would fail the same way, so it ends here, with the reason.
          e.outcome = AttemptOutcome::FailedStart;
          e.detail = st.start_error;
          break;
        }
        const std::string tail = env_.log_tail(id, a.number, true, 64 * 1024) + "\n" +
                                 env_.log_tail(id, a.number, false, 16 * 1024);
        // Cancelled only if the cancel reached it: a job that ended on its own before the
        // cancel arrived keeps its real outcome.
        const bool killed = WIFSIGNALED(st.wait_status) &&
                            (WTERMSIG(st.wait_status) == SIGTERM || WTERMSIG(st.wait_status) == SIGKILL);
        const auto v = classify_exit(st.wait_status, tail, st.cancelled || (rec.cancel_requested && killed));
        e.detail = v.reason;
        switch (v.kind) {
          case ExitKind::Success:
            e.outcome = AttemptOutcome::Completed;
            record_duration(signature_of(rec), at - a.launched_at);  // backfill's prediction (item 5)
            if (a.peak_mib > 0) {
              const auto it = activity_.find(id);
              const bool ours = it != activity_.end() && it->second.attempt == a.number;
              record_history(signature_of(rec), a.gpu_uuids, a.peak_mib, ours ? it->second.means() : RunActivity{},
                             now);
            }
            break;
          case ExitKind::Cancelled: e.outcome = AttemptOutcome::Cancelled; break;
          case ExitKind::Oom: e.outcome = AttemptOutcome::Oom; break;
          case ExitKind::Failed: e.outcome = AttemptOutcome::Failed; break;
        }
        // A client that could not reach its GPU's MPS control daemon, which was down while
        // it ran (checked now, not at the next interval): the host's fault, not the job's.
        if ((v.kind == ExitKind::Failed || v.kind == ExitKind::Oom) && mps_ && mps_->active())
          if (const auto line = find_mps_connect_line(tail)) {
            check_mps(now, true);
            if (std::ranges::any_of(a.gpu_uuids,
                                    [&](const std::string& u) { return mps_->outage_during(u, a.launched_at, at); })) {
              e.outcome = AttemptOutcome::Lost;  // back to its place, its recovery state untouched
              e.detail = std::string(kInterruptedByHost) + "its GPU's MPS control daemon was stopped while it ran (" +
                         *line + ")";
            }
          }
        break;
      }
    }
    activity_.erase(id);
    apply(life_.ended(id, e, at), now);
  }
}

void Daemon::cancel_orphans(Seconds now) {
  // An attached job whose `aegis run` is gone has nobody waiting for it: under Slurm that
  // is a scancel, a time limit or a killed batch script, and the job must not outlive it.
  std::vector<std::pair<JobId, std::string>> gone;
  for (const auto& [id, j] : records_) {
    if (!j.attached_to || j.cancel_requested) continue;
    if (env_.process_start_ticks(j.attached_to->pid) == j.attached_to->start_ticks) continue;
    gone.push_back({id, fmt::format("its client (aegis run, pid {}) is gone", j.attached_to->pid)});
  }
  for (const auto& [id, why] : gone) apply(life_.cancel(id, why, now), now);
}

void Daemon::note_io_trouble(const std::string& what) {
  if (what != io_trouble_) fmt::print(stderr, "aegisd: {}\n", what);
  io_trouble_ = what;
}

// ---------------------------------------------------------------------------------------
// Decisions: the lifecycle decides with the engine; the daemon records, then acts.

std::vector<GpuView> Daemon::views() const {
  std::vector<GpuView> out;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    const auto& g = gpus_[i];
    GpuView v;
    v.index = static_cast<int>(i);
    v.uuid = g.uuid;
    v.total_mib = g.status.total_mib;
    v.free_mib = g.status.free_mib;
    for (const auto& p : g.foreign) v.foreign_mib += p.used_mib.value_or(0);
    v.process_count = 0;
    for (const auto& p : g.status.processes) v.process_count += env_.is_infrastructure(static_cast<pid_t>(p.pid)) ? 0 : 1;
    v.level = g.status.level();
    v.mig_instance = !g.status.parent_uuid.empty();
    v.window = g.window_copy;
    // Its MPS control daemon is down (being restarted, or given up): a job would not connect.
    if (!g.unusable.empty() || (mps_ && !mps_->unavailable(g.uuid).empty())) {  // offers nothing
      v.free_mib = 0;
      v.foreign_mib = v.total_mib;
      v.process_count = std::max(v.process_count, 1);
    }
    out.push_back(v);
  }
  return out;
}

std::vector<DeviceInfo> Daemon::devices() const {
  // What each usable GPU can ever offer (lifecycle/placer.h): less what it held when no job
  // of aegis ran there; and what processes outside aegis hold now, which they may free.
  std::vector<DeviceInfo> out;
  for (const auto& g : gpus_) {
    if (!g.unusable.empty()) continue;
    MiB foreign = 0;
    for (const auto& p : g.foreign) foreign += p.used_mib.value_or(0);
    out.push_back({g.status.total_mib, !g.status.parent_uuid.empty(), g.held_idle_mib.value_or(0), foreign,
                   static_cast<int>(g.foreign.size())});
  }
  return out;
}

void Daemon::schedule(Seconds now) {
  if (!life_.has_work() || now < launch_backoff_until_) return;
  const auto t0 = std::chrono::steady_clock::now();
  OneServerPlacer placer(engine_);
  placer.server.views = views();
  placer.server.running = life_.running_on(0);
  placer.server.state = engine_state_;
  placer.feasibility.emplace(engine_, devices());
  if (cfg_.daemon.preemption)  // what a preemption would free (issue 32 item 1)
    for (const auto& [id, per_gpu] : job_memory_now_)
      for (const auto& [uuid, mib] : per_gpu)
        for (std::size_t i = 0; i < gpus_.size(); ++i)
          if (gpus_[i].uuid == uuid) placer.used_mib[id][static_cast<int>(i)] = mib;
  Effects fx = life_.schedule(now, placer);
  engine_state_ = placer.server.state;
  const double decide = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (stats_.recent_decide_seconds.size() >= 1024) stats_.recent_decide_seconds.erase(stats_.recent_decide_seconds.begin());
  stats_.recent_decide_seconds.push_back(decide);
  blocked_reason_ = fx.blocked ? fx.blocked->reason : "";
  if (fx.blocked && mps_)
    for (const auto& g : gpus_)
      if (const auto why = mps_->unavailable(g.uuid); !why.empty())
        blocked_reason_ += fmt::format("; GPU {} takes no job: {}", g.nvml_index, why);
  blocked_job_ = fx.blocked ? fx.blocked->job : 0;
  apply(std::move(fx), now);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.ticks++;
  stats_.tick_seconds_sum += secs;
  stats_.tick_seconds_max = std::max(stats_.tick_seconds_max, secs);
  if (stats_.recent_tick_seconds.size() >= 1024) stats_.recent_tick_seconds.erase(stats_.recent_tick_seconds.begin());
  stats_.recent_tick_seconds.push_back(secs);
}

// What the shim runs for an attempt: the job's argv and environment as data (launch_file.h).
LaunchFile Daemon::launch_file(const DaemonJob& rec, const Effects::Start& s) const {
  LaunchFile f;
  f.uid = rec.uid;
  f.gid = rec.gid;
  f.user = rec.user;
  f.workdir = rec.request.workdir.empty() ? "/" : rec.request.workdir;
  f.argv = rec.request.command;
  std::map<std::string, std::string> env = rec.request.env;
  for (const auto& [k, v] : env_.passed_on()) env[k] = v;
  std::string visible;
  std::vector<std::string> uuids;
  for (int g : s.placement.parts.front().launch.gpus) {
    uuids.push_back(gpus_[static_cast<std::size_t>(g)].uuid);
    visible += (visible.empty() ? "" : ",") + uuids.back();
  }
  env["CUDA_VISIBLE_DEVICES"] = visible;
  for (auto& [k, v] : mps_environment(cfg_.daemon, s.mps_limit_mib, uuids)) env[k] = v;
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  env["AEGIS_JOB_ID"] = std::to_string(rec.id);
  // Issue 32 item 1: which attempt this is, where it saves its checkpoints (its own
  // directory, made by prepare: Env::checkpoint_dir), and whether to resume from them
  // (an earlier attempt ran: a preemption, an OOM-ladder retry, a restart).
  env["AEGIS_ATTEMPT"] = std::to_string(s.attempt);
  env["AEGIS_CHECKPOINT_DIR"] = checkpoint_dir_of(rec.id);
  if (s.resume) env["AEGIS_RESUME"] = "1";
  else env.erase("AEGIS_RESUME");
  for (const auto& [k, v] : env) f.env.push_back(k + "=" + v);
  f.kill_grace_s = cfg_.daemon.kill_grace_s;
  f.log_max_bytes = static_cast<std::uint64_t>(cfg_.daemon.log_max_bytes);
  f.log_tail_bytes = static_cast<std::uint64_t>(cfg_.daemon.log_tail_bytes);
  f.log_min_free_bytes = static_cast<std::uint64_t>(cfg_.daemon.log_min_free_bytes);
  return f;
}

void Daemon::apply(Effects fx, Seconds now) {
  // 1. Each launch's files, before anything is recorded: a full disk stops it here, and
  //    the launch never happened (the job is back in its place, launches pause).
  std::vector<Effects::Start> prepared;
  for (auto& s : fx.starts) {
    const DaemonJob& rec = records_.at(s.job);
    try {
      env_.prepare_checkpoint_dir(checkpoint_dir_of(s.job), rec.uid, rec.gid);  // issue 32 item 1
      env_.prepare_attempt(s.job, s.attempt, launch_file(rec, s));
      prepared.push_back(s);
    } catch (const StartError& e) {
      if (e.transient) {
        life_.withdraw(s.job, std::string("cannot prepare its launch: ") + e.what());
        launch_backoff_until_ = now + kLaunchBackoffS;
        note_io_trouble(fmt::format("job {}: {}; launches wait {} s", s.job, e.what(), kLaunchBackoffS));
        std::erase_if(fx.changes, [&](const Effects::Change& c) { return c.job == s.job && c.event == "launch"; });
        if (auto it = records_.find(s.job); it != records_.end()) it->second.reason = life_.find(s.job)->reason;
      } else {
        fx.merge(life_.start_failed(s.job, false, e.what(), now));
      }
    }
  }
  // 2. Every change, on disk before it is acted on.
  persist(fx, now);
  // 3. The shims.
  for (const auto& s : prepared) {
    try {
      env_.start_attempt(s.job, s.attempt);
    } catch (const StartError& e) {
      if (e.transient) launch_backoff_until_ = now + kLaunchBackoffS;
      Effects again = life_.start_failed(s.job, e.transient, e.what(), now);
      persist(again, now);
    }
  }
  // 4. Warnings of a preemption, and stops, are signalled once their change is committed
  //    (send_warnings, send_stop_signals).
  warnings_.insert(warnings_.end(), fx.warnings.begin(), fx.warnings.end());
  stop_signals_.insert(stop_signals_.end(), fx.signals.begin(), fx.signals.end());
  // Committed already unless a caller's transaction is still open (it sends them after).
  if (!store_.in_transaction()) {
    send_warnings();
    send_stop_signals();
  }
}

void Daemon::send_warnings() {
  for (const auto& w : warnings_) {
    const LifeJob* l = life_.find(w.job);
    if (!l || !l->holds_gpus() || l->current()->number != w.attempt) continue;
    env_.signal_attempt(w.job, w.attempt, w.signal);
  }
  warnings_.clear();
}

std::string Daemon::checkpoint_dir_of(JobId id) const {
  return checkpoint_root(cfg_.daemon) + "/" + std::to_string(id);
}

// A job says it saved a checkpoint by touching $AEGIS_CHECKPOINT_DIR/checkpointed (docs/
// lab-policies.md): its time tells the lifecycle, which stops a warned job at once and
// counts it for the choice of victims. Only read while preemption is on (or a job is
// being preempted); a time in the future counts as now.
void Daemon::note_checkpoints(Seconds now) {
  if (!cfg_.daemon.preemption && !life_.preemptor()) return;
  for (JobId id : life_.holding_gpus()) {
    const LifeJob* l = life_.find(id);
    const auto t = env_.checkpointed_at(checkpoint_dir_of(id));
    if (!t) continue;
    const Seconds at = std::min(*t, now);
    if (l->current()->checkpointed_at && *l->current()->checkpointed_at >= at) continue;
    if (at < l->current()->launched_at) continue;  // an earlier attempt's
    Effects fx = life_.checkpointed(id, at);
    persist(fx, now);
    stop_signals_.insert(stop_signals_.end(), fx.signals.begin(), fx.signals.end());
  }
}

void Daemon::persist(const Effects& fx, Seconds now) {
  if (fx.changes.empty()) return;
  std::vector<JobId> finished;
  std::vector<Notice> notices;  // issue 32 item 6: told once the changes are committed
  Tx tx(store_);
  for (const auto& c : fx.changes) {
    auto it = records_.find(c.job);
    if (it == records_.end()) continue;
    DaemonJob& rec = it->second;
    sync(rec);
    store_.update(rec);
    std::string detail = c.detail;
    if (c.event == "launch" && rec.current())
      detail = fmt::format("attempt {} on {}{}", rec.current()->number, fmt::join(rec.current()->gpu_uuids, ","),
                           c.detail.empty() ? "" : "; " + c.detail);  // e.g. backfilled (lifecycle.h)
    store_.event(c.job, now, c.event, detail);
    if (notifier_->enabled())
      if (auto n = notice_for(rec, c.event, detail, now)) notices.push_back(std::move(*n));
    if (is_final(rec.state)) finished.push_back(c.job);
    if (rec.state != JobState::Queued) eta_watch_.forget(c.job);
  }
  tx.commit();
  // Inside the event loop's group commit the changes are on disk only at its commit:
  // their notices wait for it (send_stop_signals, called after it).
  for (auto& n : notices) pending_notices_.push_back(std::move(n));
  if (!store_.in_transaction()) post_notices();
  for (JobId id : finished) {
    records_.erase(id);
    life_.forget(id);
  }
}

void Daemon::post_notices() {
  for (auto& n : pending_notices_) notifier_->post(std::move(n));
  pending_notices_.clear();
}

void Daemon::send_stop_signals() {
  if (!store_.in_transaction()) post_notices();  // issue 32 item 6: committed now
  std::vector<JobId> later;
  for (JobId id : stop_signals_) {
    const LifeJob* l = life_.find(id);
    if (!l || !l->holds_gpus()) continue;
    if (!env_.stop_attempt(id, l->current()->number)) later.push_back(id);  // its shim is starting up
  }
  stop_signals_ = std::move(later);
}

std::vector<JobId> Daemon::note_etas(const std::map<JobId, Seconds>& etas, Seconds now) {
  std::vector<JobId> told;
  for (const auto& [id, eta] : etas) {
    auto it = records_.find(id);
    if (it == records_.end() || it->second.state != JobState::Queued) continue;
    const auto slip = eta_watch_.update(id, eta);
    if (!slip || !it->second.request.notify.has(api::NotifyEvent::Eta) || !notifier_->enabled()) continue;
    notifier_->post(make_notice(it->second, "eta", fmt::format("expected start slipped by {:.0f} s", *slip), now,
                                {{"eta", eta}, {"slip_s", *slip}}));
    told.push_back(id);
  }
  return told;
}

}  // namespace aegis
