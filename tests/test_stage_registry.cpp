// The stage registry and the stages' declarations: policies compose the same chains as
// before the registry; every built-in stage is monotone; request_shape digests exactly
// the job fields the composed stages read; and a new filter is one file and one line,
// shown by an example filter that exists only here.
#include <gtest/gtest.h>

#include <bit>

#include "sched/config_params.h"
#include "sched/filters/filters.h"
#include "sched/orders/orders.h"
#include "sched/stage_registry.h"
#include "sim/metrics.h"
#include "sim/simulator.h"
#include "tests/engine_fixture.h"

namespace aegis {
namespace {

using test::World;

// --- The example: a filter that exists only in this file. ----------------------------
// A GPU takes a third job only if that job's Lucid sharing score is 0 (it barely uses
// the GPU). Composed into every policy that orders by first fit while registered.
class MaxTwoJobsExample final : public Filter {
 public:
  std::string_view name() const override { return "max-two-jobs-example"; }
  bool admits(const PlacementRequest& r, const GpuCandidate& g, std::string* why) const override {
    if (g.job_count < 2 || r.job->spec.hints.sharing_score.value_or(2) == 0) return true;
    if (why) *why = "two jobs there already; only a job of sharing score 0 joins them";  // its own words
    return false;
  }
  // The job's sharing score and the GPU's job count, which jobs only add to: monotone.
  StageReads reads() const override { return {{JobField::SharingScoreHint}, {GpuFact::Jobs}}; }
  bool monotone() const override { return true; }
};

std::unique_ptr<Filter> make_max_two_jobs_example(const EngineConfig&) { return std::make_unique<MaxTwoJobsExample>(); }

// Its one registry line: name, place (after mig-single-gpu), when a policy composes it,
// factory. A test cannot edit the built-in table, so it goes through the hook.
TestFilterRegistration register_example() {
  return register_filter_for_tests(
      {"max-two-jobs-example", 35, [](const EngineConfig& c) { return c.order == "ff"; }, make_max_two_jobs_example});
}

// A filter that refuses every GPU to jobs of two GPUs or more, declares so, and counts
// how often it is asked.
int multi_gpu_example_asked = 0;
class RefusesMultiGpuExample final : public Filter {
 public:
  std::string_view name() const override { return "refuses-multi-gpu-example"; }
  bool admits(const PlacementRequest& r, const GpuCandidate&, std::string*) const override {
    ++multi_gpu_example_asked;
    return r.job->spec.num_gpus <= 1;
  }
  StageReads reads() const override { return {{JobField::GpuCount}, {}}; }
  bool monotone() const override { return true; }
  int least_gpus_refused() const override { return 2; }
};

// A tick without `explain` does not ask a filter about jobs of fewer GPUs than any it may
// refuse (Filter::least_gpus_refused), and decides as if it had; larger jobs still meet it.
TEST(StageRegistry, AFilterIsNotAskedAboutJobsSmallerThanItRefuses) {
  const auto registration = register_filter_for_tests(
      {"refuses-multi-gpu-example", 36, [](const EngineConfig&) { return true; },
       [](const EngineConfig&) -> std::unique_ptr<Filter> { return std::make_unique<RefusesMultiGpuExample>(); }});
  const Engine e = test::engine("aegis");
  World w(4);
  // A job on every GPU, gates long open: no GPU is idle, so a job shares (the alone path
  // asks only the filters that bind alone).
  for (int g = 0; g < 4; ++g) w.run(10 + g, {g}, 1000);
  w.now = 10000;
  const QueuedJob one = test::job(1, 1), two = test::job(2, 2);
  multi_gpu_example_asked = 0;
  auto s = w.snapshot_of(one);
  s.explain = false;
  EXPECT_EQ(e.tick(s).launches.size(), 1u);
  EXPECT_EQ(multi_gpu_example_asked, 0);
  auto s2 = w.snapshot_of(two);
  s2.explain = false;
  const auto d = e.tick(s2);
  EXPECT_TRUE(d.launches.empty());
  EXPECT_GT(multi_gpu_example_asked, 0);
}

TEST(StageRegistry, ANewFilterIsOneFileAndOneLine) {
  const auto registration = register_example();
  const Engine naive = test::engine("naive");  // order = "ff"
  EXPECT_EQ(naive.describe(),
            "exclusive-first > exclusive > mig-single-gpu > max-two-jobs-example > memory | ff | ladder | estimate: none");
  // Only policies whose config the predicate accepts compose it.
  EXPECT_EQ(test::engine("aegis").describe().find("example"), std::string::npos);

  // It takes effect: a GPU holding two jobs refuses a third unless its score is 0.
  auto third = [&](std::optional<int> score) {
    World w(1);
    w.run(1, {0}, 1000);
    w.run(2, {0}, 1000);
    QueuedJob j = test::job(3);
    j.spec.hints.sharing_score = score;
    return w.tick(naive, j);
  };
  auto d = third(std::nullopt);
  EXPECT_TRUE(d.launches.empty());
  ASSERT_TRUE(d.blocked.has_value());
  EXPECT_NE(d.blocked->reason.find("gpu0: max-two-jobs-example: two jobs there already; only a job of sharing score 0 "
                                   "joins them"),
            std::string::npos)
      << d.blocked->reason;
  EXPECT_EQ(third(2).launches.size(), 0u);
  EXPECT_EQ(third(0).launches.size(), 1u);

  // Its declaration reaches the engine and the request digest: naive reads no sharing
  // score of its own, and now requests with different scores are of different kinds.
  EXPECT_TRUE(naive.reads().has(JobField::SharingScoreHint));
  EXPECT_TRUE(naive.refusals_monotone());
  QueuedJob a = test::job(1), b = test::job(2);
  a.spec.hints.sharing_score = 0;
  b.spec.hints.sharing_score = 2;
  EXPECT_NE(naive.request_shape(a).kind, naive.request_shape(b).kind);
  EXPECT_EQ(test::engine("aegis").request_shape(a).kind, test::engine("aegis").request_shape(b).kind);
}

TEST(StageRegistry, ATestFilterLeavesWithItsRegistration) {
  {
    const auto registration = register_example();
    EXPECT_NE(test::engine("naive").describe().find("max-two-jobs-example"), std::string::npos);
    // Names are unique.
    EXPECT_THROW(
        (void)register_filter_for_tests({"memory", 1, [](const EngineConfig&) { return true; }, make_memory_fit}),
        std::invalid_argument);
  }
  const Engine naive = test::engine("naive");
  EXPECT_EQ(naive.describe(), "exclusive-first > exclusive > mig-single-gpu > memory | ff | ladder | estimate: none");
  EXPECT_FALSE(naive.reads().has(JobField::SharingScoreHint));
  QueuedJob a = test::job(1), b = test::job(2);
  a.spec.hints.sharing_score = 0;
  b.spec.hints.sharing_score = 2;
  EXPECT_EQ(naive.request_shape(a).kind, naive.request_shape(b).kind);
}

// What the engine treats a filter as (memory, gate, pressure, exclusive guard) is its
// entry's declared role, not its name: a filter of another name declared as the pressure
// filter has its refusals told apart (Blocked::by_pressure, the GPUs whose telemetry can
// change the answer), and a second filter declaring a role already composed is refused.
class AlwaysBusyExample final : public Filter {
 public:
  std::string_view name() const override { return "always-busy-example"; }
  bool admits(const PlacementRequest&, const GpuCandidate&, std::string* why) const override {
    if (why) *why = "it says so";
    return false;
  }
  StageReads reads() const override { return {{}, {GpuFact::Telemetry}}; }
  bool monotone() const override { return true; }
};

TEST(StageRegistry, ARoleIsDeclaredNotNamed) {
  auto make_busy = [](const EngineConfig&) -> std::unique_ptr<Filter> { return std::make_unique<AlwaysBusyExample>(); };
  auto refuse = [](const Engine& e) {
    World w(2);
    w.run(1, {0}, 1000);
    w.run(2, {1}, 1000);
    return w.tick(e, test::job(3));
  };
  {
    // naive composes no pressure filter: this one takes its role.
    const auto registration = register_filter_for_tests(
        {"always-busy-example", 95, [](const EngineConfig& c) { return !c.pressure_filter; }, make_busy, false,
         StageRole::Pressure});
    const auto d = refuse(test::engine("naive"));
    ASSERT_TRUE(d.blocked);
    EXPECT_TRUE(d.blocked->by_pressure);
    EXPECT_EQ(d.blocked->pressure_gpus, (std::vector<int>{0, 1}));
    EXPECT_NE(d.blocked->reason.find("gpu1: always-busy-example: it says so"), std::string::npos) << d.blocked->reason;
  }
  {
    // Without the role the same filter refuses as any other.
    const auto registration = register_filter_for_tests(
        {"always-busy-example", 95, [](const EngineConfig& c) { return !c.pressure_filter; }, make_busy});
    const auto d = refuse(test::engine("naive"));
    ASSERT_TRUE(d.blocked);
    EXPECT_FALSE(d.blocked->by_pressure);
  }
  {
    // aegis composes the pressure filter: a second one is a mistake, told at construction.
    const auto registration = register_filter_for_tests(
        {"always-busy-example", 95, [](const EngineConfig&) { return true; }, make_busy, false, StageRole::Pressure});
    EXPECT_THROW((void)test::engine("aegis"), std::logic_error);
  }
}

// --- The composed chains are those of before the registry. ---------------------------

TEST(StageRegistry, PoliciesComposeTheSameStagesAsBefore) {
  const std::pair<const char*, const char*> expected[] = {
      // `aegis policies` before the registry
      {"exclusive", "exclusive-first (no collocation) | ladder | estimate: none"},
      {"aegis", "exclusive-first > exclusive > mig-single-gpu > memory > observing > pressure | magm | ladder | estimate: none"},
      {"aegis-peak",
       "exclusive-first > exclusive > mig-single-gpu > memory > observing > pressure | magm | ladder | estimate: profiled"},
      {"aegis-horus",
       "exclusive-first > exclusive > mig-single-gpu > memory > observing > pressure | magm | ladder | estimate: analytical"},
      {"aegis-learned",
       "exclusive-first > exclusive > mig-single-gpu > memory > observing > pressure | lpa | ladder | estimate: learned"},
      {"carma", "exclusive-first > exclusive > mig-single-gpu > memory > observing > pressure | magm | retry | estimate: none"},
      {"lucid", "exclusive-first > exclusive > mig-single-gpu > job-count > gpu-count > sharing-score > memory | magm | "
                "ladder | estimate: profiled"},
      {"horus", "exclusive-first > exclusive > mig-single-gpu > util-cap > memory | lpu | ladder | estimate: analytical"},
      {"naive", "exclusive-first > exclusive > mig-single-gpu > memory | ff | ladder | estimate: none"},
  };
  for (const auto& [policy, stages] : expected) EXPECT_EQ(test::engine(policy).describe(), stages) << policy;
}

TEST(StageRegistry, EveryEntryBuildsTheStageItNames) {
  const EngineConfig c;
  int last = 0;
  for (const auto& e : filter_registry()) {
    EXPECT_EQ(e.make(c)->name(), e.name);
    EXPECT_GE(e.place, last) << e.name;
    last = e.place;
  }
  for (const auto& o : order_registry()) EXPECT_EQ(o.make(c)->name(), o.name);
  EXPECT_EQ(make_order("lpu", c)->name(), "lpu");
  EXPECT_THROW(make_order("nope", c), std::invalid_argument);
}

TEST(StageRegistry, OrderChoicesAreTheRegistrysNames) {
  EXPECT_EQ(order_names(), "magm,bf,lug,ff,rr,lpu,lpa");
  for (const auto& p : describe(EngineConfig{})) {
    if (p.name == "order") {
      EXPECT_EQ(p.allowed, order_names());
    }
  }
  EngineConfig c;
  for (const auto& o : order_registry()) EXPECT_NO_THROW(set_param(c, "order", o.name));
  try {
    set_param(c, "order", "nope");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "order: 'nope' is not one of magm,bf,lug,ff,rr,lpu,lpa");
  }
}

// --- Declarations and what derives from them. -----------------------------------------

TEST(StageDeclarations, EveryBuiltInStageIsMonotone) {
  EngineConfig c;
  for (const auto& e : filter_registry()) EXPECT_TRUE(e.make(c)->monotone()) << e.name;
  for (const auto& o : order_registry()) EXPECT_TRUE(o.make(c)->monotone()) << o.name;
  for (const auto& p : all_policies()) EXPECT_TRUE(test::engine(std::string(p.name)).refusals_monotone()) << p.name;
}

TEST(StageDeclarations, TelemetryUseDerivesFromTheStages) {
  // Before the declarations this was written by hand: collocate && (pressure || order = lug).
  for (const auto& p : all_policies()) {
    for (const auto& o : order_registry()) {
      for (bool pressure : {false, true}) {
        EngineConfig c = policy_config(p.name);
        c.order = std::string(o.name);
        c.pressure_filter = pressure;
        EXPECT_EQ(Engine(c).uses_telemetry(), c.collocate && (c.pressure_filter || c.order == "lug"))
            << p.name << " " << o.name << " " << pressure;
      }
    }
  }
}

TEST(StageDeclarations, WhatEachPolicyReadsAboutAJob) {
  const StageReads own{{JobField::GpuCount, JobField::EstimatePresent, JobField::MemoryNeed, JobField::ExclusiveOnly},
                       {}};
  for (const auto& p : all_policies()) {
    const Engine e = test::engine(std::string(p.name));
    const auto job = e.reads().job;
    EXPECT_EQ(job & own.job, own.job) << p.name << ": the engine's own reads";
    EXPECT_EQ(e.reads().has(JobField::GpuUtilHint), p.name == "horus") << p.name;  // util-cap
    EXPECT_EQ(e.reads().has(JobField::SharingScoreHint), p.name == "lucid") << p.name;  // sharing-score
    EXPECT_FALSE(e.reads().has(JobField::SubmitTime)) << p.name;
    EXPECT_EQ(e.reads().has(GpuFact::Telemetry), e.config().pressure_filter || e.config().order == "lug") << p.name;
  }
}

// request_shape's kind changes when a job field a composed stage reads changes, and not
// otherwise, for every policy and every field.
TEST(StageDeclarations, RequestKindFollowsTheDeclaredReads) {
  QueuedJob base = test::job(1, 1, 8000);
  base.spec.estimates.declared = base.spec.estimates.analytical = base.spec.estimates.learned = 8000;
  base.spec.hints.gpu_util = 0.5;
  base.spec.hints.sharing_score = 1;
  base.spec.submit_time = 10;
  struct Change {
    std::optional<JobField> field;  // none: a field no stage may read
    const char* what;
    void (*apply)(QueuedJob&);
  };
  const Change changes[] = {
      {JobField::GpuCount, "num_gpus", [](QueuedJob& j) { j.spec.num_gpus = 2; }},
      {JobField::ExclusiveOnly, "exclusive_only", [](QueuedJob& j) { j.recovery.exclusive_only = true; }},
      {JobField::GpuUtilHint, "gpu_util", [](QueuedJob& j) { j.spec.hints.gpu_util = 0.25; }},
      {JobField::GpuUtilHint, "gpu_util unknown", [](QueuedJob& j) { j.spec.hints.gpu_util.reset(); }},
      {JobField::SharingScoreHint, "sharing_score", [](QueuedJob& j) { j.spec.hints.sharing_score = 2; }},
      {JobField::SharingScoreHint, "sharing_score unknown", [](QueuedJob& j) { j.spec.hints.sharing_score.reset(); }},
      {JobField::SubmitTime, "submit_time", [](QueuedJob& j) { j.spec.submit_time = 11; }},
      {std::nullopt, "memory need", [](QueuedJob& j) {  // the shape's figures, not its kind
         j.spec.estimates.profiled = j.spec.estimates.declared = 9000;
         j.spec.estimates.analytical = j.spec.estimates.learned = 9000;
         j.recovery.floor_mib = 4096;
       }},
      {std::nullopt, "id", [](QueuedJob& j) { j.spec.id = 99; }},
      {std::nullopt, "name", [](QueuedJob& j) { j.spec.name = "other"; }},
      {std::nullopt, "oom_count", [](QueuedJob& j) { j.recovery.oom_count = 3; }},
  };
  for (const auto& p : all_policies()) {
    const Engine e = test::engine(std::string(p.name));
    const auto shape = e.request_shape(base);
    const auto kind = shape.kind;
    for (const auto& c : changes) {
      QueuedJob j = base;
      c.apply(j);
      const bool read = c.field && e.reads().has(*c.field);
      // A field every reader takes as a need moves a figure of the shape instead.
      const bool need = c.field && e.reads().is_need(*c.field);
      const auto changed = e.request_shape(j);
      EXPECT_EQ(changed.kind != kind, read && !need) << p.name << ": " << c.what;
      EXPECT_EQ(changed.need_util != shape.need_util || changed.need_score != shape.need_score, need)
          << p.name << ": " << c.what;
    }
    // Whether the estimate source can tell: read by every engine, observable where the
    // policy uses an estimate at all.
    QueuedJob j = base;
    j.spec.estimates = {};
    EXPECT_EQ(e.request_shape(j).kind != kind, e.config().estimator != "none") << p.name << ": estimate present";
  }
}

// --- A stage that is not monotone turns the simulator's refusal caches off. -----------

// Admits only GPUs at least half full: less free memory turns its refusal into an
// admission, which the simulator's caches do not expect (it does not ask again when a
// job's memory grows).
template <bool kClaimsMonotone>
class HalfFullExample final : public Filter {
 public:
  std::string_view name() const override { return kClaimsMonotone ? "half-full-claims-monotone" : "half-full-example"; }
  bool admits(const PlacementRequest&, const GpuCandidate& g, std::string*) const override {
    return g.free_mib <= g.view->total_mib / 2;
  }
  StageReads reads() const override { return {{}, {GpuFact::Memory}}; }
  bool monotone() const override { return kClaimsMonotone; }
};

template <bool kClaimsMonotone>
std::unique_ptr<Filter> make_half_full(const EngineConfig&) {
  return std::make_unique<HalfFullExample<kClaimsMonotone>>();
}

WorkloadProfile workload(const std::string& name, MiB peak, Seconds runtime) {
  WorkloadProfile w;
  w.name = name;
  w.peak_mib = peak;
  w.smact = w.util = 0.3;
  w.smocc = 0.1;
  w.drama = 0.1;
  w.solo_runtime_s = runtime;
  w.estimates.profiled = peak;
  return w;
}

// A big job alone on one GPU, then a small one that fits beside it once the big one has
// allocated its whole peak (the memory ramp ends seconds after its first activity).
SimResult run_half_full(bool cache) {
  WorkloadCatalog catalog;
  catalog.add(workload("big", 30000, 1000));
  catalog.add(workload("small", 2000, 100));
  Trace trace;
  for (int i = 0; i < 2; ++i) {
    TraceJob j;
    j.index = i;
    j.submit_time = i;
    j.workload = i == 0 ? "big" : "small";
    j.line = static_cast<std::uint32_t>(i) + 1;
    trace.jobs.push_back(j);
  }
  SimOptions o;
  o.engine = policy_config("naive");
  o.sim.refusal_cache = cache;
  o.cluster = ClusterSpec::uniform(1, 1, 40960);
  return simulate(catalog, trace, o);
}

TEST(StageDeclarations, ANonMonotoneStageTurnsTheRefusalCachesOff) {
  auto ff = [](const EngineConfig& c) { return c.order == "ff"; };
  {
    const auto registration = register_filter_for_tests({"half-full-example", 35, ff, make_half_full<false>});
    EXPECT_FALSE(test::engine("naive").refusals_monotone());
    const SimResult on = run_half_full(true), off = run_half_full(false);
    // The small job joins as soon as the big one holds its peak, caches on or off.
    EXPECT_LT(on.jobs[1].first_launch, on.jobs[0].end);
    EXPECT_EQ(on.jobs[1].first_launch, off.jobs[1].first_launch);
    EXPECT_EQ(on.ticks, off.ticks);
  }
  {
    // The same stage claiming to be monotone: the caches trust it and keep the refusal
    // from before the ramp, so the small job waits for the big one to end. This is what
    // the declaration protects against.
    const auto registration = register_filter_for_tests({"half-full-claims-monotone", 35, ff, make_half_full<true>});
    EXPECT_TRUE(test::engine("naive").refusals_monotone());
    const SimResult on = run_half_full(true), off = run_half_full(false);
    EXPECT_EQ(on.jobs[1].first_launch, on.jobs[0].end);
    EXPECT_LT(off.jobs[1].first_launch, off.jobs[0].end);
  }
}

}  // namespace
}  // namespace aegis
