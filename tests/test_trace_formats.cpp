// Production trace formats (detection, Philly, Alibaba 2023), shaping, and the mapping of
// their jobs to profiled workloads.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <set>

#include "tests/test_util.h"
#include "sim/csv.h"
#include "sim/trace.h"
#include "sim/trace_formats.h"
#include "sim/workload_mapping.h"

namespace aegis {
namespace {

using test::error_of;
using test::TempFile;

const std::string kData = std::string(AEGIS_SOURCE_DIR) + "/data/";
const std::string kPhillyHeader = "timestamp,duration,num_gpus,gpu_time,cluster\n";
const std::string kAlibabaHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n";

WorkloadProfile workload(const std::string& name, int gpus, Seconds runtime, double util) {
  WorkloadProfile w;
  w.name = name;
  w.num_gpus = gpus;
  w.peak_mib = 1000;
  w.util = util;
  w.solo_runtime_s = runtime;
  return w;
}

// 1-GPU workloads named so that their runtime order differs from their name order, two
// 2-GPU ones, and one that cannot be simulated (never to be borrowed).
WorkloadCatalog small_catalog() {
  WorkloadCatalog c;
  c.add(workload("w1_d", 1, 100, 0.2));
  c.add(workload("w1_c", 1, 200, 0.5));
  c.add(workload("w1_b", 1, 300, 0.9));
  c.add(workload("w1_a", 1, 400, 0.3));
  c.add(workload("w2_y", 2, 1000, 0.8));
  c.add(workload("w2_x", 2, 2000, 0.7));
  WorkloadProfile broken = workload("w1_broken", 1, 50, 0.1);
  broken.problem = "no solo_runtime_s";
  c.add(broken);
  return c;
}

TraceJob job(std::int64_t index, int gpus, Seconds duration, double fraction = 1.0) {
  TraceJob j;
  j.index = index;
  j.num_gpus = static_cast<std::int16_t>(gpus);
  j.duration_s = duration;
  j.gpu_fraction = fraction;
  j.line = static_cast<std::uint32_t>(index) + 1;
  return j;
}

std::map<std::int64_t, std::string> by_index(const std::vector<TraceJob>& jobs) {
  std::map<std::int64_t, std::string> m;
  for (const auto& j : jobs) m[j.index] = j.workload;
  return m;
}

TraceOptions with_format(TraceFormat f) {
  TraceOptions o;
  o.format = f;
  return o;
}

// ---------------------------------------------------------------- detection

TEST(TraceFormats, DetectsEachFormatFromItsHeader) {
  using H = std::vector<std::string>;
  EXPECT_EQ(detect_trace_format(H{"job_index", "submit_time_s", "workload_name", "num_gpus"}), TraceFormat::Aegis);
  EXPECT_EQ(detect_trace_format(H{"timestamp", "duration", "num_gpus", "gpu_time", "cluster"}), TraceFormat::Philly);
  EXPECT_EQ(detect_trace_format(H{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos",
                                  "pod_phase", "creation_time", "deletion_time", "scheduled_time"}),
            TraceFormat::Alibaba);
  EXPECT_EQ(detect_trace_format(H{"timestamp", "duration"}), std::nullopt);  // num_gpus missing
  EXPECT_EQ(detect_trace_format(H{"a", "b"}), std::nullopt);
  EXPECT_EQ(detect_trace_format(H{"job_index", "submit_time_s", "workload_name", "num_gpus", "timestamp", "duration"}),
            std::nullopt);  // both aegis and philly
}

TEST(TraceFormats, LoadTraceDetectsOrAsksForTheFormat) {
  const auto catalog = small_catalog();
  TempFile philly(kPhillyHeader + "2017-10-09 07:01:55,66.0,1,66.0,c1\n");
  EXPECT_EQ(load_trace(philly.path(), catalog).format, TraceFormat::Philly);
  TempFile alibaba(kAlibabaHeader + "p0,1000,100,1,1000,,LS,Running,5,50,10\n");
  EXPECT_EQ(load_trace(alibaba.path(), catalog).format, TraceFormat::Alibaba);

  TempFile ambiguous("job_index,submit_time_s,workload_name,num_gpus,timestamp,duration\n"
                    "0,0,w1_a,1,2017-10-09 07:01:55,66\n");
  const std::string e = error_of([&] { load_trace(ambiguous.path(), catalog); });
  EXPECT_EQ(e.rfind(ambiguous.path() + ":1: ", 0), 0u) << e;
  EXPECT_NE(e.find("use --trace-format"), std::string::npos) << e;
  // Naming the format resolves it.
  EXPECT_EQ(load_trace(ambiguous.path(), catalog, with_format(TraceFormat::Philly)).jobs.size(), 1u);

  TempFile unknown("a,b\n1,2\n");
  EXPECT_NE(error_of([&] { load_trace(unknown.path(), catalog); }).find("use --trace-format"), std::string::npos);
}

TEST(TraceFormats, ForcedFormatStillNeedsItsColumns) {
  TempFile f("timestamp,num_gpus\n2017-10-09 07:01:55,1\n");
  EXPECT_EQ(error_of([&] { load_trace(f.path(), small_catalog(), with_format(TraceFormat::Philly)); }),
            f.path() + ":1: missing column 'duration'");
  EXPECT_EQ(error_of([&] { load_trace(f.path(), small_catalog(), with_format(TraceFormat::Alibaba)); }),
            f.path() + ":1: missing column 'name'");
}

// ---------------------------------------------------------------- Philly

TEST(TraceFormats, PhillyParsesAndSortsByArrival) {
  TempFile f(kPhillyHeader +
            "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
            "2017-10-09 06:13:03,2951.5,4,11806.0,6214e9\n"
            "\n"
            "2017-10-09 07:01:55,10.0,2,20.0,103959\n");
  const Trace t = load_trace(f.path(), small_catalog());
  EXPECT_EQ(t.format, TraceFormat::Philly);
  EXPECT_EQ(t.path, f.path());
  EXPECT_EQ(t.name + ".csv", f.path().substr(f.path().rfind('/') + 1));
  ASSERT_EQ(t.jobs.size(), 3u);
  // Sorted by arrival, equal arrivals by row; rebased to the first arrival.
  EXPECT_EQ(t.jobs[0].index, 1);
  EXPECT_EQ(t.jobs[0].submit_time, 0);
  EXPECT_EQ(t.jobs[0].num_gpus, 4);
  EXPECT_EQ(t.jobs[0].duration_s, 2951.5);
  EXPECT_EQ(t.source_id(t.jobs[0]), "6214e9");
  EXPECT_EQ(t.where(t.jobs[0]), f.path() + ":3");
  EXPECT_EQ(t.jobs[1].index, 0);
  EXPECT_EQ(t.jobs[1].submit_time, 48 * 60 + 52);
  EXPECT_EQ(t.where(t.jobs[1]), f.path() + ":2");
  EXPECT_EQ(t.jobs[2].index, 2);
  EXPECT_EQ(t.jobs[2].submit_time, 48 * 60 + 52);
  EXPECT_EQ(t.where(t.jobs[2]), f.path() + ":5");  // the blank line still counts
  for (const auto& j : t.jobs) {
    EXPECT_FALSE(j.workload.empty());
    EXPECT_EQ(j.gpu_fraction, 1.0);
  }
  EXPECT_NE(t.mapping_method.find("seed 42"), std::string::npos) << t.mapping_method;
}

TEST(TraceFormats, PhillyTimestampsAreUtcSecondsSinceTheEpoch) {
  // Arrivals are rebased to the first one, so the epoch itself as the first row exposes
  // the absolute conversion; the others cross a leap day and a year end.
  TempFile f(kPhillyHeader +
            "2017-10-09 07:01:55,1,1,1,a\n"
            "1970-01-01 00:00:00,1,1,1,a\n"
            "2016-02-28 23:59:59,1,1,1,a\n"
            "2016-03-01 00:00:00,1,1,1,a\n"
            "2017-12-31 23:59:59,1,1,1,a\n"
            "2018-01-01 00:00:00,1,1,1,a\n");
  const Trace t = load_trace(f.path(), small_catalog());
  ASSERT_EQ(t.jobs.size(), 6u);
  EXPECT_EQ(t.jobs[0].submit_time, 0);
  EXPECT_EQ(t.jobs[3].index, 0);
  EXPECT_EQ(t.jobs[3].submit_time, 1507532515);
  EXPECT_EQ(t.jobs[2].submit_time - t.jobs[1].submit_time, 86400 + 1);  // 2016-02-29 exists
  EXPECT_EQ(t.jobs[5].submit_time - t.jobs[4].submit_time, 1);
}

TEST(TraceFormats, PhillyBadFieldsNameFileLineAndField) {
  const auto catalog = small_catalog();
  struct Bad {
    std::string row, message;
  };
  auto bad_time = [](const std::string& text) {
    return "field 'timestamp': expected a UTC time 'YYYY-MM-DD HH:MM:SS', got '" + text + "'";
  };
  const std::vector<Bad> cases = {
      {"2017-13-01 00:00:00,66,1,66,c", bad_time("2017-13-01 00:00:00")},
      {"2017-02-29 00:00:00,66,1,66,c", bad_time("2017-02-29 00:00:00")},
      {"2017-10-09 24:00:00,66,1,66,c", bad_time("2017-10-09 24:00:00")},
      {"2017-10-09T07:01:55,66,1,66,c", bad_time("2017-10-09T07:01:55")},
      {"2017-1O-09 07:01:55,66,1,66,c", bad_time("2017-1O-09 07:01:55")},  // a letter O for a zero
      {"2017-10-09 07:0/:55,66,1,66,c", bad_time("2017-10-09 07:0/:55")},  // just below '0'
      {"2017-10-09 07:01:5:,66,1,66,c", bad_time("2017-10-09 07:01:5:")},  // just above '9'
      {"1507532515,66,1,66,c", bad_time("1507532515")},
      {",66,1,66,c", bad_time("")},
      {"2017-10-09 07:01:55,0,1,0,c", "field 'duration': 0 is not positive"},
      {"2017-10-09 07:01:55,-5.5,1,0,c", "field 'duration': -5.5 is not positive"},
      {"2017-10-09 07:01:55,abc,1,0,c", "field 'duration': expected a number, got 'abc'"},
      {"2017-10-09 07:01:55,,1,0,c", "field 'duration': missing value"},
      {"2017-10-09 07:01:55,66,0,66,c", "field 'num_gpus': 0 is not in [1, 1024]"},
      {"2017-10-09 07:01:55,66,1.5,66,c", "field 'num_gpus': expected a whole number, got '1.5'"},
      {"2017-10-09 07:01:55,66,two,66,c", "field 'num_gpus': expected a number, got 'two'"},
  };
  for (const auto& c : cases) {
    TempFile f(kPhillyHeader + "2017-10-09 07:01:55,66.0,1,66.0,c\n" + c.row + "\n");
    EXPECT_EQ(error_of([&] { load_trace(f.path(), catalog); }), f.path() + ":3: " + c.message);
  }
}

// ---------------------------------------------------------------- Alibaba

TEST(TraceFormats, AlibabaSkipsPodsWithAReasonAndKeepsFractions) {
  TempFile f(kAlibabaHeader +
            "cpu-1,4000,100,0,0,,BE,Running,0,100,0\n"
            "cpu-2,4000,100,0,0,,BE,Running,1,100,\n"
            "pending-1,4000,100,1,1000,,LS,Pending,2,,\n"
            "pending-2,4000,100,2,1000,,LS,Pending,3,900,\n"
            "instant,4000,100,1,1000,,LS,Failed,4,50,50\n"
            "share,4000,100,1,250,V100M16|V100M32,BE,Running,100,700,160\n"
            "whole,4000,100,1,1000,,LS,Succeeded,40,500,100\n"
            "multi,4000,100,4,1000,,LS,Running,70,1070,75\n"
            "multi-part,4000,100,2,500,,LS,Running,80,180,80\n");
  const Trace t = load_trace(f.path(), small_catalog());
  EXPECT_EQ(t.format, TraceFormat::Alibaba);
  const std::map<std::string, std::int64_t> skipped = {{"CPU-only pod", 2}, {"never scheduled", 2}, {"no runtime", 1}};
  EXPECT_EQ(t.skipped, skipped);
  ASSERT_EQ(t.jobs.size(), 4u);
  // Arrival = creation (rebased), duration = deletion - scheduled.
  EXPECT_EQ(t.source_id(t.jobs[0]), "whole");
  EXPECT_EQ(t.jobs[0].submit_time, 0);
  EXPECT_EQ(t.jobs[0].duration_s, 400);
  EXPECT_EQ(t.jobs[0].gpu_fraction, 1.0);
  EXPECT_EQ(t.jobs[0].index, 6);
  EXPECT_EQ(t.where(t.jobs[0]), f.path() + ":8");
  EXPECT_EQ(t.source_id(t.jobs[1]), "multi");
  EXPECT_EQ(t.jobs[1].submit_time, 30);
  EXPECT_EQ(t.jobs[1].num_gpus, 4);
  EXPECT_EQ(t.jobs[1].duration_s, 995);
  EXPECT_EQ(t.source_id(t.jobs[2]), "multi-part");
  EXPECT_EQ(t.jobs[2].gpu_fraction, 1.0);  // only a single-GPU pod shares a GPU
  EXPECT_EQ(t.source_id(t.jobs[3]), "share");
  EXPECT_EQ(t.jobs[3].submit_time, 60);
  EXPECT_EQ(t.jobs[3].duration_s, 540);
  EXPECT_EQ(t.jobs[3].gpu_fraction, 0.25);
  EXPECT_EQ(t.jobs[3].num_gpus, 1);
  EXPECT_EQ(t.jobs[3].workload, "w1_d");  // the only 1-GPU workload with util <= 0.25
}

TEST(TraceFormats, AlibabaBadFieldsNameFileLineAndField) {
  const auto catalog = small_catalog();
  struct Bad {
    std::string row, message;
  };
  const std::vector<Bad> cases = {
      {"p,1,1,1,0,,LS,Running,0,10,0", "field 'gpu_milli': 0 is not in [1, 1000] for a GPU pod"},
      {"p,1,1,1,1001,,LS,Running,0,10,0", "field 'gpu_milli': 1001 is not in [1, 1000] for a GPU pod"},
      {"p,1,1,1,,,LS,Running,0,10,0", "field 'gpu_milli': missing value"},
      {"p,1,1,-1,1000,,LS,Running,0,10,0", "field 'num_gpu': -1 is not in [0, 1024]"},
      {"p,1,1,0.5,500,,LS,Running,0,10,0", "field 'num_gpu': expected a whole number, got '0.5'"},
      {"p,1,1,1,1000,,LS,Running,,10,0", "field 'creation_time': missing value"},
      {"p,1,1,1,1000,,LS,Running,0,soon,0", "field 'deletion_time': expected a number, got 'soon'"},
  };
  for (const auto& c : cases) {
    TempFile f(kAlibabaHeader + "ok,1,1,1,1000,,LS,Running,0,10,0\n" + c.row + "\n");
    EXPECT_EQ(error_of([&] { load_trace(f.path(), catalog); }), f.path() + ":3: " + c.message);
  }
}

TEST(TraceFormats, AlibabaWithNothingLeftSaysWhatWasSkipped) {
  TempFile f(kAlibabaHeader + "cpu,1,1,0,0,,BE,Running,0,10,0\n");
  EXPECT_EQ(error_of([&] { load_trace(f.path(), small_catalog()); }), f.path() + ": no jobs (skipped: 1 CPU-only pod)");
}

// ---------------------------------------------------------------- shaping

TEST(TraceFormats, MaxJobsKeepsTheFirstBySubmitTime) {
  TempFile f(kPhillyHeader +
            "2017-10-09 00:00:40,1,1,1,a\n"
            "2017-10-09 00:00:10,1,1,1,a\n"
            "2017-10-09 00:00:30,1,1,1,a\n"
            "2017-10-09 00:00:50,1,1,1,a\n"
            "2017-10-09 00:00:20,1,1,1,a\n");
  TraceOptions o;
  o.max_jobs = 3;
  const Trace t = load_trace(f.path(), small_catalog(), o);
  ASSERT_EQ(t.jobs.size(), 3u);
  EXPECT_EQ(t.jobs[0].index, 1);
  EXPECT_EQ(t.jobs[1].index, 4);
  EXPECT_EQ(t.jobs[2].index, 2);
  EXPECT_EQ(t.skipped.at("beyond --max-jobs"), 2);
  for (const auto& j : t.jobs) EXPECT_FALSE(j.workload.empty());
}

// --max-jobs reads only the rows it keeps when the file has no quotes; a file with quotes
// goes through the full reader. Both must give the same trace, blank lines, CRLF line
// ends and ties in submit time included, on a slice of the bundled Philly trace.
TEST(TraceFormats, MaxJobsFastPathGivesWhatTheFullReaderGives) {
  std::ifstream in(kData + "traces/philly/philly_jobs.csv");
  std::string header, line, plain, quoted;
  std::getline(in, header);
  plain = quoted = header + "\r\n";
  for (int i = 0; i < 3000 && std::getline(in, line); ++i) {
    if (i == 10) plain += "\r\n", quoted += "\n";  // a blank line counts as a line
    plain += line + "\r\n";
    // The same row with its last field quoted: read as the same value.
    const auto comma = line.rfind(',');
    quoted += line.substr(0, comma + 1) + '"' + line.substr(comma + 1) + "\"\n";
  }
  plain += "2017-10-03 14:00:00,60.0,1,60.0,dup\n2017-10-03 14:00:00,60.0,2,120.0,dup\n";  // a tie
  quoted += "2017-10-03 14:00:00,60.0,1,60.0,dup\n2017-10-03 14:00:00,60.0,2,120.0,dup\n";
  TempFile fast(plain), full(quoted);
  const auto catalog = WorkloadCatalog::load(kData + "aegis/workloads.csv");
  for (std::size_t keep : {0u, 1u, 500u, 2999u, 5000u}) {  // 0: every row, read at once too
    TraceOptions o;
    o.max_jobs = keep;
    const Trace a = load_trace(fast.path(), catalog, o), b = load_trace(full.path(), catalog, o);
    ASSERT_EQ(a.jobs.size(), b.jobs.size()) << keep;
    EXPECT_EQ(a.skipped, b.skipped) << keep;
    EXPECT_EQ(a.mapping_method, b.mapping_method);
    for (std::size_t i = 0; i < a.jobs.size(); ++i) {
      const TraceJob &x = a.jobs[i], &y = b.jobs[i];
      ASSERT_EQ(x.index, y.index) << keep << " " << i;
      EXPECT_EQ(x.line, y.line) << i;
      EXPECT_EQ(x.submit_time, y.submit_time) << i;
      EXPECT_EQ(x.workload, y.workload) << i;
      EXPECT_EQ(x.num_gpus, y.num_gpus) << i;
      EXPECT_EQ(x.duration_s, y.duration_s) << i;
      EXPECT_EQ(a.source_id(x), b.source_id(y)) << i;
    }
  }
}

TEST(TraceFormats, MaxJobsFastPathStillValidatesTheRowsItKeeps) {
  TempFile f(kPhillyHeader +
            "2017-10-09 00:00:40,1,1,1,a\n"
            "2017-10-09 00:00:10,-5,1,1,a\n"
            "2017-10-09 00:00:30,1,1,1,a\n");
  TraceOptions o;
  o.max_jobs = 2;
  EXPECT_EQ(error_of([&] { load_trace(f.path(), small_catalog(), o); }),
            f.path() + ":3: field 'duration': -5 is not positive");
  TempFile bad_time(kPhillyHeader + "2017-10-09 00:00:40,1,1,1,a\nyesterday,1,1,1,a\n");
  EXPECT_EQ(error_of([&] { load_trace(bad_time.path(), small_catalog(), o); }),
            bad_time.path() + ":3: field 'timestamp': expected a UTC time 'YYYY-MM-DD HH:MM:SS', got 'yesterday'");
}

// Without --max-jobs a file without quotes is read at once too; its rows are validated in
// file order, so the first bad row named is the one the full reader names, not the
// earliest bad one by submit time.
TEST(TraceFormats, WholeFileReadNamesTheFirstBadRowInFileOrder) {
  const std::string rows = "2017-10-09 00:00:40,1,1,1,a\n"
                           "2017-10-09 00:00:50,1,0,1,a\n"
                           "2017-10-09 00:00:10,-5,1,1,a\n";
  TempFile plain(kPhillyHeader + rows), quoted(kPhillyHeader + "\"2017-10-09 00:00:01\",1,1,1,a\n" + rows);
  const std::string want = ":3: field 'num_gpus': 0 is not in [1, 1024]";
  EXPECT_EQ(error_of([&] { load_trace(plain.path(), small_catalog()); }), plain.path() + want);
  EXPECT_EQ(error_of([&] { load_trace(quoted.path(), small_catalog()); }),
            quoted.path() + ":4: field 'num_gpus': 0 is not in [1, 1024]");
}

TEST(TraceFormats, RepeatReplaysTheTraceShiftedByItsSpan) {
  TempFile f(kPhillyHeader +
            "2017-10-09 00:01:00,5,1,5,a\n"
            "2017-10-09 00:00:20,7,1,7,a\n");
  TraceOptions o;
  o.repeat = 3;
  const Trace t = load_trace(f.path(), small_catalog(), o);
  ASSERT_EQ(t.jobs.size(), 6u);
  const Seconds span = 40 + 1;  // last arrival after the rebase, plus one second
  for (std::size_t k = 0; k < 3; ++k)
    for (std::size_t i = 0; i < 2; ++i) {
      const TraceJob &c = t.jobs[k * 2 + i], &o0 = t.jobs[i];
      EXPECT_EQ(c.submit_time, o0.submit_time + static_cast<double>(k) * span);
      EXPECT_EQ(c.index, o0.index + static_cast<std::int64_t>(k) * 2);
      EXPECT_EQ(c.workload, o0.workload);
      EXPECT_EQ(c.duration_s, o0.duration_s);
    }
  o.repeat = 0;
  EXPECT_EQ(error_of([&] { load_trace(f.path(), small_catalog(), o); }), "--repeat: must be at least 1");
}

TEST(TraceFormats, LoadCompressesInterArrivalTimes) {
  TempFile f(kPhillyHeader +
            "2017-10-09 00:01:00,1,1,1,a\n"
            "2017-10-09 00:00:20,1,1,1,a\n"
            "2017-10-09 00:05:00,1,1,1,a\n");
  const Trace plain = load_trace(f.path(), small_catalog());
  TraceOptions o;
  o.load = 2.0;
  const Trace doubled = load_trace(f.path(), small_catalog(), o);
  ASSERT_EQ(doubled.jobs.size(), 3u);
  EXPECT_EQ(plain.jobs[0].submit_time, 0);
  EXPECT_EQ(doubled.jobs[0].submit_time, 0);
  EXPECT_EQ(plain.jobs[1].submit_time, 40);
  EXPECT_EQ(doubled.jobs[1].submit_time, 20);
  EXPECT_EQ(plain.jobs[2].submit_time, 280);
  EXPECT_EQ(doubled.jobs[2].submit_time, 140);
  EXPECT_EQ(by_index(plain.jobs), by_index(doubled.jobs));  // load changes arrivals only
}

// ---------------------------------------------------------------- mapping

TEST(Mapping, KeepsGpuCountsAndBorrowsTheNearestCount) {
  const auto catalog = small_catalog();
  const int counts[] = {1, 2, 4, 8};
  auto count_of = [&](std::int64_t index) { return counts[index % 4]; };
  std::vector<TraceJob> jobs;
  for (int i = 0; i < 40; ++i) jobs.push_back(job(i, count_of(i), 10.0 + i));
  map_workloads(jobs, catalog, 42, false);
  for (const auto& j : jobs) {
    const WorkloadProfile* w = catalog.find(j.workload);
    ASSERT_NE(w, nullptr) << j.workload;
    EXPECT_TRUE(w->problem.empty());
    EXPECT_EQ(w->num_gpus, std::min<int>(j.num_gpus, 2)) << "job " << j.index;
    EXPECT_EQ(j.num_gpus, count_of(j.index));
    EXPECT_EQ(j.duration_s, 10.0 + static_cast<double>(j.index));
  }

  // Equally far from two counts: the smaller.
  WorkloadCatalog gaps;
  gaps.add(workload("two", 2, 100, 0.5));
  gaps.add(workload("four", 4, 100, 0.5));
  std::vector<TraceJob> three = {job(0, 3, 10), job(1, 1, 10), job(2, 16, 10)};
  map_workloads(three, gaps, 42, false);
  EXPECT_EQ(three[0].workload, "two");
  EXPECT_EQ(three[1].workload, "two");
  EXPECT_EQ(three[2].workload, "four");
}

TEST(Mapping, LongerJobsBorrowLongerRunningWorkloads) {
  const auto catalog = small_catalog();
  const std::vector<std::string> by_runtime = {"w1_d", "w1_c", "w1_b", "w1_a"};
  auto rank = [&](const std::string& name) {
    return std::find(by_runtime.begin(), by_runtime.end(), name) - by_runtime.begin();
  };
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    std::vector<TraceJob> jobs;
    for (int i = 0; i < 23; ++i) jobs.push_back(job(i, 1, 1000.0 - 7.0 * i));  // index order is the reverse
    map_workloads(jobs, catalog, seed, false);
    EXPECT_EQ(jobs.back().workload, "w1_d") << "seed " << seed;   // shortest job
    EXPECT_EQ(jobs.front().workload, "w1_a") << "seed " << seed;  // longest job
    for (std::size_t i = 1; i < jobs.size(); ++i) EXPECT_LE(rank(jobs[i].workload), rank(jobs[i - 1].workload));
  }
}

TEST(Mapping, QuantilesSpreadJobsEvenlyOverCandidates) {
  // With n = k * m jobs each of the m candidates gets exactly k, whatever the seed.
  const auto catalog = small_catalog();
  std::vector<TraceJob> jobs;
  for (int i = 0; i < 12; ++i) jobs.push_back(job(i, 1, 5.0 * i));
  map_workloads(jobs, catalog, 3, false);
  std::map<std::string, int> count;
  for (const auto& j : jobs) ++count[j.workload];
  const std::map<std::string, int> expected = {{"w1_a", 3}, {"w1_b", 3}, {"w1_c", 3}, {"w1_d", 3}};
  EXPECT_EQ(count, expected);
}

TEST(Mapping, EqualDurationsRankByIndex) {
  // As many jobs as candidates: rank r takes candidate r whatever the draw.
  std::vector<TraceJob> jobs = {job(3, 1, 60), job(1, 1, 60), job(0, 1, 60), job(2, 1, 60)};
  map_workloads(jobs, small_catalog(), 42, false);
  const std::map<std::int64_t, std::string> expected = {{0, "w1_d"}, {1, "w1_c"}, {2, "w1_b"}, {3, "w1_a"}};
  EXPECT_EQ(by_index(jobs), expected);
}

std::vector<TraceJob> mixed_jobs() {
  std::vector<TraceJob> jobs;
  for (int i = 0; i < 101; ++i) jobs.push_back(job(i, 1 + i % 3, 1.0 + (i * 37) % 101));
  return jobs;
}

TEST(Mapping, SameSeedSameMappingOtherSeedsDiffer) {
  const auto catalog = small_catalog();
  auto mapped = [&](std::uint64_t seed) {
    auto jobs = mixed_jobs();
    map_workloads(jobs, catalog, seed, false);
    return by_index(jobs);
  };
  EXPECT_EQ(mapped(7), mapped(7));
  EXPECT_NE(mapped(7), mapped(8));
  EXPECT_NE(mapped(7), mapped(9));
}

TEST(Mapping, DoesNotDependOnInputOrder) {
  const auto catalog = small_catalog();
  auto jobs = mixed_jobs();
  map_workloads(jobs, catalog, 11, false);
  auto shuffled = mixed_jobs();
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(5));
  map_workloads(shuffled, catalog, 11, false);
  EXPECT_EQ(by_index(jobs), by_index(shuffled));
}

TEST(Mapping, FractionalJobsBorrowWorkloadsWithinTheirFraction) {
  const auto catalog = small_catalog();
  std::vector<TraceJob> jobs;
  const std::vector<double> fractions = {0.1, 0.25, 0.35, 0.5, 0.95};
  for (int i = 0; i < 100; ++i) jobs.push_back(job(i, 1, 10.0 * i, fractions[static_cast<std::size_t>(i % 5)]));
  for (int i = 100; i < 120; ++i) jobs.push_back(job(i, 1, 10.0 * i));
  map_workloads(jobs, catalog, 42, false);
  std::set<std::string> whole_gpu;
  for (const auto& j : jobs) {
    const WorkloadProfile* w = catalog.find(j.workload);
    ASSERT_NE(w, nullptr);
    if (j.gpu_fraction == 1.0) {
      whole_gpu.insert(j.workload);
    } else if (j.gpu_fraction < 0.2) {
      EXPECT_EQ(j.workload, "w1_d");  // nothing fits: the lightest workload
    } else {
      EXPECT_LE(w->util, j.gpu_fraction) << "job " << j.index << " got " << j.workload;
    }
  }
  // Whole-GPU jobs are ranked apart from the fractional ones (all of them are longer),
  // and their candidates are not narrowed by anyone's fraction.
  EXPECT_TRUE(whole_gpu.count("w1_b")) << "the 0.9-util workload is open to whole-GPU jobs";
  std::set<std::string> at_95;
  for (const auto& j : jobs)
    if (j.gpu_fraction == 0.95) at_95.insert(j.workload);
  EXPECT_EQ(at_95.size(), 4u) << "a 0.95 fraction admits every 1-GPU workload";
}

TEST(Mapping, WorkloadRuntimeClearsDurations) {
  const auto catalog = small_catalog();
  auto jobs = mixed_jobs();
  const std::string from_trace = map_workloads(jobs, catalog, 42, false);
  auto cleared = mixed_jobs();
  const std::string from_workload = map_workloads(cleared, catalog, 42, true);
  EXPECT_EQ(by_index(jobs), by_index(cleared));  // same borrowing either way
  for (const auto& j : jobs) EXPECT_TRUE(j.duration_s.has_value());
  for (const auto& j : cleared) EXPECT_FALSE(j.duration_s.has_value());
  EXPECT_NE(from_trace.find("durations from the trace"), std::string::npos) << from_trace;
  EXPECT_NE(from_workload.find("solo runtimes"), std::string::npos) << from_workload;
  EXPECT_NE(from_trace.find("seed 42"), std::string::npos);
}

TEST(Mapping, NeedsDurationsAndAProfiledWorkload) {
  std::vector<TraceJob> jobs = {job(0, 1, 10), job(1, 1, 10)};
  jobs[1].duration_s.reset();
  EXPECT_EQ(error_of([&] { map_workloads(jobs, small_catalog(), 42, false); }),
            "job 1 (line 2) has no duration, which the workload mapping ranks by");

  TempFile cat("name,num_gpus,peak_memory_mib,avg_smact,avg_smocc,avg_drama,solo_runtime_s\n"
              "unprofiled,1,1000,0.2,0.1,0.1,\n");
  const auto unusable = WorkloadCatalog::load(cat.path());
  std::vector<TraceJob> one = {job(0, 1, 10)};
  EXPECT_EQ(error_of([&] { map_workloads(one, unusable, 42, false); }),
            cat.path() + ": no profiled workload for trace jobs to borrow");
}

// ---------------------------------------------------------------- bundled traces

TEST(TraceFormats, BundledPhillyLoadsEveryJob) {
  const auto catalog = WorkloadCatalog::load(kData + "aegis/workloads.csv");
  const auto start = std::chrono::steady_clock::now();
  const Trace t = load_trace(kData + "traces/philly/philly_jobs.csv", catalog);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::cout << "philly_jobs.csv: " << t.jobs.size() << " jobs loaded and mapped in " << ms << " ms\n";
  EXPECT_EQ(t.format, TraceFormat::Philly);
  ASSERT_EQ(t.jobs.size(), 82247u);
  EXPECT_TRUE(t.skipped.empty());
  EXPECT_EQ(t.jobs.front().submit_time, 0);
  for (std::size_t i = 1; i < t.jobs.size(); ++i) {
    const TraceJob &a = t.jobs[i - 1], &b = t.jobs[i];
    ASSERT_TRUE(a.submit_time < b.submit_time || (a.submit_time == b.submit_time && a.index < b.index)) << t.where(b);
  }
  for (const auto& j : t.jobs) {
    const WorkloadProfile* w = catalog.find(j.workload);
    ASSERT_NE(w, nullptr) << t.where(j);
    ASSERT_TRUE(w->problem.empty()) << t.where(j);
    ASSERT_EQ(w->num_gpus, std::min<int>(j.num_gpus, 2)) << t.where(j);  // the catalog has 1- and 2-GPU workloads
    ASSERT_TRUE(j.duration_s && *j.duration_s > 0) << t.where(j);
  }
}

TEST(TraceFormats, BundledAlibabaLoadsAndReportsSkips) {
  const auto catalog = WorkloadCatalog::load(kData + "aegis/workloads.csv");
  const Trace t = load_trace(kData + "traces/alibaba-gpu-2023/openb_pod_list_default.csv", catalog);
  std::int64_t pods = static_cast<std::int64_t>(t.jobs.size()), fractional = 0;
  std::cout << "openb_pod_list_default.csv: " << t.jobs.size() << " jobs";
  for (const auto& [reason, n] : t.skipped) {
    std::cout << ", skipped " << n << " " << reason;
    pods += n;
  }
  for (const auto& j : t.jobs) {
    const WorkloadProfile* w = catalog.find(j.workload);
    ASSERT_NE(w, nullptr);
    if (j.gpu_fraction < 1.0) {
      ++fractional;
      EXPECT_EQ(j.num_gpus, 1);
      EXPECT_EQ(w->num_gpus, 1);
    }
  }
  std::cout << "; " << fractional << " fractional\n";
  EXPECT_EQ(t.format, TraceFormat::Alibaba);
  EXPECT_EQ(pods, 8152);  // every pod of the trace is either a job or a counted skip
  EXPECT_GT(t.skipped.at("CPU-only pod"), 0);
  EXPECT_GT(t.skipped.at("never scheduled"), 0);
  EXPECT_GT(fractional, 0);
}

}  // namespace
}  // namespace aegis
