#include "sched/filters/filters.h"

#include <fmt/format.h>

namespace aegis {
namespace {

// Stage 1. GpuCandidate::free_mib is already the effective free memory under the
// policy's accounting (see memory_accounting.h).
class MemoryFit final : public Filter {
 public:
  std::string_view name() const override { return "memory"; }
  bool admits(const PlacementRequest& r, const GpuCandidate& g, std::string* why) const override {
    if (g.free_mib >= r.required_free_mib) return true;
    if (why) *why = fmt::format("needs {} MiB, {} free", r.required_free_mib, g.free_mib);
    return false;
  }
  // One comparison: a larger requirement or less free memory keeps failing it (more jobs
  // only book or use more): monotone.
  StageReads reads() const override { return {{JobField::MemoryNeed}, {GpuFact::Memory}}; }
  bool monotone() const override { return true; }
};

}  // namespace

std::unique_ptr<Filter> make_memory_fit(const EngineConfig&) { return std::make_unique<MemoryFit>(); }

}  // namespace aegis
