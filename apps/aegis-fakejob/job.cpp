#include "job.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "sim/models/interference.h"
#include "sim/sim_config.h"

namespace aegis::fakejob {

namespace {

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

std::string gpu_list(const std::vector<int>& gpus) {
  std::string s;
  for (int g : gpus) s += (s.empty() ? "" : ",") + std::to_string(g);
  return s;
}

}  // namespace

int run_job(emu::State& state, const Options& o, const std::vector<int>& gpus, std::uint32_t pid,
            const volatile std::sig_atomic_t& stop) {
  const SimConfig sim;
  const InterferenceModel model{sim.interference_util_coeff, sim.interference_dram_coeff};
  const ActivityProfile self{o.activity.util, o.activity.drama};

  if (!sleep_until(after(Clock::now(), o.startup_s), stop)) return 128 + stop;
  const auto t0 = Clock::now();
  std::printf("aegis-fakejob %u: started on GPU %s: %lld MiB each, %.2f s solo\n", pid, gpu_list(gpus).c_str(),
              static_cast<long long>(o.mem_mib), o.seconds);

  const int steps = o.ramp_s > 0 ? kRampSteps : 1;
  int steps_done = 0;
  MiB held = 0;
  double work = 0, speed = 1, reported_speed = -1, next_print = kPrintEvery;
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
      const MiB target = o.mem_mib * (steps_done + 1) / steps, chunk = target - held;
      for (std::size_t i = 0; i < gpus.size(); ++i) {
        MiB free = 0;
        if (!state.allocate(gpus[i], pid, chunk, &free)) {
          std::fprintf(stderr,
                       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %lld MiB (GPU %zu; %lld MiB total "
                       "capacity; %lld MiB free)\n",
                       static_cast<long long>(chunk), i, static_cast<long long>(state.read(gpus[i]).total_mib),
                       static_cast<long long>(free));
          return 1;
        }
      }
      held = target;
      ++steps_done;
    }
    if (work >= o.seconds * (1 - 1e-9)) break;

    speed = 1;  // at its slowest GPU, as in the simulator
    for (int g : gpus) {
      const auto c = state.co_runners(g, pid);
      speed = std::min(speed, model.speed(self, c.util, c.drama));
    }
    if (speed != reported_speed) {
      for (int g : gpus) state.set_activity(g, pid, o.activity, speed);
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
