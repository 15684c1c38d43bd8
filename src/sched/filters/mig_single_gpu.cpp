#include "sched/filters/filters.h"

namespace aegis {
namespace {

// A process sees at most one MIG instance, so a multi-GPU job placed on instances would
// silently run on the first only (and NCCL does not span instances).
class MigSingleGpu final : public Filter {
 public:
  std::string_view name() const override { return "mig-single-gpu"; }
  bool admits(const PlacementRequest& r, const GpuCandidate& g) const override {
    return r.job->spec.num_gpus <= 1 || !g.view->mig_instance;
  }
};

}  // namespace

std::unique_ptr<Filter> make_mig_single_gpu() { return std::make_unique<MigSingleGpu>(); }

}  // namespace aegis
