// aegis-fakejob: an emulated training job for the emulated GPUs (docs/emulated-gpu.md).
// Exit status: 0 done, 1 a CUDA error (out of memory, also at an MPS memory limit; no MPS
// control daemon) or an emulated GPU state it cannot reach (its lock held too long, the file
// damaged: state.h), 2 bad arguments or no emulated GPUs, 128 + signal on SIGTERM/SIGINT.
// Whatever the exit, it gives back what it holds.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <unistd.h>
#include <vector>

#include "job.h"
#include "mps_client.h"
#include "options.h"
#include "visible_gpus.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;

extern "C" void on_signal(int sig) { g_stop = sig; }

int usage_error(const std::string& why) {
  std::fprintf(stderr, "aegis-fakejob: %s\n", why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) try {
  using namespace aegis;
  struct sigaction sa {};
  sa.sa_handler = on_signal;  // no SA_RESTART: a signal cuts a nap short
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines reach a log file as they happen

  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(fakejob::kUsage, stdout);
      return 0;
    }
  fakejob::Options o;
  std::string error;
  if (!fakejob::parse_options(argc, argv, &o, &error)) return usage_error(error);
  const char* path = std::getenv("AEGIS_EMULATED_STATE");
  if (!path || !*path) return usage_error("AEGIS_EMULATED_STATE is not set: no emulated GPUs to run on");
  auto state = emu::State::open(path, {}, &error);
  if (!state) return usage_error(error);
  if (state->gpu_count() == 0) {
    // Nobody has configured the machine yet; AEGIS_EMULATED_GPUS (with AEGIS_EMULATED_MIG)
    // may (it never reshapes one that a daemon is already using).
    const char* spec = std::getenv("AEGIS_EMULATED_GPUS");
    if (!spec || !*spec) return usage_error(std::string("no emulated GPUs in ") + path + ": set AEGIS_EMULATED_GPUS");
    const auto gpus = emu::parse_gpu_specs(spec, &error);
    if (gpus.empty()) return usage_error(error);
    const char* mig_text = std::getenv("AEGIS_EMULATED_MIG");
    const auto mig = emu::parse_mig_layout(mig_text ? mig_text : "", &error);
    if (!mig) return usage_error(error);
    state = emu::State::open(path, gpus, &error);
    if (!state || !state->set_mig(*mig, &error)) return usage_error(error);
  }
  const auto ids = fakejob::visible_gpus(std::getenv("CUDA_VISIBLE_DEVICES"), *state, &error);
  if (ids.empty()) return usage_error(error);
  fakejob::MpsSettings mps;
  if (!fakejob::read_mps_settings(static_cast<int>(ids.size()), &mps, &error)) return usage_error(error);
  std::vector<fakejob::JobDevice> devices;
  for (std::size_t i = 0; i < ids.size(); ++i)
    devices.push_back({ids[i], state->device(ids[i]).sm_fraction(), mps.limits[i]});

  // The contention model's parameters (docs/emulated-gpu.md): the defaults, or a trial's
  // "name=value,..." in AEGIS_EMULATED_CONTENTION.
  emu::ContentionConfig contention;
  if (const char* v = std::getenv("AEGIS_EMULATED_CONTENTION"); v && *v) {
    try {
      emu::set_params(contention, v);
    } catch (const ConfigError& e) {
      return usage_error(std::string("AEGIS_EMULATED_CONTENTION: ") + e.what());
    }
  }

  const auto pid = static_cast<std::uint32_t>(getpid());
  int rc = 1;
  try {
    rc = fakejob::run_job(*state, o, devices, mps, contention, pid, g_stop);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aegis-fakejob: %s\n", e.what());
  }
  try {
    state->release(pid);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aegis-fakejob: %s\n", e.what());
    rc = rc == 0 ? 1 : rc;
  }
  return rc;
} catch (const std::exception& e) {  // the state unreachable outside the job's own loop
  std::fprintf(stderr, "aegis-fakejob: %s\n", e.what());
  return 1;
}
