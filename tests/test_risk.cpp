// Window statistics and the risk score, pinned on a hand-computed window.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>

#include "telemetry/risk.h"
#include "telemetry/rolling_window.h"

namespace aegis {
namespace {

const std::vector<double> kWindow{0.1, 0.9, 0.3, 0.7, 0.5, 0.2, 0.8, 0.4, 0.6, 1.0};

TEST(Risk, StatsOfKnownWindow) {
  const auto s = window_stats(kWindow);
  EXPECT_NEAR(s.mean, 0.55, 1e-6);
  EXPECT_NEAR(s.median, 0.55, 1e-6);
  EXPECT_NEAR(s.p95, 0.955, 1e-6);   // linear between the 9th and 10th ranks
  EXPECT_NEAR(s.ewma, 0.54991218, 1e-6);  // alpha = 2/11, seeded with the oldest sample
}

// The textbook definition, computed the slow way: sort the whole window.
WindowStats reference_stats(std::vector<double> x) {
  WindowStats s;
  const std::size_t n = x.size();
  double sum = 0, ewma = x[0];
  const double alpha = 2.0 / (static_cast<double>(n) + 1.0);
  for (std::size_t i = 0; i < n; ++i) {
    sum += x[i];
    if (i > 0) ewma = alpha * x[i] + (1 - alpha) * ewma;
  }
  if (std::all_of(x.begin(), x.end(), [&](double v) { return v == x[0]; })) return {x[0], x[0], x[0], x[0]};
  s.mean = sum / static_cast<double>(n);
  s.ewma = ewma;
  std::sort(x.begin(), x.end());
  auto q = [&](double p) {
    const double pos = p * static_cast<double>(n - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = std::min(lo + 1, n - 1);
    return x[lo] + (x[hi] - x[lo]) * (pos - static_cast<double>(lo));
  };
  s.median = q(0.5);
  s.p95 = q(0.95);
  return s;
}

// Stepwise windows (a few runs of equal values, as simulated telemetry gives) take a
// shortcut through the runs; it must agree with the full sort bit for bit, and so must
// windows of many distinct values, which take the sort.
TEST(Risk, StepwiseWindowsGiveTheSameStatsAsTheFullSort) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> runs_of(1, 12), len_of(1, 10);
  std::uniform_real_distribution<double> value(0.0, 1.0);
  int stepwise = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    std::vector<double> w;
    const int runs = runs_of(rng);
    for (int r = 0; r < runs; ++r) {
      const double v = trial % 3 == 0 ? std::round(value(rng) * 4) / 4 : value(rng);  // repeats across runs too
      for (int k = len_of(rng); k > 0; --k) w.push_back(v);
    }
    stepwise += runs <= 8;
    const WindowStats a = window_stats(w), b = reference_stats(w);
    ASSERT_EQ(std::bit_cast<std::uint64_t>(a.mean), std::bit_cast<std::uint64_t>(b.mean)) << trial;
    ASSERT_EQ(std::bit_cast<std::uint64_t>(a.median), std::bit_cast<std::uint64_t>(b.median)) << trial;
    ASSERT_EQ(std::bit_cast<std::uint64_t>(a.p95), std::bit_cast<std::uint64_t>(b.p95)) << trial;
    ASSERT_EQ(std::bit_cast<std::uint64_t>(a.ewma), std::bit_cast<std::uint64_t>(b.ewma)) << trial;
  }
  EXPECT_GT(stepwise, 1000);  // both paths were exercised
  EXPECT_LT(stepwise, 5000);
}

// The simulator summarises windows from their runs without building them: the answer
// must be the sample version's bit for bit, for steps, long steady runs (where the EWMA
// settles inside a run), runs of one sample (noisy telemetry) and empty runs.
TEST(Risk, WindowStatsFromRunsEqualTheSampleVersion) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> runs_of(1, 40), len_of(0, 40);
  std::uniform_real_distribution<double> value(0.0, 1.0);
  auto same = [](double x, double y) { return std::bit_cast<std::uint64_t>(x) == std::bit_cast<std::uint64_t>(y); };
  int settled_runs = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    std::vector<SampleRun> runs;
    std::vector<double> w;
    const int nruns = trial % 4 == 0 ? 30 : runs_of(rng);
    for (int r = 0; r < nruns; ++r) {
      const double v = trial % 3 == 0 ? std::round(value(rng) * 4) / 4 : value(rng);
      const auto len = static_cast<std::uint32_t>(trial % 4 == 0 ? 1 : trial % 5 == 0 ? 400 : len_of(rng));
      runs.push_back({v, len});
      w.insert(w.end(), len, v);
      settled_runs += len >= 400;
    }
    const WindowStats a = window_stats(std::span<const SampleRun>(runs)), b = window_stats(w);
    ASSERT_TRUE(same(a.mean, b.mean)) << trial;
    ASSERT_TRUE(same(a.median, b.median)) << trial;
    ASSERT_TRUE(same(a.p95, b.p95)) << trial;
    ASSERT_TRUE(same(a.ewma, b.ewma)) << trial;
  }
  EXPECT_GT(settled_runs, 100);
  const std::vector<SampleRun> none, empty_runs{{0.5, 0}, {0.7, 0}}, leading_empty{{0.5, 0}, {0.7, 3}};
  EXPECT_EQ(window_stats(std::span<const SampleRun>(none)).mean, 0.0);
  EXPECT_EQ(window_stats(std::span<const SampleRun>(empty_runs)).p95, 0.0);
  EXPECT_EQ(window_stats(std::span<const SampleRun>(leading_empty)).mean, 0.7);
}

// Windows of a few values are remembered (a per-thread table of recent summaries): asked
// again, in another order, and after more distinct windows than the table holds (so slots
// are overwritten and keys collide), every answer is still the sample version's.
TEST(Risk, RememberedWindowStatsEqualTheSampleVersion) {
  std::mt19937_64 rng(23);
  std::uniform_int_distribution<int> runs_of(2, 4), len_of(0, 12);
  auto same = [](const WindowStats& a, const WindowStats& b) {
    return std::bit_cast<std::uint64_t>(a.mean) == std::bit_cast<std::uint64_t>(b.mean) &&
           std::bit_cast<std::uint64_t>(a.median) == std::bit_cast<std::uint64_t>(b.median) &&
           std::bit_cast<std::uint64_t>(a.p95) == std::bit_cast<std::uint64_t>(b.p95) &&
           std::bit_cast<std::uint64_t>(a.ewma) == std::bit_cast<std::uint64_t>(b.ewma);
  };
  std::vector<std::vector<SampleRun>> windows;
  for (int i = 0; i < 20000; ++i) {
    std::vector<SampleRun> runs;
    const int nruns = runs_of(rng);
    for (int r = 0; r < nruns; ++r)  // values from a small set: many windows differ only in counts
      runs.push_back({static_cast<double>(rng() % 5) / 4, static_cast<std::uint32_t>(len_of(rng))});
    windows.push_back(runs);
  }
  for (int pass = 0; pass < 3; ++pass) {
    for (const auto& runs : windows) {
      std::vector<double> w;
      for (const auto& r : runs) w.insert(w.end(), r.count, r.value);
      ASSERT_TRUE(same(window_stats(std::span<const SampleRun>(runs)), window_stats(w))) << pass;
    }
    std::shuffle(windows.begin(), windows.end(), rng);
  }
}

TEST(Risk, PublishedWeightsGiveQuarterOfEach) {
  EXPECT_NEAR(risk_score(kWindow, RiskWeights{}), 0.65122804, 1e-6);
}

TEST(Risk, CarmaWeights) {
  // 0.2 mean + 0.3 median + 0.3 p95 + 0.2 EWMA
  EXPECT_NEAR(risk_score(kWindow, RiskWeights{0.2, 0.3, 0.3, 0.2}), 0.67148244, 1e-6);
}

TEST(Risk, EmptyWindowIsZeroAndConstantWindowIsItsValue) {
  EXPECT_EQ(risk_score(std::vector<double>{}, RiskWeights{}), 0.0);
  const std::vector<double> flat(30, 0.7);
  EXPECT_NEAR(risk_score(flat, RiskWeights{}), 0.7, 1e-6);
}

TEST(Risk, RecentSamplesWeighMoreThroughEwma) {
  std::vector<double> rising(30, 0.0), falling(30, 1.0);
  for (int i = 20; i < 30; ++i) {
    rising[i] = 1.0;
    falling[i] = 0.0;
  }
  // alpha = 2/31: after 10 ones the EWMA is 1 - (29/31)^10 = 0.4867, above the mean 1/3.
  EXPECT_NEAR(window_stats(rising).ewma, 0.48671, 1e-5);
  EXPECT_GT(window_stats(rising).ewma, window_stats(rising).mean);
  EXPECT_LT(window_stats(falling).ewma, window_stats(falling).mean);
}

TEST(RollingWindow, KeepsTheNewestSamplesOldestFirst) {
  RollingWindow w(3);
  for (int i = 1; i <= 5; ++i) w.push(GpuSample{static_cast<double>(i), 0, 0, 0});
  std::vector<GpuSample> out;
  w.copy_to(out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].smact, 3.0);
  EXPECT_EQ(out[2].smact, 5.0);
  EXPECT_THROW(RollingWindow(0), std::invalid_argument);
}

}  // namespace
}  // namespace aegis
