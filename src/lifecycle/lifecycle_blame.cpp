// Lifecycle::blame_neighbour: who an out-of-memory death on a shared GPU is charged to
// (docs/security.md, "A neighbour that lies about its memory"). A job whose user declared
// its memory and that grew past it (and its admission) plus memory_margin_mib, in the
// GPU's last sample at or before the OOM, took what it never asked for: the job that died
// beside it within its own figure is requeued as it was (no floor, no OOM counted), and
// the grower is charged: stopped, its end recovered as its own OOM (LifecycleOptions::
// oom_blame_stop), or, with that off, its OOM count raised while it runs on.
#include "lifecycle/lifecycle.h"

#include <fmt/format.h>

#include <algorithm>

namespace aegis {

namespace {

// How far a job is past its promise on a GPU sample: > 0 only for a job whose user declared
// its memory (--mem) and that holds more than both that figure and what it was admitted
// with, plus the margin. An estimator's guess (Horus, a learned model, history) that fell
// short is the scheduler's error, not the job's, and a job without a figure (observed)
// made no promise: their OOMs stay the recovery rule's.
MiB excess(const LifeJob& j, const Placement::Part& part, const GpuMemorySample& s, const EngineConfig& c) {
  const auto& declared = j.queued.spec.estimates.declared;
  if (!declared) return 0;
  const auto it = s.jobs.find(j.id());
  if (it == s.jobs.end()) return 0;
  return std::max<MiB>(0, it->second - (std::max(*declared, part.launch.admitted_mib) + c.memory_margin_mib));
}

}  // namespace

std::optional<MiB> Lifecycle::free_at(const LifeJob& j, Seconds t) const {
  std::optional<MiB> free;
  if (ledger_.empty() || !j.current()) return free;
  for (const auto& part : j.current()->placement.parts) {
    if (part.server != 0) continue;  // the ledger's GPUs are aegisd's one server's (memory_ledger.h)
    for (int g : part.launch.gpus)
      if (const GpuMemorySample* s = ledger_.at(g, t)) free = std::min(free.value_or(s->free_mib), s->free_mib);
  }
  return free;
}

bool Lifecycle::blame_neighbour(LifeJob& victim, Seconds t, Effects& fx) {
  if (ledger_.empty()) return false;  // no readings (the simulator): the recovery rule decides
  const LifeAttempt& a = *victim.current();
  LifeJob* grower = nullptr;
  MiB worst = 0, held = 0, admitted = 0, free = 0;
  int on_gpu = 0;
  for (const auto& part : a.placement.parts) {
    if (part.server != 0) continue;  // the ledger's GPUs are aegisd's one server's (memory_ledger.h)
    for (int g : part.launch.gpus) {
      const GpuMemorySample* s = ledger_.at(g, t);
      if (!s) continue;
      if (excess(victim, part, *s, config_) > 0) return false;  // it broke its own figure
      jobs_.for_each([&](LifeJob& o) {
        if (&o == &victim || !o.holds_gpus()) return;
        for (const auto& op : o.current()->placement.parts) {
          if (op.server != part.server) continue;
          if (std::find(op.launch.gpus.begin(), op.launch.gpus.end(), g) == op.launch.gpus.end()) continue;
          const MiB over = excess(o, op, *s, config_);
          if (over > worst) {
            worst = over;
            grower = &o;
            held = s->jobs.at(o.id());
            admitted = op.launch.admitted_mib;
            free = s->free_mib;
            on_gpu = g;
          }
        }
      });
    }
  }
  if (!grower) return false;
  // The victim: back to the recovery queue (served first) with the recovery state it had.
  victim.state = JobState::Queued;
  victim.reason = fmt::format(
      "requeued without penalty: out of memory on gpu{} with {} MiB free, as job {} grew to {} MiB, past its "
      "admitted {} MiB and the {} MiB margin",
      on_gpu, free, grower->id(), held, admitted, config_.memory_margin_mib);
  enqueue(victim, QueueName::Recovery, true);
  change(fx, victim.id(), "requeue", victim.reason);
  // The grower: charged once per attempt, however many neighbours it pushed out.
  const std::string why = fmt::format(
      "job {} ran out of memory beside it on gpu{} ({} MiB free) while it held {} MiB, past its admitted {} MiB and "
      "the {} MiB margin",
      victim.id(), on_gpu, free, held, admitted, config_.memory_margin_mib);
  if (!grower->blamed.empty()) return true;
  grower->blamed = "grew past its admitted memory: " + why;
  if (opt_.oom_blame_stop) {
    change(fx, grower->id(), "blamed", why + "; stopped, its end counted as its own OOM");
    fx.signals.push_back(grower->id());
  } else {
    grower->queued.recovery.oom_count += 1;
    change(fx, grower->id(), "blamed", why + "; its OOM count raised, it runs on");
  }
  return true;
}

}  // namespace aegis
