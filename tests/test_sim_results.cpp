// What the simulator hands back, independent of scheduling: interned workload names,
// percentiles without a full sort, and results in trace-index order however sparse or
// repeated the indices are (the dense case takes a linear path, the rest a sort).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>

#include "sched/policies.h"
#include "sim/metrics.h"
#include "sim/simulator.h"
#include "sim/workload_name.h"

namespace aegis {
namespace {

TEST(WorkloadName, EqualTextIsOneKeptCopy) {
  const std::string text = "resnet50_bs64_long_enough_to_allocate";
  const WorkloadName a(text), b{std::string_view(text)}, c(text.c_str());
  EXPECT_EQ(&a.str(), &b.str());  // one copy, whatever the text came in as
  EXPECT_EQ(&a.str(), &c.str());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.str(), text);
  const WorkloadName other("resnet50_bs64_long_enough_to_allocatf");
  EXPECT_FALSE(a == other);
  EXPECT_TRUE(a < other);  // by text, as strings sort
  EXPECT_FALSE(other < a);
  EXPECT_FALSE(a < b);
  EXPECT_TRUE(WorkloadName().empty());
  EXPECT_EQ(WorkloadName(), WorkloadName(""));
  EXPECT_EQ(fmt::format("[{:>6}]", WorkloadName("w")), "[     w]");
  std::ostringstream out;
  out << a;
  EXPECT_EQ(out.str(), text);
}

// The definition percentile() keeps: linear between the closest ranks of a sorted copy.
double sorted_percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

TEST(SimResults, PercentileIsTheSortedDefinitionBitForBit) {
  std::mt19937_64 rnd(7);
  for (std::size_t n : {1u, 2u, 3u, 10u, 101u, 1000u}) {
    std::vector<double> v(n);
    // Few distinct values (ties around the selected ranks) and a spread of magnitudes.
    for (auto& x : v) x = static_cast<double>(rnd() % 7) * (rnd() % 2 ? 1.5 : 1e6) + static_cast<double>(rnd() % 3) / 3;
    for (double q : {0.0, 0.05, 0.5, 0.95, 0.999, 1.0}) EXPECT_EQ(percentile(v, q), sorted_percentile(v, q)) << n << " " << q;
  }
  EXPECT_EQ(percentile({}, 0.5), 0);
}

WorkloadProfile tiny(const std::string& name) {
  WorkloadProfile w;
  w.name = name;
  w.peak_mib = 1000;
  w.smact = w.util = 0.2;
  w.smocc = 0.1;
  w.drama = 0.1;
  w.solo_runtime_s = 50;
  w.estimates.profiled = w.peak_mib;
  w.hints.gpu_util = 0.2;
  return w;
}

SimResult run_with_indices(const std::vector<std::int64_t>& indices) {
  WorkloadCatalog catalog;
  catalog.add(tiny("a"));
  Trace trace;
  for (std::size_t i = 0; i < indices.size(); ++i) {
    TraceJob j;
    j.index = indices[i];
    j.submit_time = static_cast<Seconds>(i) * 7;  // arrival order = list order
    j.workload = "a";
    trace.jobs.push_back(j);
  }
  SimOptions o;
  o.engine = policy_config("exclusive");
  o.cluster = ClusterSpec::uniform(1, 2, 40960);
  return simulate(catalog, trace, o);
}

// Results come in trace-index order, equal indices in arrival order (a stable order).
void expect_trace_order(const std::vector<std::int64_t>& indices) {
  const SimResult r = run_with_indices(indices);
  std::vector<std::pair<std::int64_t, Seconds>> want, got;
  for (std::size_t i = 0; i < indices.size(); ++i) want.push_back({indices[i], static_cast<Seconds>(i) * 7});
  std::stable_sort(want.begin(), want.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& j : r.jobs) got.push_back({j.trace_index, j.submit});
  EXPECT_EQ(got, want);
}

TEST(SimResults, ComeInTraceIndexOrderDenseSparseOrRepeated) {
  expect_trace_order({3, 0, 4, 1, 2});                       // dense: placed directly
  expect_trace_order({1000000, 5, -40, 77});                 // sparse: sorted
  expect_trace_order({2, 1, 2, 0, 1});                       // repeated: in arrival order
  expect_trace_order({std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min(), 0});
}

}  // namespace
}  // namespace aegis
