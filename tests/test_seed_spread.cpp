// The spread over seeds behind `aegis sim --seeds N` (sim/seed_spread.h): mean and min-max
// of constructed per-seed results, ratios to exclusive taken seed by seed, and the
// "within the spread" verdict (ranges overlap) on both sides of the boundary.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "sim/report_spread.h"
#include "sim/seed_spread.h"

namespace aegis {
namespace {

RunMetrics run(const std::string& trace, const std::string& policy, double makespan, std::int64_t ooms = 0) {
  RunMetrics m;
  m.trace = trace;
  m.policy = policy;
  m.makespan_s = makespan;
  m.oom_attempts = ooms;
  return m;
}

TEST(SeedSpread, IsTheMeanLeastAndGreatest) {
  const std::vector<double> v{3, 1, 2, 6};
  const Spread s = spread_of(v);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 6);
  EXPECT_THROW(spread_of(std::vector<double>{}), std::invalid_argument);
}

TEST(SeedSpread, WithinWhenRangesOverlapOnly) {
  EXPECT_TRUE(within_spread({0.74, 0.73, 0.75}, {0.735, 0.732, 0.738}));  // nested
  EXPECT_TRUE(within_spread({0.74, 0.73, 0.75}, {0.76, 0.75, 0.77}));     // touching
  EXPECT_TRUE(within_spread({0.76, 0.75, 0.77}, {0.74, 0.73, 0.75}));     // either order
  EXPECT_FALSE(within_spread({0.74, 0.73, 0.75}, {0.86, 0.85, 0.87}));    // separated
  EXPECT_FALSE(within_spread({0.86, 0.85, 0.87}, {0.74, 0.73, 0.75}));
  // One seed: a point each, within only when equal.
  EXPECT_FALSE(within_spread({0.74, 0.74, 0.74}, {0.75, 0.75, 0.75}));
  EXPECT_TRUE(within_spread({0.74, 0.74, 0.74}, {0.74, 0.74, 0.74}));
}

// Two seeds, two traces, exclusive and two policies: a and b overlap, c is apart.
SeedSpread two_seeds() {
  return gather({7, 8}, {{run("t1", "exclusive", 100), run("t1", "a", 70, 2), run("t1", "b", 72), run("t1", "c", 90),
                          run("t2", "exclusive", 200), run("t2", "a", 150, 4), run("t2", "b", 140), run("t2", "c", 180)},
                         {run("t1", "exclusive", 100), run("t1", "a", 75, 3), run("t1", "b", 73), run("t1", "c", 91),
                          run("t2", "exclusive", 200), run("t2", "a", 160, 4), run("t2", "b", 150), run("t2", "c", 181)}});
}

TEST(SeedSpread, GathersEachRunOverSeeds) {
  const SeedSpread s = two_seeds();
  ASSERT_EQ(s.runs.size(), 8u);
  const RunSpread* a = s.find("t1", "a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->per_seed.size(), 2u);
  const Spread mk = a->of(&RunMetrics::makespan_s);
  EXPECT_DOUBLE_EQ(mk.mean, 72.5);
  EXPECT_DOUBLE_EQ(mk.min, 70);
  EXPECT_DOUBLE_EQ(mk.max, 75);
  const Spread oom = a->of(&RunMetrics::oom_attempts);
  EXPECT_DOUBLE_EQ(oom.mean, 2.5);
  EXPECT_FALSE(a->seed_invariant());
  EXPECT_TRUE(s.find("t1", "exclusive")->seed_invariant());
  EXPECT_EQ(s.find("t3", "a"), nullptr);
}

TEST(SeedSpread, RejectsSeedsWithDifferentRuns) {
  EXPECT_THROW(gather({}, {}), std::invalid_argument);
  EXPECT_THROW(gather({1, 2}, {{run("t", "a", 1)}}), std::invalid_argument);
  EXPECT_THROW(gather({1, 2}, {{run("t", "a", 1)}, {run("t", "b", 1)}}), std::invalid_argument);
  EXPECT_THROW(gather({1, 2}, {{run("t", "a", 1)}, {run("t", "a", 1), run("t", "b", 1)}}), std::invalid_argument);
}

TEST(SeedSpread, NormalisesSeedBySeedAndComparesGeomeans) {
  const SeedSpread s = two_seeds();
  const auto norm = normalised(s, {"t1", "t2"}, {"exclusive", "a", "b", "c"});
  ASSERT_EQ(norm.size(), 4u);
  const NormalisedSpread& a = norm[1];
  EXPECT_EQ(a.policy, "a");
  ASSERT_EQ(a.per_trace.size(), 2u);
  EXPECT_DOUBLE_EQ(a.per_trace[0][0], 0.70);
  EXPECT_DOUBLE_EQ(a.per_trace[0][1], 0.75);
  EXPECT_DOUBLE_EQ(a.per_trace[1][1], 0.80);
  // The geometric mean over traces is taken per seed, before the spread.
  EXPECT_NEAR(a.geomean[0], std::sqrt(0.70 * 0.75), 1e-12);
  EXPECT_NEAR(a.geomean[1], std::sqrt(0.75 * 0.80), 1e-12);
  std::vector<std::pair<std::string, Spread>> g;
  for (const auto& row : norm) g.push_back({row.policy, spread_of(row.geomean)});
  // a: 0.725-0.775, b: 0.71-0.74, c: 0.9-0.91, exclusive: 1.
  const auto pairs = pairs_within(g);
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0], (std::pair<std::string, std::string>{"a", "b"}));
  // Without exclusive on every trace there is nothing to normalise to.
  EXPECT_TRUE(normalised(s, {"t1", "t3"}, {"a"}).empty());
}

// The report's section names the pairs within the spread and the runs the seed did not move.
TEST(SeedSpread, ReportSectionNamesPairsWithinTheSpread) {
  const std::string html = spread_html(two_seeds(), {"t1", "t2"}, {"exclusive", "a", "b", "c"});
  EXPECT_NE(html.find("<h2>Spread over 2 seeds</h2>"), std::string::npos);
  EXPECT_NE(html.find("Geometric mean: within the spread over 2 seeds (not a result):</p><ul><li>a and b</li></ul>"),
            std::string::npos);
  EXPECT_EQ(html.find("<li>a and c</li>"), std::string::npos);
  EXPECT_NE(html.find("<p>exclusive: every figure the same under all 2 seeds"), std::string::npos);
  EXPECT_EQ(html.find("<p>a: "), std::string::npos);  // a's makespan moved
}

}  // namespace
}  // namespace aegis
