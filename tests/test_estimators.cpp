// The memory estimators: model-spec JSON, the analytical formulas, the MLP and its
// training, the shipped learned model, the GPUMemNet rows, the k-fold evaluation's goals,
// and `aegis estimate` errors.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "estimate/analytical.h"
#include "estimate/evaluation.h"
#include "estimate/gpumemnet_data.h"
#include "estimate/learned.h"
#include "estimate/learned_net.h"
#include "estimate/mlp.h"
#include "estimate/rng.h"
#include "estimate/training.h"
#include "sim/csv.h"
#include "tests/test_util.h"

namespace aegis {
namespace {

using nlohmann::json;
const std::string kSrc = AEGIS_SOURCE_DIR;
const std::string kModel = kSrc + "/data/models/gpumemnet_mlp.json";

json valid_spec() {
  return {{"depth", 3},         {"total_activations", 3069}, {"total_parameters", 1083897},
          {"batch_size", 717},  {"batchnorm_layers", 0},     {"dropout_layers", 0},
          {"activation", "ReLU"}, {"layer_counts", {{"linear", 3}, {"relu", 2}}}};
}

std::string error_for(json j) {
  auto r = features_from_json(j);
  return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : "";
}

// The GPUMemNet CSVs the way `aegis estimate` reads them.
std::vector<MemorySample> load_rows(const std::string& path) {
  auto r = CsvReader::open(path);
  std::vector<MemorySample> out;
  while (r.next()) {
    auto s = gpumemnet_sample([&](std::string_view c) -> std::optional<std::string> {
      if (!r.has_column(c)) return std::nullopt;
      return r.field(c);
    });
    if (auto* e = std::get_if<FieldError>(&s)) r.fail(e->field, e->what);
    out.push_back(std::get<MemorySample>(s));
  }
  return out;
}

std::vector<MemorySample> all_rows() {
  auto a = load_rows(kSrc + "/data/gpumemnet/mlp_data_step1.csv");
  auto b = load_rows(kSrc + "/data/gpumemnet/mlp_data_step2.csv");
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Cli {
  int rc = -1;
  std::string out;
};

Cli run_cli(const std::string& args) {
  const std::string cmd = "cd '" + kSrc + "' && '" + AEGIS_CLI + "' " + args + " 2>&1";
  Cli r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  while (std::size_t n = fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// --- features ---------------------------------------------------------------------------

TEST(Features, JsonRoundTrip) {
  auto r = features_from_json(valid_spec());
  ASSERT_TRUE(std::holds_alternative<ModelFeatures>(r)) << std::get<std::string>(r);
  const auto& f = std::get<ModelFeatures>(r);
  EXPECT_EQ(f.depth, 3);
  EXPECT_EQ(f.batch_size, 717);
  EXPECT_EQ(f.total_parameters, 1083897);
  EXPECT_EQ(f.layer_counts.at("linear"), 3);
  EXPECT_EQ(to_json(f), valid_spec());  // counts come back as integers, fields unchanged
  auto again = features_from_json(to_json(f));
  ASSERT_TRUE(std::holds_alternative<ModelFeatures>(again));
  EXPECT_EQ(to_json(std::get<ModelFeatures>(again)), to_json(f));

  json minimal = valid_spec();
  minimal.erase("batchnorm_layers");
  minimal.erase("dropout_layers");
  minimal.erase("layer_counts");
  auto m = features_from_json(minimal);
  ASSERT_TRUE(std::holds_alternative<ModelFeatures>(m));
  EXPECT_EQ(std::get<ModelFeatures>(m).dropout_layers, 0);
  EXPECT_FALSE(to_json(std::get<ModelFeatures>(m)).contains("layer_counts"));
}

TEST(Features, EachValidationErrorNamesTheField) {
  EXPECT_EQ(error_for(json::array()), "model spec: must be a JSON object");
  auto with = [](const char* k, json v) {
    json j = valid_spec();
    j[k] = v;
    return error_for(j);
  };
  auto without = [](const char* k) {
    json j = valid_spec();
    j.erase(k);
    return error_for(j);
  };
  EXPECT_EQ(with("depht", 3).rfind("depht: unknown field (expected depth, ", 0), 0u);
  for (const char* k : {"depth", "total_activations", "total_parameters", "batch_size", "activation"})
    EXPECT_EQ(without(k), std::string(k) + ": missing (required)");
  EXPECT_EQ(with("depth", 0), "depth: must be a positive integer");
  EXPECT_EQ(error_for(json::parse(R"({"depth": 0, "total_activations": 1, "total_parameters": 1,
                                      "batch_size": 1, "activation": "ReLU"})")),
            "depth: must be a positive integer");  // parsed 0 is an unsigned JSON number
  EXPECT_EQ(with("depth", 2.0), "depth: must be a positive integer");
  EXPECT_EQ(with("depth", "3"), "depth: must be a positive integer");
  EXPECT_EQ(with("batch_size", 0), "batch_size: must be a positive integer");
  EXPECT_EQ(with("batch_size", -4), "batch_size: must be a positive integer");
  EXPECT_EQ(with("batch_size", 4294967296LL), "batch_size: must be a positive integer");
  EXPECT_EQ(with("total_activations", -1), "total_activations: must be a number >= 0");
  EXPECT_EQ(with("total_activations", "many"), "total_activations: must be a number >= 0");
  EXPECT_EQ(with("total_parameters", nullptr), "total_parameters: must be a number >= 0");
  EXPECT_EQ(with("batchnorm_layers", -1), "batchnorm_layers: must be an integer >= 0");
  EXPECT_EQ(with("dropout_layers", 1.5), "dropout_layers: must be an integer >= 0");
  EXPECT_EQ(with("activation", ""), "activation: must be a non-empty string (e.g. \"ReLU\")");
  EXPECT_EQ(with("activation", 1), "activation: must be a non-empty string (e.g. \"ReLU\")");
  EXPECT_EQ(with("layer_counts", json::array()), "layer_counts: must be an object of layer type -> count");
  EXPECT_EQ(with("layer_counts", {{"conv2d", -2}}), "layer_counts.conv2d: must be an integer >= 0");
  EXPECT_EQ(with("layer_counts", {{"", 1}}), "layer_counts: layer type names must be non-empty");
}

// --- analytical -------------------------------------------------------------------------

TEST(Analytical, HandComputedNumbers) {
  ModelFeatures f;
  f.total_activations = 1000;
  f.batch_size = 10;
  f.total_parameters = 1000000;
  // 4 * (1000*10 + 1e6 + 10*1e6) = 44,040,000 bytes.
  EXPECT_DOUBLE_EQ(horus_mib(f), 44040000.0 / 1048576.0);
  // 400 MiB + 4 * (1e6 * (1 + 1 + 2) + 1000*10) = 400 MiB + 16,040,000 bytes.
  EXPECT_DOUBLE_EQ(analytical_full_mib(f), 400.0 + 16040000.0 / 1048576.0);
  AnalyticalAssumptions sgd;
  sgd.optimizer_copies = 0;
  sgd.context_mib = 0;
  EXPECT_DOUBLE_EQ(analytical_full_mib(f, sgd), 8040000.0 / 1048576.0);
}

// --- the network ------------------------------------------------------------------------

Mlp fixed_net(HiddenActivation a) {
  Mlp m;
  m.hidden = a;
  m.layers.push_back({2, 2, {1, -1, 0.5, 2}, {0, -1}});
  m.layers.push_back({2, 1, {2, -3}, {0.5}});
  return m;
}

TEST(Mlp, ForwardOnFixedWeights) {
  const std::vector<double> x = {1, 2};
  // z1 = (1 - 2, 0.5 + 4 - 1) = (-1, 3.5); ReLU -> (0, 3.5); out = 0.5 + 0 - 10.5.
  EXPECT_DOUBLE_EQ(fixed_net(HiddenActivation::Relu).forward(x)[0], -10.0);
  EXPECT_NEAR(fixed_net(HiddenActivation::Tanh).forward(x)[0], 0.5 + 2 * std::tanh(-1.0) - 3 * std::tanh(3.5), 1e-12);
}

TEST(Mlp, JsonRoundTripAndErrors) {
  const auto m = fixed_net(HiddenActivation::Tanh);
  const auto back = mlp_from_json(to_json(m), "net");
  EXPECT_EQ(back.forward(std::vector<double>{0.3, -0.7}), m.forward(std::vector<double>{0.3, -0.7}));
  auto j = to_json(m);
  j["layers"][1]["weight"] = {1.0};
  EXPECT_THROW(
      {
        try {
          mlp_from_json(j, "regression.network");
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "regression.network.layers[1].weight: expected 2 numbers, got 1");
          throw;
        }
      },
      std::runtime_error);
  j = to_json(m);
  j["hidden_activation"] = "sigmoid";
  EXPECT_THROW(mlp_from_json(j, "n"), std::runtime_error);
}

// y = 1 + x0 - 0.5 x1 + uniform noise in [0, 1): the q-quantile is 1 + x0 - 0.5 x1 + q.
TrainingSet synthetic(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  TrainingSet s;
  s.features = 2;
  for (std::size_t i = 0; i < n; ++i) {
    const double a = rng.uniform(-1, 1), b = rng.uniform(-1, 1);
    s.x.push_back(a);
    s.x.push_back(b);
    s.y.push_back(1 + a - 0.5 * b + rng.uniform());
  }
  return s;
}

TEST(Training, PinballConvergesToTheQuantileAndIsDeterministic) {
  const auto train = synthetic(2000, 1), test = synthetic(2000, 2);
  TrainOptions o;
  o.quantile = 0.9;
  o.max_epochs = 40;
  o.seed = 5;
  Mlp a = make_mlp({2, 16, 1}, HiddenActivation::Relu, 3);
  const double before = mean_loss(a, test, LossKind::Pinball, 0.9);
  const auto rep = train_mlp(a, train, o);
  const double after = mean_loss(a, test, LossKind::Pinball, 0.9);
  EXPECT_LT(after, before / 4);
  EXPECT_GT(rep.best_epoch, 0);
  int below = 0;
  double err = 0;
  for (std::size_t i = 0; i < test.rows(); ++i) {
    const double p = a.forward(std::span<const double>(test.x).subspan(2 * i, 2))[0];
    below += test.y[i] <= p;
    err += std::fabs(p - (1 + test.x[2 * i] - 0.5 * test.x[2 * i + 1] + 0.9)) / static_cast<double>(test.rows());
  }
  EXPECT_NEAR(below / static_cast<double>(test.rows()), 0.9, 0.04);
  EXPECT_LT(err, 0.1);

  Mlp b = make_mlp({2, 16, 1}, HiddenActivation::Relu, 3);
  train_mlp(b, train, o);
  EXPECT_EQ(to_json(a), to_json(b));  // same seed: same bits
  Mlp c = make_mlp({2, 16, 1}, HiddenActivation::Relu, 3);
  o.seed = 6;
  train_mlp(c, train, o);
  EXPECT_NE(to_json(a), to_json(c));
}

TEST(Training, CrossEntropySeparatesClasses) {
  auto s = synthetic(1000, 4);
  for (std::size_t i = 0; i < s.rows(); ++i) s.y[i] = s.x[2 * i] + s.x[2 * i + 1] > 0 ? 1 : 0;
  TrainOptions o;
  o.loss = LossKind::CrossEntropy;
  o.max_epochs = 30;
  Mlp m = make_mlp({2, 8, 2}, HiddenActivation::Tanh, 1);
  train_mlp(m, s, o);
  int right = 0;
  for (std::size_t i = 0; i < s.rows(); ++i) {
    const auto out = m.forward(std::span<const double>(s.x).subspan(2 * i, 2));
    right += (out[1] > out[0]) == (s.y[i] == 1);
  }
  EXPECT_GT(right, 970);
}

// --- GPUMemNet rows ---------------------------------------------------------------------

TEST(GpuMemNet, LayerListsAndRows) {
  auto c = count_layer_types("[('linear', 629, 792540), ('batch_normalization', 629, 1258), ('ReLU', 629, 0)]");
  ASSERT_TRUE((std::holds_alternative<std::map<std::string, int>>(c)));
  const std::map<std::string, int> want = {{"linear", 1}, {"batchnorm1d", 1}, {"relu", 1}};
  EXPECT_EQ(std::get<0>(c), want);
  EXPECT_EQ(std::get<std::string>(count_layer_types("[('linear', 6, 7)")), "layer 1: expected ',' or ']' after the layer");
  EXPECT_EQ(std::get<std::string>(count_layer_types("[('linear', x, 7)]")),
            "layer 1: expected a whole number of activations");
  EXPECT_EQ(std::get<std::string>(count_layer_types("linear")), "expected a list such as [('linear', 629, 792540), ...]");

  std::map<std::string, std::string> row = {{"Depth", "2"},
                                            {"Activations-Params", "[('linear', 10, 110), ('ReLU', 10, 0), ('linear', 2, 22)]"},
                                            {"Activation Function", "ReLU"},
                                            {"Total Activations", "22"},
                                            {"Total Parameters", "132"},
                                            {"Batch Size", "8"},
                                            {"Max GPU Memory (MiB)", "1450"}};
  auto lookup = [&](std::string_view c2) -> std::optional<std::string> {
    auto it = row.find(std::string(c2));
    return it == row.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  auto s = gpumemnet_sample(lookup);
  ASSERT_TRUE(std::holds_alternative<MemorySample>(s)) << std::get<FieldError>(s).what;
  EXPECT_EQ(std::get<MemorySample>(s).features.batchnorm_layers, 0);  // step 1 has no such column
  EXPECT_EQ(std::get<MemorySample>(s).memory_mib, 1450);

  auto error = [&](const std::string& col, const std::string& value) {
    auto saved = row[col];
    row[col] = value;
    auto r = gpumemnet_sample(lookup);
    row[col] = saved;
    if (!std::holds_alternative<FieldError>(r)) return std::string("no error");
    return std::get<FieldError>(r).field + ": " + std::get<FieldError>(r).what;
  };
  EXPECT_EQ(error("Batch Size", "0"), "Batch Size: expected a whole number >= 1, got '0'");
  EXPECT_EQ(error("Depth", "two"), "Depth: expected a whole number >= 1, got 'two'");
  EXPECT_EQ(error("Max GPU Memory (MiB)", ""), "Max GPU Memory (MiB): expected a number > 0, got ''");
  EXPECT_EQ(error("Total Activations", "23"), "Activations-Params: layer activations add up to 22, but Total Activations is 23");
  EXPECT_EQ(error("Activation Function", " "), "Activation Function: missing value");
  row.erase("Depth");
  EXPECT_EQ(std::get<FieldError>(gpumemnet_sample(lookup)).field, "Depth");
}

TEST(GpuMemNet, BadCsvRowNamesFileLineAndField) {
  const std::string head =
      "Depth,Activations-Params,Activation Function,Total Activations,Total Parameters,Batch Size,Max GPU Memory (MiB)\n";
  const std::string good = "1,\"[('linear', 2, 6)]\",ReLU,2,6,4,1443\n";
  test::TempFile bad(head + good + "1,\"[('linear', 2, 6)]\",ReLU,2,6,x,1443\n");
  EXPECT_EQ(test::error_of([&] { load_rows(bad.path()); }),
            bad.path() + ":3: field 'Batch Size': expected a whole number >= 1, got 'x'");
  const auto r = run_cli("estimate eval --data " + bad.path());
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.out, "aegis: error: " + bad.path() + ":3: field 'Batch Size': expected a whole number >= 1, got 'x'\n");
  test::TempFile missing("Depth,Batch Size\n1,2\n");
  EXPECT_EQ(run_cli("estimate train --out /dev/null --data " + missing.path()).out,
            "aegis: error: " + missing.path() + ":1: missing column 'Activations-Params'\n");
}

// --- the shipped model ------------------------------------------------------------------

TEST(LearnedModel, ShippedModelPredictsDatasetRowsSanely) {
  const auto m = LearnedModel::load(kModel);
  const auto rows = load_rows(kSrc + "/data/gpumemnet/mlp_data_step2.csv");
  int sane = 0, n = 0, bin_ok = 0;
  for (std::size_t i = 0; i < rows.size(); i += 10, ++n) {
    const auto r = m.regression(rows[i].features);
    const auto c = m.classification(rows[i].features);
    ASSERT_TRUE(r && c) << rows[i].origin;
    const double ratio = static_cast<double>(*r) / rows[i].memory_mib;
    sane += ratio >= 0.9 && ratio <= 1.3;
    const double edge = static_cast<double>(*c);
    bin_ok += *c % 1024 == 0 && edge >= rows[i].memory_mib && edge - rows[i].memory_mib <= 1024;
  }
  EXPECT_GE(sane, n * 95 / 100);
  EXPECT_GE(bin_ok, n * 9 / 10);

  ModelFeatures cnn = rows[0].features;
  cnn.layer_counts["conv2d"] = 4;  // never seen in the MLP data
  EXPECT_FALSE(m.regression(cnn));
  ModelFeatures huge = rows[0].features;
  huge.total_activations = 3e7;  // a ResNet-50's activations per sample
  EXPECT_FALSE(m.classification(huge));
  ModelFeatures unknown_act = rows[0].features;
  unknown_act.activation = "Hardswish";  // the "other" slot: still an estimate
  EXPECT_TRUE(m.regression(unknown_act));
  EXPECT_FALSE(LearnedModel().regression(rows[0].features));
}

TEST(LearnedModel, LoadErrorsNameTheFileAndField) {
  auto message = [](const std::string& path) {
    try {
      LearnedModel::load(path);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("/nonexistent/m.json"), "/nonexistent/m.json: cannot open the model file");
  test::TempFile not_json("{", ".json");
  EXPECT_EQ(message(not_json.path()).rfind(not_json.path() + ": not valid JSON", 0), 0u);
  std::ifstream in(kModel);
  json j = json::parse(in);
  j["regression"]["quantile"] = 1.5;
  test::TempFile bad_q(j.dump(), ".json");
  EXPECT_EQ(message(bad_q.path()).rfind(bad_q.path() + ": regression.quantile: expected a number in (0", 0), 0u);
  j = json::parse(std::ifstream(kModel));
  j["features"]["mean"] = {1.0};
  test::TempFile bad_mean(j.dump(), ".json");
  EXPECT_NE(message(bad_mean.path()).find("features.mean: expected an array of"), std::string::npos);
}

// --- evaluation -------------------------------------------------------------------------

TEST(Evaluation, RatioMetricsOnHandNumbers) {
  const std::vector<double> est = {90, 110, 200, NAN}, act = {100, 100, 100, 100};
  const auto m = ratio_metrics(est, act);
  EXPECT_EQ(m.n, 3u);
  EXPECT_DOUBLE_EQ(m.median_ratio, 1.1);
  EXPECT_NEAR(m.underestimate_share, 1.0 / 3, 1e-12);
  EXPECT_NEAR(m.mape, (0.1 + 0.1 + 1.0) / 3, 1e-12);
  EXPECT_NEAR(m.p95_ratio, 1.1 + 0.9 * 0.9, 1e-12);  // interpolated between 1.1 and 2.0
}

TEST(Evaluation, KFoldSplitIsASeededPartition) {
  const auto f = kfold_split(10, 3, 7);
  ASSERT_EQ(f.size(), 3u);
  std::vector<int> seen(10, 0);
  for (const auto& fold : f) {
    EXPECT_GE(fold.size(), 3u);
    for (auto i : fold) ++seen[i];
  }
  EXPECT_EQ(seen, std::vector<int>(10, 1));
  EXPECT_EQ(kfold_split(10, 3, 7), f);
  EXPECT_NE(kfold_split(10, 3, 8), f);
  EXPECT_THROW(kfold_split(2, 3, 1), std::invalid_argument);
}

// The issue's goals on the real data (3 folds, seed 7; fewer epochs than `aegis estimate
// eval` to keep the suite fast): the regression underestimates at most 10 % of held-out
// runs with a median estimate / actual of at most 1.15.
TEST(Evaluation, KFoldOnGpuMemNetMeetsTheGoals) {
  const auto rows = all_rows();
  ASSERT_EQ(rows.size(), 6000u);
  KFoldOptions o;
  o.folds = 3;
  o.seed = 7;
  o.train.max_epochs = 60;
  const auto res = evaluate_kfold(rows, o);
  ASSERT_EQ(res.estimators.size(), 4u);
  std::map<std::string, RatioMetrics> by;
  for (const auto& e : res.estimators) {
    by[e.estimator] = e.metrics;
    std::cout << "  " << to_json(e).dump() << "\n";
    EXPECT_LT(e.overhead_us, 50.0) << e.estimator;
  }
  EXPECT_LE(by["learned-regression"].underestimate_share, 0.10);
  EXPECT_LE(by["learned-regression"].median_ratio, 1.15);
  EXPECT_GE(by["learned-regression"].median_ratio, 1.0);
  EXPECT_GE(*by["learned-classifier"].bin_accuracy, 0.95);
  EXPECT_GT(by["analytical"].underestimate_share, 0.2);                // the published formula errs both ways
  EXPECT_GT(by["analytical+context+optimizer"].underestimate_share, 0.99);  // 400 MiB: below this data's floor
}

// --- the command line -------------------------------------------------------------------

TEST(EstimateCli, PredictPrintsEveryEstimateOrNamesTheBadField) {
  test::TempFile spec(valid_spec().dump(), ".json");
  auto r = run_cli("estimate predict --features " + spec.path());
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("learned-regression (p95)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("learned-classifier (1024 MiB bins)"), std::string::npos) << r.out;
  r = run_cli("estimate predict --json --features " + spec.path());
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = json::parse(r.out);
  EXPECT_GT(j["learned_regression_mib"].get<double>(), 1400);
  EXPECT_TRUE(j["outside_training"].is_null());

  json bad = valid_spec();
  bad["batch_size"] = 0;
  test::TempFile bad_spec(bad.dump(), ".json");
  r = run_cli("estimate predict --features " + bad_spec.path());
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.out, "aegis: error: " + bad_spec.path() + ": batch_size: must be a positive integer\n");
  r = run_cli("estimate predict --features " + spec.path() + " --model /nonexistent.json");
  EXPECT_EQ(r.out, "aegis: error: /nonexistent.json: cannot open the model file\n");
}

// The calibrated estimator through `aegis estimate predict`: a model far from the real
// networks it was fitted on still gets an estimate, with the flag naming why, and a GPU
// model it was never calibrated on is named too.
TEST(EstimateCli, PredictFlagsAFarModelAndAnUncalibratedGpu) {
  json far = valid_spec();
  far["total_parameters"] = 5e12;
  far["layer_counts"] = {{"linear", 3}, {"conv3d", 2}};
  test::TempFile spec(far.dump(), ".json");
  auto r = run_cli("estimate predict --json --features " + spec.path() + " --gpu-model H100-80GB");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = json::parse(r.out);
  EXPECT_GT(j["calibrated_mib"].get<double>(), 0);
  EXPECT_TRUE(j["out_of_distribution"].get<bool>());
  const auto why = j["why"].get<std::string>();
  EXPECT_NE(why.find("conv3d"), std::string::npos) << why;
  EXPECT_NE(why.find("H100-80GB"), std::string::npos) << why;
  r = run_cli("estimate predict --features " + spec.path() + " --calibrated /nonexistent.json");
  EXPECT_EQ(r.out, "aegis: error: /nonexistent.json: cannot open\n");
}

}  // namespace
}  // namespace aegis

