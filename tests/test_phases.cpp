// Issue 31, item 1: a job's recorded timeline in, its simulated one out. The H200 run's
// ResNet-50 solo attempt (tests/data/h200_timelines.csv) showed SM activity near 0 for 10 s
// after its first activity, then 0.84; its profile with phase columns
// (tests/data/h200_phase_profiles.csv: the workloads.csv that `scripts/gpu-validate/compare.py
// ../shared/data/gpu-validation-h200-2026-12-04/results` wrote, its non-empty columns kept)
// through the simulator must give the same phases: where the heavy phase starts, and the
// levels before and in it, measured on both timelines the same way (summarize.py's rule).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include "sched/policies.h"
#include "sim/csv.h"
#include "sim/simulator.h"
#include "sim/trace.h"
#include "sim/workload.h"

namespace aegis {
namespace {

const std::string kTests = std::string(AEGIS_SOURCE_DIR) + "/tests/data/";

struct Sample {
  double t = 0;      // seconds since launch; the mean of the second before
  double smact = 0;
};

struct Recorded {
  double first_activity = 0;  // seconds since launch, as aegisd recorded it
  std::vector<Sample> own;    // samples once the job's process was listed
};

Recorded recorded(const std::string& run, const std::string& job) {
  std::ifstream f(kTests + "h200_timelines.csv");
  EXPECT_TRUE(f) << "tests/data/h200_timelines.csv";
  Recorded r;
  const std::string head = "# attempt " + run + " " + job + " 1:";
  for (std::string line; std::getline(f, line);) {
    if (line.rfind(head, 0) == 0) {
      const auto at = line.find("first activity ");
      r.first_activity = std::stod(line.substr(at + 15));
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> c;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) c.push_back(x);
    if (c.size() < 7 || c[0] != run || c[1] != job || c[2] != "1" || c[4] != "1") continue;
    r.own.push_back({std::stod(c[3]), std::stod(c[6])});
  }
  return r;
}

struct Phases {
  double heavy_from = 0;  // sample time of the heavy phase's first sample
  double startup_level = 0, steady_level = 0;
};

// scripts/gpu-validate/summarize.py's heavy phase: steady level = the 80th percentile of SM
// activity; the phase starts at the first of 3 samples in a row at half of it or more.
// Levels: the mean before it, and the mean after its first (partial) sample.
std::optional<Phases> phases_of(const std::vector<Sample>& s) {
  if (s.size() < 4) return std::nullopt;
  std::vector<double> v;
  for (const auto& x : s) v.push_back(x.smact);
  std::sort(v.begin(), v.end());
  const double level = v[static_cast<std::size_t>(0.8 * static_cast<double>(v.size() - 1))];
  for (std::size_t i = 0; i + 3 <= s.size(); ++i) {
    if (s[i].smact < level / 2 || s[i + 1].smact < level / 2 || s[i + 2].smact < level / 2) continue;
    Phases p;
    p.heavy_from = s[i].t;
    double a = 0, b = 0;
    for (std::size_t k = 0; k < i; ++k) a += s[k].smact;
    for (std::size_t k = i + 1; k < s.size(); ++k) b += s[k].smact;
    p.startup_level = i ? a / static_cast<double>(i) : 0;
    p.steady_level = b / static_cast<double>(s.size() - i - 1);
    return p;
  }
  return std::nullopt;
}

// The simulated GPU's SM activity sampled as NVML's GPM does: each sample the mean over
// the second before it, at the recorded sample times.
std::vector<Sample> sampled(const std::vector<GpuPoint>& tl, const std::vector<Sample>& at) {
  auto value = [&](double t) {
    double v = 0;
    for (const auto& p : tl)
      if (p.t <= t) v = p.smact;
    return v;
  };
  std::vector<Sample> out;
  for (const auto& s : at) {
    double sum = 0;
    const int n = 100;
    for (int k = 0; k < n; ++k) sum += value(s.t - 1.0 + (k + 0.5) / n);
    out.push_back({s.t, sum / n});
  }
  return out;
}

// One job of `workload` alone on one H200, its first activity when the recording had it.
std::vector<GpuPoint> simulate_alone(const WorkloadCatalog& c, const std::string& workload, double first_activity) {
  Trace t;
  t.name = "one";
  TraceJob j;
  j.workload = workload;
  t.jobs.push_back(j);
  SimOptions o;
  o.policy_name = "exclusive";
  o.engine = policy_config("exclusive");
  o.cluster = ClusterSpec::uniform(1, 1, 143771);
  // The start-up delay pinned to the recorded one: capped at it, the draw's spread tiny.
  o.sim.first_activity_median_s = first_activity;
  o.sim.first_activity_p95_s = first_activity * (1 + 1e-9);
  o.sim.first_activity_max_s = first_activity;
  o.record_timeline = true;
  const SimResult r = simulate(c, t, o);
  EXPECT_EQ(r.jobs.size(), 1u);
  return r.gpu_timeline.at(0);
}

TEST(JobPhases, RecordedResNetTimelineComesOutOfTheSimulator) {
  const Recorded rec = recorded("exclusive", "j1_resnet50_bf16");
  ASSERT_GT(rec.own.size(), 10u);
  const auto want = phases_of(rec.own);
  ASSERT_TRUE(want);
  // The recording itself: a long light start-up, then the heavy phase.
  EXPECT_GT(want->heavy_from - rec.first_activity, 8.0);
  EXPECT_LT(want->startup_level, 0.05);
  EXPECT_GT(want->steady_level, 0.8);

  const WorkloadCatalog c = WorkloadCatalog::load(kTests + "h200_phase_profiles.csv");
  const auto got = phases_of(sampled(simulate_alone(c, "j1_resnet50_bf16", rec.first_activity), rec.own));
  ASSERT_TRUE(got) << "the simulated timeline has no heavy phase";
  // Within one sample (1 s) of where it started; levels within 0.05 of SM activity.
  EXPECT_NEAR(got->heavy_from, want->heavy_from, 1.0);
  EXPECT_NEAR(got->startup_level, want->startup_level, 0.05);
  EXPECT_NEAR(got->steady_level, want->steady_level, 0.05);
}

// Every kind of the run: the heavy phase where the recording had it.
TEST(JobPhases, EveryRecordedKindStartsItsHeavyPhaseOnTime) {
  const WorkloadCatalog c = WorkloadCatalog::load(kTests + "h200_phase_profiles.csv");
  for (const char* job : {"j1_resnet50_bf16", "j2_cifar_small", "j3_bert_seq512", "j4_dlrm"}) {
    const Recorded rec = recorded("exclusive", job);
    const auto want = phases_of(rec.own);
    ASSERT_TRUE(want) << job;
    const auto got = phases_of(sampled(simulate_alone(c, job, rec.first_activity), rec.own));
    ASSERT_TRUE(got) << job;
    EXPECT_NEAR(got->heavy_from, want->heavy_from, 1.0) << job;
    EXPECT_NEAR(got->steady_level, want->steady_level, 0.05) << job;
  }
}

std::string write(const std::string& text) {
  const std::string p = ::testing::TempDir() + "phases_" +
                        ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".csv";
  std::ofstream(p) << text;
  return p;
}

TEST(JobPhases, WithoutPhaseColumnsOnePhaseAtTheMeans) {
  const auto c = WorkloadCatalog::load(write(
      "name,num_gpus,peak_memory_mib,avg_smact,avg_smocc,avg_drama,horus_gpu_util_mean,solo_runtime_s\n"
      "a,1,1000,0.3,0.2,0.1,40,100\n"));
  const JobPhases& p = c.find("a")->phases;
  EXPECT_EQ(p.startup_s, 0);
  EXPECT_EQ(p.at(0), (ActivityLevels{0.3, 0.2, 0.1, 0.4}));
  EXPECT_EQ(p.at(1e9), (ActivityLevels{0.3, 0.2, 0.1, 0.4}));
}

TEST(JobPhases, PhaseColumnsGiveStartUpThenSteady) {
  const auto c = WorkloadCatalog::load(write(
      "name,num_gpus,peak_memory_mib,avg_smact,avg_smocc,avg_drama,solo_runtime_s,startup_s,startup_smact,"
      "steady_smact,steady_util\n"
      "a,1,1000,0.3,0.2,0.1,100,12,0.02,0.9,\n"));
  const JobPhases& p = c.find("a")->phases;
  EXPECT_EQ(p.startup_s, 12);
  EXPECT_EQ(p.at(11.9).smact, 0.02);
  EXPECT_EQ(p.at(11.9).util, 0);          // absent start-up level: 0
  EXPECT_EQ(p.at(12).smact, 0.9);
  EXPECT_EQ(p.at(12).smocc, 0.2);         // absent steady level: the whole-run mean
  EXPECT_EQ(p.at(12).util, 0.3);          // (no horus column: SM activity stands in)
}

TEST(JobPhases, BadPhaseValueNamesItsColumn) {
  const std::string path = write(
      "name,num_gpus,peak_memory_mib,avg_smact,avg_smocc,avg_drama,solo_runtime_s,steady_drama\n"
      "a,1,1000,0.3,0.2,0.1,100,1.5\n");
  try {
    WorkloadCatalog::load(path);
    FAIL() << "accepted steady_drama 1.5";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("steady_drama"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aegis
