// Under MPS a job joins only a GPU whose jobs are all its own user's. NVIDIA's control
// daemon runs one MPS server per user and queues another user's clients until that server
// is gone (man nvidia-cuda-mps-control), so two users' jobs never really run side by side.
#include "sched/filters/filters.h"

namespace aegis {
namespace {

class MpsOneUser final : public Filter {
 public:
  std::string_view name() const override { return "mps-one-user"; }
  bool admits(const PlacementRequest& r, const GpuCandidate& g, std::string* why) const override {
    if (g.job_count == 0 || (!g.owners_differ && g.owner == r.job->spec.owner)) return true;
    if (why) *why = "another user's job runs there (one MPS server per user)";
    return false;
  }
  // A refusal means another user's job is on the GPU; more jobs never take it away: monotone.
  StageReads reads() const override { return {{JobField::Owner}, {GpuFact::Jobs}}; }
  bool monotone() const override { return true; }
};

}  // namespace

std::unique_ptr<Filter> make_mps_one_user(const EngineConfig&) { return std::make_unique<MpsOneUser>(); }

}  // namespace aegis
