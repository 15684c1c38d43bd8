// nvml_probe: the validation's NVML self-check. Through aegisd's own loader (open_nvml), it
// prints as JSON everything one sample of every GPU holds (memory, utilisation, processes,
// power, energy, MIG, GPM activity) before and after a GPM interval, then what one in-process
// sample costs (reading everything; neither per-process utilisation nor energy, as aegisd
// mostly asks; per-process utilisation without energy) against one run of each given
// command (nvidia-smi, aegis-gpu-query): the published prototype paid a subprocess per
// sample; bench/bench_gpu_sample.cpp measures the same on emulated GPUs. Built by `scripts/gpu-validate.sh --prepare` against the build's
// libaegis_gpu.a; not part of the CMake build on purpose (a validation tool, not a product).
//   nvml_probe [--library PATH] [--gpm-interval-ms MS] [--samples N] [--runs M] [--max-seconds S]
//              [--time 'CMD ARGS']...
// --max-seconds caps each timing loop (the samples, each command's runs): a driver in a VM or
// without persistence mode may answer far slower than expected, and the run has a budget.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <numeric>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <vector>

#include "runtime/gpu/gpu_source.h"

extern char** environ;

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

json stats(std::vector<double> v, double scale) {
  if (v.empty()) return json(nullptr);
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return scale * v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))]; };
  return {{"n", v.size()},
          {"mean", scale * std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size())},
          {"p50", at(0.5)},
          {"p99", at(0.99)},
          {"max", scale * v.back()}};
}

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json to_json(const std::vector<aegis::GpuStatus>& gpus) {
  json out = json::array();
  for (const auto& g : gpus) {
    json procs = json::array();
    for (const auto& p : g.processes) procs.push_back({{"pid", p.pid}, {"used_mib", p.used_mib ? json(*p.used_mib) : json(nullptr)}});
    const auto level = g.level();
    out.push_back({{"index", g.index}, {"uuid", g.uuid}, {"name", g.name}, {"memory_total_mib", g.total_mib},
                   {"memory_used_mib", g.used_mib}, {"memory_free_mib", g.free_mib}, {"utilization", opt(g.util)},
                   {"smact", opt(g.smact)}, {"smocc", opt(g.smocc)}, {"drama", opt(g.drama)},
                   {"power_w", opt(g.power_w)}, {"energy_j", opt(g.energy_j)}, {"mig_enabled", g.mig_enabled},
                   {"parent_uuid", g.parent_uuid}, {"mig_profile", g.mig_profile},
                   {"telemetry", level == aegis::TelemetryLevel::Full     ? "full"
                                 : level == aegis::TelemetryLevel::Coarse ? "coarse"
                                                                          : "memory-only"},
                   {"processes", procs}});
  }
  return out;
}

// One run of `cmd` with its output discarded: seconds, or a negative number if it failed.
double run_once(const std::vector<std::string>& cmd) {
  std::vector<char*> argv;
  for (const auto& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  const auto t0 = Clock::now();
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  if (rc != 0 || waitpid(pid, &status, 0) != pid) return -1;
  const double s = secs(t0, Clock::now());
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? s : -1;
}

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "nvml_probe: %s\n", msg.c_str());
  std::exit(2);
}

long number(const char* s, const char* what, long lo, long hi) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (*end || v < lo || v > hi) usage_error(std::string(what) + ": '" + s + "' is not a number in range");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string library = "libnvidia-ml.so.1";
  long gpm_ms = 1000, samples = 1000, runs = 20, max_seconds = 5;
  std::vector<std::string> timed;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--library" && has) library = argv[++i];
    else if (a == "--gpm-interval-ms" && has) gpm_ms = number(argv[++i], "--gpm-interval-ms", 1, 60000);
    else if (a == "--samples" && has) samples = number(argv[++i], "--samples", 1, 10000000);
    else if (a == "--runs" && has) runs = number(argv[++i], "--runs", 1, 100000);
    else if (a == "--max-seconds" && has) max_seconds = number(argv[++i], "--max-seconds", 1, 3600);
    else if (a == "--time" && has) timed.push_back(argv[++i]);
    else usage_error("unknown or incomplete argument '" + a + "'");
  }

  json out = {{"library", library}};
  const auto t_open = Clock::now();
  std::string error;
  auto source = aegis::open_nvml(library, &error);
  out["open_ms"] = 1e3 * secs(t_open, Clock::now());
  if (!source) {
    out["error"] = error;
    std::printf("%s\n", out.dump(2).c_str());
    std::fprintf(stderr, "nvml_probe: %s\n", error.c_str());
    return 1;
  }
  out["describe"] = source->describe();
  try {
    out["first_sample"] = to_json(source->sample());
    std::this_thread::sleep_for(std::chrono::milliseconds(gpm_ms));
    const auto second = source->sample();  // GPM metrics are means between two samples
    out["after_interval"] = to_json(second);
    out["gpm_interval_ms"] = gpm_ms;
    bool gpm = !second.empty();
    for (const auto& g : second) gpm = gpm && g.smact && g.smocc && g.drama;
    out["gpm_metrics_present"] = gpm;

    // Every call on every GPU (aegisd before issue 30), then what aegisd asks now: neither
    // costly call, or per-process utilisation on every GPU (a job awaits its anchor on each).
    auto time_samples = [&](const aegis::SampleRequest& what) {
      std::vector<double> t;
      t.reserve(static_cast<std::size_t>(samples));
      const auto loop_start = Clock::now();
      for (long i = 0; i < samples && secs(loop_start, Clock::now()) < static_cast<double>(max_seconds); ++i) {
        const auto t0 = Clock::now();
        const auto s = source->sample(what);
        t.push_back(secs(t0, Clock::now()));
        if (s.empty()) throw std::runtime_error("a sample came back with no GPUs");
      }
      return stats(t, 1e6);
    };
    out["in_process_sample_us"] = time_samples(aegis::SampleRequest{});
    out["in_process_cheap_sample_us"] = time_samples(aegis::SampleRequest::cheap());
    aegis::SampleRequest anchoring = aegis::SampleRequest::cheap();
    anchoring.process_util_everywhere = true;
    out["in_process_anchoring_sample_us"] = time_samples(anchoring);
    out["gpus"] = second.size();
  } catch (const std::exception& e) {
    out["error"] = std::string("sample: ") + e.what();
  }

  json spawned = json::array();
  for (const auto& line : timed) {
    std::vector<std::string> cmd;
    std::istringstream ss(line);
    for (std::string w; ss >> w;) cmd.push_back(w);
    if (cmd.empty()) continue;
    std::vector<double> t;
    long failed = 0, tried = 0;
    const auto loop_start = Clock::now();
    for (long i = 0; i < runs && secs(loop_start, Clock::now()) < static_cast<double>(max_seconds); ++i, ++tried) {
      const double s = run_once(cmd);
      if (s < 0) ++failed;
      else t.push_back(s);
    }
    spawned.push_back({{"command", line}, {"runs", tried}, {"failed", failed}, {"ms", stats(t, 1e3)}});
  }
  out["subprocess_per_sample"] = spawned;
  if (out.contains("in_process_sample_us") && out["in_process_sample_us"].is_object())
    for (auto& s : out["subprocess_per_sample"])
      if (s["ms"].is_object())
        s["ratio_to_in_process"] = s["ms"]["mean"].get<double>() * 1e3 / out["in_process_sample_us"]["mean"].get<double>();
  std::printf("%s\n", out.dump(2).c_str());
  return out.contains("error") ? 1 : 0;
}
