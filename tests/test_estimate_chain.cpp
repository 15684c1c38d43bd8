// The estimate chain in the lifecycle (lifecycle/estimate_chain.h): which source a job's
// memory estimate comes from (declared, else history, else learned or calibrated, else the
// floor), what it learns from completed attempts (a quantile of the last `window` peaks per
// GPU model), and the simulator's aegis-auto learning from a repeated job as aegisd does.
#include <gtest/gtest.h>

#include <fstream>

#include "estimate/source.h"
#include "lifecycle/estimate_chain.h"
#include "sched/policies.h"
#include "sim/simulator.h"

namespace aegis {
namespace {

const std::string kData = std::string(AEGIS_SOURCE_DIR) + "/data/";

ModelFeatures resnet_like() {
  ModelFeatures f;
  f.depth = 50;
  f.batch_size = 64;
  f.total_parameters = 25.6e6;
  f.total_activations = 10.8e6;
  f.activation = "ReLU";
  f.layer_counts = {{"conv2d", 49}, {"linear", 1}};
  return f;
}

CalibratedModel calibrated() {
  std::ifstream in(kData + "models/calibrated_memory.json");
  return CalibratedModel::from_json(nlohmann::json::parse(in));
}

EstimateChain chain_on(std::vector<std::string> models, EstimateChainConfig c = {}) {
  EstimateChain chain(c);
  chain.set_server_models(std::move(models));
  return chain;
}

TEST(EstimateChain, WithNoDataOnlyTheJobsOwnFiguresAndAutoFallsToTheFloor) {
  const EstimateChain chain = chain_on({"A100-40GB"});
  ChainJob j;
  j.signature = "sig";
  const MemoryEstimates e = chain.estimates(j);
  EXPECT_FALSE(e.history);
  EXPECT_FALSE(e.learned);
  EXPECT_FALSE(e.analytical);
  EXPECT_FALSE(select_estimate(e, EstimateSource::Auto));  // the estimator-free floor
  EXPECT_FALSE(chain.predicted_utilisation(j).value);
}

TEST(EstimateChain, TheOrderIsDeclaredThenHistoryThenLearned) {
  EstimateChain chain = chain_on({"A100-40GB"});
  chain.set_calibrated(calibrated());
  ChainJob j;
  j.signature = "sig";
  j.model = resnet_like();
  const MemoryEstimates learned_only = chain.estimates(j);
  ASSERT_TRUE(learned_only.learned);  // the calibrated model answers for every spec
  ASSERT_TRUE(learned_only.analytical);
  EXPECT_EQ(select_estimate(learned_only, EstimateSource::Auto), learned_only.learned);

  ASSERT_TRUE(chain.completed({"sig", "A100-40GB", 1234, std::nullopt}));
  const MemoryEstimates with_history = chain.estimates(j);
  EXPECT_EQ(with_history.history, MiB{1234});
  EXPECT_EQ(select_estimate(with_history, EstimateSource::Auto), MiB{1234});

  j.declared = 999;
  EXPECT_EQ(select_estimate(chain.estimates(j), EstimateSource::Auto), MiB{999});
}

TEST(EstimateChain, TheCalibratedFigureIsTheNeediestGpuModels) {
  const CalibratedModel m = calibrated();
  EstimateChain one = chain_on({"A100-40GB"});
  one.set_calibrated(m);
  EstimateChain two = chain_on({"A100-40GB", "H200"});
  two.set_calibrated(m);
  const auto a = one.learned(resnet_like());
  const auto b = two.learned(resnet_like());
  ASSERT_TRUE(a && b);
  EXPECT_GE(*b, *a);
  EXPECT_EQ(*b, static_cast<MiB>(std::ceil(std::max(m.estimate(calibration_run(resnet_like(), "A100-40GB"), "A100-40GB").mib,
                                                    m.estimate(calibration_run(resnet_like(), "H200"), "H200").mib))));
}

TEST(EstimateChain, HistoryIsTheConfiguredQuantileOfTheLastWindowOfPeaks) {
  EstimateChain chain = chain_on({"gpu"}, EstimateChainConfig{3, 0.5, 0.5, 1});
  for (MiB p : {100, 200, 300, 400}) chain.completed({"sig", "gpu", p, std::nullopt});
  // The last 3 are 200, 300, 400; the median by nearest rank rounding up is the 2nd.
  EXPECT_EQ(chain.history("sig"), MiB{300});
  // A stray run falls out of the window: three more small ones.
  for (MiB p : {50, 60, 70}) chain.completed({"sig", "gpu", p, std::nullopt});
  EXPECT_EQ(chain.history("sig"), MiB{60});
  EXPECT_FALSE(chain.history("other"));
}

TEST(EstimateChain, ARunWhoseProcessesWereNeverSeenTeachesNothing) {
  EstimateChain chain = chain_on({"gpu"});
  EXPECT_FALSE(chain.completed({"sig", "gpu", 0, 0.5}));
  EXPECT_FALSE(chain.history("sig"));
  ChainJob j;
  j.signature = "sig";
  EXPECT_FALSE(chain.predicted_utilisation(j).value);
}

TEST(EstimateChain, AnotherGpuModelGetsTheMostRunModelsFigureMovedByItsContext) {
  const CalibratedModel m = calibrated();
  EstimateChain chain = chain_on({"A100-40GB", "H200"});
  chain.set_calibrated(m);
  chain.completed({"sig", "A100-40GB", 10000, std::nullopt});
  const double moved = 10000 + m.context_mib("H200") - m.context_mib("A100-40GB");
  EXPECT_EQ(chain.history("sig"), std::max<MiB>(10000, static_cast<MiB>(std::ceil(moved))));
}

TEST(EstimateChain, StoredHistoryFromBeforePerModelRunsKeepsItsLargestPeak) {
  EstimateChain chain = chain_on({"gpu"});
  chain.restore({{"old", 777}}, {}, {});
  EXPECT_EQ(chain.history("old"), MiB{777});
}

TEST(EstimateChain, UtilisationFromHistoryNeedsRunsOnEveryGpuModel) {
  EstimateChain chain = chain_on({"a", "b"});
  ChainJob j;
  j.signature = "sig";
  chain.completed({"sig", "a", 100, 0.3});
  EXPECT_FALSE(chain.predicted_utilisation(j).value);  // none on b: not moved across models
  chain.completed({"sig", "b", 100, 0.7});
  const auto p = chain.predicted_utilisation(j);
  ASSERT_TRUE(p.value);
  EXPECT_DOUBLE_EQ(*p.value, 0.7);  // the largest over the models
  EXPECT_EQ(p.source, "history");
}

// The simulator's aegis-auto learns from a repeated job as aegisd does: the second run of a
// workload is admitted with the first's peak, not the (here far too high) learned figure.
TEST(EstimateChainInSimulator, AegisAutoAdmitsARepeatedJobWithItsHistory) {
  WorkloadCatalog catalog;
  WorkloadProfile w;
  w.name = "repeated";
  w.peak_mib = 5000;
  w.smact = w.util = 0.3;
  w.smocc = w.drama = 0.1;
  w.solo_runtime_s = 100;
  w.estimates.learned = 30000;
  catalog.add(w);
  Trace trace;
  for (int i = 0; i < 2; ++i) {
    TraceJob j;
    j.index = i;
    j.submit_time = 1000.0 * i;  // the second arrives after the first completed
    j.workload = "repeated";
    trace.jobs.push_back(j);
  }
  SimOptions o;
  o.policy_name = "aegis-auto";
  o.engine = policy_config("aegis-auto");
  o.cluster = ClusterSpec::uniform(1, 1, 40960);
  const SimResult r = simulate(catalog, trace, o);
  ASSERT_EQ(r.jobs.size(), 2u);
  ASSERT_FALSE(r.jobs[0].attempts.empty());
  ASSERT_FALSE(r.jobs[1].attempts.empty());
  const MiB first = r.jobs[0].attempts.front().admitted_mib;
  const MiB second = r.jobs[1].attempts.front().admitted_mib;
  EXPECT_GE(first, 30000);  // the learned figure: no history yet
  EXPECT_LT(second, first);
  EXPECT_GE(second, 5000);  // the recorded peak
  EXPECT_LT(second, 30000);
}

}  // namespace
}  // namespace aegis
