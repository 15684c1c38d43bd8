// Window statistics and the risk score, pinned on a hand-computed window.
#include <gtest/gtest.h>

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
