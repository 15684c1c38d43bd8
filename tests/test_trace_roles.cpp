// Issue 32 in the production readers: Alibaba's `qos` as priority levels
// (--alibaba-qos-priority) and Philly's `cluster` as users or groups (--philly-cluster-as),
// both off by default; and a qos level reaching preemption in the simulator.
#include <gtest/gtest.h>

#include "tests/test_util.h"
#include "sched/policies.h"
#include "sim/csv.h"
#include "sim/metrics.h"
#include "sim/simulator.h"
#include "sim/trace.h"
#include "sim/trace_formats.h"

namespace aegis {
namespace {

using test::error_of;
using test::TempFile;

const std::string kPhillyHeader = "timestamp,duration,num_gpus,gpu_time,cluster\n";
const std::string kAlibabaHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n";

WorkloadCatalog one_workload() { return test::one_workload_catalog(); }

TraceOptions qos_on() {
  TraceOptions o;
  o.alibaba_qos_priority = true;
  return o;
}

TraceOptions cluster_as(TraceColumnRole role) {
  TraceOptions o;
  o.philly_cluster_as = role;
  return o;
}

// ---------------------------------------------------------------- Alibaba qos

TEST(TraceRoles, QosClassesMapToLevelsLsAndGuaranteedAboveBurstableAboveBe) {
  EXPECT_EQ(alibaba_qos_level("LS"), 2);
  EXPECT_EQ(alibaba_qos_level("Guaranteed"), 2);
  EXPECT_EQ(alibaba_qos_level("Burstable"), 1);
  EXPECT_EQ(alibaba_qos_level("BE"), 0);
  for (const char* bad : {"", "ls", "BestEffort", "LS "}) EXPECT_EQ(alibaba_qos_level(bad), std::nullopt) << bad;
}

TEST(TraceRoles, AlibabaQosBecomesEachPodsLevelOnlyWithTheOption) {
  TempFile f(kAlibabaHeader +
             "a,1,1,1,1000,,LS,Running,0,100,0\n"
             "b,1,1,1,1000,,Burstable,Running,1,100,1\n"
             "c,1,1,1,500,,BE,Running,2,100,2\n"
             "d,1,1,2,1000,,Guaranteed,Running,3,100,3\n");
  const auto catalog = one_workload();
  const Trace on = load_trace(f.path(), catalog, qos_on());
  ASSERT_EQ(on.jobs.size(), 4u);
  const std::int16_t levels[] = {2, 1, 0, 2};
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(on.jobs[i].priority, levels[i]) << on.source_id(on.jobs[i]);
  const Trace off = load_trace(f.path(), catalog);
  for (const auto& j : off.jobs) EXPECT_EQ(j.priority, 0) << off.source_id(j);
}

TEST(TraceRoles, AnUnknownQosNamesTheRowAndTheColumn) {
  const auto catalog = one_workload();
  for (const std::string qos : {"Gold", ""}) {
    TempFile f(kAlibabaHeader + "ok,1,1,1,1000,,LS,Running,0,10,0\nbad,1,1,1,1000,," + qos + ",Running,0,10,0\n");
    EXPECT_EQ(error_of([&] { load_trace(f.path(), catalog, qos_on()); }),
              f.path() + ":3: field 'qos': '" + qos + "' is not one of LS, Guaranteed, Burstable, BE");
    EXPECT_EQ(load_trace(f.path(), catalog).jobs.size(), 2u);  // off: the column is not read
  }
  // A pod left out (CPU-only) is not a job: its qos is not read, as its other GPU fields.
  TempFile cpu(kAlibabaHeader + "ok,1,1,1,1000,,LS,Running,0,10,0\ncpu,1,1,0,0,,Gold,Running,0,10,0\n");
  EXPECT_EQ(load_trace(cpu.path(), catalog, qos_on()).jobs.size(), 1u);
}

TEST(TraceRoles, EachOptionNeedsItsColumnAndItsFormat) {
  const auto catalog = one_workload();
  TempFile no_qos("name,num_gpu,gpu_milli,creation_time,scheduled_time,deletion_time\np,1,1000,0,0,10\n");
  EXPECT_EQ(error_of([&] { load_trace(no_qos.path(), catalog, qos_on()); }),
            no_qos.path() + ":1: missing column 'qos' (read by --alibaba-qos-priority)");
  TempFile no_cluster("timestamp,duration,num_gpus\n2017-10-09 07:01:55,66.0,1\n");
  EXPECT_EQ(error_of([&] { load_trace(no_cluster.path(), catalog, cluster_as(TraceColumnRole::User)); }),
            no_cluster.path() + ":1: missing column 'cluster' (read by --philly-cluster-as)");
  EXPECT_EQ(error_of([&] { load_trace(no_cluster.path(), catalog, qos_on()); }),
            no_cluster.path() + ": --alibaba-qos-priority: applies to alibaba traces only, this one is philly");
  EXPECT_EQ(error_of([&] { load_trace(no_qos.path(), catalog, cluster_as(TraceColumnRole::Group)); }),
            no_qos.path() + ": --philly-cluster-as: applies to philly traces only, this one is alibaba");
}

// ---------------------------------------------------------------- Philly cluster

// Both readers: the one that splits only the rows it keeps (no quotes) and the full one.
TEST(TraceRoles, PhillyClustersBecomeUsersOrGroupsNumberedInFileOrder) {
  const auto catalog = one_workload();
  const std::string rows =
      "2017-10-09 07:00:03,10,1,10,team-b\n"
      "2017-10-09 07:00:01,10,1,10,team-a\n"
      "2017-10-09 07:00:02,10,1,10,team-b\n";
  for (const std::string quote : {"", "\"\""}) {
    TempFile f(kPhillyHeader + rows + (quote.empty() ? "" : "2017-10-09 07:00:04,10,1,10,\"team-a\"\n"));
    const Trace users = load_trace(f.path(), catalog, cluster_as(TraceColumnRole::User));
    // Numbered in file order (team-b's row comes first), whichever reader; jobs by arrival.
    EXPECT_EQ(users.user_names, (std::vector<std::string>{"team-b", "team-a"}));
    std::vector<std::int32_t> owners;
    for (const auto& j : users.jobs) owners.push_back(j.owner);
    std::vector<std::int32_t> expected = {1, 0, 0};
    if (!quote.empty()) expected.push_back(1);
    EXPECT_EQ(owners, expected);
    for (const auto& j : users.jobs) EXPECT_EQ(j.group, -1);
    EXPECT_TRUE(users.group_names.empty());

    const Trace groups = load_trace(f.path(), catalog, cluster_as(TraceColumnRole::Group));
    for (const auto& j : groups.jobs) {
      EXPECT_EQ(j.owner, -1);
      ASSERT_TRUE(j.group >= 0 && static_cast<std::size_t>(j.group) < groups.group_names.size()) << j.group;
      EXPECT_EQ(groups.group_names[static_cast<std::size_t>(j.group)], groups.source_id(j));
    }
    EXPECT_TRUE(groups.user_names.empty());

    const Trace none = load_trace(f.path(), catalog);
    for (const auto& j : none.jobs) EXPECT_EQ(std::make_pair(j.owner, j.group), std::make_pair(-1, -1));
    EXPECT_TRUE(none.user_names.empty() && none.group_names.empty());
  }
}

TEST(TraceRoles, APhillyJobWithoutAClusterNamesTheRowWhenClustersAreUsers) {
  TempFile f(kPhillyHeader + "2017-10-09 07:00:01,10,1,10,team-a\n2017-10-09 07:00:02,10,1,10,\n");
  EXPECT_EQ(error_of([&] { load_trace(f.path(), one_workload(), cluster_as(TraceColumnRole::User)); }),
            f.path() + ":3: field 'cluster': missing value");
  EXPECT_EQ(load_trace(f.path(), one_workload()).jobs.size(), 2u);
}

TEST(TraceRoles, ColumnRolesParseByName) {
  EXPECT_EQ(parse_column_role("none"), TraceColumnRole::None);
  EXPECT_EQ(parse_column_role("user"), TraceColumnRole::User);
  EXPECT_EQ(parse_column_role("group"), TraceColumnRole::Group);
  EXPECT_EQ(parse_column_role("team"), std::nullopt);
  EXPECT_EQ(to_string(TraceColumnRole::Group), "group");
}

// ---------------------------------------------------------------- in the simulator

// One GPU held by a BE pod since t=0 (2000 s); an LS pod arrives at t=700. With qos levels
// and preemption the BE pod is stopped for it, and the count says which level lost;
// without the option both are level 0 and nothing is preempted.
TEST(TraceRoles, AnLsPodPreemptsABePodOnlyWithQosLevels) {
  TempFile f(kAlibabaHeader +
             "be,1,1,1,1000,,BE,Running,0,2000,0\n"
             "ls,1,1,1,1000,,LS,Running,700,900,700\n");
  const auto catalog = one_workload();
  SimOptions o;
  o.policy_name = "exclusive";
  o.engine = policy_config("exclusive");
  o.cluster = ClusterSpec::uniform(1, 1, 40960);
  o.sim.preemption = true;
  const SimResult on = simulate(catalog, load_trace(f.path(), catalog, qos_on()), o);
  EXPECT_EQ(on.lab.preemptions, 1);
  EXPECT_EQ(on.lab.preempted_by_level, (std::map<int, std::int64_t>{{0, 1}}));
  ASSERT_EQ(on.jobs.size(), 2u);
  EXPECT_EQ(on.jobs[0].attempts.front().outcome, SimOutcome::Preempted);
  EXPECT_LT(on.jobs[1].first_launch - on.jobs[1].submit, 200);  // warned 120 s, saves in 30
  const SimResult off = simulate(catalog, load_trace(f.path(), catalog), o);
  EXPECT_EQ(off.lab.preemptions, 0);
  EXPECT_TRUE(off.lab.preempted_by_level.empty());
  EXPECT_GE(off.jobs[1].first_launch, 2000);  // waits for the BE pod's end
}

}  // namespace
}  // namespace aegis
