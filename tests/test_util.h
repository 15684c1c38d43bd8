// Helpers shared by the tests: temporary files unique to a process and test (ctest runs
// tests in parallel processes sharing the temporary directory), and error capture.
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <unistd.h>

#include "sim/csv.h"
#include "sim/workload.h"

namespace aegis::test {

// A catalog of one 1-GPU workload named "w" (10,000 MiB peak, 1000 s solo, light load):
// what the trace readers' and the simulator's small scenarios run.
inline WorkloadCatalog one_workload_catalog() {
  WorkloadProfile w;
  w.name = "w";
  w.num_gpus = 1;
  w.peak_mib = 10000;
  w.smact = w.util = 0.2;
  w.smocc = w.drama = 0.1;
  w.solo_runtime_s = 1000;
  WorkloadCatalog c;
  c.add(w);
  return c;
}

inline std::string temp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? std::string(info->test_suite_name()) + "." + info->name() : "global";
  for (auto& c : test)
    if (c == '/') c = '_';
  return ::testing::TempDir() + "aegis_" + std::to_string(getpid()) + "_" + test + "_" + name;
}

// A file holding `text` for the lifetime of the object.
class TempFile {
 public:
  explicit TempFile(const std::string& text, const std::string& suffix = ".csv")
      : path_(temp_path(std::to_string(counter_++) + suffix)) {
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

// The message of the InputError `f` throws, or "" if it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace aegis::test
