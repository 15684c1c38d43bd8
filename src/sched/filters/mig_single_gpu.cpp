#include "sched/filters/filters.h"

#include <fmt/format.h>

namespace aegis {
namespace {

// A process sees at most one MIG instance, so a multi-GPU job placed on instances would
// silently run on the first only (and NCCL does not span instances).
class MigSingleGpu final : public Filter {
 public:
  std::string_view name() const override { return "mig-single-gpu"; }
  bool admits(const PlacementRequest& r, const GpuCandidate& g, std::string* why) const override {
    if (r.job->spec.num_gpus <= 1 || !g.view->mig_instance) return true;
    if (why) *why = fmt::format("a MIG instance; a job on {} GPUs needs whole ones", r.job->spec.num_gpus);
    return false;
  }
  // The job's GPU count and a fact of the hardware; no load can change either: monotone.
  StageReads reads() const override { return {{JobField::GpuCount}, {GpuFact::Mig}}; }
  bool monotone() const override { return true; }
  // A job of one GPU is admitted everywhere.
  int least_gpus_refused() const override { return 2; }
};

}  // namespace

std::unique_ptr<Filter> make_mig_single_gpu(const EngineConfig&) { return std::make_unique<MigSingleGpu>(); }

}  // namespace aegis
