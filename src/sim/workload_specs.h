// The model specs of the catalog's workloads (data/aegis/workload_specs.csv, written by
// scripts/workload_specs.py), and the coarse utilisation each workload is predicted to
// have from its spec alone, its own model left out of the fit: job data, not a decision.
#pragma once
#include <span>
#include <string>
#include <vector>

#include "estimate/features.h"
#include "sim/workload.h"

namespace aegis {

// The catalog was profiled on one GPU model (data/README.md).
inline constexpr const char* kCatalogGpuModel = "A100-40GB";

struct WorkloadSpec {
  std::string name;   // the catalog workload it describes
  std::string model;  // its model group ("vgg16/imagenet"), left out together
  ModelFeatures features;
  bool half = false;  // bf16 or fp16 activations
  std::string where;  // "file:line"
};

// Throws InputError naming the file, the line and the field.
std::vector<WorkloadSpec> load_workload_specs(const std::string& path);

// Sets WorkloadProfile::predicted_util of every catalog workload with a spec: the
// utilisation regression (estimate/utilisation.h) fitted on the measured coarse utilisation
// of the workloads of every other model, so a workload's own measurement (or its model's)
// never feeds its prediction. Specs naming no catalog workload are skipped. Deterministic.
void predict_catalog_utilisation(WorkloadCatalog& catalog, std::span<const WorkloadSpec> specs);

}  // namespace aegis
