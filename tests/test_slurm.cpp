// The Slurm adapter's pure parts: GPU memory as a byte-counted GRES, scontrol job records,
// and the give-back plan. The real daemons are exercised by tests/slurm/test_slurm.py.
#include <gtest/gtest.h>

#include "runtime/slurm/give_back.h"
#include "runtime/slurm/gres.h"
#include "runtime/slurm/job_record.h"

namespace aegis::slurm {
namespace {

TEST(SlurmGres, CountsUseSlurmsPowersOf1024) {
  EXPECT_EQ(parse_count("4096"), 4096u);
  EXPECT_EQ(parse_count("12G"), 12ull << 30);
  EXPECT_EQ(parse_count("12000M"), 12000ull << 20);
  EXPECT_EQ(parse_count("1k"), 1024u);
  EXPECT_EQ(parse_count("2T"), 2ull << 40);
  EXPECT_FALSE(parse_count(""));
  EXPECT_FALSE(parse_count("1.5G"));  // Slurm takes no fractions
  EXPECT_FALSE(parse_count("12GB"));
  EXPECT_FALSE(parse_count("G"));
  EXPECT_FALSE(parse_count("-1"));
  EXPECT_FALSE(parse_count("99999999999999999999"));
  EXPECT_FALSE(parse_count("20000P"));  // past 2^64 bytes
  EXPECT_EQ(mib_count(40960), "40960M");
  EXPECT_EQ(parse_count(mib_count(40960)), 40960ull << 20);
}

TEST(SlurmGres, ReadsTresPerNodeAndTresForms) {
  auto l = parse_gres_list("gres:gpu:a100:1,gres:aegis_mem:12G");
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].name, "gpu");
  EXPECT_EQ(l[0].type, "a100");
  EXPECT_EQ(l[0].count, "1");
  EXPECT_EQ(l[1].name, "aegis_mem");
  EXPECT_EQ(l[1].type, "");
  EXPECT_EQ(l[1].count, "12G");
  EXPECT_EQ(booked_mib(l, "aegis_mem"), 12288);
  EXPECT_FALSE(booked_mib(l, "shard"));
  EXPECT_EQ(booked_mib(parse_gres_list("gres/aegis_mem=12582912000"), "aegis_mem"), 12000);
  EXPECT_EQ(booked_mib(parse_gres_list("aegis_mem:8000M"), "aegis_mem"), 8000);
  EXPECT_EQ(parse_gres_list("gres:shard").at(0).count, "1");
  EXPECT_TRUE(parse_gres_list("(null)").empty());
  EXPECT_TRUE(parse_gres_list("").empty());
  // Below a MiB rounds down.
  EXPECT_EQ(booked_mib(parse_gres_list("aegis_mem:1000"), "aegis_mem"), 0);
}

TEST(SlurmGres, SetsOneCountAndKeepsTheRest) {
  const auto l = parse_gres_list("gres:gpu:a100:1,gres:aegis_mem:12G");
  EXPECT_EQ(with_count(l, "aegis_mem", "40960M"), "gpu:a100:1,aegis_mem:40960M");
  EXPECT_EQ(with_count(parse_gres_list("gres:gpu:1"), "aegis_mem", "40960M"), "gpu:1,aegis_mem:40960M");
  EXPECT_EQ(with_count({}, "aegis_mem", "1M"), "aegis_mem:1M");
}

constexpr const char* kRunning =
    "JobId=23 JobName=wrap UserId=ann(1000) GroupId=ann(1000) MCS_label=N/A Priority=4294901737 Nice=0 "
    "Account=root QOS=normal JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 "
    "Reboot=0 ExitCode=0:0 Partition=gpu AllocNode:Sid=localhost:1256 ReqNodeList=(null) ExcNodeList=(null) "
    "NodeList=n1 BatchHost=n1 NumNodes=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
    "TRES=cpu=1,mem=100M,node=1,billing=1,gres/aegis_mem=4294967296 WorkDir=/home/ann/my job "
    "Comment=two words  StdErr=/tmp/x.out TresPerNode=gres:aegis_mem:4G \n";

TEST(SlurmJobRecord, ReadsTheFieldsAegisUses) {
  const auto r = parse_job_record(kRunning);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->id, "23");
  ASSERT_TRUE(r->uid);
  EXPECT_EQ(*r->uid, 1000u);
  EXPECT_EQ(r->state, "RUNNING");
  EXPECT_EQ(r->partition, "gpu");
  EXPECT_EQ(r->nodes, "n1");
  EXPECT_EQ(r->excluded_nodes, "");
  EXPECT_EQ(r->tres_per_node, "gres:aegis_mem:4G");
  EXPECT_TRUE(r->requeue_allowed);
  EXPECT_EQ(r->restarts, 0);
  // Values with spaces stay whole; keys with punctuation are keys.
  EXPECT_EQ(r->fields.at("WorkDir"), "/home/ann/my job");
  EXPECT_EQ(r->fields.at("Comment"), "two words");
  EXPECT_EQ(r->fields.at("AllocNode:Sid"), "localhost:1256");
  EXPECT_EQ(r->fields.at("CPUs/Task"), "1");
}

TEST(SlurmJobRecord, RejectsWhatIsNotAJob) {
  EXPECT_FALSE(parse_job_record(""));
  EXPECT_FALSE(parse_job_record("slurm_load_jobs error: Invalid job id specified"));
  const auto r = parse_job_record("JobId=7 Requeue=0 Restarts=2 ExcNodeList=n[1-2] UserId=nobody");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->requeue_allowed);
  EXPECT_EQ(r->restarts, 2);
  EXPECT_EQ(r->excluded_nodes, "n[1-2]");
  EXPECT_FALSE(r->uid);
}

GiveBackInput waiting_on_n1() {
  GiveBackInput in;
  in.job = *parse_job_record(kRunning);
  in.comment = "";
  in.this_node = "n1";
  in.partition_nodes = {"n1", "n2", "n3"};
  in.whole_gpu_mib = 40960;
  in.gpus = 1;
  in.oom_count = 2;
  return in;
}

TEST(SlurmGiveBack, BooksAWholeGpuAwayFromThisNodeAndMarksTheJob) {
  const auto p = plan_give_back(waiting_on_n1());
  ASSERT_TRUE(p.go) << p.why_not;
  EXPECT_EQ(p.gres, "aegis_mem:40960M");
  EXPECT_EQ(p.exclude, "n1");
  EXPECT_TRUE(marked_alone(p.comment));
  EXPECT_EQ(p.comment, "aegis:alone (2 OOMs, then waited alone on n1)");
}

TEST(SlurmGiveBack, MultiGpuJobsBookEachGpuAndCommentsAreKept) {
  auto in = waiting_on_n1();
  in.gpus = 2;
  in.comment = "ann's sweep";
  const auto p = plan_give_back(in);
  ASSERT_TRUE(p.go);
  EXPECT_EQ(p.gres, "aegis_mem:81920M");
  EXPECT_EQ(p.comment.rfind("ann's sweep; aegis:alone", 0), 0u) << p.comment;
  // A second give-back keeps the one marker.
  in.comment = p.comment;
  EXPECT_EQ(plan_give_back(in).comment, p.comment);
}

TEST(SlurmGiveBack, ExclusionsAccumulateUntilNoNodeIsLeft) {
  auto in = waiting_on_n1();
  in.this_node = "n2";
  in.excluded = {"n1"};
  auto p = plan_give_back(in);
  ASSERT_TRUE(p.go);
  EXPECT_EQ(p.exclude, "n1,n2");
  in.this_node = "n3";
  in.excluded = {"n1", "n2"};
  p = plan_give_back(in);
  EXPECT_FALSE(p.go);
  EXPECT_NE(p.why_not.find("no node it has not waited on"), std::string::npos) << p.why_not;
  // One node alone: it waits there (its aegisd drains a GPU for it).
  in = waiting_on_n1();
  in.partition_nodes = {"n1"};
  EXPECT_FALSE(plan_give_back(in).go);
}

TEST(SlurmGiveBack, NotForJobsSlurmWillNotRequeue) {
  auto in = waiting_on_n1();
  in.job.requeue_allowed = false;
  const auto p = plan_give_back(in);
  EXPECT_FALSE(p.go);
  EXPECT_NE(p.why_not.find("--no-requeue"), std::string::npos);
}

}  // namespace
}  // namespace aegis::slurm
