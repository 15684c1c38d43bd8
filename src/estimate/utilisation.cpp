#include "estimate/utilisation.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>

namespace aegis {
namespace {

// Small, so that a model family with few runs cannot pull a coefficient far; in the units
// of the standardised-free log inputs (their spread is several units).
constexpr double kRidge = 1e-3;

std::vector<double> inputs(const CalibrationRun& r) {
  return {1.0, std::log1p(r.parameters), std::log1p(r.activations * r.batch_size),
          std::log(static_cast<double>(std::max(1, r.batch_size)))};
}

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (std::size_t k = i; k <= j; ++k) r[order[k]] = (static_cast<double>(i + j) / 2.0) + 1;
    i = j + 1;
  }
  return r;
}

double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n, mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    sab += (a[i] - ma) * (b[i] - mb), saa += (a[i] - ma) * (a[i] - ma), sbb += (b[i] - mb) * (b[i] - mb);
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0;
}

}  // namespace

double UtilisationModel::predict(const CalibrationRun& job) const {
  const auto x = inputs(job);
  double y = 0;
  for (std::size_t i = 0; i < x.size() && i < coefficients.size(); ++i) y += coefficients[i] * x[i];
  return std::clamp(y, 0.0, 1.0);
}

UtilisationModel fit_utilisation(std::span<const CalibrationRun> runs, std::span<const double> target) {
  std::map<std::string, int> count;
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (std::isfinite(target[i])) count[runs[i].model]++;
  const Eigen::Index cols = 4;
  Eigen::MatrixXd A = kRidge * Eigen::MatrixXd::Identity(cols, cols);
  Eigen::VectorXd b = Eigen::VectorXd::Zero(cols);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (!std::isfinite(target[i])) continue;
    const auto x = inputs(runs[i]);
    const double w = 1.0 / count[runs[i].model];
    Eigen::Map<const Eigen::VectorXd> xv(x.data(), cols);
    A += w * xv * xv.transpose();
    b += w * target[i] * xv;
  }
  const Eigen::VectorXd beta = A.ldlt().solve(b);
  return {std::vector<double>(beta.data(), beta.data() + cols)};
}

std::vector<double> utilisation_predict_held_out(std::span<const CalibrationRun> runs,
                                                 std::span<const double> target) {
  std::vector<double> out(runs.size(), NAN);
  std::set<std::string> models;
  for (const auto& r : runs) models.insert(r.model);
  for (const auto& held : models) {
    std::vector<double> masked(target.begin(), target.end());
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (runs[i].model == held) masked[i] = NAN;
    const auto m = fit_utilisation(runs, masked);
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (runs[i].model == held) out[i] = m.predict(runs[i]);
  }
  return out;
}

std::vector<double> utilisation_leave_one_model_out(std::span<const CalibrationRun> runs,
                                                    std::span<const double> target) {
  auto out = utilisation_predict_held_out(runs, target);
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (!std::isfinite(target[i])) out[i] = NAN;
  return out;
}

AgreementMetrics agreement(std::span<const double> predicted, std::span<const double> measured) {
  std::vector<double> p, m;
  for (std::size_t i = 0; i < std::min(predicted.size(), measured.size()); ++i)
    if (std::isfinite(predicted[i]) && std::isfinite(measured[i])) p.push_back(predicted[i]), m.push_back(measured[i]);
  AgreementMetrics a;
  a.n = p.size();
  if (a.n == 0) return a;
  for (std::size_t i = 0; i < p.size(); ++i) a.mae += std::fabs(p[i] - m[i]);
  a.mae /= static_cast<double>(a.n);
  a.spearman = pearson(ranks(p), ranks(m));
  return a;
}

nlohmann::json to_json(const std::map<std::string, UtilisationModel>& models) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, m] : models) j[name] = m.coefficients;
  return j;
}

std::map<std::string, UtilisationModel> utilisation_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::runtime_error("utilisation: expected an object");
  std::map<std::string, UtilisationModel> out;
  for (const auto& [name, v] : j.items()) {
    if (!v.is_array() || v.size() != 4) throw std::runtime_error("utilisation." + name + ": expected 4 coefficients");
    UtilisationModel m;
    for (const auto& c : v) {
      if (!c.is_number() || !std::isfinite(c.get<double>()))
        throw std::runtime_error("utilisation." + name + ": expected 4 coefficients");
      m.coefficients.push_back(c.get<double>());
    }
    out[name] = m;
  }
  return out;
}

int sharing_score_from_util(double util, double tiny_util) { return util < tiny_util ? 0 : 2; }

}  // namespace aegis
