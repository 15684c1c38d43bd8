// The CSV reader and the loaders: every bad input names the file, line and field.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "sim/csv.h"
#include "sim/trace.h"
#include "sim/workload.h"
#include "sim/workload_specs.h"
#include "tests/test_util.h"

namespace aegis {
namespace {

using test::error_of;
using test::TempFile;

TEST(Csv, QuotedFieldsAndLineNumbers) {
  std::istringstream in("a,b,c\n1,\"x, \"\"y\"\"\",3\n\n4,\"multi\nline\",6\n7,8,9\n");
  CsvReader r(in, "t.csv");
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.field("b"), "x, \"y\"");
  EXPECT_EQ(r.line(), 2u);
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.field("b"), "multi\nline");
  EXPECT_EQ(r.line(), 4u);
  ASSERT_TRUE(r.next());
  EXPECT_EQ(r.get_int("c"), 9);
  EXPECT_EQ(r.line(), 6u);
  EXPECT_FALSE(r.next());
}

TEST(Csv, Errors) {
  std::istringstream bad_count("a,b\n1,2,3\n");
  CsvReader r(bad_count, "t.csv");
  EXPECT_EQ(error_of([&] { r.next(); }), "t.csv:2: expected 2 fields as in the header, found 3");

  std::istringstream bad_num("a,b\n1,x2\n");
  CsvReader r2(bad_num, "t.csv");
  r2.next();
  EXPECT_EQ(error_of([&] { r2.get_double("b"); }), "t.csv:2: field 'b': expected a number, got 'x2'");
  EXPECT_EQ(error_of([&] { r2.field("zzz"); }), "t.csv:1: missing column 'zzz'");

  std::istringstream unterminated("a\n\"open\n");
  CsvReader r3(unterminated, "t.csv");
  EXPECT_EQ(error_of([&] { r3.next(); }), "t.csv:2: unterminated quoted field");

  EXPECT_EQ(error_of([] { CsvReader::open("/nonexistent/x.csv"); }), "/nonexistent/x.csv: cannot open file");
  std::istringstream empty("");
  EXPECT_EQ(error_of([&] { CsvReader r4(empty, "e.csv"); }), "e.csv: empty file, expected a CSV header");
}

const char* kCatalog =
    "name,num_gpus,peak_memory_mib,avg_smact,avg_smocc,avg_drama,solo_runtime_s,horus_gpu_util_mean,lucid_ss\n"
    "small,1,1000,0.2,0.1,0.1,100,30,0\n"
    "pair,2,9000,0.8,0.3,0.2,200,90,2\n"
    "legacy,1,2816,41.2,37.8,12.4,,,\n";

TEST(Catalog, LoadsAndKeepsUnusableRowsWithAReason) {
  TempFile f(kCatalog);
  auto c = WorkloadCatalog::load(f.path());
  EXPECT_EQ(c.size(), 3u);
  EXPECT_TRUE(c.find("small")->problem.empty());
  EXPECT_DOUBLE_EQ(c.find("small")->util, 0.30);
  EXPECT_EQ(c.find("pair")->hints.sharing_score, 2);
  EXPECT_EQ(c.find("legacy")->problem, "avg_smact 41.2 is not in [0,1]");
}

TEST(Catalog, BundledCatalogHas53SimulatableWorkloads) {
  auto c = WorkloadCatalog::load(std::string(AEGIS_SOURCE_DIR) + "/data/aegis/workloads.csv");
  int ok = 0;
  for (const auto& [name, w] : c.all()) ok += w.problem.empty();
  EXPECT_EQ(ok, 53);
}

// The simulator's predicted utilisation of a catalog workload never reads the measured
// utilisation of its own model: changing every measurement of one model leaves that
// model's predictions as they were and moves another model's.
TEST(WorkloadSpecs, PredictedUtilisationLeavesTheWorkloadsModelOut) {
  const std::string data = std::string(AEGIS_SOURCE_DIR) + "/data/aegis/";
  const auto specs = load_workload_specs(data + "workload_specs.csv");
  auto predicted = [&](const std::string& changed_model) {
    auto c = WorkloadCatalog::load(data + "workloads.csv");
    for (const auto& s : specs) {
      if (s.model != changed_model) continue;
      WorkloadProfile w = *c.find(s.name);
      w.util = 1 - w.util;
      c.add(w);
    }
    predict_catalog_utilisation(c, specs);
    std::map<std::string, double> out;
    for (const auto& [name, w] : c.all())
      if (w.predicted_util) out[name] = *w.predicted_util;
    return out;
  };
  const auto base = predicted("");
  EXPECT_EQ(base.size(), specs.size());  // every spec names a catalog workload
  for (const auto& [name, u] : base) {
    EXPECT_GE(u, 0.0) << name;
    EXPECT_LE(u, 1.0) << name;
  }
  EXPECT_EQ(predicted(""), base);  // deterministic
  const std::string held = "vgg16/imagenet", other = "resnet50/imagenet";
  const auto changed = predicted(held);
  int held_runs = 0, other_moved = 0;
  for (const auto& s : specs) {
    if (s.model == held) {
      ++held_runs;
      EXPECT_EQ(changed.at(s.name), base.at(s.name)) << s.name;
    }
    if (s.model == other) other_moved += changed.at(s.name) != base.at(s.name);
  }
  EXPECT_GT(held_runs, 0);
  EXPECT_GT(other_moved, 0);
}

TEST(WorkloadSpecs, BadRowsNameFileLineAndField) {
  TempFile f(
      "name,model,batch_size,gpus,precision,total_parameters,total_activations,depth,activation,layer_counts\n"
      "a,m,x,1,fp32,10,10,1,relu,linear:1\n");
  EXPECT_EQ(error_of([&] { load_workload_specs(f.path()); }),
            f.path() + ":2: field 'batch_size': expected a number, got 'x'");
}

TEST(Trace, BadLinesNameFileLineAndField) {
  TempFile cat(kCatalog);
  auto c = WorkloadCatalog::load(cat.path());
  auto load = [&](const std::string& text) {
    TempFile t(text);
    return error_of([&] { load_aegis_trace(t.path(), c); });
  };
  const std::string h = "job_index,submit_time_s,workload_name,num_gpus\n";
  EXPECT_NE(load(h + "0,0,small,1\n1,5,nosuch,1\n").find(":3: field 'workload_name': unknown workload 'nosuch'"),
            std::string::npos);
  EXPECT_NE(load(h + "0,abc,small,1\n").find(":2: field 'submit_time_s': expected a number, got 'abc'"),
            std::string::npos);
  EXPECT_NE(load(h + "0,0,small,2\n").find(":2: field 'num_gpus': 2 but workload 'small' is profiled on 1 GPUs"),
            std::string::npos);
  EXPECT_NE(load(h + "0,0,legacy,1\n").find("cannot be simulated: avg_smact 41.2 is not in [0,1]"),
            std::string::npos);
  EXPECT_NE(load(h + "0,0,small\n").find(":2: expected 4 fields as in the header, found 3"), std::string::npos);
  EXPECT_NE(load(h + "0,-3,small,1\n").find("field 'submit_time_s': must not be negative"), std::string::npos);
  EXPECT_NE(load(h + "0,0,small,1\n0,1,small,1\n").find("field 'job_index': duplicate job index 0"),
            std::string::npos);
  EXPECT_NE(load("index,time\n0,0\n").find(":1: missing column 'job_index'"), std::string::npos);
  EXPECT_NE(load(h).find("no jobs"), std::string::npos);
}

TEST(Trace, SortedBySubmitTime) {
  TempFile cat(kCatalog);
  auto c = WorkloadCatalog::load(cat.path());
  TempFile t("job_index,submit_time_s,workload_name,num_gpus\n0,50,small,1\n1,10,pair,2\n2,10,small,1\n");
  auto tr = load_aegis_trace(t.path(), c);
  ASSERT_EQ(tr.jobs.size(), 3u);
  EXPECT_EQ(tr.jobs[0].index, 1);
  EXPECT_EQ(tr.jobs[1].index, 2);
  EXPECT_EQ(tr.jobs[2].index, 0);
}

}  // namespace
}  // namespace aegis
