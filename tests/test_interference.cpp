// The interference model and its calibration on independent measurements.
#include <gtest/gtest.h>

#include "sim/models/interference.h"
#include "sim/models/startup.h"
#include "sim/sim_config.h"
#include "sim/metrics.h"

namespace aegis {
namespace {

TEST(Interference, SpeedFormula) {
  InterferenceModel m{0.28, 0.45};
  EXPECT_DOUBLE_EQ(m.speed({0.5, 0.2}, 0, 0), 1.0);
  EXPECT_NEAR(m.speed({0.9, 0.4}, 0.9, 0.4), 1.0 / (1 + 0.28 * 0.81 + 0.45 * 0.16), 1e-12);
  // Light jobs barely notice each other; heavy ones do.
  EXPECT_GT(m.speed({0.2, 0.05}, 0.2, 0.05), 0.98);
  EXPECT_LT(m.speed({1.0, 0.8}, 1.0, 0.8), 0.65);
}

TEST(Interference, SaturationTermActsOnlyPastTheWholeGpu) {
  // Time slicing cannot give a GPU's jobs more than the whole GPU: the c term adds
  // c * u * (u + U - 1) once together they ask for more, and nothing before.
  const InterferenceModel m{0.22, 0.20, 0.34};
  EXPECT_NEAR(m.speed({0.5, 0.2}, 0.5, 0.2), 1.0 / (1 + 0.22 * 0.25 + 0.20 * 0.04), 1e-12);
  EXPECT_NEAR(m.speed({1.0, 0.8}, 1.0, 0.8), 1.0 / (1 + 0.22 + 0.20 * 0.64 + 0.34), 1e-12);
  // Up to the whole GPU (u + U = 1) the term is zero: the two-term form's speed.
  const InterferenceModel two{0.22, 0.20, 0};
  EXPECT_DOUBLE_EQ(m.speed({0.6, 0.3}, 0.4, 0.2), two.speed({0.6, 0.3}, 0.4, 0.2));
  // Past it, the cost grows with the excess: with two heavy co-runners it counts twice.
  EXPECT_NEAR(m.speed({1.0, 0.8}, 2.0, 1.6), 1.0 / (1 + 0.22 * 2 + 0.20 * 0.8 * 1.6 + 0.34 * 2), 1e-12);
}

TEST(Interference, FitRecoversKnownCoefficients) {
  // Pairs generated from a known model are fitted back exactly.
  const InterferenceModel truth{0.6, 0.2, 0.5};
  std::vector<MeasuredPair> pairs;
  for (int i = 0; i <= 10; ++i)
    for (int k = 0; k <= 10; ++k) {
      ActivityProfile a{i / 10.0, (10 - i) / 20.0}, b{k / 10.0, k / 25.0};
      pairs.push_back({a, b, truth.speed(a, b.util, b.drama), truth.speed(b, a.util, a.drama)});
    }
  const auto fit = fit_interference(pairs);
  EXPECT_NEAR(fit.model.util_coeff, 0.6, 1e-9);
  EXPECT_NEAR(fit.model.dram_coeff, 0.2, 1e-9);
  EXPECT_NEAR(fit.model.saturation_coeff, 0.5, 1e-9);
  EXPECT_NEAR(fit.rmse, 0, 1e-9);
}

TEST(Interference, ShippedDefaultsAreTheFitOnLucidAndGavelPairs) {
  const std::string dir = std::string(AEGIS_SOURCE_DIR) + "/data/interference/";
  const auto lucid = load_lucid_pairs(dir + "lucid_colocate_info.csv", dir + "lucid_single_data.csv");
  ASSERT_EQ(lucid.size(), 1388u);
  const auto gavel = load_gavel_pairs(dir + "gavel_simulation_throughputs.json", "v100", dir + "lucid_single_data.csv");
  ASSERT_EQ(gavel.size(), 175u);  // V100 pairs of the four networks Lucid profiled
  std::vector<MeasuredPair> pairs = lucid;
  pairs.insert(pairs.end(), gavel.begin(), gavel.end());
  const auto fit = fit_interference(pairs);
  const SimConfig shipped;
  EXPECT_NEAR(fit.model.util_coeff, shipped.interference_util_coeff, 1e-9);
  EXPECT_NEAR(fit.model.dram_coeff, shipped.interference_dram_coeff, 1e-9);
  EXPECT_NEAR(fit.model.saturation_coeff, shipped.interference_saturation_coeff, 1e-9);
  // The model must explain the measurements better than "no interference", and the
  // saturation term must earn its place against the two-term form on the same pairs.
  EXPECT_LT(fit.rmse, 0.75 * fit.rmse_no_model);
  EXPECT_LT(fit.rmse, fit_interference(pairs, false).rmse);
}

TEST(Startup, FirstActivityDelayMatchesPublishedQuantiles) {
  const SimConfig c;
  std::vector<double> d;
  for (std::uint64_t j = 0; j < 20000; ++j) d.push_back(first_activity_delay(c, 42, j, 1));
  EXPECT_NEAR(percentile(d, 0.50), 8.2, 0.3);
  EXPECT_NEAR(percentile(d, 0.95), 20.6, 0.8);
  EXPECT_LE(*std::max_element(d.begin(), d.end()), 55.5);
  // Same keys, same draw; different attempt, different draw.
  EXPECT_EQ(first_activity_delay(c, 42, 7, 1), first_activity_delay(c, 42, 7, 1));
  EXPECT_NE(first_activity_delay(c, 42, 7, 1), first_activity_delay(c, 42, 7, 2));
}

}  // namespace
}  // namespace aegis
