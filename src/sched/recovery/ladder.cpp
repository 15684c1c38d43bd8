#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <optional>

#include "sched/recovery/recovery.h"

namespace aegis {

namespace {

// Hands the rungs to `on` in ascending order until it returns true (ladder_rungs' list,
// walked without making it: an OOM asks for one rung, and the list was a few heap blocks).
template <class On>
void walk_rungs(MiB total_mib, const std::vector<double>& fractions, MiB max_step_mib, On&& on) {
  bool any = false;
  MiB last = 0;
  for (double f : fractions) {
    const auto target = static_cast<MiB>(std::floor(f * static_cast<double>(total_mib)));
    if (any && max_step_mib > 0) {
      while (target - last > max_step_mib) {
        last += max_step_mib;
        if (on(last)) return;
      }
    }
    if (!any || target > last) {
      any = true;
      last = target;
      if (on(last)) return;
    }
  }
}

}  // namespace

std::vector<MiB> ladder_rungs(MiB total_mib, const std::vector<double>& fractions, MiB max_step_mib) {
  std::vector<MiB> rungs;
  walk_rungs(total_mib, fractions, max_step_mib, [&](MiB rung) {
    rungs.push_back(rung);
    return false;
  });
  return rungs;
}

namespace {

class LadderRecovery final : public RecoveryRule {
 public:
  explicit LadderRecovery(const EngineConfig& c) : fractions_(c.ladder_fractions), step_(c.ladder_max_step_mib) {}
  std::string_view name() const override { return "ladder"; }

  std::variant<Requeue, Stop> after_oom(const RunningJob& job, bool explain) const override {
    if (job.exclusive) return needs_larger_gpu(job, explain);
    RecoveryState next = job.recovery;
    next.oom_count += 1;
    const MiB had = std::max(job.recovery.floor_mib, job.free_at_placement);
    std::optional<MiB> above;  // the first rung above what it had
    walk_rungs(job.gpu_total_mib, fractions_, step_, [&](MiB rung) {
      if (rung > had) above = rung;
      return above.has_value();
    });
    if (above) {
      next.floor_mib = *above;
      return Requeue{job.spec.id, next,
                     explain ? fmt::format("out of memory, placed with {} MiB free; retry needs {} MiB free", had,
                                           *above)
                             : std::string()};
    }
    next.exclusive_only = true;
    return Requeue{job.spec.id, next,
                   explain ? fmt::format("out of memory, placed with {} MiB free, above the top rung; retry alone", had)
                           : std::string()};
  }

 private:
  std::vector<double> fractions_;
  MiB step_;
};

}  // namespace

std::variant<Requeue, Stop> needs_larger_gpu(const RunningJob& job, bool explain) {
  RecoveryState next = job.recovery;
  next.oom_count += 1;
  next.exclusive_only = true;
  next.floor_mib = job.free_at_placement + 1;
  return Requeue{job.spec.id, next,
                 explain ? fmt::format("out of memory alone with {} MiB; retry only on a larger GPU", job.free_at_placement)
                         : std::string()};
}

std::unique_ptr<RecoveryRule> make_ladder_recovery(const EngineConfig& c) {
  return std::make_unique<LadderRecovery>(c);
}

std::unique_ptr<RecoveryRule> make_recovery(const EngineConfig& c) {
  if (c.recovery == "retry") return make_retry_recovery(c);
  return make_ladder_recovery(c);
}

}  // namespace aegis
