// The telemetry source chosen per GPU (telemetry_select.h) on emulated GPUs, through the
// real loaders: GPM where the GPU has it, else DCGM's profiling fields from the emulated
// libdcgm (the same shared state as the emulated NVML), else coarse utilisation. Also DCGM's
// modes (embedded, nv-hostengine), and every way DCGM can be unavailable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <unistd.h>

#include "runtime/gpu/emulated/state.h"
#include "runtime/gpu/telemetry_select.h"
#include "tests/test_util.h"

namespace {

using namespace aegis;

const std::string kNvml = AEGIS_EMULATED_NVML;
const std::string kDcgm = AEGIS_EMULATED_DCGM;
constexpr const char* kEnv[] = {"AEGIS_EMULATED_STATE", "AEGIS_EMULATED_GPUS", "AEGIS_EMULATED_GPM", "AEGIS_EMULATED_MIG",
                                "AEGIS_EMULATED_DCGM_HOSTENGINE", "AEGIS_EMULATED_DCGM_PROFILING"};

// Three emulated GPUs; GPU 0 runs a busy process (SM activity 0.8, occupancy 0.4, DRAM 0.3,
// utilisation 0.5: below the coarse rule's 0.70, above the published rule's thresholds).
class Telemetry : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kEnv) unsetenv(v);
    state_path_ = test::temp_path("gpus.state");
    std::remove(state_path_.c_str());
    setenv("AEGIS_EMULATED_STATE", state_path_.c_str(), 1);
    setenv("AEGIS_EMULATED_GPUS", "3x40960", 1);
  }
  void TearDown() override {
    for (const char* v : kEnv) unsetenv(v);
    std::remove(state_path_.c_str());
  }

  // Opens the sources (the emulated NVML reads the environment now) and starts the busy process.
  std::unique_ptr<GpuSource> open(const DcgmOptions& o, bool everywhere = false) {
    std::string error;
    auto s = open_gpus(kNvml, o, &error, everywhere);
    EXPECT_TRUE(s) << error;
    client_ = emu::State::open(state_path_, {}, &error);
    EXPECT_TRUE(client_) << error;
    if (client_) {
      EXPECT_TRUE(client_->set_activity(0, static_cast<std::uint32_t>(getpid()), {0.8, 0.4, 0.3, 0.5}));
    }
    return s;
  }
  static DcgmOptions dcgm(const std::string& mode = "auto") { return {mode, kDcgm, "127.0.0.1", 0.1}; }
  // The second sample: GPM has its two by then.
  static std::vector<GpuStatus> settled(GpuSource& s) {
    s.sample();
    return s.sample();
  }

  std::string state_path_;
  std::unique_ptr<emu::State> client_;
};

TEST_F(Telemetry, AmpereReadsDcgmProfilingFields) {
  setenv("AEGIS_EMULATED_GPM", "0", 1);
  auto src = open(dcgm());
  ASSERT_TRUE(src);
  const auto gpus = settled(*src);
  ASSERT_EQ(gpus.size(), 3u);
  const auto& g = gpus[0];
  EXPECT_FALSE(g.gpm);
  EXPECT_EQ(g.level(), TelemetryLevel::Full);
  EXPECT_STREQ(g.telemetry_source(), "dcgm");
  EXPECT_NEAR(*g.smact, 0.8, 1e-9);
  EXPECT_NEAR(*g.smocc, 0.4, 1e-9);
  EXPECT_NEAR(*g.drama, 0.3, 1e-9);
  EXPECT_NEAR(*g.util, 0.5, 0.005);  // NVML's, as before
  EXPECT_STREQ(gpus[2].telemetry_source(), "dcgm");  // idle, but measured
  EXPECT_EQ(*gpus[2].smact, 0);
  const auto d = src->describe();
  EXPECT_NE(d.find("GPM: no, DCGM: " + kDcgm + ", embedded host engine, 3 GPUs"), std::string::npos) << d;
}

// GPM where the GPU has it, DCGM only for the others (and only they are watched).
TEST_F(Telemetry, MixedMachineChoosesPerGpu) {
  setenv("AEGIS_EMULATED_GPM", "0,1", 1);  // GPU 0 Ampere-like, GPUs 1 and 2 Hopper-like
  auto src = open(dcgm());
  ASSERT_TRUE(src);
  ASSERT_TRUE(client_->set_activity(1, static_cast<std::uint32_t>(getpid()), {0.2, 0.1, 0.1, 0.3}));
  const auto gpus = src->sample();
  EXPECT_STREQ(gpus[0].telemetry_source(), "dcgm");
  EXPECT_STREQ(gpus[1].telemetry_source(), "gpm");
  EXPECT_STREQ(gpus[2].telemetry_source(), "gpm");
  EXPECT_NEAR(*gpus[0].smact, 0.8, 1e-9);
  EXPECT_GT(*gpus[1].smact, 0);
  EXPECT_NE(src->describe().find("GPM: 2 of 3, DCGM: " + kDcgm + ", embedded host engine, 1 GPU"), std::string::npos)
      << src->describe();
}

TEST_F(Telemetry, HopperNeedsNoDcgm) {
  auto src = open(dcgm());
  ASSERT_TRUE(src);
  const auto gpus = settled(*src);
  EXPECT_STREQ(gpus[0].telemetry_source(), "gpm");
  EXPECT_NEAR(*gpus[0].smact, 0.8, 1e-6);
  EXPECT_NE(src->describe().find("DCGM: not needed (GPM on every GPU)"), std::string::npos) << src->describe();
}

// aegis-gpu-query --source dcgm: DCGM on every GPU, its values in place of GPM's.
TEST_F(Telemetry, DcgmEverywhereForComparison) {
  auto src = open(dcgm(), true);
  ASSERT_TRUE(src);
  const auto gpus = settled(*src);
  for (const auto& g : gpus) EXPECT_STREQ(g.telemetry_source(), "dcgm");
  EXPECT_NEAR(*gpus[0].smact, 0.8, 1e-9);
}

TEST_F(Telemetry, RunningHostEngineIsPreferred) {
  setenv("AEGIS_EMULATED_GPM", "0", 1);
  setenv("AEGIS_EMULATED_DCGM_HOSTENGINE", "127.0.0.1", 1);
  auto src = open(dcgm());
  ASSERT_TRUE(src);
  EXPECT_STREQ(settled(*src)[0].telemetry_source(), "dcgm");
  EXPECT_NE(src->describe().find("nv-hostengine at 127.0.0.1, 3 GPUs"), std::string::npos) << src->describe();
}

TEST_F(Telemetry, AutoEmbedsWhenNoHostEngineAnswers) {
  setenv("AEGIS_EMULATED_GPM", "0", 1);
  setenv("AEGIS_EMULATED_DCGM_HOSTENGINE", "10.0.0.9:5555", 1);  // listening elsewhere
  auto src = open(dcgm());
  ASSERT_TRUE(src);
  EXPECT_STREQ(settled(*src)[0].telemetry_source(), "dcgm");
  EXPECT_NE(src->describe().find("embedded host engine"), std::string::npos) << src->describe();
}

// Every way DCGM can be unavailable leaves the GPU coarse, and the description says why.
struct Unavailable {
  const char* name;
  DcgmOptions options;
  const char* profiling;  // AEGIS_EMULATED_DCGM_PROFILING, or null
  const char* why;
};

class DcgmUnavailable : public Telemetry, public ::testing::WithParamInterface<Unavailable> {};

TEST_P(DcgmUnavailable, GpuReadsCoarse) {
  setenv("AEGIS_EMULATED_GPM", "0", 1);
  if (GetParam().profiling) setenv("AEGIS_EMULATED_DCGM_PROFILING", GetParam().profiling, 1);
  auto src = open(GetParam().options);
  ASSERT_TRUE(src);
  const auto g = settled(*src)[0];
  EXPECT_FALSE(g.smact || g.smocc || g.drama);
  EXPECT_EQ(g.level(), TelemetryLevel::Coarse);
  EXPECT_STREQ(g.telemetry_source(), "coarse");
  const auto d = src->describe();
  EXPECT_NE(d.find(std::string("DCGM: ") + GetParam().why), std::string::npos) << d;
  EXPECT_EQ(d.find('\n'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Telemetry, DcgmUnavailable,
    ::testing::Values(
        Unavailable{"Off", {"off", AEGIS_EMULATED_DCGM, "127.0.0.1", 1}, nullptr, "off (dcgm = \"off\")"},
        Unavailable{"NoLibrary", {"auto", "/nonexistent/libdcgm.so.4", "127.0.0.1", 1}, nullptr,
                    "not used: cannot load DCGM from '/nonexistent/libdcgm.so.4'"},
        Unavailable{"NotDcgm", {"auto", "libm.so.6", "127.0.0.1", 1}, nullptr,
                    "not used: 'libm.so.6' is not a usable DCGM library: it lacks dcgmInit"},
        Unavailable{"NoHostEngine", {"hostengine", AEGIS_EMULATED_DCGM, "127.0.0.1", 1}, nullptr,
                    "not used: cannot connect to nv-hostengine at 127.0.0.1: Host engine connection invalid"},
        Unavailable{"NoProfiling", {"auto", AEGIS_EMULATED_DCGM, "127.0.0.1", 1}, "0",
                    "not used: DCGM cannot profile these GPUs (dcgmWatchFields: Profiling is not supported"}),
    [](const ::testing::TestParamInfo<Unavailable>& p) { return std::string(p.param.name); });

}  // namespace
