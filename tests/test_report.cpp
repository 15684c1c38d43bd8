// The HTML report: every chart is there, OOM attempts are marked, the file is
// self-contained, text is escaped, output is deterministic, and big clusters are capped.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "sched/policies.h"
#include "sim/csv.h"
#include "sim/metrics.h"
#include "sim/report_html.h"
#include "sim/simulator.h"
#include "sim/trace.h"
#include "tests/test_util.h"

namespace aegis {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size())) ++n;
  return n;
}

// The published Philly sample on one 3-GPU server, under three policies.
class ReportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string data = std::string(AEGIS_SOURCE_DIR) + "/data/aegis/";
    const auto catalog = WorkloadCatalog::load(data + "workloads.csv");
    const auto trace = load_aegis_trace(data + "trace_philly.csv", catalog);
    for (const char* policy : {"exclusive", "aegis", "naive"}) {
      SimOptions o;
      o.policy_name = policy;
      o.engine = policy_config(policy);
      o.cluster = ClusterSpec::uniform(1, 3, 40960);
      o.record_timeline = true;
      results_.push_back(simulate(catalog, trace, o));
    }
  }
  static void TearDownTestSuite() { results_.clear(); }

  static std::vector<ReportRun> runs(const std::vector<SimResult>& results) {
    std::vector<ReportRun> out;
    for (const auto& r : results) out.push_back({&r, summarize(r)});
    return out;
  }

  static std::string report(const std::vector<ReportRun>& rs, const std::string& title = "aegis test",
                            const Json& config = Json{{"seed", 1}}) {
    const std::string path = test::temp_path("report_unit.html");
    write_html_report(path, title, rs, config);
    return read_file(path);
  }

  static std::vector<SimResult> results_;
};
std::vector<SimResult> ReportTest::results_;

TEST_F(ReportTest, HasEveryChartPolicyAndFigure) {
  const auto html = report(runs(results_));
  EXPECT_EQ(count(html, R"(<svg class="chart bars")"), 1u);
  EXPECT_EQ(count(html, R"(<svg class="chart cdf")"), 1u);
  EXPECT_EQ(count(html, R"(<svg class="chart queue")"), 1u);
  EXPECT_EQ(count(html, R"(<svg class="chart timeline")"), 3u);  // one per policy
  EXPECT_EQ(count(html, R"(<svg class="chart memory")"), 9u);    // one per GPU and policy
  EXPECT_EQ(count(html, "<details open>"), 2u);                  // the first policy's timeline and memory
  for (const char* policy : {"exclusive", "aegis", "naive"}) EXPECT_NE(html.find(policy), std::string::npos);
  EXPECT_NE(html.find("Normalised to exclusive"), std::string::npos);
  EXPECT_NE(html.find("<pre>{\n  &quot;seed&quot;: 1\n}</pre>"), std::string::npos);
  EXPECT_NE(html.find("60/60"), std::string::npos);  // the table: every job done
  EXPECT_NE(html.find("exclusive: at most 4"), std::string::npos);  // jobs queue: 40-odd wait at the peak
}

TEST_F(ReportTest, MarksOomAttemptsAndCollocation) {
  const auto ms = runs(results_);
  ASSERT_GT(ms[2].metrics.oom_attempts, 0) << "naive should hit OOM on this trace";
  ASSERT_GT(ms[1].metrics.collocated_attempts, 0);
  std::size_t oom_bars = 0;
  for (const auto& r : results_)
    for (const auto& j : r.jobs)
      for (const auto& a : j.attempts)
        if (a.outcome == SimOutcome::Oom) oom_bars += a.gpus.size();
  const auto html = report(ms);
  EXPECT_EQ(count(html, R"(<path class="x")"), oom_bars);
  const auto naive = html.find("<summary>naive:");
  ASSERT_NE(naive, std::string::npos);
  EXPECT_NE(html.find(" oom\"", naive), std::string::npos);
  EXPECT_NE(html.find(", OOM</title>", naive), std::string::npos);
  // Collocated attempts split their GPU's 44 px row (less a 1 px margin each side) in lanes.
  const auto aegis = html.find("<summary>aegis:");
  EXPECT_NE(html.substr(aegis, naive - aegis).find(R"(height="21")"), std::string::npos);
}

TEST_F(ReportTest, IsSelfContained) {
  auto html = report(runs(results_));
  // Namespace URIs name a vocabulary; nothing is fetched from them.
  for (const std::string ns : {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xhtml"})
    for (auto p = html.find(ns); p != std::string::npos; p = html.find(ns)) html.erase(p, ns.size());
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_NE(html.find("Content-Security-Policy"), std::string::npos);
}

TEST_F(ReportTest, EscapesText) {
  auto copy = results_;
  copy[0].trace = copy[1].trace = copy[2].trace = "a<b & \"c\"";
  copy[1].jobs[0].workload = "<w>";
  const auto html = report(runs(copy), "t<1>", Json{{"note", "</pre><script>"}});
  EXPECT_NE(html.find("a&lt;b &amp; &quot;c&quot;"), std::string::npos);
  EXPECT_EQ(html.find("a<b"), std::string::npos);
  EXPECT_NE(html.find("<title>t&lt;1&gt;</title>"), std::string::npos);
  EXPECT_NE(html.find("&lt;w&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<w>"), std::string::npos);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
}

TEST_F(ReportTest, IsDeterministic) {
  const auto a = report(runs(results_));
  const auto b = report(runs(results_));
  EXPECT_EQ(a, b);
}

TEST_F(ReportTest, NormalisesToTheFirstPolicyWithoutExclusive) {
  const std::vector<SimResult> two(results_.begin() + 1, results_.end());
  const auto html = report(runs(two));
  EXPECT_NE(html.find("No exclusive run on this trace: normalised to aegis, the first policy"), std::string::npos);
}

TEST_F(ReportTest, GroupsRunsByTrace) {
  auto copy = results_;
  copy.push_back(results_[0]);
  copy.back().trace = "other";
  const auto html = report(runs(copy));
  EXPECT_EQ(count(html, "<section id=\"trace-"), 2u);
  EXPECT_EQ(count(html, R"(<svg class="chart bars")"), 2u);
  EXPECT_NE(html.find("<h2>Trace other</h2>"), std::string::npos);
}

TEST_F(ReportTest, UnwritablePathThrows) {
  const std::string path = "/nonexistent-dir/report.html";
  try {
    write_html_report(path, "t", runs(results_), Json::object());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": cannot write file");
  }
}

// The fixture that sets up the browser check (tests/CMakeLists.txt: ctest runs this case as
// `report_sample`, and `report_browser` opens the file it leaves at AEGIS_REPORT_SAMPLE in
// headless Chromium). The file is the very report the cases above check.
TEST_F(ReportTest, WritesSampleForBrowserCheck) {
  const std::string path = AEGIS_REPORT_SAMPLE;
  std::remove(path.c_str());  // never leave the browser an older run's file
  const std::string title = "aegis report test: trace_philly, 3 x 40960 MiB";
  write_html_report(path, title, runs(results_), Json{{"seed", 1}});
  std::cout << "report written to " << path << "\n";
  EXPECT_EQ(read_file(path), report(runs(results_), title));
}

// A made-up run on 100 GPUs with more attempts than the timeline draws (one job in
// `oom_every` first dies of OOM), and a queue with one short spike among many points.
SimResult big_run(int oom_every) {
  SimResult r;
  r.policy = "aegis";
  r.trace = "big";
  constexpr int gpus = 100, jobs = 40000;
  r.gpu_total_mib.assign(gpus, 40960);
  r.gpu_server.assign(gpus, 0);
  r.gpu_timeline.resize(gpus);
  for (int i = 0; i < jobs; ++i) {
    JobRecord j;
    j.trace_index = i;
    j.workload = "w";
    j.submit = i;
    j.first_launch = i + 1;
    AttemptRecord a;
    a.launch = j.first_launch;
    a.end = a.launch + 100 + i % 50;
    a.gpus = {i % gpus};
    if (i % oom_every == 0) {
      a.outcome = SimOutcome::Oom;
      j.attempts.push_back(a);
      a.launch = a.end + 1;
      a.end = a.launch + 100;
      a.outcome = SimOutcome::Completed;
    }
    j.attempts.push_back(a);
    j.end = a.end;
    j.completed = true;
    r.end = std::max(r.end, j.end);
    r.jobs.push_back(j);
    r.gpu_timeline[static_cast<std::size_t>(i % gpus)].push_back({a.launch, 1000 + i % 7, 0.5, 1});
  }
  for (int k = 0; k < 100000; ++k) r.queue_timeline.push_back({k * 0.4, k == 54321 ? 999 : 3});
  return r;
}

TEST(ReportBig, CapsTimelineAndKeepsPeaks) {
  const SimResult r = big_run(1000);
  const std::string path = test::temp_path("report_big.html");
  write_html_report(path, "big", {{&r, summarize(r)}}, Json::object());
  const auto html = read_file(path);
  EXPECT_EQ(count(html, "<rect class=\"j"), 20000u);
  EXPECT_NE(html.find("Showing the first 64 of 100 GPUs."), std::string::npos);
  EXPECT_NE(html.find("5640 of 25640 bars are not drawn"), std::string::npos);
  EXPECT_EQ(count(html, R"(<path class="x")"), 40u);  // every OOM attempt is kept
  EXPECT_EQ(count(html, R"(<svg class="chart memory")"), 1u);  // the cluster total
  EXPECT_NE(html.find("aegis: at most 999 waiting"), std::string::npos);  // the spike survives downsampling
  const auto queue = html.find(R"(<svg class="chart queue")");
  const auto path_start = html.find("<path class=\"line\"", queue);
  const auto path_end = html.find("</path>", path_start);
  EXPECT_LE(count(html.substr(path_start, path_end - path_start), "H"), 2001u);
  EXPECT_LT(html.size(), 5u << 20);
}

TEST(ReportBig, KeepsAQuarterOfTheCapForOomAttempts) {
  const SimResult r = big_run(1);  // 25,600 OOM and 25,600 completed attempts on the first 64 GPUs
  const std::string path = test::temp_path("report_oom.html");
  write_html_report(path, "oom", {{&r, summarize(r)}}, Json::object());
  const auto html = read_file(path);
  EXPECT_EQ(count(html, "<rect class=\"j"), 20000u);
  EXPECT_EQ(count(html, R"(<path class="x")"), 5000u);
  EXPECT_NE(html.find("31200 of 51200 bars are not drawn, to keep the file small: the shortest, 10600 other attempts "
                      "of at most"),
            std::string::npos);
  EXPECT_NE(html.find("and 20600 OOM attempts of at most"), std::string::npos);
}

}  // namespace
}  // namespace aegis

