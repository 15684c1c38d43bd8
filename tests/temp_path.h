// Temporary file paths unique to this process and test: ctest runs tests in parallel
// processes that share the temporary directory.
#pragma once
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

namespace aegis::test {

inline std::string temp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? std::string(info->test_suite_name()) + "." + info->name() : "global";
  for (auto& c : test)
    if (c == '/') c = '_';
  return ::testing::TempDir() + "aegis_" + std::to_string(getpid()) + "_" + test + "_" + name;
}

}  // namespace aegis::test
