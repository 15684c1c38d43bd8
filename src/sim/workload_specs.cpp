#include "sim/workload_specs.h"

#include <fmt/format.h>
#include <sstream>

#include "estimate/calibrated.h"
#include "estimate/utilisation.h"
#include "sim/csv.h"

namespace aegis {
namespace {

// The utilisation regression does not read the GPU model; the calibration run only carries it.
const char* const kCatalogGpu = kCatalogGpuModel;

std::map<std::string, int> parse_layer_counts(const CsvReader& r) {
  std::map<std::string, int> out;
  std::stringstream ss(r.field("layer_counts"));
  std::string item;
  while (std::getline(ss, item, ';')) {
    const auto colon = item.find(':');
    if (colon == std::string::npos) r.fail("layer_counts", "expected type:count;type:count");
    try {
      out[item.substr(0, colon)] = std::stoi(item.substr(colon + 1));
    } catch (const std::exception&) {
      r.fail("layer_counts", "expected type:count;type:count");
    }
  }
  return out;
}

}  // namespace

std::vector<WorkloadSpec> load_workload_specs(const std::string& path) {
  std::vector<WorkloadSpec> out;
  auto s = CsvReader::open(path);
  while (s.next()) {
    WorkloadSpec x;
    x.name = s.get_text("name");
    x.model = s.get_text("model");
    x.where = fmt::format("{}:{}", path, s.line());
    auto& f = x.features;
    f.total_parameters = s.get_double("total_parameters");
    f.total_activations = s.get_double("total_activations");
    f.batch_size = static_cast<int>(s.get_int("batch_size"));
    f.depth = std::max(1, static_cast<int>(s.get_int("depth")));
    f.activation = s.get_text("activation");
    f.layer_counts = parse_layer_counts(s);
    if (!(f.total_parameters >= 0) || !(f.total_activations >= 0) || f.batch_size < 1)
      s.fail("batch_size", "parameters, activations >= 0 and batch >= 1 expected");
    const std::string precision = s.get_text("precision");
    x.half = precision == "bf16" || precision == "fp16";
    out.push_back(std::move(x));
  }
  return out;
}

void predict_catalog_utilisation(WorkloadCatalog& catalog, std::span<const WorkloadSpec> specs) {
  std::vector<const WorkloadSpec*> used;
  std::vector<CalibrationRun> runs;
  std::vector<double> measured;
  for (const auto& s : specs) {
    const WorkloadProfile* w = catalog.find(s.name);
    if (!w) continue;
    CalibrationRun r = calibration_run(s.features, kCatalogGpu, s.half);
    r.model = s.model;
    runs.push_back(std::move(r));
    // A row the catalog could not read (its `problem`) has no trustworthy measurement.
    measured.push_back(w->problem.empty() ? w->util : NAN);
    used.push_back(&s);
  }
  const auto predicted = utilisation_predict_held_out(runs, measured);
  for (std::size_t i = 0; i < used.size(); ++i)
    if (std::isfinite(predicted[i])) catalog.set_predicted_util(used[i]->name, predicted[i]);
}

}  // namespace aegis
