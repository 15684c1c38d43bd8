// Which memory estimates a simulated policy reads. By default this project's estimators,
// run on each catalog workload's model spec (data/aegis/workload_specs.csv) through the
// estimate chain aegisd uses; the policies marked `published_estimates` in the registry
// replay the catalog's published Horus and GPUMemNet columns instead (docs/simulator.md).
#pragma once
#include <span>

#include "lifecycle/estimate_chain.h"
#include "sim/workload.h"
#include "sim/workload_specs.h"

namespace aegis {

// A copy of `published` whose analytical and learned figures are the chain's on each
// workload's spec (Horus' formula; the learned model, else the calibrated one on the
// catalog's GPU model). A workload without a spec gets neither: a policy that admits by
// them admits it on the estimator-free floor, as aegisd would a job without a spec.
WorkloadCatalog with_our_estimates(const WorkloadCatalog& published, std::span<const WorkloadSpec> specs,
                                   const EstimateChain& chain);

// The same with, for each workload, a chain whose calibrated model was fitted (the shipped
// form, CalibrationOptions' defaults) on the measured peaks of the catalog's workloads of
// every other model: no workload's own peak feeds its estimate, as for a job aegisd never
// saw. The shipped data/models/calibrated_memory.json was fitted on these very workloads.
WorkloadCatalog with_our_estimates_held_out(const WorkloadCatalog& published, std::span<const WorkloadSpec> specs);

}  // namespace aegis
