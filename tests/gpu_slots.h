// A placer of whole GPUs for the lifecycle's backfill tests (tests/test_backfill.cpp,
// tests/test_backfill_history.cpp): one server of n GPUs, one job each; a job of k GPUs
// starts when k are free, and release() frees a job's GPUs.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "lifecycle/placer.h"

namespace aegis::test {

class GpuSlots : public Placer {
 public:
  explicit GpuSlots(int n) : held(static_cast<std::size_t>(n), 0), count{n} {}
  std::vector<JobId> held;  // per GPU: the job on it, 0 when free
  std::vector<int> count;
  int places = 0;           // place() calls

  std::optional<Placement> place(const QueuedJob& job, Seconds) override {
    ++places;
    Launch l;
    l.job = job.spec.id;
    for (std::size_t g = 0; g < held.size() && static_cast<int>(l.gpus.size()) < job.spec.num_gpus; ++g)
      if (!held[g]) l.gpus.push_back(static_cast<int>(g));
    if (static_cast<int>(l.gpus.size()) < job.spec.num_gpus) return std::nullopt;
    l.alone = l.exclusive = true;
    Placement p;
    p.parts.push_back({0, l, 40960});
    return p;
  }
  void started(const QueuedJob& job, const Placement& p, Seconds) override {
    for (int g : p.parts.front().launch.gpus) held[static_cast<std::size_t>(g)] = job.spec.id;
  }
  void release(JobId id) {
    for (auto& h : held)
      if (h == id) h = 0;
  }
  std::optional<std::string> never_runs(const QueuedJob& job) const override {
    if (job.spec.num_gpus > static_cast<int>(held.size())) return std::string("job.gpus: too many");
    return std::nullopt;
  }
  std::variant<Requeue, Stop> recover(const Failure& f) const override { return Stop{f.job.spec.id, f.detail}; }
  std::optional<Blocked> blocked() const override {
    Blocked b;
    b.reason = "no GPUs free";
    return b;
  }
  std::span<const int> server_gpus() const override { return count; }
};

}  // namespace aegis::test
