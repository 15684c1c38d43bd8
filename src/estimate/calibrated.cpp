#include "estimate/calibrated.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace aegis {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// The model file's format: 2 adds context_margin_mib (the two-part margin), written only when
// it is not 0, so that a margin-alone fit writes the same file as before.
constexpr const char* kFormat = "aegis-calibrated-memory-2";
constexpr const char* kFormatMarginOnly = "aegis-calibrated-memory-1";
// How far past the training range (in natural-log units, as the learned model's coverage
// check: a tenth of the range, at least 0.5 = a factor 1.65) a job still counts as inside.
constexpr double kRangeSlackShare = 0.1, kRangeSlackMin = 0.5;

// Each model's runs weigh 1 together, so that a model profiled at six batch sizes does not
// count six times (and the 6,000 synthetic MLPs, one group, do not drown the real ones).
std::vector<double> group_weights(std::span<const CalibrationRun> runs) {
  std::map<std::string, int> count;
  for (const auto& r : runs) count[r.model]++;
  std::vector<double> w;
  for (const auto& r : runs) w.push_back(1.0 / count[r.model]);
  return w;
}

double weighted_quantile(std::vector<std::pair<double, double>> value_weight, double q) {
  std::sort(value_weight.begin(), value_weight.end());
  double total = 0;
  for (const auto& [v, w] : value_weight) total += w;
  double seen = 0;
  for (const auto& [v, w] : value_weight) {
    seen += w;
    if (seen >= q * total - 1e-12) return v;
  }
  return value_weight.back().first;
}

double slack(double lo, double hi) { return std::max(kRangeSlackShare * (hi - lo), kRangeSlackMin); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The smallest margin (at least 1: never below the fit) on the model-dependent part that
// leaves at most 1 - q of the runs above context + context_margin + margin x part, counted
// with `weights` (each model 1) and, over the real runs, each run 1.
double margin_for(std::span<const CalibrationRun> runs, const std::vector<double>& weights,
                  const std::vector<double>& context, const std::vector<double>& variable, bool all_real,
                  double context_margin, double q) {
  std::vector<std::pair<double, double>> by_model, by_run;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (!(variable[i] > 0)) continue;  // nothing model-dependent to scale
    const double need = (runs[i].peak_mib - context[i] - context_margin) / variable[i];
    by_model.emplace_back(need, weights[i]);
    if (all_real || !runs[i].synthetic) by_run.emplace_back(need, 1.0);
  }
  double margin = 1;
  if (!by_model.empty()) margin = std::max(margin, weighted_quantile(std::move(by_model), q));
  if (!by_run.empty()) margin = std::max(margin, weighted_quantile(std::move(by_run), q));
  return margin;
}

// (context margin, margin): see CalibrationOptions::two_part_margin. The margin alone, as
// before the two-part form, quantiles over models only.
std::pair<double, double> choose_margins(std::span<const CalibrationRun> runs, const std::vector<double>& weights,
                                         const std::vector<double>& context, const std::vector<double>& variable,
                                         const CalibrationOptions& o) {
  if (!o.two_part_margin) {
    std::vector<std::pair<double, double>> ratios;
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (variable[i] > 0) ratios.emplace_back((runs[i].peak_mib - context[i]) / variable[i], weights[i]);
    return {0.0, ratios.empty() ? 1.0 : std::max(1.0, weighted_quantile(std::move(ratios), o.margin_quantile))};
  }
  // With no real run (synthetic data only), every run counts as real.
  const bool all_real = std::all_of(runs.begin(), runs.end(), [](const CalibrationRun& r) { return r.synthetic; });
  std::vector<std::pair<double, double>> contexts;
  for (std::size_t i = 0; i < runs.size(); ++i) contexts.emplace_back(context[i], weights[i]);
  const double base = weighted_quantile(std::move(contexts), 0.5);
  const double step = (o.context_margin_high - o.context_margin_low) / o.context_margin_steps;
  double best_median = INFINITY;
  std::pair<double, double> best = {0.0, 1.0};
  for (int k = 0; k <= o.context_margin_steps; ++k) {
    const double share = k == o.context_margin_steps ? o.context_margin_high : o.context_margin_low + k * step;
    const double add = base * share;
    const double margin = margin_for(runs, weights, context, variable, all_real, add, o.margin_quantile);
    std::vector<double> ratios;
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (all_real || !runs[i].synthetic)
        ratios.push_back((context[i] + add + margin * variable[i]) / runs[i].peak_mib);
    const double med = median(std::move(ratios));
    if (med < best_median) best_median = med, best = {add, margin};
  }
  return best;
}

}  // namespace

CalibrationRun calibration_run(const ModelFeatures& f, const std::string& gpu, bool half) {
  CalibrationRun r;
  r.gpu = gpu;
  r.parameters = f.total_parameters;
  r.activations = f.total_activations;
  r.batch_size = f.batch_size;
  r.activation_bytes = half ? 2 : 4;
  for (const auto& [type, n] : f.layer_counts)
    if (n > 0) r.layer_types.insert(type);
  return r;
}

double CalibrationRun::parameter_mib() const { return 4.0 * parameters / kMiB; }
double CalibrationRun::activation_mib() const {
  return activation_bytes * activations * batch_size / kMiB;
}

CalibratedModel CalibratedModel::fit(std::span<const CalibrationRun> runs, const CalibrationOptions& o) {
  if (runs.empty()) throw std::invalid_argument("calibration: no runs");
  if (!(o.margin_quantile > 0 && o.margin_quantile <= 1))
    throw std::invalid_argument("calibration: margin quantile must be in (0, 1]");
  if (o.two_part_margin && !(o.context_margin_steps >= 1 && o.context_margin_low <= o.context_margin_high))
    throw std::invalid_argument("calibration: context margin grid needs steps >= 1 and low <= high");
  CalibratedModel m;
  m.quantile_ = o.margin_quantile;
  m.default_gpu_ = o.default_gpu;
  std::map<std::string, int> gpu_column;
  for (const auto& r : runs) {
    if (!(r.peak_mib > 0) || r.parameters < 0 || r.activations < 0 || r.batch_size < 1)
      throw std::invalid_argument(fmt::format("calibration: run of {}: peak, P, A, batch must be positive", r.model));
    gpu_column.emplace(r.gpu, 0);
  }
  int k = 0;
  for (auto& [g, c] : gpu_column) c = k++;
  const int slope0 = k, cols = k + 2;
  const auto weights = group_weights(runs);
  // Weighted least squares on the relative error (each row divided by its peak), the two
  // slopes held at 0 when they would come out negative (no component takes negative memory).
  std::vector<bool> active(static_cast<std::size_t>(cols), true);
  Eigen::VectorXd beta = Eigen::VectorXd::Zero(cols);
  for (int pass = 0; pass < 3; ++pass) {
    Eigen::MatrixXd X = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(runs.size()), cols);
    Eigen::VectorXd y(static_cast<Eigen::Index>(runs.size()));
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const auto& r = runs[i];
      const double s = std::sqrt(weights[i]) / r.peak_mib;
      const auto row = static_cast<Eigen::Index>(i);
      X(row, gpu_column[r.gpu]) = s;
      if (active[static_cast<std::size_t>(slope0)]) X(row, slope0) = s * r.parameter_mib();
      if (active[static_cast<std::size_t>(slope0 + 1)]) X(row, slope0 + 1) = s * r.activation_mib();
      y(row) = s * r.peak_mib;
    }
    beta = X.colPivHouseholderQr().solve(y);
    bool changed = false;
    for (int c = slope0; c < cols; ++c)
      if (active[static_cast<std::size_t>(c)] && beta(c) < 0) {
        active[static_cast<std::size_t>(c)] = false;
        changed = true;
      }
    for (int c = slope0; c < cols; ++c)
      if (!active[static_cast<std::size_t>(c)]) beta(c) = 0;
    if (!changed) break;
  }
  for (const auto& [g, c] : gpu_column) m.context_[g] = std::max(0.0, beta(c));
  m.per_parameter_ = beta(slope0);
  m.per_activation_ = beta(slope0 + 1);
  m.log_param_lo_ = m.log_act_lo_ = INFINITY;
  m.log_param_hi_ = m.log_act_hi_ = -INFINITY;
  std::vector<double> context(runs.size()), variable(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    context[i] = m.context_[r.gpu];
    variable[i] = m.per_parameter_ * r.parameter_mib() + m.per_activation_ * r.activation_mib();
    const double lp = std::log1p(r.parameters), la = std::log1p(r.activations * r.batch_size);
    m.log_param_lo_ = std::min(m.log_param_lo_, lp), m.log_param_hi_ = std::max(m.log_param_hi_, lp);
    m.log_act_lo_ = std::min(m.log_act_lo_, la), m.log_act_hi_ = std::max(m.log_act_hi_, la);
    m.layer_types_.insert(r.layer_types.begin(), r.layer_types.end());
  }
  std::tie(m.context_margin_, m.margin_) = choose_margins(runs, weights, context, variable, o);
  if (!m.context_.count(m.default_gpu_)) m.default_gpu_ = m.context_.begin()->first;
  return m;
}

double CalibratedModel::context_mib(const std::string& gpu) const {
  auto it = context_.find(gpu);
  return it != context_.end() ? it->second : context_.at(default_gpu_);
}

CalibratedEstimate CalibratedModel::estimate(const CalibrationRun& job, const std::string& gpu) const {
  CalibratedEstimate e;
  e.mib = context_mib(gpu) + context_margin_ +
          margin_ * (per_parameter_ * job.parameter_mib() + per_activation_ * job.activation_mib());
  std::vector<std::string> why;
  auto check = [&](const char* what, double v, double lo, double hi) {
    const double s = slack(lo, hi);
    if (v < lo - s || v > hi + s)
      why.push_back(fmt::format("{} {:.3g} outside the training range {:.3g} to {:.3g}", what, std::expm1(v),
                                std::expm1(lo), std::expm1(hi)));
  };
  check("parameters", std::log1p(job.parameters), log_param_lo_, log_param_hi_);
  check("activations of one batch", std::log1p(job.activations * job.batch_size), log_act_lo_, log_act_hi_);
  std::vector<std::string> unseen;
  for (const auto& t : job.layer_types)
    if (!layer_types_.count(t)) unseen.push_back(t);
  if (!unseen.empty()) why.push_back(fmt::format("layer types never seen in training: {}", fmt::join(unseen, ", ")));
  if (!knows_gpu(gpu))
    why.push_back(fmt::format("GPU model '{}' not calibrated: {}'s context used", gpu, default_gpu_));
  e.out_of_distribution = !why.empty();
  e.why = fmt::format("{}", fmt::join(why, "; "));
  return e;
}

double CalibratedModel::translate(double mib, const std::string& from_gpu, const std::string& to_gpu) const {
  return mib + context_mib(to_gpu) - context_mib(from_gpu);
}

nlohmann::json CalibratedModel::to_json() const {
  nlohmann::json ctx = nlohmann::json::object();
  for (const auto& [g, c] : context_) ctx[g] = c;
  nlohmann::json j = {{"format", context_margin_ != 0 ? kFormat : kFormatMarginOnly},
                      {"context_mib", ctx},
                      {"per_parameter_mib", per_parameter_},
                      {"per_activation_mib", per_activation_},
                      {"margin", margin_},
                      {"margin_quantile", quantile_},
                      {"default_gpu", default_gpu_},
                      {"coverage",
                       {{"log1p_parameters", {log_param_lo_, log_param_hi_}},
                        {"log1p_batch_activations", {log_act_lo_, log_act_hi_}},
                        {"layer_types", layer_types_}}}};
  if (context_margin_ != 0) j["context_margin_mib"] = context_margin_;
  return j;
}

CalibratedModel CalibratedModel::from_json(const nlohmann::json& j) {
  auto need = [&](const nlohmann::json& o, const char* key) -> const nlohmann::json& {
    if (!o.is_object() || !o.contains(key)) throw std::runtime_error(fmt::format("{}: missing", key));
    return o.at(key);
  };
  auto number = [&](const nlohmann::json& o, const char* key) {
    const auto& v = need(o, key);
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      throw std::runtime_error(fmt::format("{}: expected a number", key));
    return v.get<double>();
  };
  auto range = [&](const nlohmann::json& o, const char* key, double& lo, double& hi) {
    const auto& v = need(o, key);
    if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number())
      throw std::runtime_error(fmt::format("coverage.{}: expected [low, high]", key));
    lo = v[0].get<double>(), hi = v[1].get<double>();
  };
  if (!j.is_object() || !j.contains("format") || !j.at("format").is_string() ||
      (j.at("format") != kFormat && j.at("format") != kFormatMarginOnly))
    throw std::runtime_error(fmt::format("format: expected \"{}\" or \"{}\"", kFormat, kFormatMarginOnly));
  CalibratedModel m;
  // Version 1 had no context margin (the margin alone): it reads as 0.
  if (j.at("format") == kFormat) m.context_margin_ = number(j, "context_margin_mib");
  const auto& ctx = need(j, "context_mib");
  if (!ctx.is_object() || ctx.empty()) throw std::runtime_error("context_mib: expected a non-empty object");
  for (const auto& [g, v] : ctx.items()) {
    if (!v.is_number() || v.get<double>() < 0)
      throw std::runtime_error(fmt::format("context_mib.{}: expected a number >= 0", g));
    m.context_[g] = v.get<double>();
  }
  m.per_parameter_ = number(j, "per_parameter_mib");
  m.per_activation_ = number(j, "per_activation_mib");
  m.margin_ = number(j, "margin");
  m.quantile_ = number(j, "margin_quantile");
  if (!need(j, "default_gpu").is_string() || !m.context_.count(j.at("default_gpu").get<std::string>()))
    throw std::runtime_error("default_gpu: expected one of context_mib's GPU models");
  m.default_gpu_ = j.at("default_gpu").get<std::string>();
  const auto& cov = need(j, "coverage");
  range(cov, "log1p_parameters", m.log_param_lo_, m.log_param_hi_);
  range(cov, "log1p_batch_activations", m.log_act_lo_, m.log_act_hi_);
  const auto& types = need(cov, "layer_types");
  if (!types.is_array()) throw std::runtime_error("coverage.layer_types: expected an array of strings");
  for (const auto& t : types) {
    if (!t.is_string()) throw std::runtime_error("coverage.layer_types: expected an array of strings");
    m.layer_types_.insert(t.get<std::string>());
  }
  return m;
}

std::vector<double> leave_one_model_out(std::span<const CalibrationRun> runs, const CalibrationOptions& o,
                                        const std::function<bool(const CalibrationRun&)>& judged) {
  std::vector<double> out(runs.size(), NAN);
  std::set<std::string> models;
  for (const auto& r : runs)
    if (judged(r)) models.insert(r.model);
  for (const auto& held : models) {
    std::vector<CalibrationRun> train;
    for (const auto& r : runs)
      if (r.model != held) train.push_back(r);
    const auto m = CalibratedModel::fit(train, o);
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (runs[i].model == held) out[i] = m.estimate(runs[i], runs[i].gpu).mib;
  }
  return out;
}

}  // namespace aegis
