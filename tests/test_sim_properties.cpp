// Properties over the three published traces and every policy: every job completes, the
// memory jobs hold never exceeds a GPU and every OOM is recovered, estimate-based policies
// never admit more estimated memory than a GPU holds, and the same seed gives the same
// result.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "sched/policies.h"
#include "sim/json_report.h"
#include "sim/metrics.h"
#include "sim/simulator.h"

namespace aegis {
namespace {

const std::string kData = std::string(AEGIS_SOURCE_DIR) + "/data/aegis/";

struct Published {
  WorkloadCatalog catalog = WorkloadCatalog::load(kData + "workloads.csv");
  std::map<std::string, Trace> traces;
  Published() {
    for (const char* t : {"philly", "saturn", "venus"})
      traces[t] = load_aegis_trace(kData + "trace_" + t + ".csv", catalog);
  }
};

const Published& published() {
  static const Published p;
  return p;
}

SimResult run(const std::string& trace, const std::string& policy, std::uint64_t seed, bool timeline = false) {
  SimOptions o;
  o.record_timeline = timeline;
  o.policy_name = policy;
  o.engine = policy_config(policy);
  o.cluster = ClusterSpec::uniform(1, 3, 40960);
  o.seed = seed;
  return simulate(published().catalog, published().traces.at(trace), o);
}

// Serialises everything a run produced, attempt by attempt.
std::string fingerprint(const SimResult& r) {
  Json j = to_json(summarize(r));
  for (const auto& job : r.jobs)
    for (const auto& a : job.attempts)
      j["attempt_log"].push_back({a.launch, a.first_activity, a.end, a.gpus, a.floor_mib, static_cast<int>(a.outcome)});
  return j.dump();
}

class EveryPolicy : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(EveryPolicy, EveryJobCompletes) {
  const auto& [trace, policy] = GetParam();
  const auto m = summarize(run(trace, policy, 1));
  EXPECT_EQ(m.jobs, 60);
  EXPECT_EQ(m.completed, 60);
  EXPECT_EQ(m.stopped, 0);
  if (policy == "exclusive") {
    EXPECT_EQ(m.collocated_attempts, 0);
  } else {
    EXPECT_GT(m.collocated_attempts, 0);
  }
}

// What holds for every policy, with or without memory estimates: the memory jobs really
// hold on a GPU never exceeds it (an allocation that would is an OOM), no attempt running
// alone dies of OOM, and every job whose attempt died of OOM is placed again and completes.
TEST_P(EveryPolicy, UsedMemoryNeverExceedsTheGpuAndEveryOomRecovers) {
  const auto& [trace, policy] = GetParam();
  const auto r = run(trace, policy, 1, /*timeline=*/true);
  ASSERT_EQ(r.gpu_timeline.size(), r.gpu_total_mib.size());
  std::size_t points = 0;
  for (std::size_t g = 0; g < r.gpu_timeline.size(); ++g)
    for (const auto& p : r.gpu_timeline[g]) {
      ++points;
      EXPECT_GE(p.used_mib, 0) << "gpu" << g << " at t=" << p.t;
      EXPECT_LE(p.used_mib, r.gpu_total_mib[g]) << "gpu" << g << " at t=" << p.t;
    }
  EXPECT_GT(points, 0u);
  for (const auto& j : r.jobs) {
    ASSERT_FALSE(j.attempts.empty()) << "job " << j.trace_index;
    for (std::size_t k = 0; k < j.attempts.size(); ++k) {
      const auto& a = j.attempts[k];
      if (a.outcome != SimOutcome::Oom) continue;
      EXPECT_FALSE(a.exclusive) << "job " << j.trace_index << " died of OOM alone on its GPU";
      EXPECT_LT(k + 1, j.attempts.size()) << "job " << j.trace_index << ": no attempt after its OOM";
    }
    EXPECT_TRUE(j.completed) << "job " << j.trace_index;
    EXPECT_EQ(j.attempts.back().outcome, SimOutcome::Completed) << "job " << j.trace_index;
  }
}

// Policies that admit by a memory estimate never book more than a GPU holds: the admitted
// estimates of the attempts sharing a GPU sum to at most its memory. (Estimator-free
// policies admit by reported free memory; the test above is what holds for them.)
class EstimatingPolicy : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(EstimatingPolicy, EstimatedMemoryOfCollocatedJobsFitsTheGpu) {
  const auto& [trace, policy] = GetParam();
  ASSERT_NE(policy_config(policy).estimator, "none");
  const auto r = run(trace, policy, 1);
  struct Span {
    Seconds a, b;
    MiB mib;
  };
  std::map<int, std::vector<Span>> by_gpu;
  for (const auto& j : r.jobs)
    for (const auto& a : j.attempts)
      for (int g : a.gpus) by_gpu[g].push_back({a.launch, a.end, a.admitted_mib});
  int shared = 0;  // placements next to another attempt: the property is not vacuous
  for (const auto& [g, spans] : by_gpu) {
    for (const auto& s : spans) {
      MiB sum = 0;
      int n = 0;
      for (const auto& o : spans)
        if (o.a <= s.a && s.a < o.b) {
          sum += o.mib;
          ++n;
        }
      if (n >= 2) {
        ++shared;
        EXPECT_LE(sum, 40960) << "gpu" << g << " at t=" << s.a << " with " << n << " jobs";
      }
    }
  }
  EXPECT_GT(shared, 0);
}

TEST_P(EveryPolicy, SameSeedSameResult) {
  const auto& [trace, policy] = GetParam();
  EXPECT_EQ(fingerprint(run(trace, policy, 7)), fingerprint(run(trace, policy, 7)));
}

std::vector<std::tuple<std::string, std::string>> cases() {
  std::vector<std::tuple<std::string, std::string>> v;
  for (const char* t : {"philly", "saturn", "venus"})
    for (const auto& p : all_policies()) v.emplace_back(t, std::string(p.name));
  return v;
}

std::string case_name(const ::testing::TestParamInfo<EveryPolicy::ParamType>& p) {
  std::string n = std::get<0>(p.param) + "_" + std::get<1>(p.param);
  for (auto& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(PublishedTraces, EveryPolicy, ::testing::ValuesIn(cases()), case_name);

// The policies whose configuration names a memory estimator, on every trace.
std::vector<std::tuple<std::string, std::string>> estimating_cases() {
  std::vector<std::tuple<std::string, std::string>> v;
  for (const auto& c : cases())
    if (policy_config(std::get<1>(c)).estimator != "none") v.push_back(c);
  return v;
}

INSTANTIATE_TEST_SUITE_P(PublishedTraces, EstimatingPolicy, ::testing::ValuesIn(estimating_cases()), case_name);

TEST(Seeds, DifferentSeedsDrawDifferentStartupDelays) {
  EXPECT_NE(fingerprint(run("philly", "aegis", 1)), fingerprint(run("philly", "aegis", 2)));
}

TEST(Published, CollocationBeatsExclusiveOnEveryTrace) {
  for (const char* t : {"philly", "saturn", "venus"}) {
    const double ex = summarize(run(t, "exclusive", 1)).makespan_s;
    EXPECT_LT(summarize(run(t, "aegis", 1)).makespan_s, ex) << t;
  }
}

// Backfill (issue 32 item 5, src/lifecycle/backfill.h) on the published traces, with time
// limits of 3x each job's solo runtime (enforced): each waiting head starts by the start it
// was reserved, and its reservation never moves later while it waits. Without the switch,
// nothing is reserved. (Policy `exclusive`: no OOM sends a job to the recovery queue, which
// is served before the head by the published queue order, not by backfill.)
TEST(Backfill, NeverDelaysTheHeadsReservationOnThePublishedTraces) {
  std::size_t reservations = 0;
  for (const char* trace : {"philly", "saturn", "venus"}) {
    for (bool on : {false, true}) {
      SimOptions o;
      o.policy_name = "exclusive";
      o.engine = policy_config("exclusive");
      o.engine.backfill = on;
      o.engine.backfill_history_runs = 0;  // limits only: a prediction can be outrun (lab-policies.md)
      o.sim.time_limit_factor = 3;
      o.record_reservations = true;
      o.cluster = ClusterSpec::uniform(1, 3, 40960);
      o.seed = 1;
      const SimResult r = simulate(published().catalog, published().traces.at(trace), o);
      // --jobs-csv's `backfilled` and `head_reserved_s`: an attempt is marked backfilled
      // exactly when it started while a job ahead of it in the queue still waited (the
      // queue is in submit order; nothing else passes the head under `exclusive`), and a
      // job's head_reserved is its first reservation as the head.
      std::size_t backfilled = 0;
      for (const JobRecord& j : r.jobs) {
        ASSERT_EQ(j.attempts.size(), 1u) << trace;  // no OOM under exclusive; a timeout is not retried
        const Seconds at = j.attempts[0].launch;
        bool passed = false;
        for (const JobRecord& k : r.jobs)
          passed = passed || ((k.submit < j.submit || (k.submit == j.submit && k.trace_index < j.trace_index)) &&
                              k.first_launch > at + 1e-9);
        EXPECT_EQ(j.attempts[0].backfilled, passed) << trace << " job " << j.trace_index << (on ? " on" : " off");
        backfilled += j.attempts[0].backfilled ? 1 : 0;
      }
      if (!on) {
        EXPECT_TRUE(r.reservations.empty()) << trace;
        EXPECT_EQ(backfilled, 0u) << trace;
        EXPECT_TRUE(r.head_reserved.empty()) << trace;
        continue;
      }
      EXPECT_GT(backfilled, 0u) << trace;
      std::map<std::int64_t, Seconds> held, first;
      for (const auto& [job, at, pass] : r.reservations) {
        first.try_emplace(job, at);
        auto [it, fresh] = held.try_emplace(job, at);
        if (!fresh) {
          EXPECT_LE(at, it->second + 1e-6) << trace << " job " << job;
          it->second = std::min(it->second, at);
        }
      }
      for (const auto& [job, at] : held)
        EXPECT_LE(r.jobs[static_cast<std::size_t>(job)].first_launch, at + 1e-6) << trace << " job " << job;
      ASSERT_EQ(r.head_reserved.size(), r.jobs.size()) << trace;
      for (std::size_t k = 0; k < r.jobs.size(); ++k) {
        const auto f = first.find(r.jobs[k].trace_index);
        EXPECT_EQ(r.head_reserved[k], f == first.end() ? -1 : f->second) << trace << " job " << r.jobs[k].trace_index;
      }
      reservations += held.size();
    }
  }
  EXPECT_GT(reservations, 0u);
}

// The same under sharing (`aegis`, the default `backfill_joins = by_reservation`, limits 2x as
// in docs/lab-policies.md's study, every seed of it). With joins counted unslowed
// (`backfill_join_slowdown = 1`) each head starts by the first start it was reserved (its
// reservation may move later, but only when a retry enters the recovery queue ahead of it:
// traced on philly, s34-bfspan, so only the start is asserted). At the default (1.28) the
// schedule differs, and in philly's seeds 4 and 8 one head (job 50) waits past its
// reservation for pressure, which the memory rule run forward cannot see: a head late like
// that must have had no job backfilled ahead of it while it waited.
TEST(Backfill, UnderSharingAHeadStartsByItsReservationOrNothingWasBackfilledAheadOfIt) {
  for (const double slowdown : {1.0, EngineConfig{}.backfill_join_slowdown}) {
    for (const char* trace : {"philly", "saturn", "venus"}) {
      for (std::uint64_t seed = 1; seed <= 8; ++seed) {
        SimOptions o;
        o.policy_name = "aegis";
        o.engine = policy_config("aegis");
        o.engine.backfill = true;
        o.engine.backfill_join_slowdown = slowdown;
        o.sim.time_limit_factor = 2;
        o.record_reservations = true;
        o.cluster = ClusterSpec::uniform(1, 3, 40960);
        o.seed = seed;
        const SimResult r = simulate(published().catalog, published().traces.at(trace), o);
        std::map<std::int64_t, Seconds> first;
        std::map<std::int64_t, std::vector<Seconds>> passes;  // when each job waited as the head
        for (const auto& [job, at, pass] : r.reservations) {
          first.try_emplace(job, at);
          passes[job].push_back(pass);
        }
        EXPECT_GT(first.size(), 10u) << trace << " seed " << seed;
        for (const auto& [job, at] : first) {
          const JobRecord& head = r.jobs[static_cast<std::size_t>(job)];
          if (slowdown == 1.0) {  // the rule as measured at s34: every head by its first reservation
            EXPECT_LE(head.first_launch, at + 1e-6) << trace << " seed " << seed << " job " << job;
            continue;
          }
          if (head.first_launch <= at + 1e-6) continue;
          // Late (the memory rule run forward cannot see pressure: philly seeds 4 and 8, job
          // 50): then no job was backfilled ahead of it while it waited, so the wait is the
          // estimate's, not backfill's.
          for (const JobRecord& k : r.jobs) {
            for (const auto& a : k.attempts) {
              if (!a.backfilled) continue;
              for (Seconds pass : passes[job]) {
                EXPECT_NE(a.launch, pass) << trace << " seed " << seed << ": job " << k.trace_index
                                          << " was backfilled at " << a.launch << " ahead of late head " << job;
              }
            }
          }
        }
      }
    }
  }
}

// A trace's time_limit_s column (issue 32 item 5): a job past its limit is stopped and fails
// with the reason; an empty cell is no limit; a bad one names the column.
TEST(TimeLimitColumn, AJobPastItsTraceLimitIsStopped) {
  const Trace& pub = published().traces.at("philly");
  const std::string path = ::testing::TempDir() + "/trace_limits.csv";
  {
    std::ofstream f(path);
    f << "job_index,submit_time_s,workload_name,num_gpus,time_limit_s\n";
    f << "0,0," << pub.jobs[0].workload.str() << "," << pub.jobs[0].num_gpus << ",60\n";
    f << "1,0," << pub.jobs[1].workload.str() << "," << pub.jobs[1].num_gpus << ",\n";
  }
  const Trace t = load_aegis_trace(path, published().catalog);
  SimOptions o;
  o.policy_name = "exclusive";
  o.engine = policy_config("exclusive");
  o.cluster = ClusterSpec::uniform(1, 3, 40960);
  const SimResult r = simulate(published().catalog, t, o);
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_FALSE(r.jobs[0].completed);
  EXPECT_EQ(r.jobs[0].end - r.jobs[0].first_launch, 60);
  EXPECT_EQ(r.jobs[0].stop_reason.str(), "timeout: ran past its time limit of 1m");
  EXPECT_TRUE(r.jobs[1].completed);
  {
    std::ofstream f(path);
    f << "job_index,submit_time_s,workload_name,num_gpus,time_limit_s\n";
    f << "0,0," << pub.jobs[0].workload.str() << "," << pub.jobs[0].num_gpus << ",-5\n";
  }
  try {
    load_aegis_trace(path, published().catalog);
    ADD_FAILURE() << "a negative limit was read";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("time_limit_s"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace aegis
