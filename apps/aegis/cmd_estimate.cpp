// `aegis estimate`: the GPU memory estimators. `train` fits the learned model on GPUMemNet's
// MLP data and writes it as JSON; `eval` cross-validates every estimator (and, with
// --workloads, compares them on the profiled catalog); `predict` estimates one model spec.
// The app reads the CSV files (sim/csv.h); the estimate layer only sees rows' fields.
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <set>

#include "apps/aegis/commands.h"
#include "apps/aegis/estimate_real.h"
#include "estimate/analytical.h"
#include "estimate/evaluation.h"
#include "estimate/gpumemnet_data.h"
#include "estimate/learned_net.h"
#include "estimate/learned_training.h"
#include "sim/csv.h"

namespace aegis::cli {
namespace {

const std::vector<std::string> kDefaultData = {"data/gpumemnet/mlp_data_step1.csv",
                                               "data/gpumemnet/mlp_data_step2.csv"};
const std::string kDefaultModel = "data/models/gpumemnet_mlp.json";
constexpr double kMiB = 1024.0 * 1024.0;

// --- data ---------------------------------------------------------------------------

std::vector<MemorySample> load_gpumemnet(const std::vector<std::string>& files) {
  std::vector<MemorySample> out;
  for (const auto& path : files) {
    auto r = CsvReader::open(path);
    for (auto col : kGpuMemNetRequired)
      if (!r.has_column(col)) throw InputError(fmt::format("{}:1: missing column '{}'", path, col));
    std::size_t rows = 0;
    while (r.next()) {
      auto s = gpumemnet_sample([&](std::string_view col) -> std::optional<std::string> {
        if (!r.has_column(col)) return std::nullopt;
        return r.field(col);
      });
      if (auto* e = std::get_if<FieldError>(&s)) r.fail(e->field, e->what);
      auto& sample = std::get<MemorySample>(s);
      sample.origin = fmt::format("{}:{}", path, r.line());
      out.push_back(std::move(sample));
      ++rows;
    }
    if (rows == 0) throw InputError(fmt::format("{}: no data rows", path));
  }
  return out;
}

nlohmann::json describe_data(const std::vector<std::string>& files, const std::vector<MemorySample>& s) {
  std::map<std::string, std::size_t> rows;
  for (const auto& x : s) rows[x.origin.substr(0, x.origin.rfind(':'))]++;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& f : files) list.push_back({{"file", std::filesystem::path(f).filename().string()}, {"rows", rows[f]}});
  return {{"files", list},
          {"rows", s.size()},
          {"source", "itu-rad/GPUMemNet at f01eb05, Datasets/MLP: synthetic MLP training runs, peak GPU memory "
                     "(Max GPU Memory (MiB)) measured alone on one GPU"}};
}

std::string today_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

// --- the profiled catalog -------------------------------------------------------------

// One workload of data/aegis/workloads.csv with what the analytical formula needs.
struct CatalogRow {
  std::string name;
  int batch = 0;
  double peak = NAN;                              // measured solo peak, MiB
  double params = NAN, fb_mb = NAN;               // model summary: P, forward/backward MB
  double activations = NAN;                       // A per sample, derived (NAN if unknown)
  std::string a_rule;                             // how A was derived
  double horus_pub = NAN, faketensor_pub = NAN, gpumemnet_pub = NAN;  // NAN: none or capped
  bool horus_capped = false, faketensor_capped = false, gpumemnet_capped = false;
};

std::vector<CatalogRow> load_catalog(const std::string& path) {
  auto r = CsvReader::open(path);
  std::vector<CatalogRow> rows;
  auto published = [&](std::string_view col, double& v, bool& capped) {
    const auto x = r.opt_double(col);
    capped = x && *x >= 40000;  // the artifact's "could not estimate below the cap"
    v = x && !capped ? *x : NAN;
  };
  while (r.next()) {
    if (r.has_column("in_profiled_53_catalog") && r.field("in_profiled_53_catalog") != "yes") continue;
    CatalogRow w;
    w.name = r.get_text("name");
    w.batch = static_cast<int>(r.get_int("batch_size"));
    if (w.batch < 1) r.fail("batch_size", "expected a positive batch size");
    w.peak = r.opt_double("peak_memory_mib").value_or(NAN);
    w.params = r.opt_double("model_summary_total_params").value_or(NAN);
    w.fb_mb = r.opt_double("model_summary_forward_backward_pass_size_mb").value_or(NAN);
    published("horus_estimate_mib", w.horus_pub, w.horus_capped);
    published("faketensor_estimate_mib", w.faketensor_pub, w.faketensor_capped);
    published("gpumemnet_estimate_mib", w.gpumemnet_pub, w.gpumemnet_capped);
    rows.push_back(std::move(w));
  }
  // torchsummary prints "Forward/backward pass size (MB)" = 2 x 4 bytes x (sum of every
  // layer's output elements) / 2^20 for the input it was given: either one sample (batch
  // -1, the same figure for every batch size) or the job's whole batch (the figure grows
  // with it). Workloads sharing a summary (same parameter count) at several batch sizes
  // tell which; a summary seen at one batch size only is taken as the job's batch.
  std::map<double, std::vector<CatalogRow*>> by_model;
  for (auto& w : rows)
    if (std::isfinite(w.params) && std::isfinite(w.fb_mb)) by_model[w.params].push_back(&w);
  for (auto& [p, group] : by_model) {
    std::set<int> batches;
    bool same = true, proportional = true;
    for (auto* w : group) {
      batches.insert(w->batch);
      same = same && std::fabs(w->fb_mb - group[0]->fb_mb) <= 0.01 * group[0]->fb_mb;
      const double per = w->fb_mb / w->batch, per0 = group[0]->fb_mb / group[0]->batch;
      proportional = proportional && std::fabs(per - per0) <= 0.01 * per0;
    }
    for (auto* w : group) {
      const double elements = w->fb_mb * kMiB / 8.0;  // sum of output elements summarised
      if (batches.size() > 1 && same) {
        w->activations = elements;
        w->a_rule = "per-sample summary (same at every batch size)";
      } else if (batches.size() > 1 && proportional) {
        w->activations = elements / w->batch;
        w->a_rule = "batch summary (grows with the batch)";
      } else if (batches.size() == 1) {
        w->activations = elements / w->batch;
        w->a_rule = "single batch size: taken as the job's batch";
      }
    }
  }
  return rows;
}

std::string cell(double v) { return std::isfinite(v) ? fmt::format("{:.0f}", v) : "-"; }
std::string ratio_cell(double v, double peak) {
  return std::isfinite(v) && std::isfinite(peak) ? fmt::format("{:.2f}", v / peak) : "-";
}

// The workloads comparison: analytical estimates from the model summaries beside the
// published estimators' columns, all against the measured solo peak.
nlohmann::json compare_catalog(const std::string& path, const LearnedNet* net) {
  const auto rows = load_catalog(path);
  constexpr int kAssumedDepth = 7;  // the catalog records no depth: the middle of GPUMemNet's 2-12
  std::map<std::string, std::vector<double>> est;
  std::vector<double> peaks;
  nlohmann::json out_rows = nlohmann::json::array();
  std::size_t outside = 0;
  fmt::print("\n{}: {} workloads; estimate / measured peak (- = no estimate; capped at 40000 counts as none)\n",
             path, rows.size());
  fmt::print("{:<38} {:>5} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8}\n", "workload", "batch", "peak MiB",
             "A/sample", "horus", "h+ctx+op", "pub.hor", "pub.fake", "pub.gmn");
  for (const auto& w : rows) {
    double h = NAN, full = NAN, forced = NAN;
    std::string why;
    if (std::isfinite(w.activations)) {
      ModelFeatures f;
      f.depth = kAssumedDepth;
      f.batch_size = w.batch;
      f.total_parameters = w.params;
      f.total_activations = w.activations;
      f.activation = "ReLU";
      h = horus_mib(f);
      full = analytical_full_mib(f);
      if (net) {
        forced = net->regression_mib(f);
        why = net->encoder.outside(f).value_or("");
        outside += why.empty() ? 0 : 1;
      }
    }
    peaks.push_back(w.peak);
    est["analytical"].push_back(h);
    est["analytical+context+optimizer"].push_back(full);
    est["published-horus"].push_back(w.horus_pub);
    est["published-faketensor"].push_back(w.faketensor_pub);
    est["published-gpumemnet"].push_back(w.gpumemnet_pub);
    est["learned-regression"].push_back(why.empty() ? forced : NAN);
    fmt::print("{:<38} {:>5} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8}\n", w.name, w.batch, cell(w.peak),
               std::isfinite(w.activations) ? fmt::format("{:.3g}", w.activations) : "-", ratio_cell(h, w.peak),
               ratio_cell(full, w.peak), ratio_cell(w.horus_pub, w.peak), ratio_cell(w.faketensor_pub, w.peak),
               ratio_cell(w.gpumemnet_pub, w.peak));
    nlohmann::json j = {{"workload", w.name}, {"batch_size", w.batch}};
    auto put = [&](const char* k, double v) { j[k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
    put("peak_memory_mib", w.peak);
    put("total_parameters", w.params);
    put("forward_backward_mb", w.fb_mb);
    put("activations_per_sample", w.activations);
    j["activations_rule"] = w.a_rule;
    put("analytical_mib", h);
    put("analytical_context_optimizer_mib", full);
    put("published_horus_mib", w.horus_pub);
    put("published_faketensor_mib", w.faketensor_pub);
    put("published_gpumemnet_mib", w.gpumemnet_pub);
    j["published_capped"] = {{"horus", w.horus_capped}, {"faketensor", w.faketensor_capped},
                             {"gpumemnet", w.gpumemnet_capped}};
    if (net && std::isfinite(forced)) {
      put("learned_regression_forced_mib", forced);
      j["learned_outside_training"] = why.empty() ? nlohmann::json() : nlohmann::json(why);
    }
    out_rows.push_back(j);
  }
  fmt::print("\n");
  const auto summary = print_ratio_table("estimator (catalog)",
                                         {"analytical", "analytical+context+optimizer", "published-horus",
                                          "published-faketensor", "published-gpumemnet", "learned-regression"},
                                         est, peaks, 30, 2);
  if (net)
    fmt::print("learned model: {} of the workloads with a model summary lie outside its training data "
               "(no estimate; docs/estimators.md)\n",
               outside);
  return {{"file", path},
          {"assumed_depth_for_learned", kAssumedDepth},
          {"rows", out_rows},
          {"estimators", summary},
          {"learned_outside_training", outside}};
}

// --- subcommands ---------------------------------------------------------------------

struct TrainArgs {
  std::vector<std::string> data;
  std::string out;
  std::uint64_t seed = 1;
  double quantile = 0.95;
  int epochs = 300;
  std::string date;
};

void add_train(CLI::App& est) {
  static TrainArgs a;
  auto* cmd = est.add_subcommand("train", "Train the learned estimator on GPUMemNet's MLP data; write it as JSON");
  cmd->add_option("--data", a.data, "GPUMemNet CSV (repeatable; default: both files in data/gpumemnet/)");
  cmd->add_option("--out", a.out, "Model file to write")->required();
  cmd->add_option("--seed", a.seed, "Training seed")->capture_default_str();
  cmd->add_option("--quantile", a.quantile, "Quantile the regression head learns")
      ->check(CLI::Range(0.5, 0.999))
      ->capture_default_str();
  cmd->add_option("--epochs", a.epochs, "Maximum epochs (early stopping on a seeded validation split)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--date", a.date, "Training date recorded in the file (default: today, UTC)");
  cmd->callback([] {
    const auto files = a.data.empty() ? kDefaultData : a.data;
    const auto samples = load_gpumemnet(files);
    if (!std::ofstream(a.out, std::ios::app))  // fail before training, without truncating
      throw InputError(a.out + ": cannot write the model file");
    LearnedTrainOptions o;
    o.seed = a.seed;
    o.quantile = a.quantile;
    o.max_epochs = a.epochs;
    const auto t0 = std::chrono::steady_clock::now();
    LearnedNet net = train_learned(samples, o);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    net.training["data"] = describe_data(files, samples);
    net.training["date"] = a.date.empty() ? today_utc() : a.date;
    net.training["calibrated_on"] = "GPUMemNet MLP data only (not on the AEGIS workload catalog)";
    std::ofstream f(a.out);
    if (!f) throw InputError(a.out + ": cannot write the model file");
    f << to_json(net).dump() << "\n";
    if (!f) throw InputError(a.out + ": write failed");
    const auto& m = net.training["in_sample_metrics"];
    fmt::print("trained on {} runs in {:.1f} s (seed {}); wrote {}\n", samples.size(), secs, a.seed, a.out);
    fmt::print("regression (p{:g}): epochs {} (best {}), in-sample median ratio {:.3f}, underestimates {:.3f}\n",
               a.quantile * 100, net.training["regression_report"]["epochs_run"].get<int>(),
               net.training["regression_report"]["best_epoch"].get<int>(),
               m["regression"]["median_ratio"].get<double>(), m["regression"]["underestimate_share"].get<double>());
    fmt::print("classifier ({} bins of {:g} MiB): epochs {} (best {}), in-sample bin accuracy {:.3f}\n",
               net.classifier.outputs(), net.bin_mib, net.training["classification_report"]["epochs_run"].get<int>(),
               net.training["classification_report"]["best_epoch"].get<int>(),
               m["classification"]["bin_accuracy"].get<double>());
  });
}

struct EvalArgs {
  std::vector<std::string> data;
  int folds = 3;
  std::uint64_t seed = 7;
  double quantile = 0.95;
  int epochs = 300;
  std::string json_path, workloads, model = kDefaultModel, specs = kDefaultSpecs;
};

void add_eval(CLI::App& est) {
  static EvalArgs a;
  auto* cmd = est.add_subcommand("eval", "Cross-validate the estimators (seeded k-fold); optionally on the catalog");
  cmd->add_option("--data", a.data, "GPUMemNet CSV (repeatable; default: both files in data/gpumemnet/)");
  cmd->add_option("--folds", a.folds, "Folds")->check(CLI::Range(2, 100))->capture_default_str();
  cmd->add_option("--seed", a.seed, "Seed of the fold split and of each fold's training")->capture_default_str();
  cmd->add_option("--quantile", a.quantile, "Quantile the regression head learns")
      ->check(CLI::Range(0.5, 0.999))
      ->capture_default_str();
  cmd->add_option("--epochs", a.epochs, "Maximum epochs per fold")->check(CLI::Range(1, 100000))->capture_default_str();
  cmd->add_option("--json", a.json_path, "Write every figure as JSON");
  cmd->add_option("--workloads", a.workloads, "Also compare on a profiled catalog (data/aegis/workloads.csv)");
  cmd->add_option("--model", a.model, "Learned model for the catalog comparison")->capture_default_str();
  cmd->add_option("--specs", a.specs,
                  "With --workloads: the catalog's model specs, for the leave-one-model-out tables "
                  "(memory and utilisation) on real networks")
      ->capture_default_str();
  cmd->callback([] {
    const auto files = a.data.empty() ? kDefaultData : a.data;
    const auto samples = load_gpumemnet(files);
    if (samples.size() < static_cast<std::size_t>(a.folds))
      throw InputError(fmt::format("--folds {}: only {} runs in the data", a.folds, samples.size()));
    KFoldOptions o;
    o.folds = a.folds;
    o.seed = a.seed;
    o.train.quantile = a.quantile;
    o.train.max_epochs = a.epochs;
    const auto res = evaluate_kfold(samples, o);

    fmt::print("{}-fold cross-validation on {} runs ({}), seed {}\n", a.folds, samples.size(),
               fmt::join(files, ", "), a.seed);
    fmt::print("{:<30} {:>8} {:>8} {:>8} {:>8} {:>8} {:>12}\n", "estimator", "median", "p95", "under", "MAPE",
               "bin acc", "us/estimate");
    nlohmann::json ests = nlohmann::json::array();
    for (const auto& e : res.estimators) {
      const auto& m = e.metrics;
      fmt::print("{:<30} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>8} {:>12.3f}\n", e.estimator, m.median_ratio,
                 m.p95_ratio, m.underestimate_share, m.mape,
                 m.bin_accuracy ? fmt::format("{:.3f}", *m.bin_accuracy) : "-", e.overhead_us);
      ests.push_back(to_json(e));
    }
    fmt::print("(median, p95: of estimate / measured peak; under: share of runs underestimated; "
               "overheads vary from run to run)\n");
    nlohmann::json out = {
        {"config",
         {{"data", describe_data(files, samples)},
          {"folds", a.folds},
          {"seed", a.seed},
          {"training", to_json(o.train)},
          {"analytical_context_mib", AnalyticalAssumptions{}.context_mib},
          {"analytical_optimizer", "adam: 2 fp32 copies of the parameters, plus 1 of gradients"}}},
        {"estimators", ests},
        {"folds", res.folds}};
    if (!a.workloads.empty()) {
      std::optional<LearnedNet> net;
      if (std::filesystem::exists(a.model)) net = load_learned_net(a.model);
      else fmt::print("(no learned model at {}: the catalog comparison leaves it out)\n", a.model);
      out["workloads"] = compare_catalog(a.workloads, net ? &*net : nullptr);
      if (net) out["workloads"]["model"] = a.model;
      out["real_networks"] = evaluate_real_networks(a.workloads, a.specs, files, net ? &*net : nullptr);
    }
    if (!a.json_path.empty()) {
      std::ofstream f(a.json_path);
      if (!f) throw InputError(a.json_path + ": cannot write");
      f << out.dump(2) << "\n";
    }
  });
}

struct PredictArgs {
  std::string features, model = kDefaultModel, calibrated = kDefaultCalibrated, gpu = "A100-40GB";
  bool json = false;
};

void add_predict(CLI::App& est) {
  static PredictArgs a;
  auto* cmd = est.add_subcommand("predict", "Estimate the peak GPU memory of one model spec (features JSON)");
  cmd->add_option("--features", a.features, "Model spec JSON (scripts/model_spec.py writes one)")->required();
  cmd->add_option("--model", a.model, "Learned model file")->capture_default_str();
  cmd->add_option("--calibrated", a.calibrated, "Calibrated model file (real networks)")->capture_default_str();
  cmd->add_option("--gpu-model", a.gpu, "GPU model the calibrated estimate is for (its context)")
      ->capture_default_str();
  cmd->add_flag("--json", a.json, "Print JSON instead of a table");
  cmd->callback([] {
    std::ifstream in(a.features);
    if (!in) throw InputError(a.features + ": cannot open");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::parse_error& e) {
      throw InputError(fmt::format("{}: not valid JSON ({})", a.features, e.what()));
    }
    auto parsed = features_from_json(j);
    if (auto* e = std::get_if<std::string>(&parsed)) throw InputError(a.features + ": " + *e);
    const auto& f = std::get<ModelFeatures>(parsed);
    const LearnedNet net = load_learned_net(a.model);
    const auto outside = net.encoder.outside(f);
    const double h = horus_mib(f), full = analytical_full_mib(f);
    const double reg = net.regression_mib(f), cls = net.classification_mib(f);
    // The calibrated model is optional where it is the default and not there (a build
    // directory run elsewhere); named explicitly, it must load.
    const bool no_calibrated = a.calibrated == kDefaultCalibrated && !std::filesystem::exists(a.calibrated);
    const auto cal = no_calibrated ? nlohmann::json::object() : calibrated_prediction(f, a.calibrated, a.gpu);
    if (a.json) {
      nlohmann::json o = {{"features", to_json(f)},
                          {"model", a.model},
                          {"analytical_mib", h},
                          {"analytical_context_optimizer_mib", full},
                          {"learned_regression_mib", outside ? nlohmann::json() : nlohmann::json(reg)},
                          {"learned_classifier_mib", outside ? nlohmann::json() : nlohmann::json(cls)},
                          {"quantile", net.quantile},
                          {"bin_mib", net.bin_mib},
                          {"outside_training", outside ? nlohmann::json(*outside) : nlohmann::json()}};
      o.update(cal);
      fmt::print("{}\n", o.dump(2));
      return;
    }
    fmt::print("{}: depth {}, batch {}, {:.4g} parameters, {:.4g} activations per sample, {}\n", a.features,
               f.depth, f.batch_size, f.total_parameters, f.total_activations, f.activation);
    fmt::print("{:<34} {:>10.0f} MiB\n", "analytical (Horus formula)", std::ceil(h));
    fmt::print("{:<34} {:>10.0f} MiB\n", "analytical+context+optimizer", std::ceil(full));
    if (!no_calibrated)
      fmt::print("{:<34} {:>10.0f} MiB{}\n", "calibrated (" + a.gpu + ")",
                 std::ceil(cal["calibrated_mib"].get<double>()),
               cal["out_of_distribution"].get<bool>() ? "  out of distribution: " + cal["why"].get<std::string>() : "");
    if (!no_calibrated && !cal["utilisation"].empty()) {
      std::vector<std::string> parts;
      for (const auto& [name, v] : cal["utilisation"].items())
        parts.push_back(fmt::format("{} {:.2f}", name, v.get<double>()));
      fmt::print("{:<34} {}\n", "utilisation (calibrated)", fmt::join(parts, ", "));
    }
    if (outside) {
      fmt::print("{:<34} no estimate: {}\n", "learned (" + a.model + ")", *outside);
    } else {
      fmt::print("{:<34} {:>10.0f} MiB\n", fmt::format("learned-regression (p{:g})", net.quantile * 100),
                 std::ceil(reg));
      fmt::print("{:<34} {:>10.0f} MiB\n", fmt::format("learned-classifier ({:g} MiB bins)", net.bin_mib), cls);
    }
  });
}

}  // namespace

void add_estimate(CLI::App& app) {
  auto* est = app.add_subcommand("estimate",
                                 "GPU memory estimators: train, calibrate, evaluate, predict (docs/estimators.md)");
  est->require_subcommand(1);
  add_train(*est);
  add_eval(*est);
  add_predict(*est);
  add_calibrate_estimator(*est, kDefaultData);
}

}  // namespace aegis::cli
