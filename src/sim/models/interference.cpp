#include "sim/models/interference.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <tuple>

#include "sim/csv.h"

namespace aegis {

namespace {

struct Errors {
  double rmse = 0, mae = 0;
};

Errors errors(const InterferenceModel& m, std::span<const MeasuredPair> pairs) {
  if (pairs.empty()) return {};
  double sq = 0, ab = 0;
  for (const auto& p : pairs) {
    const double ea = m.speed(p.a, p.b.util, p.b.drama) - p.speed_a;
    const double eb = m.speed(p.b, p.a.util, p.a.drama) - p.speed_b;
    sq += ea * ea + eb * eb;
    ab += std::fabs(ea) + std::fabs(eb);
  }
  const double n = 2.0 * static_cast<double>(pairs.size());
  return {std::sqrt(sq / n), ab / n};
}

}  // namespace

InterferenceFit fit_interference(std::span<const MeasuredPair> pairs, bool with_saturation) {
  InterferenceFit best;
  best.pairs = pairs.size();
  best.model.saturation_coeff = 0;
  if (pairs.empty()) return best;
  // Coarse grid over [0,3]^3 (c fixed at 0 without saturation), then a fine grid within
  // one coarse step of the coarse optimum. Coefficients are kept on the 0.01 lattice so
  // that the fit prints and pins exactly.
  double best_rmse = 1e300;
  auto lattice = [](double x) { return std::round(std::max(x, 0.0) * 100) / 100; };
  auto search = [&](const InterferenceModel& lo, const InterferenceModel& hi, double step) {
    for (double a = lo.util_coeff; a <= hi.util_coeff + 1e-9; a += step)
      for (double b = lo.dram_coeff; b <= hi.dram_coeff + 1e-9; b += step)
        for (double c = lo.saturation_coeff; c <= hi.saturation_coeff + 1e-9; c += step) {
          const InterferenceModel m{lattice(a), lattice(b), lattice(c)};
          const auto e = errors(m, pairs);
          if (e.rmse < best_rmse - 1e-12) {
            best_rmse = e.rmse;
            best.model = m;
            best.rmse = e.rmse;
            best.mae = e.mae;
          }
        }
  };
  const double cmax = with_saturation ? 3.0 : 0.0;
  search({0, 0, 0}, {3, 3, cmax}, 0.1);
  const InterferenceModel o = best.model;
  const double cw = with_saturation ? 0.1 : 0.0;
  search({o.util_coeff - 0.1, o.dram_coeff - 0.1, o.saturation_coeff - cw},
         {o.util_coeff + 0.1, o.dram_coeff + 0.1, o.saturation_coeff + cw}, 0.01);
  best.rmse_no_model = errors(InterferenceModel{0, 0, 0}, pairs).rmse;
  return best;
}

double interference_rmse(const InterferenceModel& m, std::span<const MeasuredPair> pairs) {
  return errors(m, pairs).rmse;
}

std::vector<MeasuredPair> load_lucid_pairs(const std::string& colocate_csv, const std::string& single_csv) {
  using Key = std::tuple<std::string, std::string, std::int64_t, std::int64_t>;
  std::map<Key, ActivityProfile> solo;
  {
    CsvReader r = CsvReader::open(single_csv);
    while (r.next()) {
      const double u = r.get_double("gpu_util"), d = r.get_double("gmem_util");
      if (u < 0 || u > 100) r.fail("gpu_util", "not a percentage");
      if (d < 0 || d > 100) r.fail("gmem_util", "not a percentage");
      solo[{r.get_text("model"), r.get_text("dataset"), r.get_int("batchsize"), r.get_int("amp")}] = {u / 100, d / 100};
    }
  }
  std::vector<MeasuredPair> out;
  CsvReader r = CsvReader::open(colocate_csv);
  while (r.next()) {
    Key k1{r.get_text("model1"), r.get_text("dataset1"), r.get_int("batchsize1"), r.get_int("amp1")};
    Key k2{r.get_text("model2"), r.get_text("dataset2"), r.get_int("batchsize2"), r.get_int("amp2")};
    auto a = solo.find(k1), b = solo.find(k2);
    if (a == solo.end()) r.fail("model1", "no solo profile for this job in " + single_csv);
    if (b == solo.end()) r.fail("model2", "no solo profile for this job in " + single_csv);
    MeasuredPair p{a->second, b->second, r.get_double("speed1"), r.get_double("speed2")};
    if (p.speed_a <= 0 || p.speed_b <= 0) r.fail("speed1", "speeds must be positive");
    out.push_back(p);
  }
  return out;
}

}  // namespace aegis
