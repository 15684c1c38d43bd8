#include "runtime/gpu/emulated/call_cost.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <iterator>
#include <thread>

#include "runtime/gpu/emulated/driver.h"

namespace aegis::emu {

namespace {

struct CostRow {
  const char* name;
  double p50_us;
};

// p50 of each call on one idle NVIDIA H200 (driver 580.159.04, NVML 13.580.159.04), timed
// 60 times each through nvidia-ml-py on 2026-12-04: data/h200/nvml_call_costs.json (from
// gpu-validation-h200-2026-12-04/nvml-calls/). Under one training job the costly two were
// cheaper (per-process utilisation 1,419 us, energy 2,416 us); the idle figures are the
// ones the in-process sample (mean 6.4 ms, p50 5.4 ms) was measured with. The GPM row is
// half the timed pair of nvmlGpmSampleGet calls. Calls not timed there cost nothing here.
constexpr CostRow kCostTable[] = {
    {"nvmlDeviceGetMemoryInfo", 6.7},
    {"nvmlDeviceGetUtilizationRates", 1.5},
    {"nvmlDeviceGetComputeRunningProcesses", 8.0},
    {"nvmlDeviceGetMPSComputeRunningProcesses", 7.9},
    {"nvmlDeviceGetProcessUtilization", 2638.0},
    {"nvmlDeviceGetPowerUsage", 3.3},
    {"nvmlDeviceGetTotalEnergyConsumption", 3185.5},
    {"nvmlDeviceGetMigMode", 130.3},
    {"nvmlDeviceGetUUID", 2.4},
    {"nvmlGpmSampleGet", 45.6},
};
static_assert(std::size(kCostTable) == static_cast<std::size_t>(Call::Count_));

constexpr double kSpinBelowUs = 200;

std::atomic<std::uint64_t> g_calls[static_cast<std::size_t>(Call::Count_)];

}  // namespace

const char* call_name(Call c) { return kCostTable[static_cast<std::size_t>(c)].name; }

double call_cost_us(Call c) { return kCostTable[static_cast<std::size_t>(c)].p50_us; }

void charge(Call c) {
  g_calls[static_cast<std::size_t>(c)].fetch_add(1, std::memory_order_relaxed);
  if (!driver_options().call_costs) return;
  using Clock = std::chrono::steady_clock;
  const auto cost = std::chrono::nanoseconds(static_cast<std::int64_t>(call_cost_us(c) * 1000));
  if (call_cost_us(c) >= kSpinBelowUs) {
    std::this_thread::sleep_for(cost);
    return;
  }
  const auto until = Clock::now() + cost;
  while (Clock::now() < until) {
  }
}

std::uint64_t calls_of(const char* name) {
  if (!name) return 0;
  for (std::size_t i = 0; i < std::size(kCostTable); ++i)
    if (std::strcmp(kCostTable[i].name, name) == 0) return g_calls[i].load(std::memory_order_relaxed);
  return 0;
}

}  // namespace aegis::emu
