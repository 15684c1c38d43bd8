// Preemption in the lifecycle (lifecycle.h, preemption.h). A head that cannot start may
// stop running jobs of lower levels: each victim is warned with its checkpoint signal
// (Effects::warnings) and stopped when it says it saved a checkpoint (checkpointed())
// or when its lead time is over (Effects::signals); when it ends it goes back to its
// place in its queue with its recovery state unchanged (no OOM ladder step), and its next
// attempt resumes (Effects::Start::resume). Until the head starts, it is served first:
// what was freed for it is not handed to anyone else.
#include "lifecycle/preemption.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <fmt/format.h>

#include "lifecycle/lifecycle.h"

namespace aegis {

namespace {

// The victims `c` gives in its order: the shortest prefix that fits (the whole list, known
// to fit, is not asked again), then each one the head can do without given back, the most
// work first (one taken early may be unneeded once a larger one is taken).
std::vector<JobId> take_in_order(const std::vector<VictimCandidate>& c,
                                 const std::function<bool(std::span<const JobId>)>& fits) {
  std::vector<JobId> taken;
  taken.reserve(c.size());
  for (const auto& v : c) taken.push_back(v.id);
  for (std::size_t n = 1; n < c.size(); ++n)
    if (fits(std::span<const JobId>(taken.data(), n))) {
      taken.resize(n);
      break;
    }
  for (std::size_t i = taken.size(); i-- > 1;) {
    std::vector<JobId> without = taken;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(i - 1));
    if (fits(without)) taken = std::move(without);
  }
  return taken;
}

// Ties in both orders: the lower level, then the later job.
bool tie_first(const VictimCandidate& a, const VictimCandidate& b) {
  if (a.priority != b.priority) return a.priority < b.priority;
  return a.id > b.id;
}

}  // namespace

int earlier_preemptions(const LifeJob& j) {
  int n = 0;
  for (std::size_t i = 0; i + 1 < j.attempts.size(); ++i) n += j.attempts[i].detail.starts_with(kPreemptedFor) ? 1 : 0;
  return n;
}

Seconds exempt_for(const LifeJob& j, const EngineConfig& config) {
  const int before = earlier_preemptions(j);
  return before == 0 ? config.preempt_exempt_s
                     : config.preempt_exempt_s * std::pow(config.preempt_exempt_growth, before);
}

std::vector<JobId> choose_victims(std::vector<VictimCandidate> c,
                                  const std::function<bool(std::span<const JobId>)>& fits) {
  // All of them first: a head that even all candidates cannot make room for is the
  // common case while it waits (each pass asks again), and one ask answers it, where the
  // walks below would ask once per candidate (hundreds at cluster scale, each a what-if).
  std::vector<JobId> all;
  all.reserve(c.size());
  for (const auto& v : c) all.push_back(v.id);
  if (!fits(all)) return {};

  std::vector<VictimCandidate> by_work = c;
  std::sort(by_work.begin(), by_work.end(), [](const VictimCandidate& a, const VictimCandidate& b) {
    if (a.work_at_risk_gpu_s() != b.work_at_risk_gpu_s()) return a.work_at_risk_gpu_s() < b.work_at_risk_gpu_s();
    return tie_first(a, b);
  });
  std::sort(c.begin(), c.end(), [](const VictimCandidate& a, const VictimCandidate& b) {
    if (a.seconds_at_risk != b.seconds_at_risk) return a.seconds_at_risk < b.seconds_at_risk;
    if (a.gpus != b.gpus) return a.gpus < b.gpus;
    return tie_first(a, b);
  });
  std::vector<JobId> first = take_in_order(by_work, fits);
  const bool same_order = std::equal(by_work.begin(), by_work.end(), c.begin(),
                                     [](const VictimCandidate& a, const VictimCandidate& b) { return a.id == b.id; });
  if (same_order) return first;
  std::vector<JobId> second = take_in_order(c, fits);

  std::unordered_map<JobId, double> work;
  for (const auto& v : c) work[v.id] = v.work_at_risk_gpu_s();
  const auto lost = [&](const std::vector<JobId>& ids) {
    double sum = 0;
    for (JobId id : ids) sum += work[id];
    return sum;
  };
  const double lost_first = lost(first), lost_second = lost(second);
  if (lost_second < lost_first || (lost_second == lost_first && second.size() < first.size())) return second;
  return first;
}

bool Lifecycle::preempt_for(LifeJob& head, Seconds now, Placer& placer, Effects& fx) {
  if (preemptor_) return false;
  const int level = head.spec().priority;
  std::vector<VictimCandidate> c;
  // An attempt younger than preempt_exempt_s is spared (Slurm's PreemptExemptTime): just
  // restarted, it has the least work at risk and would be chosen again and again. With
  // preempt_exempt_growth, longer for each earlier preemption of its job (exempt_for). The
  // head asks again when the first of them comes of age.
  std::optional<Seconds> of_age;
  jobs_.for_each([&](const LifeJob& r) {
    if (!r.holds_gpus() || r.cancel_requested || r.preempted_for || r.spec().priority >= level) return;
    const LifeAttempt& a = *r.current();
    if (const Seconds from = a.launched_at + exempt_for(r, config_); now < from) {
      of_age = of_age ? std::min(*of_age, from) : from;
      return;
    }
    // Its resume point: the last checkpoint it told of (the ready file, touched when warned
    // or on its own; the simulator's periodic ones), else its attempt's start. A checkpoint
    // signal alone makes it no cheaper: whether it will save within its lead is not known.
    const Seconds resume_point = std::max(a.launched_at, a.checkpointed_at.value_or(a.launched_at));
    c.push_back({r.id(), r.spec().priority, now - resume_point, r.spec().num_gpus});
  });
  const auto none = [&] {
    if (of_age) fx.wake_at = fx.wake_at ? std::min(*fx.wake_at, *of_age) : *of_age;
    return false;
  };
  if (c.empty()) return none();
  const auto victims = choose_victims(std::move(c), [&](std::span<const JobId> gone) {
    return placer.place_without(head.queued, now, gone).has_value();
  });
  if (victims.empty()) return none();
  preemptor_ = head.id();
  for (JobId id : victims) {
    LifeJob& v = job(id);
    v.preempted_for = head.id();
    v.preempt_warned_at = now;
    ++preemptions_;
    const int sig = v.spec().checkpoint_signal;
    const Seconds lead = v.spec().checkpoint_lead_s;
    if (sig != 0 && lead > 0) {
      v.preempt_stop_at = now + lead;
      fx.warnings.push_back({id, v.current()->number, sig});
      change(fx, id, "preempt", fmt::format("for job {}: warned with signal {}, stopped within {} s", head.id(), sig, lead));
      fx.wake_at = fx.wake_at ? std::min(*fx.wake_at, v.preempt_stop_at) : v.preempt_stop_at;
    } else {
      v.preempt_stop_at = now;
      change(fx, id, "preempt", fmt::format("for job {}: no checkpoint signal asked for, stopped now", head.id()));
      stop_victim(v, now, fx, "no warning asked for");
    }
  }
  head.reason = fmt::format("waiting: preempting {} running job(s) of lower priority", victims.size());
  fx.blocked.emplace();  // (in place: a temporary's inline GPU list trips GCC's uninitialised check)
  fx.blocked->job = head.id();
  fx.blocked->reason = head.reason;
  return true;
}

void Lifecycle::stop_victim(LifeJob& v, Seconds, Effects& fx, std::string_view why) {
  v.preempt_stopping = true;
  fx.signals.push_back(v.id());
  change(fx, v.id(), "preempt-stop", why);
}

void Lifecycle::advance_preemptions(Seconds now, Effects& fx) {
  if (!preemptor_) return;
  const LifeJob* head = jobs_.find(*preemptor_);
  const bool wanted = head && head->state == JobState::Queued;
  std::vector<JobId> warned;
  jobs_.for_each([&](const LifeJob& v) {
    if (v.preempted_for == preemptor_ && v.holds_gpus() && !v.preempt_stopping) warned.push_back(v.id());
  });
  std::sort(warned.begin(), warned.end());  // the table's order is none: the changes come in id order
  for (JobId id : warned) {
    LifeJob& v = job(id);
    if (!wanted) {  // the head left the queue (cancelled, started): the warned ones run on
      v.preempted_for.reset();
      change(fx, v.id(), "preempt-withdrawn", fmt::format("job {} no longer waits", *preemptor_));
    } else if (now >= v.preempt_stop_at) {
      stop_victim(v, now, fx, "lead time over");
    } else {
      fx.wake_at = fx.wake_at ? std::min(*fx.wake_at, v.preempt_stop_at) : v.preempt_stop_at;
    }
  }
  if (!wanted) preemptor_.reset();
}

bool Lifecycle::serve_preemptor(Seconds now, Placer& placer, Effects& fx) {
  if (!preemptor_) return false;
  LifeJob& head = job(*preemptor_);
  int stopping = 0;
  jobs_.for_each([&](const LifeJob& v) {
    if (v.preempted_for == head.id() && v.holds_gpus()) ++stopping;
  });
  if (auto p = placer.place(head.queued, now)) {
    start(head, std::move(*p), now, placer, fx);
    preemptor_.reset();
    if (stopping > 0) advance_preemptions(now, fx);  // those not yet stopped are spared
    return false;
  }
  // Until it starts it is the head: what its victims free is kept for it.
  fx.blocked.emplace();
  fx.blocked->job = head.id();
  fx.blocked->reason = stopping > 0
                           ? fmt::format("waiting: preempting {} running job(s) of lower priority", stopping)
                           : "waiting: its preempted jobs stopped; starting it once their GPUs show free";
  if (auto w = placer.wake_at()) fx.wake_at = fx.wake_at ? std::min(*fx.wake_at, *w) : *w;
  return stopping > 0 || config_.strict_head_of_line;
}

bool Lifecycle::requeue_if_preempted(LifeJob& j, const Ended& e, Seconds t, Effects& fx) {
  const JobId for_job = *j.preempted_for;
  const bool stopped = j.preempt_stopping;
  j.preempted_for.reset();
  j.preempt_stopping = false;
  j.preempt_warned_at = j.preempt_stop_at = 0;
  // It ended on its own (completed, died before the stop, never started, or a cancel
  // reached it): as any job would.
  if (!stopped || j.cancel_requested || e.outcome == AttemptOutcome::Completed || e.outcome == AttemptOutcome::Lost)
    return false;
  LifeAttempt& a = *j.current();
  a.detail = fmt::format("{}{}", kPreemptedFor, for_job) + (e.detail.empty() ? "" : ": " + e.detail);
  (void)t;
  // Back to its place with its recovery state as it was: a preemption is no failure.
  j.state = JobState::Queued;
  j.reason = fmt::format("requeued: preempted for job {}", for_job);
  enqueue(j, j.placed_from == QueueName::Recovery ? QueueName::Recovery : QueueName::Main, false);
  change(fx, j.id(), "requeue", j.reason);
  return true;
}

Effects Lifecycle::checkpointed(JobId id, Seconds t) {
  Effects fx;
  LifeJob* j = jobs_.find(id);
  if (!j || !j->holds_gpus()) return fx;
  j->current()->checkpointed_at = t;
  if (j->preempted_for && !j->preempt_stopping && t >= j->preempt_warned_at) stop_victim(*j, t, fx, "checkpoint saved");
  return fx;
}

}  // namespace aegis
