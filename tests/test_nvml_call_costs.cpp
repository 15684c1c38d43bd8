// The NVML loader asks the two costly calls only where a sample's request says (issue 30,
// item 4), counted by the emulated library (aegisEmulatedNvmlCalls); and the switch that
// turns the emulated per-call costs off. Counts calls, never time.
#include <gtest/gtest.h>

#include <cstdlib>
#include <dlfcn.h>
#include <string>

#include "runtime/gpu/gpu_source.h"
#include "tests/test_util.h"

namespace {

using namespace aegis;

class NvmlCallCosts : public ::testing::Test {
 protected:
  void SetUp() override {
    state_path_ = test::temp_path("gpus.state");
    std::remove(state_path_.c_str());
    setenv("AEGIS_EMULATED_STATE", state_path_.c_str(), 1);
    setenv("AEGIS_EMULATED_GPUS", "3x40960", 1);
    setenv("AEGIS_EMULATED_CALL_COSTS", "0", 1);  // counted all the same
  }
  void TearDown() override {
    for (const char* v : {"AEGIS_EMULATED_STATE", "AEGIS_EMULATED_GPUS", "AEGIS_EMULATED_CALL_COSTS"}) unsetenv(v);
    std::remove(state_path_.c_str());
  }
  // Calls of `name` made so far in this process (the library must be loaded: a source open).
  static unsigned long long calls(const char* name) {
    void* lib = dlopen(AEGIS_EMULATED_NVML, RTLD_NOW | RTLD_NOLOAD);
    if (!lib) return ~0ULL;
    auto* count = reinterpret_cast<unsigned long long (*)(const char*)>(dlsym(lib, "aegisEmulatedNvmlCalls"));
    const unsigned long long n = count ? count(name) : ~0ULL;
    dlclose(lib);
    return n;
  }
  std::string state_path_;
};

constexpr const char* kProcessUtil = "nvmlDeviceGetProcessUtilization";
constexpr const char* kEnergy = "nvmlDeviceGetTotalEnergyConsumption";
constexpr const char* kMemory = "nvmlDeviceGetMemoryInfo";
constexpr const char* kMigMode = "nvmlDeviceGetMigMode";

TEST_F(NvmlCallCosts, ACheapSampleMakesNoPerProcessNorEnergyCall) {
  std::string error;
  auto src = open_nvml(AEGIS_EMULATED_NVML, &error);
  ASSERT_TRUE(src) << error;
  const auto util0 = calls(kProcessUtil), energy0 = calls(kEnergy), mem0 = calls(kMemory), mig0 = calls(kMigMode);
  for (int i = 0; i < 5; ++i) {
    const auto gpus = src->sample(SampleRequest::cheap());
    ASSERT_EQ(gpus.size(), 3u);
    for (const auto& g : gpus) {
      EXPECT_FALSE(g.process_samples);
      EXPECT_FALSE(g.energy_j);
    }
  }
  EXPECT_EQ(calls(kProcessUtil) - util0, 0u);
  EXPECT_EQ(calls(kEnergy) - energy0, 0u);
  EXPECT_EQ(calls(kMemory) - mem0, 15u) << "the counts count: one memory read per GPU and sample";
  EXPECT_EQ(calls(kMigMode) - mig0, 0u) << "MIG mode is read once, at start";

  // One GPU awaits an anchor: one per-process call, on it alone.
  SampleRequest one = SampleRequest::cheap();
  one.process_util = {src->sample(SampleRequest::cheap())[1].uuid};
  const auto gpus = src->sample(one);
  EXPECT_EQ(calls(kProcessUtil) - util0, 1u);
  EXPECT_FALSE(gpus[0].process_samples);
  EXPECT_TRUE(gpus[1].process_samples);
  EXPECT_FALSE(gpus[2].process_samples);

  // The default (tools such as aegis-gpu-query) still reads everything.
  const auto all = src->sample();
  EXPECT_EQ(calls(kProcessUtil) - util0, 4u);
  EXPECT_EQ(calls(kEnergy) - energy0, 3u);
  EXPECT_TRUE(all[0].energy_j);
}

TEST_F(NvmlCallCosts, TheCostSwitchTakesZeroOrOne) {
  setenv("AEGIS_EMULATED_CALL_COSTS", "fast", 1);
  std::string error;
  EXPECT_FALSE(open_nvml(AEGIS_EMULATED_NVML, &error));
  EXPECT_NE(error.find("AEGIS_EMULATED_CALL_COSTS='fast'"), std::string::npos) << error;
}

}  // namespace
