#include "sim/estimate_catalog.h"

#include <functional>
#include <map>
#include <set>

namespace aegis {
namespace {

WorkloadCatalog with_estimates(const WorkloadCatalog& published, std::span<const WorkloadSpec> specs,
                               const std::function<const EstimateChain&(const WorkloadSpec&)>& chain_for) {
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
      const MemoryEstimates e = chain_for(*s->second).estimates(j);
      p.estimates.analytical = e.analytical;
      p.estimates.learned = e.learned;
    }
    ours.add(std::move(p));
  }
  return ours;
}

}  // namespace

WorkloadCatalog with_our_estimates(const WorkloadCatalog& published, std::span<const WorkloadSpec> specs,
                                   const EstimateChain& chain) {
  return with_estimates(published, specs, [&](const WorkloadSpec&) -> const EstimateChain& { return chain; });
}

WorkloadCatalog with_our_estimates_held_out(const WorkloadCatalog& published, std::span<const WorkloadSpec> specs) {
  // The training runs: every spec'd workload the catalog measured (a row with a problem has
  // no trustworthy peak).
  std::vector<CalibrationRun> runs;
  std::set<std::string> models;
  for (const auto& s : specs) {
    const WorkloadProfile* w = published.find(s.name);
    if (!w || !w->problem.empty() || w->peak_mib <= 0) continue;
    CalibrationRun r = calibration_run(s.features, kCatalogGpuModel, s.half);
    r.model = s.model;
    r.peak_mib = static_cast<double>(w->peak_mib);
    runs.push_back(std::move(r));
    models.insert(s.model);
  }
  std::map<std::string, EstimateChain> chains;  // model group -> chain fitted without it
  for (const auto& s : specs) models.insert(s.model);
  for (const auto& held : models) {
    std::vector<CalibrationRun> train;
    for (const auto& r : runs)
      if (r.model != held) train.push_back(r);
    EstimateChain c;
    c.set_server_models({kCatalogGpuModel});
    if (!train.empty()) c.set_calibrated(CalibratedModel::fit(train, CalibrationOptions{}));
    chains.emplace(held, std::move(c));
  }
  return with_estimates(published, specs, [&](const WorkloadSpec& s) -> const EstimateChain& { return chains.at(s.model); });
}

}  // namespace aegis
