#include "job.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>


namespace aegis::fakejob {

namespace {

// The pid the emulated control daemon in `pipe_dir` wrote (emu::kNoServer: none readable).
std::uint32_t mps_server_pid(const std::string& pipe_dir) {
  std::ifstream f(pipe_dir + "/nvidia-cuda-mps-control.pid");
  long pid = 0;
  return f >> pid && pid > 0 ? static_cast<std::uint32_t>(pid) : emu::kNoServer;
}

using Clock = std::chrono::steady_clock;
using Dur = std::chrono::duration<double>;

constexpr int kRampSteps = 5;                // a ramp allocates in this many equal steps
constexpr double kPrintEvery = 5;            // seconds between progress lines
constexpr Dur kLongestNap{0.1};              // how stale the co-runner view may get

// Sleeps until `until`; false as soon as `stop` is set (a signal cuts the nap short).
bool sleep_until(Clock::time_point until, const volatile std::sig_atomic_t& stop) {
  while (!stop) {
    const auto now = Clock::now();
    if (now >= until) return true;
    const double s = std::min(Dur(until - now), kLongestNap).count();
    timespec ts{static_cast<time_t>(s), static_cast<long>((s - static_cast<double>(static_cast<time_t>(s))) * 1e9)};
    nanosleep(&ts, nullptr);
  }
  return false;
}

Clock::time_point after(Clock::time_point t, double seconds) {
  return t + std::chrono::duration_cast<Clock::duration>(Dur(seconds));
}

std::string device_list(emu::State& state, const std::vector<JobDevice>& devices) {
  std::string s;
  for (const auto& d : devices) {
    s += (s.empty() ? "" : ",") + std::to_string(emu::gpu_of(d.id));
    if (emu::is_mig_device(d.id)) s += " MIG " + state.device(d.id).profile;
  }
  return s;
}

// What CUDA reports when an allocation fails, as PyTorch prints it. Under an MPS memory
// limit the client sees the limit as the device's capacity.
void print_oom(emu::State& state, const JobDevice& d, std::size_t ordinal, MiB chunk, MiB held, MiB device_free) {
  MiB total = state.read(d.id).total_mib, free = device_free;
  if (d.mps_limit) {
    total = std::min(total, *d.mps_limit);
    free = std::clamp(*d.mps_limit - held, MiB{0}, free);
  }
  std::fprintf(stderr,
               "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %lld MiB (GPU %zu; %lld MiB total "
               "capacity; %lld MiB free)\n",
               static_cast<long long>(chunk), ordinal, static_cast<long long>(total), static_cast<long long>(free));
}

}  // namespace

int run_job(emu::State& state, const Options& o, const std::vector<JobDevice>& devices, const MpsSettings& mps,
            const emu::ContentionConfig& contention, std::uint32_t pid, const volatile std::sig_atomic_t& stop) {
  if (!sleep_until(after(Clock::now(), o.startup_s), stop)) return 128 + stop;
  // CUDA connects to the MPS control daemon at its first call; the text is cudaErrorMpsConnectionFailed's.
  if (!mps.pipe_dir.empty() && !connect_mps(mps.pipe_dir, pid)) {
    std::fprintf(stderr, "RuntimeError: CUDA error: MPS client failed to connect to the MPS control daemon or the MPS "
                         "server (no control daemon in %s)\n", mps.pipe_dir.c_str());
    return 1;
  }
  // Its speed next to the co-runners it sees now, at its slowest device (synchronous data
  // parallelism). Known before the first step, so that no work is done at a wrong speed.
  auto current_speed = [&] {
    double s = 1;
    for (const auto& d : devices) {
      const emu::DeviceShare share{d.sm_fraction, mps.thread_fraction, !mps.pipe_dir.empty()};
      s = std::min(s, emu::speed_on_device(contention, o.activity, state.co_runners(d.id, pid), share));
    }
    return s;
  };
  MiB held = 0;
  // Takes what it holds on every device to `target`; false (the OOM printed) when it cannot.
  auto grow_to = [&](MiB target) {
    const MiB chunk = target - held;
    for (std::size_t i = 0; i < devices.size(); ++i) {
      const JobDevice& d = devices[i];
      MiB free = 0;
      // An MPS client past its own limit fails like any OOM, however much the device has.
      const bool over_limit = d.mps_limit && held + chunk > *d.mps_limit;
      if (over_limit) {
        const auto r = state.read(d.id);
        free = r.total_mib - r.used_mib;
      }
      if (over_limit || !state.allocate(d.id, pid, chunk, &free)) {
        print_oom(state, d, i, chunk, held, free);
        return false;
      }
    }
    held = target;
    // NVML lists it among the MPS processes, and its work against its server: the emulated
    // control daemon, which stands for the server (its pid file; its name starts with
    // nvidia-cuda-mps, as aegisd tells a server by).
    if (!mps.pipe_dir.empty()) state.mark_mps_client(pid, mps_server_pid(mps.pipe_dir));
    return true;
  };
  // A real job's start (docs/emulated-gpu.md): the CUDA context, then the model loading
  // in steps, memory growing and no kernel running; training comes after.
  if (o.context_mib > 0) {
    if (!grow_to(o.context_mib)) return 1;
    std::printf("aegis-fakejob %u: CUDA context on GPU %s: %lld MiB\n", pid, device_list(state, devices).c_str(),
                static_cast<long long>(o.context_mib));
    std::fflush(stdout);
    if (o.load_activity.smact > 0)  // warm-up kernels at full speed: they are too small to contend
      for (const auto& d : devices) state.set_activity(d.id, pid, o.load_activity, 1.0);
    const MiB loaded = o.loaded_mib > 0 ? o.loaded_mib : o.mem_mib;
    const auto l0 = Clock::now();
    for (int k = 1; k <= kRampSteps && o.load_s > 0; ++k) {
      if (!sleep_until(after(l0, o.load_s * k / kRampSteps), stop)) return 128 + stop;
      if (!grow_to(o.context_mib + (loaded - o.context_mib) * k / kRampSteps)) return 1;
    }
  }
  const MiB base = held;  // training's memory grows from here to mem_mib

  double speed = current_speed();
  const auto t0 = Clock::now();
  std::printf("aegis-fakejob %u: started on GPU %s: %lld MiB each, %.2f s solo\n", pid,
              device_list(state, devices).c_str(), static_cast<long long>(o.mem_mib), o.seconds);

  const int steps = o.ramp_s > 0 ? kRampSteps : 1;
  int steps_done = 0;
  double work = 0, reported_speed = -1, next_print = kPrintEvery;
  const double nap = std::clamp(o.seconds / 50, 0.01, kLongestNap.count());
  auto last = t0;
  for (;;) {
    const auto now = Clock::now();
    work += speed * Dur(now - last).count();
    last = now;
    const double t = Dur(now - t0).count();
    // Memory due by now: step k at k/(steps-1) of the ramp, the whole of it at its end.
    auto step_at = [&](int k) { return steps == 1 ? 0.0 : o.ramp_s * k / (steps - 1); };
    while (steps_done < steps && t >= step_at(steps_done)) {
      if (!grow_to(base + (o.mem_mib - base) * (steps_done + 1) / steps)) return 1;
      ++steps_done;
    }
    if (work >= o.seconds * (1 - 1e-9)) break;

    speed = current_speed();
    if (speed != reported_speed) {
      if (reported_speed < 0) {  // the anchor tests compare aegisd's first activity with this
        timespec wall{};
        clock_gettime(CLOCK_REALTIME, &wall);
        std::printf("aegis-fakejob %u: first kernel at %.3f\n", pid,
                    static_cast<double>(wall.tv_sec) + static_cast<double>(wall.tv_nsec) / 1e9);
        std::fflush(stdout);
      }
      for (const auto& d : devices) state.set_activity(d.id, pid, o.activity, speed);
      reported_speed = speed;
    }
    if (t >= next_print) {
      std::printf("aegis-fakejob %u: %.0f%% (%.1f of %.1f s solo) after %.1f s, speed %.2f, %lld MiB per GPU\n", pid,
                  100 * work / o.seconds, work, o.seconds, t, speed, static_cast<long long>(held));
      next_print += kPrintEvery;
    }
    double wake = t + nap;
    wake = std::min(wake, t + (o.seconds - work) / speed);
    if (steps_done < steps) wake = std::min(wake, step_at(steps_done));
    if (!sleep_until(after(t0, wake), stop)) return 128 + stop;
  }
  std::printf("done: %.2f s wall, %.2f s solo\n", Dur(Clock::now() - t0).count(), o.seconds);
  return 0;
}

}  // namespace aegis::fakejob
