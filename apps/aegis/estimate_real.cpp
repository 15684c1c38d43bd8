#include "apps/aegis/estimate_real.h"

#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <map>

#include "estimate/analytical.h"
#include "estimate/calibrated.h"
#include "estimate/gpumemnet_data.h"
#include "estimate/ratio_metrics.h"
#include "estimate/utilisation.h"
#include "runtime/daemon/config.h"
#include "sim/csv.h"
#include "sim/workload_specs.h"

namespace aegis::cli {
namespace {

// Where the measured peaks come from: the catalog was profiled on an A100 40 GB
// (data/README.md); GPUMemNet's MLPs on its authors' testbed, another GPU and stack.
const std::string kCatalogGpu = "A100-40GB";
const std::string kMlpGpu = "gpumemnet-testbed";
const std::string kMlpModel = "gpumemnet-mlp";  // the synthetic MLPs weigh as one model
const std::vector<double> kQuantiles = {0.8, 0.85, 0.9, 0.95, 0.99};
// The shipped form: CalibrationOptions' defaults (two-part, q = 0.90; docs/estimators.md).
const CalibrationOptions kShippedForm{};

struct RealRun {
  std::string name;
  CalibrationRun run;
  ModelFeatures features;
  double smact = NAN, smocc = NAN, drama = NAN, util = NAN;  // shares in [0, 1]
  double horus_pub = NAN, fake_pub = NAN, gmn_pub = NAN;      // NAN: none or capped at 40000
  int lucid_ss = -1;                                          // Lucid's sharing score (-1: none)
  bool catalog = false;
};

CalibrationRun run_of(const ModelFeatures& f, const std::string& model, const std::string& gpu, bool half) {
  CalibrationRun r = calibration_run(f, gpu, half);
  r.model = model;
  return r;
}

std::vector<RealRun> load_catalog_runs(const std::string& workloads, const std::string& specs) {
  struct Measured {
    double peak, smact, smocc, drama, util, horus, fake, gmn;
    int lucid_ss;
  };
  std::map<std::string, Measured> measured;
  auto w = CsvReader::open(workloads);
  auto published = [&](std::string_view col) {
    const auto x = w.opt_double(col);
    return x && *x < 40000 ? *x : NAN;  // 40000: the artifact's cap, no estimate
  };
  while (w.next()) {
    const auto util = w.opt_double("horus_gpu_util_mean");
    measured[w.get_text("name")] = {w.opt_double("peak_memory_mib").value_or(NAN),
                                    w.opt_double("avg_smact").value_or(NAN),
                                    w.opt_double("avg_smocc").value_or(NAN),
                                    w.opt_double("avg_drama").value_or(NAN),
                                    util ? *util / 100.0 : NAN,
                                    published("horus_estimate_mib"),
                                    published("faketensor_estimate_mib"),
                                    published("gpumemnet_estimate_mib"),
                                    static_cast<int>(w.opt_int("lucid_ss").value_or(-1))};
  }
  std::vector<RealRun> out;
  for (const auto& s : load_workload_specs(specs)) {
    RealRun x;
    x.name = s.name;
    auto it = measured.find(x.name);
    if (it == measured.end()) throw InputError(fmt::format("{}: field 'name': not in {}", s.where, workloads));
    if (!(it->second.peak > 0))
      throw InputError(fmt::format("{}: field 'name': the catalog has no measured peak for it", s.where));
    x.features = s.features;
    x.run = run_of(s.features, s.model, kCatalogGpu, s.half);
    x.run.peak_mib = it->second.peak;
    const auto& m = it->second;
    x.smact = m.smact, x.smocc = m.smocc, x.drama = m.drama, x.util = m.util;
    x.horus_pub = m.horus, x.fake_pub = m.fake, x.gmn_pub = m.gmn;
    x.lucid_ss = m.lucid_ss;
    x.catalog = true;
    out.push_back(std::move(x));
  }
  return out;
}

std::vector<RealRun> load_mlp_runs(const std::vector<std::string>& files) {
  std::vector<RealRun> out;
  for (const auto& path : files) {
    auto r = CsvReader::open(path);
    while (r.next()) {
      auto s = gpumemnet_sample([&](std::string_view col) -> std::optional<std::string> {
        if (!r.has_column(col)) return std::nullopt;
        return r.field(col);
      });
      if (auto* e = std::get_if<FieldError>(&s)) r.fail(e->field, e->what);
      RealRun x;
      x.features = std::get<MemorySample>(s).features;
      x.name = fmt::format("{}:{}", path, r.line());
      x.run = run_of(x.features, kMlpModel, kMlpGpu, false);
      x.run.synthetic = true;
      x.run.peak_mib = std::get<MemorySample>(s).memory_mib;
      // GPUMemNet's utilisation columns: SMACT and SMOCC as shares, GPUTL in percent; no DRAM activity.
      x.smact = r.opt_double("Avg SMACT").value_or(NAN);
      x.smocc = r.opt_double("Avg SMOCC").value_or(NAN);
      const auto util = r.opt_double("Avg GPUTL");
      x.util = util ? *util / 100.0 : NAN;
      out.push_back(std::move(x));
    }
  }
  return out;
}

std::vector<CalibrationRun> calibration_runs(const std::vector<RealRun>& all) {
  std::vector<CalibrationRun> runs;
  for (const auto& x : all) runs.push_back(x.run);
  return runs;
}

nlohmann::json memory_table(const std::vector<RealRun>& all, const LearnedNet* learned) {
  const auto runs = calibration_runs(all);
  std::map<std::string, std::vector<double>> est;
  std::vector<std::string> names;
  auto judge = [&](const std::string& name, const CalibrationOptions& o) {
    names.push_back(name);
    est[name] = leave_one_model_out(runs, o, [](const CalibrationRun& r) { return r.model != kMlpModel; });
  };
  // Both forms, the margin alone (shipped before) and the two-part margin (shipped now;
  // docs/estimators.md, "Context by layer type, two-part margin"), at each quantile.
  for (bool two_part : {false, true})
    for (double q : kQuantiles) {
      CalibrationOptions o;
      o.margin_quantile = q;
      o.two_part_margin = two_part;
      o.default_gpu = kCatalogGpu;
      judge(fmt::format("calibrated ({} p{:g})", two_part ? "two-part" : "margin", q * 100), o);
    }
  std::vector<double> peaks;
  for (const auto& x : all) {
    if (!x.catalog) continue;
    peaks.push_back(x.run.peak_mib);
    est["analytical"].push_back(horus_mib(x.features));
    est["analytical+context+optimizer"].push_back(analytical_full_mib(x.features));
    est["published-horus"].push_back(x.horus_pub);
    est["published-faketensor"].push_back(x.fake_pub);
    est["published-gpumemnet"].push_back(x.gmn_pub);
    if (learned)
      est["learned-regression"].push_back(learned->encoder.outside(x.features) ? NAN
                                                                               : learned->regression_mib(x.features));
  }
  for (const auto& n : names) {  // keep the catalog rows only (the MLP rows are never held out)
    std::vector<double> kept;
    for (std::size_t i = 0; i < all.size(); ++i)
      if (all[i].catalog) kept.push_back(est[n][i]);
    est[n] = kept;
  }
  for (const char* n : {"analytical", "analytical+context+optimizer", "published-horus", "published-faketensor",
                        "published-gpumemnet"})
    names.push_back(n);
  if (learned) names.push_back("learned-regression");
  fmt::print("\nMemory, leave-one-model-out on {} profiled runs of real networks (A100 40 GB); "
             "estimate / measured peak\n", peaks.size());
  const auto table = print_ratio_table("estimator", names, est, peaks, 32, 3);
  fmt::print("(calibrated: fitted without the held-out model's runs; the others need no training. "
             "Published columns: 40000 and empty count as no estimate; learned-regression: the shipped model, "
             "inside its coverage only)\n");
  nlohmann::json rows = nlohmann::json::array();
  const auto chosen = fmt::format("calibrated ({} p{:g})", kShippedForm.two_part_margin ? "two-part" : "margin",
                                  kShippedForm.margin_quantile * 100);
  std::size_t k = 0;
  for (const auto& x : all) {
    if (!x.catalog) continue;
    rows.push_back({{"workload", x.name},
                    {"model", x.run.model},
                    {"peak_mib", x.run.peak_mib},
                    {"calibrated_mib", est[chosen][k]},
                    {"ratio", est[chosen][k] / x.run.peak_mib}});
    ++k;
  }
  return {{"estimators", table}, {"rows", rows}, {"chosen", chosen}};
}

// The utilisation targets: the name the model file and aegisd use, and the measured column.
std::vector<std::pair<std::string, double RealRun::*>> utilisation_targets() {
  return {{"smact", &RealRun::smact}, {"smocc", &RealRun::smocc}, {"drama", &RealRun::drama},
          {"gpu_util", &RealRun::util}};
}

// Lucid's sharing score as aegisd derives it from the predicted utilisation (held out),
// against the catalog's labels (Lucid's classifier): how often the two agree.
nlohmann::json sharing_score_table(const std::vector<RealRun>& all, const std::vector<CalibrationRun>& runs) {
  std::vector<double> y;
  for (const auto& x : all) y.push_back(x.util);
  const auto pred = utilisation_leave_one_model_out(runs, y);
  const double tiny = DaemonSettings{}.tiny_util;
  int n = 0, exact = 0, tiny_agree = 0, unsafe = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (!all[i].catalog || all[i].lucid_ss < 0 || !std::isfinite(pred[i])) continue;
    const int ss = sharing_score_from_util(pred[i], tiny), label = all[i].lucid_ss;
    ++n;
    exact += ss == label;
    tiny_agree += (ss == 0) == (label == 0);
    unsafe += ss < label;  // told it may share more than Lucid's label allows
  }
  fmt::print("Sharing score from the predicted utilisation (0 below tiny_util = {:g}, else 2) against the "
             "catalog's lucid_ss, {} runs: {} equal, {} agree on tiny or not, {} scored below the label\n",
             tiny, n, exact, tiny_agree, unsafe);
  return {{"tiny_util", tiny}, {"n", n}, {"equal", exact}, {"tiny_agree", tiny_agree}, {"below_label", unsafe}};
}

nlohmann::json utilisation_table(const std::vector<RealRun>& all) {
  const auto runs = calibration_runs(all);
  struct Target {
    const char* name;
    double RealRun::*field;
  };
  const Target targets[] = {{"SM activity (avg_smact)", &RealRun::smact},
                            {"SM occupancy (avg_smocc)", &RealRun::smocc},
                            {"DRAM activity (avg_drama)", &RealRun::drama},
                            {"coarse utilisation (horus_gpu_util_mean)", &RealRun::util}};
  fmt::print("\nUtilisation, leave-one-model-out on the profiled runs (the MLPs' columns in training, "
             "as one model); predicted vs measured share\n");
  fmt::print("{:<42} {:>4} {:>8} {:>9} {:>14}\n", "target", "n", "MAE", "Spearman", "MAE (mean)");
  nlohmann::json table = nlohmann::json::array();
  for (const auto& t : targets) {
    std::vector<double> y;
    for (const auto& x : all) y.push_back(x.*t.field);
    const auto pred = utilisation_leave_one_model_out(runs, y);
    // The baseline: the mean of the other models (each weighing 1), what a scheduler
    // without features would assume.
    std::vector<double> base(all.size(), NAN), pc, yc, bc;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (!all[i].catalog || !std::isfinite(y[i])) continue;
      std::map<std::string, std::pair<double, int>> per_model;
      for (std::size_t j = 0; j < all.size(); ++j)
        if (all[j].run.model != all[i].run.model && std::isfinite(y[j])) {
          auto& [s, n] = per_model[all[j].run.model];
          s += y[j], n += 1;
        }
      double sum = 0;
      for (const auto& [m, sn] : per_model) sum += sn.first / sn.second;
      base[i] = per_model.empty() ? NAN : sum / static_cast<double>(per_model.size());
    }
    for (std::size_t i = 0; i < all.size(); ++i)
      if (all[i].catalog) pc.push_back(pred[i]), yc.push_back(y[i]), bc.push_back(base[i]);
    const auto m = agreement(pc, yc), b = agreement(bc, yc);
    fmt::print("{:<42} {:>4} {:>8.3f} {:>9.3f} {:>14.3f}\n", t.name, m.n, m.mae, m.spearman, b.mae);
    table.push_back({{"target", t.name}, {"n", m.n}, {"mae", m.mae}, {"spearman", m.spearman},
                     {"baseline_mean_mae", b.mae}});
  }
  fmt::print("(MAE (mean): predicting every job as the mean of the other models)\n");
  // What `aegis sim` gives aegis-learned's order (sim/workload_specs.h): the same regression
  // fitted on the catalog's coarse utilisation alone (the simulator reads no MLP data).
  std::vector<CalibrationRun> catalog_runs;
  std::vector<double> catalog_util;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i].catalog) catalog_runs.push_back(runs[i]), catalog_util.push_back(all[i].util);
  const auto sim = agreement(utilisation_leave_one_model_out(catalog_runs, catalog_util), catalog_util);
  fmt::print("{:<42} {:>4} {:>8.3f} {:>9.3f}   (the catalog alone: aegis sim's predicted utilisation)\n",
             "coarse utilisation, catalog only", sim.n, sim.mae, sim.spearman);
  return {{"targets", table},
          {"simulator_util", {{"n", sim.n}, {"mae", sim.mae}, {"spearman", sim.spearman}}},
          {"sharing_score", sharing_score_table(all, runs)}};
}

}  // namespace

nlohmann::json print_ratio_table(const std::string& title, const std::vector<std::string>& names,
                                 const std::map<std::string, std::vector<double>>& estimates,
                                 const std::vector<double>& peaks, int width, int decimals) {
  fmt::print("{:<{}} {:>4} {:>8} {:>8} {:>8} {:>8}\n", title, width, "n", "median", "p95", "under", "MAPE");
  nlohmann::json table = nlohmann::json::array();
  for (const auto& n : names) {
    const auto it = estimates.find(n);
    const auto m = ratio_metrics(it != estimates.end() ? it->second : std::vector<double>{}, peaks);
    fmt::print("{:<{}} {:>4} {:>8.{}f} {:>8.{}f} {:>8.{}f} {:>8.{}f}\n", n, width, m.n, m.median_ratio, decimals,
               m.p95_ratio, decimals, m.underestimate_share, decimals, m.mape, decimals);
    nlohmann::json j = {{"estimator", n}};
    j.update(to_json(m));
    table.push_back(j);
  }
  return table;
}

nlohmann::json evaluate_real_networks(const std::string& workloads, const std::string& specs,
                                      const std::vector<std::string>& mlp_files, const LearnedNet* learned) {
  auto all = load_catalog_runs(workloads, specs);
  auto mlp = load_mlp_runs(mlp_files);
  all.insert(all.end(), std::make_move_iterator(mlp.begin()), std::make_move_iterator(mlp.end()));
  nlohmann::json out = {{"specs", specs}, {"workloads", workloads}};
  out["memory"] = memory_table(all, learned);
  out["utilisation"] = utilisation_table(all);
  return out;
}

void add_calibrate_estimator(CLI::App& est, const std::vector<std::string>& default_mlp_files) {
  struct Args {
    std::string workloads = "data/aegis/workloads.csv", specs = kDefaultSpecs, out;
    std::vector<std::string> data;
    double quantile = kShippedForm.margin_quantile;
    std::string form = kShippedForm.two_part_margin ? "two-part" : "margin";
  };
  static Args a;
  static std::vector<std::string> defaults;
  defaults = default_mlp_files;
  auto* cmd =
      est.add_subcommand("calibrate", "Fit the calibrated memory estimator for real networks; write it as JSON");
  cmd->add_option("--workloads", a.workloads, "Profiled catalog (measured peaks)")->capture_default_str();
  cmd->add_option("--specs", a.specs, "Model specs of the catalog (scripts/workload_specs.py)")->capture_default_str();
  cmd->add_option("--data", a.data, "GPUMemNet CSV (repeatable; default: both files in data/gpumemnet/)");
  cmd->add_option("--quantile", a.quantile,
                  "two-part: the share of training runs, counted over models and over real runs, the estimate must "
                  "cover (0.9: the goal's 10 % under); margin: the quantile of (measured - context) / fitted "
                  "model-dependent part taken as the margin")
      ->check(CLI::Range(0.5, 1.0))
      ->capture_default_str();
  cmd->add_option("--form", a.form,
                  "two-part: context margin + margin (shipped); margin: the margin alone (shipped before "
                  "2026-12-03, with --quantile 0.95); docs/estimators.md")
      ->check(CLI::IsMember({"two-part", "margin"}))
      ->capture_default_str();
  cmd->add_option("--out", a.out, "Model file to write")->required();
  cmd->callback([] {
    auto all = load_catalog_runs(a.workloads, a.specs);
    auto mlp = load_mlp_runs(a.data.empty() ? defaults : a.data);
    all.insert(all.end(), mlp.begin(), mlp.end());
    CalibrationOptions o;
    o.margin_quantile = a.quantile;
    o.two_part_margin = a.form == "two-part";
    o.default_gpu = kCatalogGpu;
    const auto m = CalibratedModel::fit(calibration_runs(all), o);
    auto j = m.to_json();
    // The utilisation regressions, on the same runs, for aegisd's hints (calibrated_model).
    std::map<std::string, UtilisationModel> util;
    const auto runs = calibration_runs(all);
    for (const auto& [name, field] : utilisation_targets()) {
      std::vector<double> y;
      for (const auto& x : all) y.push_back(x.*field);
      util[name] = fit_utilisation(runs, y);
    }
    j["utilisation"] = to_json(util);
    j["training"] = {{"workloads", a.workloads}, {"specs", a.specs}, {"runs", all.size()},
                     {"command", fmt::format("aegis estimate calibrate --form {} --quantile {:g} --out {}", a.form,
                                             a.quantile, a.out)}};
    std::ofstream f(a.out);
    if (!f) throw InputError(a.out + ": cannot write the model file");
    f << j.dump(2) << "\n";
    if (!f) throw InputError(a.out + ": write failed");
    fmt::print("fitted on {} runs: context {} {:+.1f} MiB, margin {:.3f} x ({:.3f} x parameter MiB + {:.3f} x "
               "activation MiB); wrote {}\n",
               all.size(), j["context_mib"].dump(), m.context_margin_mib(), m.margin(), m.per_parameter_mib(),
               m.per_activation_mib(), a.out);
  });
}

nlohmann::json calibrated_prediction(const ModelFeatures& f, const std::string& model_file, const std::string& gpu) {
  std::ifstream in(model_file);
  if (!in) throw InputError(model_file + ": cannot open");
  CalibratedModel m;
  std::map<std::string, UtilisationModel> utilisation;
  try {
    const auto j = nlohmann::json::parse(in);
    m = CalibratedModel::from_json(j);
    if (j.contains("utilisation")) utilisation = utilisation_from_json(j.at("utilisation"));
  } catch (const std::exception& e) {
    throw InputError(fmt::format("{}: {}", model_file, e.what()));
  }
  const auto job = calibration_run(f, gpu);
  const auto e = m.estimate(job, gpu);
  nlohmann::json util = nlohmann::json::object();
  for (const auto& [name, u] : utilisation) util[name] = u.predict(job);
  return {{"calibrated_mib", e.mib},
          {"utilisation", util},
          {"gpu_model", gpu},
          {"out_of_distribution", e.out_of_distribution},
          {"why", e.why.empty() ? nlohmann::json() : nlohmann::json(e.why)},
          {"calibrated_model", model_file}};
}

}  // namespace aegis::cli
