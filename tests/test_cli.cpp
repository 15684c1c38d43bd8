// The `aegis` command line as users and the acceptance checks call it.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/wait.h>

#include "tests/test_util.h"

namespace {

const std::string kSrc = AEGIS_SOURCE_DIR;

struct Result {
  int rc = -1;
  std::string out;  // stdout and stderr together
};

Result run(const std::string& args) {
  const std::string cmd = "cd '" + kSrc + "' && '" + AEGIS_CLI + "' " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  while (std::size_t n = fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string tmp(const std::string& name) { return aegis::test::temp_path(name); }

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

const std::string kAcceptance =
    "sim --workloads data/aegis/workloads.csv --trace data/aegis/trace_philly.csv --gpus 3 --gpu-memory 40960 "
    "--policies exclusive,aegis,lucid,horus";

TEST(Cli, AcceptanceCommandWritesTableAndJson) {
  const auto r = run(kAcceptance + " --json " + tmp("a.json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("makespan"), std::string::npos);
  const auto j = nlohmann::json::parse(slurp(tmp("a.json")));
  ASSERT_TRUE(j.contains("config"));
  EXPECT_EQ(j["config"]["seed"], 1);
  EXPECT_EQ(j["config"]["policies"]["aegis"]["engine"]["smact_threshold"], 0.65);
  EXPECT_TRUE(j["config"]["sim"].contains("interference_util_coeff"));
  ASSERT_EQ(j["results"].size(), 4u);
  for (const auto& res : j["results"]) {
    for (const char* k : {"policy", "jobs", "completed", "makespan_s", "jct_mean_s", "jct_p95_s", "queue_mean_s",
                          "exec_total_s", "failed_attempts", "oom_attempts", "slowdown_max", "energy_j"})
      EXPECT_TRUE(res.contains(k)) << k;
    EXPECT_EQ(res["jobs"], 60);
    EXPECT_EQ(res["completed"], 60);
  }
  EXPECT_EQ(j["results"][1]["policy"], "aegis");
}

TEST(Cli, SameSeedSameBytes) {
  ASSERT_EQ(run(kAcceptance + " --seed 5 --json " + tmp("s1.json")).rc, 0);
  ASSERT_EQ(run(kAcceptance + " --seed 5 --json " + tmp("s2.json")).rc, 0);
  ASSERT_EQ(run(kAcceptance + " --seed 6 --json " + tmp("s3.json")).rc, 0);
  EXPECT_EQ(slurp(tmp("s1.json")), slurp(tmp("s2.json")));
  EXPECT_NE(slurp(tmp("s1.json")), slurp(tmp("s3.json")));
}

TEST(Cli, MissingFile) {
  const auto r = run("sim --trace data/aegis/nosuch.csv");
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.out, "aegis: error: data/aegis/nosuch.csv: cannot open file\n");
}

TEST(Cli, UnknownWorkloadNamesFileLineAndField) {
  std::ofstream(tmp("t1.csv")) << "job_index,submit_time_s,workload_name,num_gpus\n0,0,mnist_bs32_1gpu,1\n1,3,gpt5_1gpu,1\n";
  const auto r = run("sim --trace " + tmp("t1.csv"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find(tmp("t1.csv") + ":3: field 'workload_name': unknown workload 'gpt5_1gpu'"), std::string::npos)
      << r.out;
}

TEST(Cli, MalformedLine) {
  std::ofstream(tmp("t2.csv")) << "job_index,submit_time_s,workload_name,num_gpus\n0,0,mnist_bs32_1gpu,1\n1,soon,mnist_bs32_1gpu,1\n";
  const auto r = run("sim --trace " + tmp("t2.csv"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find(":3: field 'submit_time_s': expected a number, got 'soon'"), std::string::npos) << r.out;
}

TEST(Cli, JobNeedingMoreGpusThanExist) {
  const auto r = run("sim --trace data/aegis/trace_philly.csv --gpus 1 --policies aegis");
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("field 'num_gpus'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("needs 2 GPUs; the simulated cluster has 1"), std::string::npos) << r.out;
}

TEST(Cli, BadPolicyAndBadOverride) {
  auto r = run("sim --trace data/aegis/trace_philly.csv --policies aegis,gandiva");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("unknown policy 'gandiva'"), std::string::npos) << r.out;
  r = run("sim --trace data/aegis/trace_philly.csv --set smact_threshold=lots");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.out, "aegis: error: smact_threshold: expected a number, got 'lots'\n");
  r = run("sim --trace data/aegis/trace_philly.csv --gpus 0");
  EXPECT_EQ(r.rc, 2);
}

TEST(Cli, OverridesChangeResultsAndAreRecorded) {
  ASSERT_EQ(run(kAcceptance + " --set observation_window_s=120 --set lucid.max_jobs_per_gpu=1 --json " + tmp("o.json")).rc, 0);
  const auto j = nlohmann::json::parse(slurp(tmp("o.json")));
  EXPECT_EQ(j["config"]["policies"]["aegis"]["engine"]["observation_window_s"], 120);
  EXPECT_EQ(j["config"]["policies"]["lucid"]["engine"]["max_jobs_per_gpu"], 1);
  EXPECT_EQ(j["config"]["policies"]["horus"]["engine"]["max_jobs_per_gpu"], 0);
}

// A gang job preempts in `aegis sim` (issue 32): a Philly trace with a `priority` column,
// three full 8-GPU servers of level-0 jobs (server 0's the oldest) and a level-1 16-GPU job
// at t=1000. With preemption it stops the 16 jobs of servers 1-2 and starts at once
// (queue wait under 100 s); without, it waits for them to end (t=5000 and later).
TEST(Cli, SimPreemptionStopsWholeServersForAGangJob) {
  const std::string trace = tmp("gang_priority.csv");
  {
    std::ofstream f(trace);
    f << "timestamp,duration,num_gpus,priority\n";
    for (int i = 0; i < 24; ++i) {
      const int t = 100 * (i / 8) + i % 8;
      f << fmt::format("2017-10-03 00:{:02}:{:02},5000,1,\n", t / 60, t % 60);
    }
    f << "2017-10-03 00:16:40,500,16,1\n";
  }
  const std::string base = "sim --workloads data/aegis/workloads.csv --trace " + trace +
                           " --servers 3 --gpus-per-server 8 --gpu-memory 40960 --policies exclusive "
                           "--set preempt_exempt_s=0 --jobs-csv " + tmp("gang_jobs.csv") + " --json " +
                           tmp("gang.json");
  // The gang job's (job_index 24) queue wait, from --jobs-csv (first_launch_s - submit_s).
  auto gang_wait = [&] {
    std::istringstream rows(slurp(tmp("gang_jobs.csv")));
    std::string line;
    while (std::getline(rows, line)) {
      std::vector<std::string> f;
      std::istringstream fields(line);
      for (std::string x; std::getline(fields, x, ',');) f.push_back(x);
      if (f.size() > 6 && f[2] == "24") return std::stod(f[6]) - std::stod(f[5]);
    }
    return -1.0;
  };
  const auto on = run(base + " --set sim.preemption=true");
  ASSERT_EQ(on.rc, 0) << on.out;
  EXPECT_NE(on.out.find("preemptions: 16"), std::string::npos) << on.out;
  auto j = nlohmann::json::parse(slurp(tmp("gang.json")));
  EXPECT_EQ(j["results"][0]["preemptions"], 16);
  EXPECT_GE(gang_wait(), 0);
  EXPECT_LT(gang_wait(), 100);
  const auto off = run(base);
  ASSERT_EQ(off.rc, 0) << off.out;
  j = nlohmann::json::parse(slurp(tmp("gang.json")));
  EXPECT_FALSE(j["results"][0].contains("preemptions"));
  EXPECT_GE(gang_wait(), 4000);
}

TEST(Cli, HelpConfigPolicies) {
  EXPECT_EQ(run("--help").rc, 0);
  EXPECT_NE(run("sim --help").out.find("--gpu-memory"), std::string::npos);
  const auto c = run("config --policy carma");
  EXPECT_EQ(c.rc, 0);
  EXPECT_NE(c.out.find("smact_threshold"), std::string::npos);
  EXPECT_NE(c.out.find("0.8"), std::string::npos);
  const auto p = run("policies");
  EXPECT_EQ(p.rc, 0);
  EXPECT_NE(p.out.find("observing > pressure | magm | ladder"), std::string::npos) << p.out;
}

}  // namespace

namespace {

TEST(Cli, PhillyCrossCheckWithOtherSimulators) {
  // First 10,000 Philly jobs by submit time, 64 x 8 GPUs, strict-FIFO exclusive: three
  // public simulators give a makespan of 5,944,538 s and a mean queueing delay between
  // 318,527 and 331,343 s depending on how they consolidate multi-GPU jobs.
  const auto r = run("sim --trace data/traces/philly/philly_jobs.csv --max-jobs 10000 --servers 64 "
                     "--gpus-per-server 8 --policies exclusive --json " + tmp("x.json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(slurp(tmp("x.json")));
  const auto& res = j["results"][0];
  EXPECT_EQ(res["completed"], 10000);
  EXPECT_DOUBLE_EQ(res["makespan_s"].get<double>(), 5944538.0);
  EXPECT_GE(res["queue_mean_s"].get<double>(), 318527.0);
  EXPECT_LE(res["queue_mean_s"].get<double>(), 331343.0);
  EXPECT_EQ(j["config"]["cluster"]["gpus"], 512);
  EXPECT_EQ(j["config"]["traces"][0]["format"], "philly");
  EXPECT_FALSE(j["config"]["traces"][0]["mapping"].get<std::string>().empty());
}

TEST(Cli, ClusterOptionsAndTheirErrors) {
  auto r = run("sim --trace data/aegis/trace_venus.csv --gpu-memory 1x2x40960,1x2x81920 --policies aegis --json " +
               tmp("c.json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("1 x 2 x 40960 MiB + 1 x 2 x 81920 MiB"), std::string::npos) << r.out;
  r = run("sim --trace data/aegis/trace_venus.csv --gpu-memory 2x8 --policies aegis");
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.out, "aegis: error: --gpu-memory: '2x8' is not SERVERSxGPUSxMIB (e.g. 4x8x81920)\n");
  r = run("sim --trace data/aegis/trace_venus.csv --gpus 3 --servers 2");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("--gpus is for one server"), std::string::npos) << r.out;
  r = run("sim --trace data/aegis/trace_venus.csv --trace-format parquet");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("--trace-format: 'parquet' is not one of aegis, philly, alibaba"), std::string::npos);
  r = run("sim --trace data/aegis/trace_venus.csv --load 0");
  EXPECT_EQ(r.rc, 2);
}

TEST(Cli, LoadCompressesArrivals) {
  ASSERT_EQ(run("sim --trace data/aegis/trace_venus.csv --policies exclusive --load 2 --mapping " + tmp("m2.csv")).rc, 0);
  ASSERT_EQ(run("sim --trace data/aegis/trace_venus.csv --policies exclusive --mapping " + tmp("m1.csv")).rc, 0);
  auto last_submit = [](const std::string& csv) {
    const auto line = csv.substr(csv.rfind('\n', csv.size() - 2) + 1);
    return std::stod(line.substr(line.find(',', line.find(',', line.find(',') + 1) + 1) + 1));
  };
  EXPECT_NEAR(last_submit(slurp(tmp("m2.csv"))) * 2, last_submit(slurp(tmp("m1.csv"))), 1e-6);
}

TEST(Cli, SweepWritesOneRowPerPointPolicyAndTrace) {
  const auto r = run("sim --trace data/aegis/trace_venus.csv --trace data/aegis/trace_saturn.csv "
                     "--policies exclusive,aegis --sweep smact=0.5:0.6:0.05,smocc=0.3:0.4:0.1 --sweep-csv " +
                     tmp("sw.csv"));
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto csv = slurp(tmp("sw.csv"));
  EXPECT_EQ(lines(csv), 1 + 3 * 2 * 2 * 2);  // header + 6 points x 2 policies x 2 traces
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "smact_threshold,smocc_threshold,policy,trace,makespan_s,makespan_vs_exclusive,jct_mean_s,jct_p95_s,"
            "queue_mean_s,exec_total_s,oom_attempts,failed_attempts,slowdown_mean,slowdown_max,energy_j");
  EXPECT_NE(r.out.find("makespan/excl"), std::string::npos);
  // Progress bars are for terminals: nothing on a pipe.
  EXPECT_EQ(r.out.find('\r'), std::string::npos);
  for (const char* bad : {"smact=0.8:0.5:0.05", "smact=0.5:0.8", "nosuch=1:2:1", "smact=a:b:c", "smact=0.5:0.6:0"})
    EXPECT_EQ(run(std::string("sim --trace data/aegis/trace_venus.csv --sweep ") + bad).rc, 2) << bad;
}

}  // namespace

// --- --sharing ----------------------------------------------------------------------------

namespace sharing {

const std::string kVenus = "sim --trace data/aegis/trace_venus.csv --gpus 3 --gpu-memory 40960 --policies aegis ";

nlohmann::json sim_json(const std::string& sharing, const std::string& name) {
  const auto r = run(kVenus + "--sharing " + sharing + " --json " + tmp(name));
  EXPECT_EQ(r.rc, 0) << r.out;
  return r.rc == 0 ? nlohmann::json::parse(slurp(tmp(name))) : nlohmann::json::object();
}

}  // namespace sharing

TEST(Cli, SharingMpsWithAndWithoutLimitsIsRecordedAndChangesResults) {
  const auto process = sharing::sim_json("process", "sh_p.json");
  const auto mps = sharing::sim_json("mps", "sh_m.json");
  const auto nolimits = sharing::sim_json("mps-nolimits", "sh_n.json");
  ASSERT_FALSE(process.empty() || mps.empty() || nolimits.empty());
  EXPECT_EQ(mps["config"]["sim"]["sharing"], "mps");
  EXPECT_EQ(mps["config"]["sim"]["mps_memory_limits"], true);
  EXPECT_EQ(nolimits["config"]["sim"]["sharing"], "mps");
  EXPECT_EQ(nolimits["config"]["sim"]["mps_memory_limits"], false);
  EXPECT_EQ(process["config"]["sim"]["sharing"], "process");
  // MPS runs co-located kernels side by side instead of time slicing them: other timings.
  EXPECT_NE(process["results"][0]["makespan_s"], mps["results"][0]["makespan_s"]);
  for (const auto* j : {&process, &mps, &nolimits}) EXPECT_EQ((*j)["results"][0]["completed"], (*j)["results"][0]["jobs"]);
  const auto bad = run(sharing::kVenus + "--sharing mpx");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.out.find("--sharing: 'mpx' is not process, mps, mps-nolimits or mig:LAYOUT"), std::string::npos)
      << bad.out;
}

TEST(Cli, SharingMigCutsGpusByTheModelsTable) {
  const auto j = sharing::sim_json("mig:3g.20gb,2g.10gb,1g.5gb,1g.5gb", "sh_mig.json");
  ASSERT_FALSE(j.empty());
  EXPECT_EQ(j["config"]["cluster"]["gpus"], 12);
  EXPECT_EQ(j["config"]["cluster"]["describe"].get<std::string>().rfind("1 server(s), 12 MIG instances (3g.20gb,2g.10gb,", 0),
            0u)
      << j["config"]["cluster"]["describe"];
  EXPECT_GT(j["results"][0]["completed"], 0);
  // 80 GB GPUs are A100-80GB ones: their profiles, not the 40 GB ones.
  auto r = run("sim --trace data/aegis/trace_venus.csv --gpus 2 --gpu-memory 81920 --policies aegis "
               "--sharing mig:3g.40gb,4g.40gb");
  EXPECT_EQ(r.rc, 0) << r.out;
  // Refused, one line each: a layout NVIDIA refuses, a profile of another model, a GPU
  // of no MIG-capable model.
  const std::pair<std::string, std::string> bad[] = {
      {"--gpu-memory 40960 --sharing mig:3g.20gb,3g.20gb,1g.5gb",
       "aegis: error: --sharing mig: no placement of its instances fits the 8 memory slices of an A100-40GB "
       "(nvidia-smi mig -lgipp)\n"},
      {"--gpu-memory 40960 --sharing mig:3g.40gb", "'3g.40gb' is not a MIG profile of the A100-40GB"},
      {"--gpu-memory 40000 --sharing mig:1g.5gb", "a GPU of 40000 MiB is no MIG-capable model aegis knows"},
      {"--gpu-memory 40960 --sharing mig:3g.20", "'3g.20' is not a MIG profile of the A100-40GB"},
  };
  for (const auto& [args, why] : bad) {
    r = run("sim --trace data/aegis/trace_venus.csv --gpus 3 --policies aegis " + args);
    EXPECT_NE(r.rc, 0) << args;
    EXPECT_NE(r.out.find(why), std::string::npos) << r.out;
    EXPECT_EQ(lines(r.out), 1) << r.out;
  }
}

// Issue 32 in the production readers (docs/traces.md): the options are recorded only when
// given, reach the run (preemptions by level, per-user shares) and refuse bad values.
TEST(Cli, TraceRoleOptionsAreRecordedReachTheRunAndRefuseBadValues) {
  const std::string alibaba = "sim --trace data/traces/alibaba-gpu-2023/openb_pod_list_default.csv --gpu-memory "
                              "1x8x40960,1x8x81920 --load 0.5 --policies exclusive --set sim.preemption=true --json ";
  auto r = run(alibaba + tmp("qos.json") + " --alibaba-qos-priority");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("(stopped: level "), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(slurp(tmp("qos.json")));
  EXPECT_EQ(j["config"]["trace_options"]["alibaba_qos_priority"], true);
  EXPECT_FALSE(j["results"][0]["preempted_by_level"].empty());
  r = run(alibaba + tmp("noqos.json"));  // every pod level 0: nothing to preempt
  ASSERT_EQ(r.rc, 0) << r.out;
  j = nlohmann::json::parse(slurp(tmp("noqos.json")));
  EXPECT_FALSE(j["config"]["trace_options"].contains("alibaba_qos_priority"));
  EXPECT_EQ(j["results"][0]["preemptions"], 0);

  const std::string philly = "sim --trace data/traces/philly/philly_jobs.csv --max-jobs 300 --servers 2 "
                             "--gpus-per-server 8 --policies exclusive ";
  r = run(philly + "--philly-cluster-as user --json " + tmp("vc.json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("user GPU shares: "), std::string::npos) << r.out;
  j = nlohmann::json::parse(slurp(tmp("vc.json")));
  EXPECT_EQ(j["config"]["trace_options"]["philly_cluster_as"], "user");
  EXPECT_TRUE(j["results"][0]["user_shares"].contains("6214e9"));
  r = run(philly + "--philly-cluster-as team");
  EXPECT_EQ(r.out, "aegis: error: --philly-cluster-as: 'team' is not one of none, user, group\n");
  r = run(philly + "--alibaba-qos-priority");
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("--alibaba-qos-priority: applies to alibaba traces only, this one is philly"), std::string::npos);
}
