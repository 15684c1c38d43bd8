// Filters of the profile-based baselines: they trust per-job profiles instead of
// live telemetry (Lucid's sharing scores and equal GPU counts, Horus's utilisation sum).
#include "sched/filters/filters.h"

namespace aegis {
namespace {

class JobCountCap final : public Filter {
 public:
  explicit JobCountCap(int m) : max_(m) {}
  std::string_view name() const override { return "job-count"; }
  bool admits(const PlacementRequest&, const GpuCandidate& g) const override {
    return g.job_count < max_;
  }

 private:
  int max_;
};

// A job without a profiled utilisation counts as fully utilising (it cannot share).
class UtilCap final : public Filter {
 public:
  explicit UtilCap(double cap) : cap_(cap) {}
  std::string_view name() const override { return "util-cap"; }
  bool admits(const PlacementRequest& r, const GpuCandidate& g) const override {
    const double own = r.job->spec.hints.gpu_util.value_or(1.0);
    return g.util_sum + own <= cap_ + 1e-9;
  }

 private:
  double cap_;
};

// A job without a sharing score counts as score 2 (Lucid's "do not share" class).
class SharingScoreCap final : public Filter {
 public:
  explicit SharingScoreCap(int cap) : cap_(cap) {}
  std::string_view name() const override { return "sharing-score"; }
  bool admits(const PlacementRequest& r, const GpuCandidate& g) const override {
    if (g.job_count == 0) return true;
    return g.score_sum + r.job->spec.hints.sharing_score.value_or(2) <= cap_;
  }

 private:
  int cap_;
};

class SameGpuCount final : public Filter {
 public:
  std::string_view name() const override { return "gpu-count"; }
  bool admits(const PlacementRequest& r, const GpuCandidate& g) const override {
    if (g.job_count == 0) return true;
    const int n = r.job->spec.num_gpus;
    return g.min_gpu_count == n && g.max_gpu_count == n;
  }
};

}  // namespace

std::unique_ptr<Filter> make_job_count_cap(int m) { return std::make_unique<JobCountCap>(m); }
std::unique_ptr<Filter> make_util_cap(double cap) { return std::make_unique<UtilCap>(cap); }
std::unique_ptr<Filter> make_sharing_score_cap(int cap) { return std::make_unique<SharingScoreCap>(cap); }
std::unique_ptr<Filter> make_same_gpu_count() { return std::make_unique<SameGpuCount>(); }

}  // namespace aegis
