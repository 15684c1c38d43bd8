#include "sim/estimate_catalog.h"

#include <map>

namespace aegis {

WorkloadCatalog with_our_estimates(const WorkloadCatalog& published, std::span<const WorkloadSpec> specs,
                                   const EstimateChain& chain) {
  std::map<std::string, const WorkloadSpec*> spec_of;
  for (const auto& s : specs) spec_of[s.name] = &s;
  WorkloadCatalog ours = published;
  for (const auto& [name, w] : published.all()) {
    WorkloadProfile p = w;
    p.estimates.analytical.reset();
    p.estimates.learned.reset();
    if (auto s = spec_of.find(name); s != spec_of.end()) {
      ChainJob j;
      j.model = s->second->features;
      j.half = s->second->half;
      const MemoryEstimates e = chain.estimates(j);
      p.estimates.analytical = e.analytical;
      p.estimates.learned = e.learned;
    }
    ours.add(std::move(p));
  }
  return ours;
}

}  // namespace aegis
