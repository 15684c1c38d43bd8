#include "runtime/gpu/emulated/contention_fit.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <utility>

namespace aegis::emu {
namespace {

// Gavel names a job type with its scale factor: "('ResNet-50 (batch size 32)', 1)". Only
// single-GPU jobs share a GPU.
bool single_gpu(const std::string& key) { return key.size() > 4 && key.ends_with(", 1)"); }

double sse(std::span<const GavelPair> pairs, double overhead, std::span<const double> u) {
  const ContentionConfig c{overhead};
  double e = 0;
  for (const auto& p : pairs) {
    const double da = timesliced_speed(c, u[p.a], u[p.b]) - p.speed_a;
    const double db = timesliced_speed(c, u[p.b], u[p.a]) - p.speed_b;
    e += da * da + db * db;
  }
  return e;
}

// Minimum of f on [lo, hi] by golden-section search, to within 1e-7.
template <class F>
double golden(F f, double lo, double hi) {
  const double r = (std::sqrt(5.0) - 1) / 2;
  double a = lo, b = hi, c = b - r * (b - a), d = a + r * (b - a);
  double fc = f(c), fd = f(d);
  while (b - a > 1e-7) {
    if (fc < fd) {
      b = d, d = c, fd = fc;
      c = b - r * (b - a);
      fc = f(c);
    } else {
      a = c, c = d, fc = fd;
      d = a + r * (b - a);
      fd = f(d);
    }
  }
  return (a + b) / 2;
}

}  // namespace

GavelPairs load_gavel_pairs(const std::string& json_path, const std::string& gpu_type) {
  std::ifstream f(json_path);
  if (!f) throw std::runtime_error(json_path + ": cannot open file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(json_path + ": not valid JSON: " + e.what());
  }
  if (!j.contains(gpu_type) || !j[gpu_type].is_object())
    throw std::runtime_error(json_path + ": no table for GPU type '" + gpu_type + "'");
  const auto& t = j[gpu_type];
  GavelPairs out;
  std::map<std::string, std::size_t> index;
  std::vector<double> solo;
  for (const auto& [key, row] : t.items()) {
    if (!single_gpu(key)) continue;
    if (!row.is_object() || !row.contains("null") || !row["null"].is_number() || row["null"].get<double>() <= 0)
      throw std::runtime_error(json_path + ": " + gpu_type + " " + key + ": no positive solo throughput");
    index[key] = out.jobs.size();
    out.jobs.push_back(key);
    solo.push_back(row["null"].get<double>());
  }
  std::set<std::pair<std::size_t, std::size_t>> seen;
  for (const auto& [key, row] : t.items()) {
    if (!single_gpu(key)) continue;
    const std::size_t a = index.at(key);
    for (const auto& [other, pair] : row.items()) {
      if (other == "null") continue;
      const auto it = index.find(other);
      if (it == index.end()) continue;
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number() || !pair[1].is_number())
        throw std::runtime_error(json_path + ": " + gpu_type + " " + key + " with " + other + ": not [own, other]");
      const double own = pair[0].get<double>(), theirs = pair[1].get<double>();
      if (own <= 0 || theirs <= 0) continue;  // could not run together (out of memory)
      const std::size_t b = it->second;
      if (!seen.insert({std::min(a, b), std::max(a, b)}).second) continue;
      GavelPair p{a, b, own / solo[a], theirs / solo[b]};
      if (p.a > p.b) p = {b, a, p.speed_b, p.speed_a};
      out.pairs.push_back(p);
    }
  }
  if (out.pairs.empty()) throw std::runtime_error(json_path + ": " + gpu_type + ": no pair that ran together");
  return out;
}

double contention_rmse(std::span<const GavelPair> pairs, double overhead, std::span<const double> demand) {
  return pairs.empty() ? 0 : std::sqrt(sse(pairs, overhead, demand) / (2.0 * static_cast<double>(pairs.size())));
}

ContentionFit fit_contention(std::span<const GavelPair> pairs, std::size_t job_types) {
  ContentionFit fit;
  fit.pairs = pairs.size();
  std::vector<double> u(job_types, 0.5);
  double k = 1;
  // The pairs each job type takes part in: a demand's error term needs only those.
  std::vector<std::vector<GavelPair>> of(job_types);
  for (const auto& p : pairs) {
    of.at(p.a).push_back(p);
    if (p.b != p.a) of.at(p.b).push_back(p);
  }
  for (fit.sweeps = 1; fit.sweeps <= 500; ++fit.sweeps) {
    double moved = 0;
    const double k2 = golden([&](double x) { return sse(pairs, x, u); }, 0, 10);
    moved = std::abs(k2 - k);
    k = k2;
    for (std::size_t i = 0; i < job_types; ++i) {
      if (of[i].empty()) continue;
      const double before = u[i];
      const double x = golden(
          [&](double v) {
            u[i] = v;
            return sse(of[i], k, u);
          },
          0, 1);
      u[i] = x;
      moved = std::max(moved, std::abs(x - before));
    }
    if (moved < 1e-6) break;
  }
  fit.timeslice_overhead = k;
  fit.demand = u;
  fit.rmse = contention_rmse(pairs, k, u);
  const ContentionConfig c{k};
  double abs_sum = 0, none = 0;
  for (const auto& p : pairs) {
    abs_sum += std::abs(timesliced_speed(c, u[p.a], u[p.b]) - p.speed_a) +
               std::abs(timesliced_speed(c, u[p.b], u[p.a]) - p.speed_b);
    none += (1 - p.speed_a) * (1 - p.speed_a) + (1 - p.speed_b) * (1 - p.speed_b);
  }
  const double n = 2.0 * static_cast<double>(std::max<std::size_t>(pairs.size(), 1));
  fit.mae = abs_sum / n;
  fit.rmse_no_model = std::sqrt(none / n);
  return fit;
}

}  // namespace aegis::emu
