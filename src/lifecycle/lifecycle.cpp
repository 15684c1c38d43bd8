#include "lifecycle/lifecycle.h"

#include "lifecycle/backfill.h"
#include "lifecycle/mps_limit.h"

#include <algorithm>
#include <fmt/format.h>
#include <functional>
#include <limits>
#include <stdexcept>

namespace aegis {

namespace {

// An estimator's figure (Horus formula, FakeTensor, learned model, history) that no GPU can
// offer is a guess that went wrong, not a need: the job is scheduled without it, as an
// estimator-free job is (observed, and the OOM ladder learns what it really needs). The
// user's own figure and a profiled peak stand. Returns whether it dropped any.
bool drop_guessed_estimates(MemoryEstimates& e) {
  const bool any = e.analytical || e.faketensor || e.learned || e.history;
  e.analytical = e.faketensor = e.learned = e.history = std::nullopt;
  return any;
}

}  // namespace

void Effects::merge(Effects&& o) {
  for (auto& c : o.changes) changes.push_back(std::move(c));
  for (auto& s : o.starts) starts.push_back(std::move(s));
  signals.insert(signals.end(), o.signals.begin(), o.signals.end());
  warnings.insert(warnings.end(), o.warnings.begin(), o.warnings.end());
  finished.insert(finished.end(), o.finished.begin(), o.finished.end());
  if (o.blocked) blocked = std::move(o.blocked);
  if (o.wake_at) wake_at = wake_at ? std::min(*wake_at, *o.wake_at) : *o.wake_at;
  if (o.reserved_start) reserved_start = o.reserved_start;
  join_turns.insert(join_turns.end(), o.join_turns.begin(), o.join_turns.end());
}

void Effects::reset() {
  changes.clear();
  starts.clear();
  signals.clear();
  warnings.clear();
  finished.clear();
  blocked.reset();
  wake_at.reset();
  reserved_start.reset();
  join_turns.clear();
}

Lifecycle::Lifecycle(const EngineConfig& config, LifecycleOptions options)
    : config_(config),
      opt_(std::move(options)),
      share_(config, opt_.share_weights),
      share_on_(share_.orders() || share_.caps() || opt_.track_usage) {}

void Lifecycle::record_change(Effects& fx, JobId id, std::string_view event, std::string_view detail) const {
  fx.changes.push_back({id, std::string(event), std::string(detail)});
}

LifeJob& Lifecycle::job(JobId id) {
  LifeJob* j = jobs_.find(id);
  if (!j) throw std::logic_error(fmt::format("lifecycle: no job {}", id));
  return *j;
}

const LifeJob* Lifecycle::find(JobId id) const {
  return jobs_.find(id);
}

void Lifecycle::enqueue(LifeJob& j, QueueName q, bool new_place) {
  j.queue = q;
  if (j.spec().priority != 0) ++ranked_;  // [fair share] the queues are served by level then
  auto& queue = q == QueueName::Recovery ? recovery_ : main_;
  if (new_place) {
    // A new place is after every queued one (next_seq_ exceeds every position given or
    // restored), so it goes in at the end without a search down the tree.
    j.queue_seq = next_seq_++;
    queue.push_back(j.queue_seq, &j);
  } else {
    queue.put(j.queue_seq, &j);
  }
}

void Lifecycle::dequeue(LifeJob& j) {
  if (j.queue != QueueName::None && j.spec().priority != 0) --ranked_;  // [fair share]
  if (j.queue == QueueName::Main) main_.erase(j.queue_seq);
  if (j.queue == QueueName::Recovery) recovery_.erase(j.queue_seq);
  j.queue = QueueName::None;
}

void Lifecycle::finish(LifeJob& j, JobState s, std::string_view reason, Seconds t, Effects& fx,
                       std::string_view event) {
  dequeue(j);
  j.state = s;
  j.ended_at = t;
  j.reason = reason;
  if (holds_.active()) holds_.finished(j.id(), s);  // [issue 32] what its dependents wait for
  fx.finished.push_back(j.id());
  change(fx, j.id(), event, reason);
}

Effects Lifecycle::submitted(JobSpec spec, bool exclusive, bool restartable, Seconds t) {
  Effects fx;
  const JobId id = spec.id;
  auto [made, fresh] = jobs_.try_emplace(id);
  if (!fresh) throw std::logic_error(fmt::format("lifecycle: job {} submitted twice", id));
  LifeJob& stored = *made;
  stored.queued.spec = std::move(spec);
  // Under MPS a job on several GPUs runs alone on them: each GPU has its own control
  // daemon, and a client reaches one (docs/sharing.md, "Jobs on several GPUs").
  stored.queued.recovery.exclusive_only = exclusive || runs_alone_under_mps(config_, stored.queued.spec);
  stored.restartable = restartable;
  enqueue(stored, QueueName::Main, true);
  if (share_on_) share_.seen(stored.spec().owner, stored.spec().group);  // [fair share]
  (void)t;
  change(fx, id, "submit", "");
  return fx;
}

Effects Lifecycle::submitted(JobSpec spec, bool exclusive, bool restartable, Seconds t, const JobLinks& links) {
  const JobId id = spec.id;
  const bool linked = spec.array_id || !links.after.empty();
  Effects fx = submitted(std::move(spec), exclusive, restartable, t);
  if (linked) holds_.add(job(id), links);  // [issue 32]
  return fx;
}

void Lifecycle::restore(LifeJob j, const JobLinks& links) {
  const JobId id = j.id();
  const bool linked = j.spec().array_id || !links.after.empty();
  restore(std::move(j));
  if (linked) holds_.add(job(id), links);  // [issue 32]
}

void Lifecycle::restore(LifeJob j) {
  const JobId id = j.id();
  next_seq_ = std::max(next_seq_, j.queue_seq + 1);
  LifeJob& stored = jobs_.assign(id, std::move(j));
  if (runs_alone_under_mps(config_, stored.spec())) stored.queued.recovery.exclusive_only = true;  // queued before the rule
  if (share_on_) {  // [fair share] its user, and its charge from the launch of a running attempt
    share_.seen(stored.spec().owner, stored.spec().group);
    if (stored.holds_gpus())
      share_.started(stored.spec().owner, stored.spec().group, gpu_holds(stored.current()->placement),
                     stored.current()->launched_at);
  }
  if (stored.state == JobState::Queued) {
    enqueue(stored, stored.queue == QueueName::Recovery ? QueueName::Recovery : QueueName::Main, false);
  } else {
    stored.queue = QueueName::None;
    // Issue 32 item 5: a running attempt keeps its deadline across a restart.
    // (Its signal may have been sent: the reason the driver kept says so.)
    if (const LifeAttempt* a = stored.current(); stored.holds_gpus() && stored.spec().time_limit) {
      deadlines_.add(id, a->number, a->launched_at + *stored.spec().time_limit);
      stored.timed_out = stored.reason.starts_with("timeout:");
    }
    if (stored.preempted_for && stored.holds_gpus()) preemptor_ = stored.preempted_for;  // preemption.h
    // It ended and was classified, but the recovery rule had not decided yet: ask again.
    const LifeAttempt* a = stored.current();
    if (stored.state == JobState::Running && a && a->ended_at &&
        (a->outcome == AttemptOutcome::Oom || a->outcome == AttemptOutcome::Failed ||
         a->outcome == AttemptOutcome::FailedStart))
      pending_failures_.push_back(
          {id, Failure{running_view(stored, a->placement.parts.empty() ? Placement::Part{} : a->placement.parts.front()),
                       a->outcome == AttemptOutcome::Oom ? FailureKind::Oom : FailureKind::Other, a->detail}});
  }
}

Effects Lifecycle::start_failed(JobId id, bool transient, const std::string& why, Seconds t) {
  Effects fx;
  LifeJob& j = job(id);
  if (j.holds_gpus()) charge_stop(j, t);  // [fair share]
  LifeAttempt& a = *j.current();
  a.ended_at = t;
  if (transient) {
    // Nothing ran: back to its place in its queue, for the next pass.
    a.outcome = AttemptOutcome::Lost;
    a.detail = "never started";
    j.state = JobState::Queued;
    j.reason = "requeued: cannot start it: " + why;
    enqueue(j, j.placed_from == QueueName::Recovery ? QueueName::Recovery : QueueName::Main, false);
    change(fx, id, "requeue", j.reason);
  } else {
    a.outcome = AttemptOutcome::FailedStart;
    a.detail = why;
    finish(j, JobState::Failed, "cannot start: " + why, t, fx, "failed");
  }
  return fx;
}

Effects Lifecycle::withdraw(JobId id, const std::string& why) {
  Effects fx;
  LifeJob& j = job(id);
  if (!j.holds_gpus()) return fx;
  charge_stop(j, j.current()->launched_at);  // [fair share] it never ran
  j.attempts.pop_back();
  if (j.attempts.empty()) j.started_at.reset();
  j.state = JobState::Queued;
  j.reason = "waiting: " + why;
  enqueue(j, j.placed_from == QueueName::Recovery ? QueueName::Recovery : QueueName::Main, false);
  return fx;
}

void Lifecycle::set_estimates(JobId id, const MemoryEstimates& e) { job(id).queued.spec.estimates = e; }
void Lifecycle::set_hints(JobId id, const ProfileHints& h) { job(id).queued.spec.hints = h; }
void Lifecycle::set_predicted_util(JobId id, std::optional<double> u) { job(id).queued.spec.predicted_util = u; }
void Lifecycle::set_predicted_duration(JobId id, std::optional<Seconds> s) {
  job(id).queued.spec.predicted_duration = s;
}

Effects Lifecycle::first_activity(JobId id, Seconds t, Anchor anchor) {
  Effects fx;
  LifeJob& j = job(id);
  if (!j.holds_gpus() || j.current()->first_activity) return fx;
  j.current()->first_activity = t;
  j.current()->anchor = anchor;
  // (Its detail string made only when there is one: the simulator's activities are Reported.)
  if (anchor == Anchor::Reported) change(fx, id, "activity", "");
  else change(fx, id, "activity", "anchor: " + std::string(to_string(anchor)));
  return fx;
}

Effects Lifecycle::ended(JobId id, const Ended& e, Seconds t) {
  Effects fx;
  ended(id, e, t, fx);
  return fx;
}

void Lifecycle::ended(JobId id, const Ended& e, Seconds t, Effects& fx) {
  fx.reset();
  LifeJob& j = job(id);
  if (!j.holds_gpus()) return;
  charge_stop(j, t);  // [fair share]
  LifeAttempt& a = *j.current();
  a.ended_at = t;
  a.outcome = e.outcome;
  a.detail = e.detail;
  // Issue 32 item 5: stopped at its time limit, it failed, whatever its exit says (a job
  // that completed before the signal reached it keeps its completion).
  if (j.timed_out && e.outcome != AttemptOutcome::Completed && !j.cancel_requested) {
    finish(j, JobState::Failed, j.reason, t, fx, "failed");
    return;
  }
  if (j.preempted_for && requeue_if_preempted(j, e, t, fx)) return;  // issue 32 item 1 (preemption.cpp)
  // Stopped for a neighbour's OOM (lifecycle_blame.cpp): however it ended but completed,
  // the OOM is its own, and its recovery rule decides.
  const bool charged = opt_.oom_blame_stop && !j.blamed.empty() && !j.cancel_requested &&
                       (e.outcome == AttemptOutcome::Cancelled || e.outcome == AttemptOutcome::Failed ||
                        e.outcome == AttemptOutcome::Oom);
  if (charged) {
    a.outcome = AttemptOutcome::Oom;
    a.detail = j.blamed;
  }
  switch (a.outcome) {
    case AttemptOutcome::Running:
      throw std::logic_error("lifecycle: an attempt ended as running");
    case AttemptOutcome::Completed:
      finish(j, JobState::Completed, "", t, fx, "completed");
      if (!fx.changes.empty()) fx.changes.back().detail = e.detail;
      break;
    case AttemptOutcome::Cancelled:
      finish(j, JobState::Cancelled, j.reason.empty() ? "cancelled" : j.reason, t, fx, "cancelled");
      break;
    case AttemptOutcome::Oom:
    case AttemptOutcome::Failed:
    case AttemptOutcome::FailedStart: {
      if (j.cancel_requested) {  // it was asked to stop: it stopped
        finish(j, JobState::Cancelled, j.reason.empty() ? "cancelled" : j.reason, t, fx, "cancelled");
        break;
      }
      const bool oom = a.outcome == AttemptOutcome::Oom;
      change(fx, id, oom ? "oom" : "exit", a.detail);
      // Beside a job that grew past its admission, the OOM is that job's (lifecycle_blame.cpp).
      if (oom && !charged && blame_neighbour(j, t, fx)) break;
      if (oom)
        if (auto free = free_at(j, t)) free_at_failure_[id] = *free;
      const auto& part = a.placement.parts.empty() ? Placement::Part{} : a.placement.parts.front();
      pending_failures_.push_back(
          {id, Failure{running_view(j, part), oom ? FailureKind::Oom : FailureKind::Other,
                       a.outcome == AttemptOutcome::FailedStart ? "failed to start: " + a.detail : a.detail}});
      break;
    }
    case AttemptOutcome::Lost: {
      // It never started: back to its old place, a few times at most. One the host
      // interrupted is not counted: each took an outage the driver bounds (its restarts).
      const bool by_host = e.detail.starts_with(kInterruptedByHost);
      int never = 0;
      for (auto it = j.attempts.rbegin(); it != j.attempts.rend() && it->outcome == AttemptOutcome::Lost; ++it)
        never += it->detail.starts_with(kInterruptedByHost) ? 0 : 1;
      if (by_host) {
        j.state = JobState::Queued;
        j.reason = "requeued, not counted against it: " + e.detail.substr(kInterruptedByHost.size());
        enqueue(j, j.placed_from == QueueName::Recovery ? QueueName::Recovery : QueueName::Main, false);
        change(fx, id, "requeue", j.reason);
        break;
      }
      if (never >= opt_.max_unstarted_attempts) {
        finish(j, JobState::Failed,
               fmt::format("could not be started: its launch ended before starting it {} times in a row", never), t, fx,
               "failed");
        break;
      }
      j.state = JobState::Queued;
      j.reason = "requeued: its launch was interrupted";
      enqueue(j, j.placed_from == QueueName::Recovery ? QueueName::Recovery : QueueName::Main, false);
      change(fx, id, "requeue", j.reason);
      break;
    }
    case AttemptOutcome::Unknown:
      // It may have run: never again behind its user's back, unless it may run twice.
      if (j.cancel_requested) {
        finish(j, JobState::Cancelled, j.reason.empty() ? "cancelled" : j.reason, t, fx, "cancelled");
      } else if (j.restartable) {
        j.state = JobState::Queued;
        j.reason = "requeued (restartable): " + e.detail;
        enqueue(j, j.placed_from == QueueName::Recovery ? QueueName::Recovery : QueueName::Main, false);
        change(fx, id, "requeue", j.reason);
      } else {
        finish(j, JobState::Failed,
               e.detail + "; not run again, as it might have run already (submit with --restartable to allow it)", t,
               fx, "failed");
      }
      break;
  }
}

Effects Lifecycle::cancel(JobId id, const std::string& why, Seconds t) {
  Effects fx;
  LifeJob& j = job(id);
  if (is_final(j.state)) return fx;
  if (j.state == JobState::Queued) {
    finish(j, JobState::Cancelled, "cancelled before it started" + (why.empty() ? "" : ": " + why), t, fx,
           "cancelled");
    return fx;
  }
  // Recorded first (the driver persists the change), signalled after.
  j.cancel_requested = true;
  j.reason = why.empty() ? "" : "cancelled: " + why;
  change(fx, id, "cancel", why.empty() ? "requested" : why);
  fx.signals.push_back(id);
  return fx;
}

Effects Lifecycle::expire(Seconds t) {
  Effects fx;
  std::vector<Deadlines::Due> due;
  deadlines_.take_due(t, due);
  for (const auto& d : due) {
    LifeJob* j = jobs_.find(d.job);
    // Only the attempt the deadline was set for, still running and not being stopped.
    if (!j || !j->holds_gpus() || j->current()->number != d.attempt || j->cancel_requested) continue;
    if (j->timed_out) {  // signalled before a restart (restore()): again, it may not have been sent
      fx.signals.push_back(d.job);
      continue;
    }
    j->timed_out = true;
    j->reason = "timeout: ran past its time limit of " + format_time_limit(*j->spec().time_limit);
    change(fx, d.job, "timeout", j->reason);
    fx.signals.push_back(d.job);
  }
  fx.wake_at = deadlines_.next();
  return fx;
}

std::optional<Seconds> Lifecycle::reservation(const LifeJob& head, Seconds now, const Placer& placer) {
  const auto servers = placer.server_gpus();
  if (servers.empty()) return std::nullopt;
  bf_held_.clear();
  bf_need_ = placer.head_need(head.queued);
  bf_num_gpus_ = head.spec().num_gpus;
  constexpr Seconds kOn = std::numeric_limits<Seconds>::infinity();
  jobs_.for_each([&](const LifeJob& j) {
    if (!j.holds_gpus()) return;
    const LifeAttempt& a = *j.current();
    // Ends when expected (its limit, or its predicted duration when shorter; now, when past
    // its limit and being stopped); with neither, it may run on.
    const auto end = expected_end(j.spec(), a.launched_at, now);
    const Seconds until = end ? std::max(now, *end) : kOn;
    hold(a.placement, until);
  });
  if (config_.backfill_joins != "any") {
    bf_busy_.reset(servers);
    for (const HeldGpu& h : bf_held_) bf_busy_.mark(h.server, h.gpu, h.until);
  }
  bf_book_.reset(bf_num_gpus_, servers, bf_held_, now, bf_need_);
  auto reserved = bf_book_.start();
  // The memory rule run forward says the head could share GPUs now, yet the engine has just
  // refused it: what it waits for (memory in use beyond what was booked, a gate, pressure)
  // is not what the rule counts, so a reservation of now protects nothing (every job would
  // keep it). The head is then reserved idle GPUs, which the rule counts exactly.
  if (reserved && *reserved <= now && bf_need_ && bf_need_->shares) {
    bf_need_.reset();
    bf_book_.reset(bf_num_gpus_, servers, bf_held_, now, bf_need_);
    reserved = bf_book_.start();
  }
  return reserved;
}

void Lifecycle::hold(const Placement& p, Seconds until) {
  for (const auto& part : p.parts)
    for (int g : part.launch.gpus)
      bf_held_.push_back({part.server, g, until, part.launch.admitted_mib, part.launch.exclusive});
}

// A later job placed at `p`: the head's reservation counted with it running to its limit
// (on, without one) must be no later. One that ends by then takes nothing from the head.
// With `backfill_joins` (none, earlier_ending, by_reservation) it must also not share a GPU
// with a running job (none), with one expected to end after it (earlier_ending), or with one
// expected to run past the head's reservation (by_reservation): running jobs have precedence
// too, and joining them slows them (docs/lab-policies.md).
bool Lifecycle::keeps_reservation(const LifeJob& j, const Placement& p, Seconds now, Seconds reserved) {
  const auto end = expected_end(j.spec(), now, now);
  const Seconds until = end ? *end : std::numeric_limits<Seconds>::infinity();
  if (config_.backfill_joins != "any") {
    std::optional<Seconds> turns;
    if (joins_running(p, until, now, reserved, &turns)) {
      if (turns && *turns < reserved)
        for (const auto& part : p.parts) bf_turns_.emplace_back(part.server, *turns);
      return false;
    }
  }
  bool kept = may_backfill(j.spec(), now, reserved);
  if (!kept) {
    const std::size_t before = bf_held_.size();
    hold(p, until);
    // The book counts what was held before; only the servers of p are counted again.
    const std::span<const HeldGpu> mine(bf_held_.begin() + static_cast<std::ptrdiff_t>(before), bf_held_.end());
    const auto r = bf_book_.start_with(mine);
    kept = r && *r <= reserved;  // kept: it runs, and the next candidate counts it
    if (kept) bf_book_.add(mine);
    else bf_held_.resize(before);
  }
  if (kept && config_.backfill_joins != "any")  // it will run: later candidates see it
    for (const auto& part : p.parts)
      for (int g : part.launch.gpus) bf_busy_.mark(part.server, g, until);
  return kept;
}

// Whether `p`, for a job expected to end at `until` while the head is reserved at
// `reserved`, shares a GPU with a running job that `backfill_joins` protects from it.
// by_reservation: a job that ends by the reservation leaves before the head starts anyway,
// so sharing with it costs it only time the queue was waiting for the head; one that runs
// past it would be slowed beyond the window backfill borrows (a week-long job on Philly).
// The joined job is slowed by the sharing, so its end is counted slowed
// (backfill_join_slowdown): the job whose end is the reservation itself, the one the head
// waits for, is never joined, since slowing it moves the head's real start later.
bool Lifecycle::joins_running(const Placement& p, Seconds until, Seconds now, Seconds reserved,
                              std::optional<Seconds>* turns_at) const {
  const std::string& joins = config_.backfill_joins;
  const bool any_job = joins == "none";
  const bool by_reservation = joins == "by_reservation";
  const double f = config_.backfill_join_slowdown;
  const Seconds bound = by_reservation ? reserved : until;
  bool declined = false;
  bool turns = by_reservation && f > 1;  // only the slowdown's refusals turn with time
  Seconds at = now;
  for (const auto& part : p.parts)
    for (int g : part.launch.gpus) {
      if (any_job) {
        if (bf_busy_.busy(part.server, g)) return true;
        continue;
      }
      const Seconds end = bf_busy_.until(part.server, g);
      if (end > bound) return true;  // past the reservation even unslowed: no time turns it
      if (by_reservation && slowed_end(end, now, f) > bound) {
        declined = true;
        // now' + (end - now') f <= reserved from now' = (end f - reserved) / (f - 1) on,
        // which comes before the job's end only if it ends before the reservation.
        // (A microsecond later: at the computed instant rounding may still decline it.)
        if (end < bound) at = std::max(at, (end * f - reserved) / (f - 1) + 1e-6);
        else turns = false;
      }
    }
  if (declined && turns && turns_at) *turns_at = at;
  return declined;
}

RunningJob Lifecycle::running_view(const LifeJob& j, const Placement::Part& part) const {
  RunningJob r;
  const LifeAttempt* a = j.current();
  r.spec = j.queued.spec;
  r.recovery = j.queued.recovery;
  r.gpus = part.launch.gpus;
  // A job spanning servers is, to each server's engine, a job of the GPUs it has there.
  r.spec.num_gpus = static_cast<int>(part.launch.gpus.size());
  if (a) {
    r.launched_at = a->launched_at;
    r.first_activity = a->first_activity;
  }
  r.exclusive = part.launch.exclusive;
  r.admitted_mib = part.launch.admitted_mib;
  r.free_at_placement = part.launch.free_at_placement;
  r.gpu_total_mib = part.gpu_total_mib;
  return r;
}

Effects Lifecycle::schedule(Seconds now, Placer& placer) {
  Effects fx;
  schedule(now, placer, fx);
  return fx;
}

void Lifecycle::start(LifeJob& j, Placement&& p, Seconds now, Placer& placer, Effects& fx, bool backfilled) {
  const QueuedJob& qj = j.queued;
  // The placer's view of its GPUs includes the job before anything else is placed.
  placer.started(qj, p, now);
  if (holds_.active()) holds_.started(j);  // [issue 32] its array's running count
  if (share_on_) share_.started(j.spec().owner, j.spec().group, gpu_holds(p), now);  // [fair share]
  j.placed_from = j.queue;
  dequeue(j);
  j.state = JobState::Running;
  j.reason.clear();
  j.blamed.clear();  // issue 33 item 2: a blame is the attempt's
  if (!j.started_at) j.started_at = now;
  Effects::Start s;
  s.job = j.id();
  if (opt_.start_placements) s.placement = p;
  s.attempt = static_cast<int>(j.attempts.size()) + 1;
  s.backfilled = backfilled;
  // Under MPS every job that others may join gets a limit from what is known of it
  // (lifecycle/mps_limit.h), also one placed alone for now: unlimited, it could grow
  // and push a later neighbour out of memory. A job placed exclusive has no neighbour.
  if (opt_.mps_limits) s.mps_limit_mib = mps_memory_limit(config_, qj, p);
  // An earlier attempt ran (an OOM, a preemption, a restart): this one resumes from what
  // it saved (AEGIS_RESUME; issue 32 item 1). One that never started saved nothing.
  for (const LifeAttempt& before : j.attempts)
    if (before.outcome != AttemptOutcome::Lost && before.outcome != AttemptOutcome::FailedStart) s.resume = true;
  LifeAttempt& a = j.attempts.emplace_back();
  a.number = s.attempt;
  a.placement = std::move(p);
  a.launched_at = now;
  fx.starts.push_back(std::move(s));
  change(fx, j.id(), "launch", backfilled ? kBackfilledLaunch : std::string_view{});
  if (j.spec().time_limit) deadlines_.add(j.id(), a.number, now + *j.spec().time_limit);  // item 5
}

void Lifecycle::schedule(Seconds now, Placer& placer, Effects& fx) {
  fx.reset();
  // Failures first: the recovery rule decides what becomes of each. (Swapped into a list
  // kept for its storage: failures_ is empty here.)
  failures_.swap(pending_failures_);
  for (auto& [id, f] : failures_) {
    LifeJob& j = job(id);
    auto outcome = placer.recover(f);
    // What the GPU had free at the failure (its last sample then), when a driver read it:
    // the rule's own figure is what the job was placed with.
    if (const auto free = free_at_failure_.find(id); free != free_at_failure_.end()) {
      const std::string at = fmt::format("; {} MiB were free at the failure", free->second);
      if (auto* r = std::get_if<Requeue>(&outcome)) r->why += at;
      else std::get<Stop>(outcome).reason += at;
      free_at_failure_.erase(free);
    }
    if (auto* r = std::get_if<Requeue>(&outcome)) {
      j.queued.recovery = r->recovery;
      j.state = JobState::Queued;
      enqueue(j, QueueName::Recovery, true);
      change(fx, id, "requeue", r->why);
      j.reason = std::move(r->why);
    } else {
      finish(j, JobState::Failed, std::get<Stop>(outcome).reason, now, fx, "failed");
    }
  }
  failures_.clear();
  if (holds_.active()) cancel_doomed(now, fx);  // [issue 32] dependencies that can no longer be met
  // Preemption (issue 32 item 1, preemption.cpp): due stops, then the job they are for.
  if (opt_.preemption || preemptor_) {
    advance_preemptions(now, fx);
    if (serve_preemptor(now, placer, fx)) return;
  }
  // Then the queues, head first: the recovery queue before the main queue.
  const bool strict = config_.strict_head_of_line;
  // The first job passed over because only processes outside aegis keep it from running:
  // reported as the one that waits when it came first.
  std::optional<Blocked> outside;
  // A job at its user's cap or an array element waiting for its learned floor: it keeps its
  // place, says why, and blocks nothing behind it (reported as `outside` when it came first).
  auto pass_over = [&](LifeJob& j, const std::string& why) {
    j.reason = "waiting: " + why;
    if (!outside) {
      outside.emplace();
      outside->job = j.id();
      outside->reason = j.reason;
    }
  };
  last_pass_ = now;
  // Backfill (issue 32 item 5, lifecycle/backfill.h): once the head waits, with a reserved
  // start, only jobs whose time limit ends them by then are tried; the head's reason stays.
  std::optional<Seconds> reserved;
  std::optional<Blocked> head_blocked;
  bf_turns_.clear();  // (a pass that returns early reports none)
  // [issue 32 item 1] Level by level, highest first, when queued jobs differ in level: a
  // level's recovery queue, then its main queue. One level: one round, as published.
  queued_levels(levels_);
  for (std::size_t k = 0; k < 2 * std::max<std::size_t>(levels_.size(), 1); ++k) {
    SeqQueue<LifeJob>* q = k % 2 == 0 ? &recovery_ : &main_;
    const std::size_t round = k / 2;
    // [fair share] By priority level, then fair share, when either applies: a list made
    // for this pass (a job leaving its queue below stays where the list points). Else FIFO
    // by index: a job leaving the queue below moves no entry (seq_queue.h).
    const bool sorted = reorders();
    // (What running jobs are committed to is counted once a pass; its starts add to it.)
    if (sorted) serving_order(*q, now, served_, k == 0);
    const std::size_t n = sorted ? served_.size() : q->end();
    for (std::size_t i = sorted ? 0 : q->first(); i < n; ++i) {
      LifeJob* queued = sorted ? served_[i] : q->at(i);
      if (!queued) continue;  // left the queue
      if (levels_.size() > 1 && queued->spec().priority != levels_[round]) continue;  // another round's
      LifeJob& j = *queued;
      const QueuedJob& qj = j.queued;
      if (holds_.active() && held(j, now, fx)) continue;  // [issue 32] held: keeps its place, blocks nothing
      if (auto why = placer.never_runs(qj)) {
        // It can never run here: it leaves the queue instead of blocking everything behind
        // it, unless it was only an estimator's guess that no GPU can offer (dropped here).
        bool dropped = drop_guessed_estimates(j.queued.spec.estimates);
        if (holds_.active()) dropped = holds_.drop_floor(j) || dropped;  // [issue 32] an array's learned floor, likewise
        if (!dropped || placer.never_runs(qj)) {
          finish(j, JobState::Failed, *why, now, fx, "failed");
          continue;
        }
      }
      if (auto why = placer.waits_outside(qj)) {
        // It can start only once processes outside aegis free memory, which nothing here
        // controls: it keeps its place but lets the jobs behind it be tried (docs/daemon.md).
        if (!outside) {
          outside.emplace();
          outside->job = j.id();
          outside->reason = "can start only when processes outside aegis end: " + *why;
        }
        continue;
      }
      // [fair share] A user at a cap waits for its own jobs: passed over, not blocking.
      auto capped = share_.caps() ? share_.capped(j.spec().owner, std::nullopt) : std::nullopt;
      auto p = capped ? std::nullopt : placer.place(qj, now);
      if (p && share_.caps()) capped = share_.capped(j.spec().owner, booked_mib(*p));
      if (capped) {
        pass_over(j, *capped);
        continue;
      }
      if (!p) {
        if (auto w = placer.wake_at()) fx.wake_at = fx.wake_at ? std::min(*fx.wake_at, *w) : *w;
        // [issue 32, experiment s35] An array element waiting for its learned floor while a
        // sibling runs: passed over, as a user at a cap is (holds.h, passed_over).
        if (holds_.active()) {
          if (auto why = holds_.passed_over(j, config_)) {
            pass_over(j, *why);
            continue;
          }
        }
        if (reserved) continue;  // backfill hook (item 5): a later job that does not fit now
        if (opt_.preemption && preempt_for(j, now, placer, fx)) return;  // issue 32 item 1
        // The first job that waits keeps its reason (without strict head-of-line later ones wait too).
        if (!fx.blocked) fx.blocked = outside ? outside : placer.blocked();
        if (strict && config_.backfill) reserved = reservation(j, now, placer);  // backfill hook (item 5)
        if (reserved) {
          head_blocked = fx.blocked;
          continue;
        }
        if (strict) return;
        continue;
      }
      if (reserved && !keeps_reservation(j, *p, now, *reserved)) {  // backfill hook (item 5)
        placer.declined(qj, *p);
        continue;
      }
      start(j, std::move(*p), now, placer, fx, reserved.has_value());  // backfilled, when a head waits (item 5)
      // [fair share] Its user is now committed to more: the rest of the pass in the new order.
      if (sorted && share_.counts_committed() && j.holds_gpus()) {
        pass_committed_[j.spec().owner] += committed_of(j, now);
        sort_by_share(now, served_, i + 1);
      }
    }
  }
  if (reserved) {  // backfill hook (item 5): the head still waits
    fx.blocked = std::move(head_blocked);
    fx.reserved_start = reserved;
    if (!bf_turns_.empty()) {  // each server once, at its earliest turn
      std::sort(bf_turns_.begin(), bf_turns_.end());
      bf_turns_.erase(std::unique(bf_turns_.begin(), bf_turns_.end(),
                                  [](const auto& a, const auto& b) { return a.first == b.first; }),
                      bf_turns_.end());
      fx.join_turns.insert(fx.join_turns.end(), bf_turns_.begin(), bf_turns_.end());
    }
  } else if (!fx.blocked) {
    fx.blocked = std::move(outside);  // none waits but the one passed over
  }
}

std::vector<RunningJob> Lifecycle::running_on(int server) const {
  std::vector<RunningJob> out;
  jobs_.for_each([&](const LifeJob& j) {
    if (!j.holds_gpus()) return;
    for (const auto& part : j.current()->placement.parts)
      if (part.server == server) out.push_back(running_view(j, part));
  });
  std::sort(out.begin(), out.end(), [](const RunningJob& a, const RunningJob& b) { return a.spec.id < b.spec.id; });
  return out;
}

std::vector<JobId> Lifecycle::queue_order() const {
  std::vector<JobId> out;
  std::vector<LifeJob*> order;
  std::vector<int> levels;
  queued_levels(levels);
  if (levels.size() > 1) {  // as schedule() serves them: by level, each level's recovery queue first
    for (int level : levels)
      for (const auto* q : {&recovery_, &main_}) {
        serving_order(*q, last_pass_, order);
        for (const LifeJob* j : order)
          if (j->spec().priority == level) out.push_back(j->id());
      }
    return out;
  }
  for (const auto* q : {&recovery_, &main_}) {
    if (reorders()) {
      serving_order(*q, last_pass_, order);
      for (const LifeJob* j : order) out.push_back(j->id());
      continue;
    }
    for (std::size_t i = q->first(); i < q->end(); ++i)
      if (const LifeJob* j = q->at(i)) out.push_back(j->id());
  }
  return out;
}

// [issue 32 item 1] The levels of the queued jobs, highest first; none while every queued
// job is at level 0 (the published loop, which needs no rounds).
void Lifecycle::queued_levels(std::vector<int>& out) const {
  out.clear();
  if (ranked_ == 0) return;
  for (const auto* q : {&recovery_, &main_})
    for (std::size_t i = q->first(); i < q->end(); ++i)
      if (const LifeJob* j = q->at(i); j && std::find(out.begin(), out.end(), j->spec().priority) == out.end())
        out.push_back(j->spec().priority);
  std::sort(out.begin(), out.end(), std::greater<>());
}

// [fair share] Priority level (higher first), then the user's fair-share factor (higher
// first), then the place in the queue. The factor is taken at the pass's start, as Slurm's
// priorities are recomputed between passes; with fair_share_committed a start in the pass
// commits its user to more at once, so schedule() orders the rest of the pass again then.
void Lifecycle::serving_order(const SeqQueue<LifeJob>& q, Seconds now, std::vector<LifeJob*>& out, bool fresh) const {
  out.clear();
  for (std::size_t i = q.first(); i < q.end(); ++i)
    if (LifeJob* j = q.at(i)) out.push_back(j);
  if (!share_.orders()) {
    std::stable_sort(out.begin(), out.end(),
                     [](const LifeJob* a, const LifeJob* b) { return a->spec().priority > b->spec().priority; });
    return;
  }
  if (fresh) pass_committed_ = committed_usage(now);
  sort_by_share(now, out, 0);
}

void Lifecycle::sort_by_share(Seconds now, std::vector<LifeJob*>& out, std::size_t first) const {
  if (first >= out.size()) return;
  const auto factor = share_.factors(now, pass_committed_.empty() ? nullptr : &pass_committed_);
  // Each job's key looked up once (a user's factor is one map lookup), then sorted stably.
  struct Keyed {
    int priority;
    double factor;
    LifeJob* job;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(out.size() - first);
  for (std::size_t i = first; i < out.size(); ++i) {
    auto it = factor.find(out[i]->spec().owner);
    keyed.push_back({out[i]->spec().priority, it == factor.end() ? 1.0 : it->second, out[i]});
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.factor > b.factor;
  });
  for (std::size_t i = 0; i < keyed.size(); ++i) out[first + i] = keyed[i].job;
}

// A running attempt is expected to hold its GPUs for the rest of its user's mean run time
// (FairShare::expected_usage), no longer than its time limit leaves.
double Lifecycle::committed_of(const LifeJob& j, Seconds now) const {
  const LifeAttempt& a = *j.current();
  std::optional<Seconds> left;
  if (j.spec().time_limit) left = a.launched_at + *j.spec().time_limit - now;
  return share_.expected_usage(j.spec().owner, a.placement, now - a.launched_at, left);
}

std::map<std::int64_t, double> Lifecycle::committed_usage(Seconds now) const {
  std::map<std::int64_t, double> out;
  if (!share_.counts_committed()) return out;
  jobs_.for_each([&](const LifeJob& j) {
    if (j.holds_gpus()) out[j.spec().owner] += committed_of(j, now);
  });
  return out;
}

std::map<std::int64_t, double> Lifecycle::fair_share_factors(Seconds now) const {
  const auto committed = committed_usage(now);
  return share_.factors(now, committed.empty() ? nullptr : &committed);
}

void Lifecycle::charge_stop(const LifeJob& j, Seconds t) {
  if (!share_on_ || !j.current()) return;
  share_.stopped(j.spec().owner, gpu_holds(j.current()->placement), t);
  share_.ran(j.spec().owner, t - j.current()->launched_at, t);  // (kept only with fair_share_committed)
}

void Lifecycle::rebuild_usage(std::vector<PastHold> ended) {
  if (!share_on_) return;
  jobs_.for_each([&](const LifeJob& j) {
    if (j.holds_gpus())
      ended.push_back({j.spec().owner, j.spec().group, gpu_holds(j.current()->placement), j.current()->launched_at, {}});
  });
  share_.rebuild(std::move(ended));
}

std::vector<JobId> Lifecycle::holding_gpus() const {
  std::vector<JobId> out;
  jobs_.for_each([&](const LifeJob& j) {
    if (j.holds_gpus()) out.push_back(j.id());
  });
  std::sort(out.begin(), out.end());
  return out;
}

void Lifecycle::forget(JobId id) {
  LifeJob* j = jobs_.find(id);
  if (!j) return;
  dequeue(*j);
  holds_.forget(id);
  jobs_.erase(id);
}

}  // namespace aegis
