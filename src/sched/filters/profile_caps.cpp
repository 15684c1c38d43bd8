// Filters of the profile-based baselines: they trust per-job profiles instead of
// live telemetry (Lucid's sharing scores and equal GPU counts, Horus's utilisation sum).
#include "sched/filters/filters.h"

#include <fmt/format.h>

namespace aegis {
namespace {

class JobCountCap final : public Filter {
 public:
  explicit JobCountCap(int m) : max_(m) {}
  std::string_view name() const override { return "job-count"; }
  bool admits(const PlacementRequest&, const GpuCandidate& g, std::string* why) const override {
    if (g.job_count < max_) return true;
    if (why) *why = fmt::format("{} jobs there, at most {}", g.job_count, max_);
    return false;
  }
  // Jobs only add to the count: monotone.
  StageReads reads() const override { return {{}, {GpuFact::Jobs}}; }
  bool monotone() const override { return true; }

 private:
  int max_;
};

// A job without a profiled utilisation counts as fully utilising (it cannot share).
class UtilCap final : public Filter {
 public:
  explicit UtilCap(double cap) : cap_(cap) {}
  std::string_view name() const override { return "util-cap"; }
  bool admits(const PlacementRequest& r, const GpuCandidate& g, std::string* why) const override {
    const double own = r.job->spec.hints.util_or_most();
    if (g.util_sum + own <= cap_ + 1e-9) return true;
    if (why) *why = fmt::format("utilisation {:.2f} there + {:.2f} > {:.2f}", g.util_sum, own, cap_);
    return false;
  }
  // The job's own utilisation plus the GPU's sum, which jobs only add to (utilisation
  // >= 0): monotone. A larger (or missing: 1) utilisation only fails more: a need.
  StageReads reads() const override {
    return {{JobField::GpuUtilHint}, {GpuFact::Jobs}, {JobField::GpuUtilHint}};
  }
  bool monotone() const override { return true; }

 private:
  double cap_;
};

// A job without a sharing score counts as score 2 (Lucid's "do not share" class).
class SharingScoreCap final : public Filter {
 public:
  explicit SharingScoreCap(int cap) : cap_(cap) {}
  std::string_view name() const override { return "sharing-score"; }
  bool admits(const PlacementRequest& r, const GpuCandidate& g, std::string* why) const override {
    if (g.job_count == 0) return true;
    const int own = r.job->spec.hints.score_or_most();
    if (g.score_sum + own <= cap_) return true;
    if (why) *why = fmt::format("scores {} there + {} > {}", g.score_sum, own, cap_);
    return false;
  }
  // The job's own score plus the GPU's sum; an empty GPU always admits, and jobs only add
  // to the sum (scores >= 0), so a refused GPU stays refused with more jobs: monotone.
  // A larger (or missing: 2) score only fails more: a need.
  StageReads reads() const override {
    return {{JobField::SharingScoreHint}, {GpuFact::Jobs}, {JobField::SharingScoreHint}};
  }
  bool monotone() const override { return true; }

 private:
  int cap_;
};

class SameGpuCount final : public Filter {
 public:
  std::string_view name() const override { return "gpu-count"; }
  bool admits(const PlacementRequest& r, const GpuCandidate& g, std::string* why) const override {
    if (g.job_count == 0) return true;
    const int n = r.job->spec.num_gpus;
    if (g.min_gpu_count == n && g.max_gpu_count == n) return true;
    if (why)
      *why = g.min_gpu_count == g.max_gpu_count
                 ? fmt::format("its jobs use {} GPUs each, this one {}", g.min_gpu_count, n)
                 : fmt::format("its jobs use {} to {} GPUs, this one {}", g.min_gpu_count, g.max_gpu_count, n);
    return false;
  }
  // A refusal means the GPU holds a job with another GPU count; more jobs keep it there
  // (the minimum only falls, the maximum only rises): monotone.
  StageReads reads() const override { return {{JobField::GpuCount}, {GpuFact::Jobs}}; }
  bool monotone() const override { return true; }
};

}  // namespace

std::unique_ptr<Filter> make_job_count_cap(const EngineConfig& c) {
  return std::make_unique<JobCountCap>(c.max_jobs_per_gpu);
}
std::unique_ptr<Filter> make_util_cap(const EngineConfig& c) { return std::make_unique<UtilCap>(c.util_cap); }
std::unique_ptr<Filter> make_sharing_score_cap(const EngineConfig& c) {
  return std::make_unique<SharingScoreCap>(c.sharing_score_cap);
}
std::unique_ptr<Filter> make_same_gpu_count(const EngineConfig&) { return std::make_unique<SameGpuCount>(); }

}  // namespace aegis
