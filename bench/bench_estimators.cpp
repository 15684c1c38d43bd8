// Times one memory estimate of each estimator on GPUMemNet's rows, on one core: the
// analytical formulas, the learned regression and classifier (LearnedModel, including
// its training-coverage check). Target: a learned estimate in under 50 us. Prints
// figures, never fails on speed.
//   build/bench/bench_estimators [repository-root] [repetitions]
#include <chrono>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "estimate/analytical.h"
#include "estimate/gpumemnet_data.h"
#include "estimate/learned.h"
#include "sim/csv.h"

using namespace aegis;

namespace {

std::vector<ModelFeatures> load(const std::string& path) {
  auto r = CsvReader::open(path);
  std::vector<ModelFeatures> out;
  while (r.next()) {
    auto s = gpumemnet_sample([&](std::string_view c) -> std::optional<std::string> {
      if (!r.has_column(c)) return std::nullopt;
      return r.field(c);
    });
    if (auto* e = std::get_if<FieldError>(&s)) r.fail(e->field, e->what);
    out.push_back(std::get<MemorySample>(s).features);
  }
  return out;
}

// Best of `reps` passes over every input: microseconds per estimate.
template <class F>
double best_us(const std::vector<ModelFeatures>& in, int reps, F&& estimate) {
  double best = 1e300;
  volatile double sink = 0;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    double sum = 0;
    for (const auto& f : in) sum += estimate(f);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    sink = sink + sum;
    best = std::min(best, us / static_cast<double>(in.size()));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string root = argc > 1 ? argv[1] : ".";
  const int reps = argc > 2 ? std::stoi(argv[2]) : 5;
  try {
    auto rows = load(root + "/data/gpumemnet/mlp_data_step1.csv");
    const auto more = load(root + "/data/gpumemnet/mlp_data_step2.csv");
    rows.insert(rows.end(), more.begin(), more.end());
    const auto model = LearnedModel::load(root + "/data/models/gpumemnet_mlp.json");
    fmt::print("{} model specs, best of {} passes, one core\n", rows.size(), reps);
    fmt::print("{:<30} {:>12}\n", "estimator", "us/estimate");
    const auto row = [](const char* name, double us) { fmt::print("{:<30} {:>12.3f}\n", name, us); };
    row("analytical (Horus)", best_us(rows, reps, [](const ModelFeatures& f) { return horus_mib(f); }));
    row("analytical+context+optimizer",
        best_us(rows, reps, [](const ModelFeatures& f) { return analytical_full_mib(f); }));
    row("learned-regression", best_us(rows, reps, [&](const ModelFeatures& f) {
          return static_cast<double>(model.regression(f).value_or(0));
        }));
    row("learned-classifier", best_us(rows, reps, [&](const ModelFeatures& f) {
          return static_cast<double>(model.classification(f).value_or(0));
        }));
    fmt::print("(published: GPUMemNet's inference 2.3 ms per estimate; target here < 50 us)\n");
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_estimators: {}\n", e.what());
    return 1;
  }
  return 0;
}
