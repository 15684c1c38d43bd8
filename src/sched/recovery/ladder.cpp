#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "sched/recovery/recovery.h"

namespace aegis {

std::vector<MiB> ladder_rungs(MiB total_mib, const std::vector<double>& fractions, MiB max_step_mib) {
  std::vector<MiB> rungs;
  for (double f : fractions) {
    const auto target = static_cast<MiB>(std::floor(f * static_cast<double>(total_mib)));
    if (!rungs.empty() && max_step_mib > 0) {
      while (target - rungs.back() > max_step_mib) rungs.push_back(rungs.back() + max_step_mib);
    }
    if (rungs.empty() || target > rungs.back()) rungs.push_back(target);
  }
  return rungs;
}

namespace {

class LadderRecovery final : public RecoveryRule {
 public:
  explicit LadderRecovery(const EngineConfig& c) : fractions_(c.ladder_fractions), step_(c.ladder_max_step_mib) {}
  std::string_view name() const override { return "ladder"; }

  std::variant<Requeue, Stop> after_oom(const RunningJob& job) const override {
    if (job.exclusive) return needs_larger_gpu(job);
    RecoveryState next = job.recovery;
    next.oom_count += 1;
    const MiB had = std::max(job.recovery.floor_mib, job.free_at_placement);
    for (MiB rung : ladder_rungs(job.gpu_total_mib, fractions_, step_)) {
      if (rung > had) {
        next.floor_mib = rung;
        return Requeue{job.spec.id, next,
                       fmt::format("out of memory with {} MiB free; retry needs {} MiB free", had, rung)};
      }
    }
    next.exclusive_only = true;
    return Requeue{job.spec.id, next,
                   fmt::format("out of memory with {} MiB free, above the top rung; retry alone", had)};
  }

 private:
  std::vector<double> fractions_;
  MiB step_;
};

}  // namespace

std::variant<Requeue, Stop> needs_larger_gpu(const RunningJob& job) {
  RecoveryState next = job.recovery;
  next.oom_count += 1;
  next.exclusive_only = true;
  next.floor_mib = job.free_at_placement + 1;
  return Requeue{job.spec.id, next,
                 fmt::format("out of memory alone with {} MiB; retry only on a larger GPU", job.free_at_placement)};
}

std::unique_ptr<RecoveryRule> make_ladder_recovery(const EngineConfig& c) {
  return std::make_unique<LadderRecovery>(c);
}

std::unique_ptr<RecoveryRule> make_recovery(const EngineConfig& c) {
  if (c.recovery == "retry") return make_retry_recovery(c);
  return make_ladder_recovery(c);
}

}  // namespace aegis
