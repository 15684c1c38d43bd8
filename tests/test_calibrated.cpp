// The calibrated memory estimator for real networks (src/estimate/calibrated.h), the
// utilisation regression (src/estimate/utilisation.h) and their `aegis estimate` commands:
// the fit recovers what generated its data, every catalog workload gets an estimate, a
// model far from the training data is flagged, GPU models are kept apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <fstream>
#include <nlohmann/json.hpp>

#include "estimate/calibrated.h"
#include "estimate/history.h"
#include "estimate/utilisation.h"
#include "sim/csv.h"

namespace aegis {
namespace {

const std::string kSrc = AEGIS_SOURCE_DIR;
const std::string kShipped = kSrc + "/data/models/calibrated_memory.json";

CalibrationRun run(const std::string& model, const std::string& gpu, double p, double a, int b) {
  CalibrationRun r;
  r.model = model, r.gpu = gpu, r.parameters = p, r.activations = a, r.batch_size = b;
  r.layer_types = {"conv2d", "linear"};
  return r;
}

// Runs whose peaks follow context(gpu) + 4 x parameter MiB + 1.5 x activation MiB exactly.
std::vector<CalibrationRun> exact_runs() {
  const std::map<std::string, double> ctx = {{"A", 500}, {"B", 1400}};
  std::vector<CalibrationRun> runs;
  int i = 0;
  for (const auto& [gpu, c] : ctx)
    for (double p : {1e6, 2e7, 1.4e8})
      for (int b : {16, 64, 256}) {
        auto r = run("m" + std::to_string(i % 7), gpu, p, 3e5 * (1 + i % 3), b);
        ++i;
        r.peak_mib = c + 4 * r.parameter_mib() + 1.5 * r.activation_mib();
        runs.push_back(r);
      }
  return runs;
}

TEST(CalibratedTest, FitRecoversContextPerGpuAndSlopes) {
  const auto runs = exact_runs();
  CalibrationOptions o;
  o.default_gpu = "A";
  o.two_part_margin = false;
  const auto m = CalibratedModel::fit(runs, o);
  EXPECT_NEAR(m.context_mib("A"), 500, 1e-6);
  EXPECT_NEAR(m.context_mib("B"), 1400, 1e-6);
  EXPECT_NEAR(m.per_parameter_mib(), 4, 1e-9);
  EXPECT_NEAR(m.per_activation_mib(), 1.5, 1e-9);
  EXPECT_NEAR(m.margin(), 1, 1e-9);  // an exact fit needs no margin
  const auto& r = runs.front();
  EXPECT_NEAR(m.estimate(r, r.gpu).mib, r.peak_mib, 1e-6);
  // The same job moved to the other GPU model: only the context changes.
  const double on_a = m.estimate(r, "A").mib, on_b = m.estimate(r, "B").mib;
  EXPECT_NEAR(m.translate(on_a, "A", "B"), on_b, 1e-6);
  EXPECT_NEAR(on_b - on_a, 900, 1e-6);
}

TEST(CalibratedTest, MarginCoversTheChosenQuantileOfRuns) {
  auto runs = exact_runs();
  for (std::size_t i = 0; i < runs.size(); ++i) runs[i].peak_mib *= 1.0 + 0.02 * static_cast<double>(i % 10);
  for (bool two_part : {false, true}) {
    CalibrationOptions o;
    o.two_part_margin = two_part;
    o.margin_quantile = 1.0;
    const auto m = CalibratedModel::fit(runs, o);
    for (const auto& r : runs) EXPECT_GE(m.estimate(r, r.gpu).mib, r.peak_mib * (1 - 1e-9)) << r.model;
    o.margin_quantile = 0.5;
    const auto half = CalibratedModel::fit(runs, o);
    int under = 0;
    for (const auto& r : runs) under += half.estimate(r, r.gpu).mib < r.peak_mib * (1 - 1e-9);
    EXPECT_LE(under, static_cast<int>(runs.size()) / 2) << "two-part " << two_part;
    EXPECT_GT(under, 0) << "two-part " << two_part;  // a median margin leaves some runs above
  }
}

// Ten real models on one GPU, the small ones' peaks 450 MiB below the large ones' context,
// all scattered by -10 to +20 %, and a synthetic model of 200 runs far above them all.
std::vector<CalibrationRun> small_jobs_below_the_context() {
  std::vector<CalibrationRun> runs;
  for (int i = 0; i < 40; ++i) {
    auto r = run("m" + std::to_string(i / 4), "A", 2e6 * (1 + i % 5) * (i < 20 ? 1 : 40), 2e5, 32 << (i % 4));
    const double scatter = 0.9 + 0.05 * (i % 7);
    r.peak_mib = (i < 20 ? 350 : 800) + scatter * (4 * r.parameter_mib() + 1.5 * r.activation_mib());
    runs.push_back(r);
  }
  for (int i = 0; i < 200; ++i) {
    auto r = run("synthetic", "A", 1e6, 1e5, 8 << (i % 5));
    r.synthetic = true;
    r.peak_mib = 3 * (800 + 4 * r.parameter_mib() + 1.5 * r.activation_mib());
    runs.push_back(r);
  }
  return runs;
}

// Peaks of small jobs below what a shared context says, large ones scattered: the two-part
// margin lowers the context where the margin-alone form can only scale the model-dependent
// part, and still covers the chosen share of runs counted per run and per model; the
// synthetic runs, fitted as ever, do not enter the median it lowers.
TEST(CalibratedTest, TwoPartMarginLowersTheMedianWithinTheQuantile) {
  const auto runs = small_jobs_below_the_context();
  auto real_median_and_under = [&](const CalibratedModel& m) {
    std::vector<double> ratios;
    std::map<std::string, std::pair<int, int>> per_model;  // runs under, runs
    for (const auto& r : runs) {
      const double ratio = m.estimate(r, "A").mib / r.peak_mib;
      auto& [u, n] = per_model[r.model];
      u += ratio < 1 - 1e-9, n += 1;
      if (!r.synthetic) ratios.push_back(ratio);
    }
    std::sort(ratios.begin(), ratios.end());
    double model_under = 0;
    for (const auto& [model, un] : per_model) model_under += static_cast<double>(un.first) / un.second;
    const auto real_under = std::count_if(ratios.begin(), ratios.end(), [](double x) { return x < 1 - 1e-9; });
    return std::tuple{(ratios[ratios.size() / 2 - 1] + ratios[ratios.size() / 2]) / 2,
                      static_cast<double>(real_under) / static_cast<double>(ratios.size()),
                      model_under / static_cast<double>(per_model.size())};
  };
  CalibrationOptions o;
  o.margin_quantile = 0.9;
  o.two_part_margin = true;
  const auto two_part = CalibratedModel::fit(runs, o);
  o.two_part_margin = false;
  const auto margin_only = CalibratedModel::fit(runs, o);
  const auto [median2, real_under2, model_under2] = real_median_and_under(two_part);
  const auto [median1, real_under1, model_under1] = real_median_and_under(margin_only);
  EXPECT_LT(two_part.context_margin_mib(), 0);  // the small jobs need less than the context
  EXPECT_EQ(margin_only.context_margin_mib(), 0);
  EXPECT_LT(median2, median1);
  EXPECT_GE(median2, 1.0);
  EXPECT_LE(real_under2, 0.1 + 1e-9);
  EXPECT_LE(model_under2, 0.1 + 1e-9);
}

TEST(CalibratedTest, FarFromTrainingIsFlaggedNotRefused) {
  CalibrationOptions o;
  o.default_gpu = "A";
  const auto m = CalibratedModel::fit(exact_runs(), o);
  const auto inside = m.estimate(run("x", "A", 2e7, 3e5, 64), "A");
  EXPECT_FALSE(inside.out_of_distribution) << inside.why;
  auto far = run("x", "A", 1e12, 3e5, 64);
  far.layer_types.insert("conv3d");
  const auto e = m.estimate(far, "A");
  EXPECT_TRUE(e.out_of_distribution);
  EXPECT_GT(e.mib, 0);
  EXPECT_NE(e.why.find("parameters"), std::string::npos) << e.why;
  EXPECT_NE(e.why.find("conv3d"), std::string::npos) << e.why;
  const auto unknown_gpu = m.estimate(run("x", "A", 2e7, 3e5, 64), "H200");
  EXPECT_TRUE(unknown_gpu.out_of_distribution);
  EXPECT_NE(unknown_gpu.why.find("H200"), std::string::npos);
  EXPECT_DOUBLE_EQ(unknown_gpu.mib, inside.mib);  // the default GPU's context
}

TEST(CalibratedTest, JsonRoundTripAndErrorsNameTheField) {
  CalibrationOptions two_part;
  two_part.two_part_margin = true;
  two_part.default_gpu = "A";
  const auto m = CalibratedModel::fit(small_jobs_below_the_context(), two_part);
  ASSERT_NE(m.context_margin_mib(), 0);
  const auto back = CalibratedModel::from_json(m.to_json());
  const auto r = run("x", "A", 3e7, 1e5, 32);
  EXPECT_DOUBLE_EQ(back.estimate(r, "A").mib, m.estimate(r, "A").mib);
  // The margin alone writes the version-1 file it always wrote (no context margin).
  CalibrationOptions margin_alone;
  margin_alone.two_part_margin = false;
  EXPECT_EQ(CalibratedModel::fit(exact_runs(), margin_alone).to_json().at("format"), "aegis-calibrated-memory-1");
  auto j = m.to_json();
  EXPECT_EQ(j.at("format"), "aegis-calibrated-memory-2");
  j["margin"] = "x";
  try {
    CalibratedModel::from_json(j);
    FAIL() << "accepted a bad margin";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("margin"), std::string::npos);
  }
  j = m.to_json();
  j["default_gpu"] = "nowhere";
  EXPECT_THROW(CalibratedModel::from_json(j), std::runtime_error);
  j = m.to_json();
  j.erase("context_margin_mib");
  try {
    CalibratedModel::from_json(j);
    FAIL() << "accepted a version-2 file without its context margin";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("context_margin_mib"), std::string::npos) << e.what();
  }
  // A version-1 file (the margin alone) still reads, with no context margin.
  j["format"] = "aegis-calibrated-memory-1";
  const auto v1 = CalibratedModel::from_json(j);
  EXPECT_EQ(v1.context_margin_mib(), 0);
  EXPECT_DOUBLE_EQ(v1.estimate(r, "A").mib, m.estimate(r, "A").mib - m.context_margin_mib());
  j["format"] = "aegis-calibrated-memory-3";
  EXPECT_THROW(CalibratedModel::from_json(j), std::runtime_error);
}

TEST(CalibratedTest, LeaveOneModelOutNeverSeesTheHeldOutModel) {
  auto runs = exact_runs();
  // A model whose peaks are 10x what the others say: held out, nothing can predict it.
  for (auto& r : runs)
    if (r.model == "m3") r.peak_mib *= 10;
  const auto est = leave_one_model_out(runs, {}, [](const CalibrationRun& r) { return r.model != "m0"; });
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].model == "m0") {
      EXPECT_TRUE(std::isnan(est[i]));
    }
    if (runs[i].model == "m3") {
      EXPECT_LT(est[i], runs[i].peak_mib / 2);
    }
  }
}

TEST(UtilisationTest, AgreementAndRegressionOnAMonotoneSignal) {
  std::vector<double> a = {0.1, 0.2, 0.3, 0.4}, rev = {0.4, 0.3, 0.2, 0.1};
  EXPECT_NEAR(agreement(a, a).spearman, 1, 1e-12);
  EXPECT_NEAR(agreement(rev, a).spearman, -1, 1e-12);
  EXPECT_NEAR(agreement(rev, a).mae, 0.2, 1e-12);
  // Utilisation rising with the batch's activations: held out, each model's rank is kept.
  std::vector<CalibrationRun> runs;
  std::vector<double> y;
  for (int i = 0; i < 8; ++i) {
    runs.push_back(run("m" + std::to_string(i), "A", 1e7, 1e5, 1 << (i + 2)));
    y.push_back(0.05 + 0.1 * i);
  }
  const auto pred = utilisation_leave_one_model_out(runs, y);
  for (double p : pred) EXPECT_TRUE(p >= 0 && p <= 1);
  EXPECT_GT(agreement(pred, y).spearman, 0.9);
}

// The shipped model on the catalog's own specs (data/aegis/workload_specs.csv): every
// workload gets a positive estimate, and none of them is out of distribution.
TEST(CalibratedTest, ShippedModelEstimatesEveryCatalogWorkload) {
  std::ifstream in(kShipped);
  ASSERT_TRUE(in) << kShipped;
  const auto m = CalibratedModel::from_json(nlohmann::json::parse(in));
  auto r = CsvReader::open(kSrc + "/data/aegis/workload_specs.csv");
  int rows = 0;
  while (r.next()) {
    CalibrationRun job;
    job.parameters = r.get_double("total_parameters");
    job.activations = r.get_double("total_activations");
    job.batch_size = static_cast<int>(r.get_int("batch_size"));
    const auto e = m.estimate(job, "A100-40GB");
    EXPECT_GT(e.mib, 0) << r.field("name");
    EXPECT_FALSE(e.out_of_distribution) << r.field("name") << ": " << e.why;
    ++rows;
  }
  EXPECT_EQ(rows, 53);
}

// --- history per GPU model (estimate/history.h) -------------------------------------------

TEST(HistoryTest, RecentQuantileOutvotesOneStrayRunOnlyWhenThereAreEnough) {
  std::vector<MiB> peaks = {1000, 5000, 1000};
  EXPECT_EQ(recent_peak_statistic(peaks, 10, 0.9), 5000);  // 3 runs: the largest
  for (int i = 0; i < 7; ++i) peaks.push_back(1000);
  EXPECT_EQ(recent_peak_statistic(peaks, 10, 0.9), 1000);  // 10 runs: the one stray is dropped
  EXPECT_EQ(recent_peak_statistic(peaks, 10, 1.0), 5000);
  peaks.push_back(1200);  // the window moves past the first run; the stray is still in it
  EXPECT_EQ(recent_peak_statistic(peaks, 3, 1.0), 1200);
  EXPECT_FALSE(recent_peak_statistic({}, 10, 0.9));
}

TEST(HistoryTest, EachGpuModelKeepsItsOwnPeaksAndTheOthersAreTranslated) {
  const std::map<std::string, std::vector<MiB>> by_model = {{"A100", {3000, 3000, 3100}}, {"V100", {2500}}};
  auto plus_context = [](MiB mib, const std::string& from, const std::string& to) {
    const std::map<std::string, MiB> ctx = {{"A100", 600}, {"V100", 400}, {"H100", 900}};
    return mib + ctx.at(to) - ctx.at(from);
  };
  // A server of V100s only: its own run, not the A100's larger figure.
  EXPECT_EQ(history_estimate(by_model, {"V100"}, 10, 0.9, plus_context), 2500);
  // An H100 it never ran on: the most-run model's figure (A100, 3100) with the context moved.
  EXPECT_EQ(history_estimate(by_model, {"H100"}, 10, 0.9, plus_context), 3400);
  // A mixed server: the job may land on either, so the larger.
  EXPECT_EQ(history_estimate(by_model, {"V100", "A100"}, 10, 0.9, plus_context), 3100);
  EXPECT_EQ(history_estimate(by_model, {}, 10, 0.9, plus_context), 3100);
  EXPECT_FALSE(history_estimate({}, {"A100"}, 10, 0.9, plus_context));
}

TEST(HistoryTest, UtilisationComesOnlyFromRunsOnEveryGpuModelTheJobMayLandOn) {
  const std::map<std::string, std::vector<double>> by_model = {{"A100", {0.8, 0.2, 0.7}}, {"V100", {0.9}}};
  // The median of the A100's three runs (nearest rank rounding up: the 2nd of 0.2, 0.7, 0.8).
  EXPECT_DOUBLE_EQ(*history_utilisation(by_model, {"A100"}, 10, 0.5, 1), 0.7);
  EXPECT_DOUBLE_EQ(*history_utilisation(by_model, {"A100"}, 10, 1.0, 1), 0.8);
  EXPECT_DOUBLE_EQ(*history_utilisation(by_model, {"A100"}, 2, 0.5, 1), 0.2);  // the last two: 0.2, 0.7
  // A mixed server: the larger of the two models' figures.
  EXPECT_DOUBLE_EQ(*history_utilisation(by_model, {"A100", "V100"}, 10, 0.5, 1), 0.9);
  // Never moved across models: an H100 on the server, or too few runs, gives nothing.
  EXPECT_FALSE(history_utilisation(by_model, {"H100"}, 10, 0.5, 1));
  EXPECT_FALSE(history_utilisation(by_model, {"A100", "H100"}, 10, 0.5, 1));
  EXPECT_FALSE(history_utilisation(by_model, {"V100"}, 10, 0.5, 2));
  EXPECT_TRUE(history_utilisation(by_model, {"A100"}, 10, 0.5, 3));
}

}  // namespace
}  // namespace aegis
