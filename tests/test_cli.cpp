// The `aegis` command line as users and the acceptance checks call it.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/wait.h>

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

std::string tmp(const std::string& name) { return ::testing::TempDir() + "aegis_cli_" + name; }

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
