#include "sim/workload.h"

#include <cmath>
#include <fmt/format.h>

#include "sim/csv.h"

namespace aegis {

namespace {

// The estimators' columns use 40000 as "could not estimate below the cap": kept as a
// value, because that is what those estimators told the published scheduler.
std::optional<MiB> mib(const CsvReader& r, std::string_view col) {
  if (!r.has_column(col)) return std::nullopt;
  auto v = r.opt_double(col);
  if (!v) return std::nullopt;
  if (*v < 0) r.fail(col, "must not be negative");
  return static_cast<MiB>(std::ceil(*v));
}

}  // namespace

WorkloadCatalog WorkloadCatalog::load(const std::string& path) {
  WorkloadCatalog cat;
  cat.path_ = path;
  CsvReader r = CsvReader::open(path);
  for (const char* col : {"name", "num_gpus", "peak_memory_mib", "avg_smact", "avg_smocc", "avg_drama",
                          "solo_runtime_s"})
    if (!r.has_column(col)) throw InputError(fmt::format("{}:1: missing column '{}'", path, col));

  while (r.next()) {
    WorkloadProfile w;
    w.name = r.get_text("name");
    w.where = fmt::format("{}:{}", path, r.line());
    const auto g = r.get_int("num_gpus");
    if (g < 1 || g > 1024) r.fail("num_gpus", fmt::format("{} is not in [1, 1024]", g));
    w.num_gpus = static_cast<int>(g);

    auto problem = [&](std::string p) {
      if (w.problem.empty()) w.problem = std::move(p);
    };
    auto unit = [&](std::string_view col, double& out) {
      auto v = r.opt_double(col);
      if (!v) return problem(fmt::format("no {}", col));
      if (*v < 0 || *v > 1) return problem(fmt::format("{} {} is not in [0,1]", col, *v));
      out = *v;
    };
    if (auto p = r.opt_double("peak_memory_mib")) {
      if (*p <= 0) problem("peak_memory_mib must be positive");
      w.peak_mib = static_cast<MiB>(std::ceil(*p));
    } else {
      problem("no peak_memory_mib");
    }
    unit("avg_smact", w.smact);
    unit("avg_smocc", w.smocc);
    unit("avg_drama", w.drama);
    if (auto s = r.opt_double("solo_runtime_s")) {
      if (*s <= 0) problem("solo_runtime_s must be positive");
      w.solo_runtime_s = *s;
    } else {
      problem("no solo_runtime_s");
    }
    // Coarse utilisation (percent in the file); SM activity stands in where absent.
    w.util = w.smact;
    if (r.has_column("horus_gpu_util_mean")) {
      if (auto u = r.opt_double("horus_gpu_util_mean")) {
        if (*u < 0 || *u > 100) problem(fmt::format("horus_gpu_util_mean {} is not in [0,100]", *u));
        else w.util = *u / 100.0;
      }
    }
    w.hints.gpu_util = w.util;
    w.phases = read_phases(r, {w.smact, w.smocc, w.drama, w.util});
    if (r.has_column("lucid_ss")) {
      if (auto s = r.opt_int("lucid_ss")) {
        if (*s < 0 || *s > 2) r.fail("lucid_ss", fmt::format("{} is not 0, 1 or 2", *s));
        w.hints.sharing_score = static_cast<int>(*s);
      }
    }
    w.estimates.profiled = w.peak_mib > 0 ? std::optional<MiB>(w.peak_mib) : std::nullopt;
    w.estimates.analytical = mib(r, "horus_estimate_mib");
    w.estimates.faketensor = mib(r, "faketensor_estimate_mib");
    w.estimates.learned = mib(r, "gpumemnet_estimate_mib");

    if (cat.by_name_.count(w.name))
      r.fail("name", fmt::format("duplicate workload '{}' (first at {})", w.name, cat.by_name_[w.name].where));
    cat.by_name_.emplace(w.name, std::move(w));
  }
  if (cat.by_name_.empty()) throw InputError(fmt::format("{}: no workloads", path));
  return cat;
}

const WorkloadProfile* WorkloadCatalog::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

void WorkloadCatalog::set_predicted_util(const std::string& name, double util) {
  if (auto it = by_name_.find(name); it != by_name_.end()) it->second.predicted_util = util;
}

void WorkloadCatalog::add(WorkloadProfile w) {
  std::string n = w.name;
  // Built without phases: one phase at its means, as a CSV row without phase columns.
  if (w.phases.startup_s == 0 && w.phases.steady == ActivityLevels{}) w.phases.steady = {w.smact, w.smocc, w.drama, w.util};
  by_name_[n] = std::move(w);
}

}  // namespace aegis
