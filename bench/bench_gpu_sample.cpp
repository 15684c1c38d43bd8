// What one GPU sample costs in process (the NVML loader, on 8 emulated GPUs running a few
// processes, the emulated library charging each call what it costs on an H200:
// src/runtime/gpu/emulated/call_cost.cpp) as aegisd used to ask it (every call on every
// GPU), as it asks now (per-process utilisation only where a job awaits its anchor, never
// energy), and against a subprocess per sample (fork+exec of aegis-gpu-query, which loads
// NVML and asks once), as the published prototype paid with nvidia-smi. Prints figures.
//   build/bench/bench_gpu_sample [samples per mode] [subprocess runs]
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <numeric>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "runtime/gpu/emulated/state.h"
#include "runtime/gpu/gpu_source.h"

extern char** environ;

namespace {

using namespace aegis;
using Clock = std::chrono::steady_clock;

constexpr int kGpus = 8;
constexpr int kProcesses = 6;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Stats {
  double mean = 0, p50 = 0, p99 = 0;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()), v[v.size() / 2],
          v[std::min(v.size() - 1, v.size() * 99 / 100)]};
}

// A child holding memory and activity on two GPUs, as a training job would; it waits to be killed.
pid_t start_holder(const std::string& path, int i) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    std::string error;
    auto s = emu::State::open(path, {}, &error);
    const auto me = static_cast<std::uint32_t>(getpid());
    bool ok = s != nullptr;
    for (int g : {i % kGpus, (i + 3) % kGpus}) {
      ok = ok && s->allocate(g, me, 4000 + 1000 * i);
      ok = ok && s->set_activity(g, me, {0.3 + 0.1 * i, 0.2, 0.25, 0.5});
    }
    const char c = ok ? 'y' : 'n';
    if (write(fds[1], &c, 1) != 1) _exit(1);
    for (;;) pause();
  }
  char c = 'n';
  const bool got = read(fds[0], &c, 1) == 1;
  close(fds[0]);
  close(fds[1]);
  return got && c == 'y' ? pid : -1;
}

// One run of aegis-gpu-query, output discarded; seconds, or -1 if it failed.
double run_query() {
  const std::string lib = AEGIS_EMULATED_NVML;
  const char* argv[] = {AEGIS_GPU_QUERY, "--library", lib.c_str(), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  const auto t0 = Clock::now();
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  if (rc != 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return seconds_since(t0);
}

// `n` samples asking `what`, after a few to warm up (buffers grown, caches hot).
Stats time_samples(GpuSource& source, const SampleRequest& what, int n) {
  for (int i = 0; i < 5; ++i) source.sample(what);
  std::vector<double> t;
  t.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    source.sample(what);
    t.push_back(seconds_since(t0));
  }
  return stats(std::move(t));
}

void print(const char* what, const Stats& s) {
  std::printf("%-52s mean %8.1f us, p50 %8.1f us, p99 %8.1f us\n", what, s.mean * 1e6, s.p50 * 1e6, s.p99 * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  const int samples = argc > 1 ? std::atoi(argv[1]) : 200;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 20;
  const std::string path = "/tmp/aegis_bench_gpu_sample_" + std::to_string(getpid()) + ".state";
  setenv("AEGIS_EMULATED_STATE", path.c_str(), 1);
  setenv("AEGIS_EMULATED_GPUS", "8x81920", 1);
  std::string error;
  const auto state = emu::State::open(path, std::vector<emu::GpuSpec>(kGpus, {81920}), &error);
  if (!state) {
    std::fprintf(stderr, "bench_gpu_sample: %s\n", error.c_str());
    return 1;
  }
  std::vector<pid_t> holders;
  for (int i = 0; i < kProcesses; ++i) holders.push_back(start_holder(path, i));
  auto cleanup = [&] {
    for (pid_t p : holders) {
      if (p <= 0) continue;
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
    std::remove(path.c_str());
  };
  if (std::count(holders.begin(), holders.end(), -1) > 0) {
    std::fprintf(stderr, "bench_gpu_sample: a holder process failed\n");
    cleanup();
    return 1;
  }
  // Each mode opens the library anew: it reads AEGIS_EMULATED_CALL_COSTS at nvmlInit.
  auto open = [&](bool costs) {
    setenv("AEGIS_EMULATED_CALL_COSTS", costs ? "1" : "0", 1);
    auto s = open_nvml(AEGIS_EMULATED_NVML, &error);
    if (!s) std::fprintf(stderr, "bench_gpu_sample: %s\n", error.c_str());
    return s;
  };
  std::printf("%d emulated GPUs, %d processes, %d samples per mode\n", kGpus, kProcesses * 2, samples);
  Stats costly_all, cheap, one_anchor, free_cheap;
  {
    auto source = open(true);
    if (!source) return cleanup(), 1;
    std::printf("%s\n", source->describe().c_str());
    SampleRequest one = SampleRequest::cheap();
    one.process_util = {source->sample(SampleRequest::cheap())[0].uuid};
    costly_all = time_samples(*source, SampleRequest{}, samples);
    one_anchor = time_samples(*source, one, samples);
    cheap = time_samples(*source, SampleRequest::cheap(), samples);
  }
  {
    auto source = open(false);
    if (!source) return cleanup(), 1;
    free_cheap = time_samples(*source, SampleRequest::cheap(), samples * 10);
  }
  std::vector<double> subprocess;
  setenv("AEGIS_EMULATED_CALL_COSTS", "1", 1);
  for (int i = 0; i < runs; ++i)
    if (const double s = run_query(); s >= 0) subprocess.push_back(s);
  cleanup();
  if (subprocess.empty()) {
    std::fprintf(stderr, "bench_gpu_sample: aegis-gpu-query failed\n");
    return 1;
  }
  std::printf("with the H200 call costs (AEGIS_EMULATED_CALL_COSTS=1):\n");
  print("  every call on every GPU (aegisd before issue 30)", costly_all);
  print("  per-process utilisation on 1 GPU, no energy", one_anchor);
  print("  no per-process utilisation, no energy (aegisd now)", cheap);
  print("  fork+exec aegis-gpu-query (cheap request)", stats(subprocess));
  std::printf("without call costs (AEGIS_EMULATED_CALL_COSTS=0):\n");
  print("  no per-process utilisation, no energy", free_cheap);
  std::printf("before / now (mean): %.0fx\n", costly_all.mean / cheap.mean);
  return 0;
}
