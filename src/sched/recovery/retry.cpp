#include <fmt/format.h>

#include "sched/recovery/recovery.h"

namespace aegis {
namespace {

class RetryRecovery final : public RecoveryRule {
 public:
  explicit RetryRecovery(const EngineConfig& c) : retries_(c.retries_before_exclusive) {}
  std::string_view name() const override { return "retry"; }

  std::variant<Requeue, Stop> after_oom(const RunningJob& job, bool explain) const override {
    if (job.exclusive) return needs_larger_gpu(job, explain);
    RecoveryState next = job.recovery;
    next.oom_count += 1;
    if (next.oom_count <= retries_)
      return Requeue{job.spec.id, next,
                     explain ? fmt::format("out of memory; retry {} of {}", next.oom_count, retries_) : std::string()};
    next.exclusive_only = true;
    return Requeue{job.spec.id, next, explain ? "out of memory again; retry alone" : std::string()};
  }

 private:
  int retries_;
};

}  // namespace

std::unique_ptr<RecoveryRule> make_retry_recovery(const EngineConfig& c) {
  return std::make_unique<RetryRecovery>(c);
}

}  // namespace aegis
