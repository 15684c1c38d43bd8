#include "sim/world/telemetry.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "sim/models/random.h"

namespace aegis::simrun {

void TelemetryWindows::attach() {
  for (std::size_t s = 0; s < st_.servers.size(); ++s) {
    lazy_.push_back(std::make_unique<LazyWindows>(*this, static_cast<int>(s)));
    st_.servers[s].placer.window_stats = lazy_.back().get();
  }
}

// A GPU's window is synthesised at the sample instants up to `t` only when a stage first
// reads it, and its statistics are remembered until it changes. Most GPUs asked about are
// refused by memory or the observation gate before any stage looks at their telemetry.
inline const WindowStats& TelemetryWindows::stats(int s, int local, int metric, Seconds t) {
  Server& srv = st_.servers[static_cast<std::size_t>(s)];
  Gpu& gpu = st_.gpus[static_cast<std::size_t>(srv.first_gpu + local)];
  // ensure_window's common case, checked here without the call: the window of this
  // instant's sample is built from the GPU's current history (asked of one GPU for
  // several metrics in a row, and of several GPUs at one instant).
  if (t != sample_of_t_ || gpu.window_k != sample_k_ || gpu.window_history != gpu.history_version)
    ensure_window(srv, local, t);
  const unsigned bit = 1u << metric;
  if (!(gpu.stats_known & bit)) {
    gpu.stats[static_cast<std::size_t>(metric)] = stats_of_runs(gpu.window, metric);
    gpu.stats_known |= bit;
  }
  return gpu.stats[static_cast<std::size_t>(metric)];
}

WindowStats TelemetryWindows::stats_of_runs(const Runs& runs, int metric) {
  const std::size_t n = runs.size();
  // A step function's window is a few runs: on the stack (uninitialised: n are written).
  std::array<SampleRun, 16> few;
  SampleRun* out = few.data();
  if (n > few.size()) {
    metric_runs_.resize(n);
    out = metric_runs_.data();
  }
  const auto* in = runs.data();
  switch (metric) {  // outside the loop: this runs at every window change
    case 0: for (std::size_t i = 0; i < n; ++i) out[i] = {in[i].first.smact, in[i].second}; break;
    case 1: for (std::size_t i = 0; i < n; ++i) out[i] = {in[i].first.smocc, in[i].second}; break;
    case 2: for (std::size_t i = 0; i < n; ++i) out[i] = {in[i].first.drama, in[i].second}; break;
    default: for (std::size_t i = 0; i < n; ++i) out[i] = {in[i].first.util, in[i].second}; break;
  }
  return window_stats(std::span<const SampleRun>(out, n));
}

void TelemetryWindows::ensure_window(Server& srv, int local, Seconds t) {
  const double hz = opt_.engine.telemetry_sample_hz;
  const int n = opt_.engine.telemetry_window_samples;
  // Asked for many GPUs at one instant: the sample index is worked out once per instant.
  if (t != sample_of_t_) {
    sample_of_t_ = t;
    sample_k_ = static_cast<std::int64_t>(std::floor(t * hz + 1e-9));
    // The run's first sample instant: the same at every instant, worked out here rather
    // than for every window built.
    first_sample_k_ = static_cast<std::int64_t>(std::ceil(st_.start * hz - 1e-9));
  }
  const std::int64_t k_now = sample_k_;
  const int g = srv.first_gpu + local;
  Gpu& gpu = st_.gpus[static_cast<std::size_t>(g)];
  if (gpu.window_k == k_now && gpu.window_history == gpu.history_version) return;  // the common case
  const std::int64_t k_lo = std::max(k_now - n + 1, first_sample_k_);
  if (still_valid(gpu, k_now, k_lo, n, hz)) {
    // Steady: the window at k_now is the same runs; said so, the next ask at this
    // instant takes the common case above (still_valid holds the more for a later
    // window_k: its oldest sample only moves later).
    gpu.window_k = k_now;
    return;
  }
  gpu.window_k = k_now;
  gpu.window_history = gpu.history_version;
  gpu.window_n = std::max<std::int64_t>(0, k_now - k_lo + 1);
  // The statistics are kept if the new window spells the same runs (about 2 rebuilds
  // in 5: a change point after the newest sample, a steady window whose history moved):
  // same runs, same statistics, bit for bit.
  window_before_.swap(gpu.window);
  gpu.window.clear();
  const auto& hist = gpu.history;
  constexpr Seconds kInf = std::numeric_limits<Seconds>::infinity();
  auto ts_of = [hz](std::int64_t k) { return static_cast<double>(k) / hz; };
  // The first sample instant at or after time x, as the comparison below decides it.
  auto first_k_at = [&](Seconds x) {
    auto e = static_cast<std::int64_t>(std::ceil(x * hz));
    while (ts_of(e - 1) >= x) --e;
    while (ts_of(e) < x) ++e;
    return e;
  };
  // Sample k reads the last change point at or before its instant (nothing before the
  // first); a change point holds for a run of samples, filled at once.
  std::size_t h = 0;
  for (std::int64_t k = k_lo; k <= k_now;) {
    const Seconds ts = ts_of(k);
    while (h + 1 < hist.size() && hist[h + 1].first <= ts) ++h;
    const bool after = hist[h].first <= ts;
    const GpuSample x = after ? hist[h].second : GpuSample{};
    const Seconds until = after ? (h + 1 < hist.size() ? hist[h + 1].first : kInf) : hist[h].first;
    const std::int64_t end = until < kInf ? std::min(k_now + 1, first_k_at(until)) : k_now + 1;
    if (end > k) gpu.window.push_back({x, static_cast<std::uint32_t>(end - k)});
    k = std::max(k, end);
  }
  if (opt_.sim.telemetry_noise > 0) {  // every sample jitters on its own
    noisy_runs_.clear();
    std::int64_t k = k_lo;
    for (const auto& [x, count] : gpu.window)
      for (std::uint32_t i = 0; i < count; ++i, ++k) noisy_runs_.push_back({noisy(x, g, k), 1});
    gpu.window.swap(noisy_runs_);
  }
  if (!same_runs(gpu.window, window_before_)) gpu.stats_known = 0;
}

// Whether two windows are the same runs, every value bit for bit (as the statistics read them).
const WindowStats& TelemetryWindows::LazyWindows::stats(int local, int metric) {
  return w_.stats(server_, local, metric, now);
}

bool TelemetryWindows::same_runs(const Runs& a, const Runs& b) {
  if (a.size() != b.size()) return false;
  auto bits = [](double v) { return std::bit_cast<std::uint64_t>(v); };
  for (std::size_t i = 0; i < a.size(); ++i) {
    const GpuSample &x = a[i].first, &y = b[i].first;
    if (a[i].second != b[i].second || bits(x.smact) != bits(y.smact) || bits(x.smocc) != bits(y.smocc) ||
        bits(x.drama) != bits(y.drama) || bits(x.util) != bits(y.util))
      return false;
  }
  return true;
}

// A window built earlier still holds if nothing changed since, and either no sample
// instant passed or the GPU was already steady over the whole earlier window (then every
// sample, old or new, is the current value).
bool TelemetryWindows::still_valid(const Gpu& gpu, std::int64_t k_now, std::int64_t k_lo, int n, double hz) const {
  if (gpu.window_history != gpu.history_version || gpu.window_k < 0) return false;
  if (gpu.window_k == k_now) return true;
  if (opt_.sim.telemetry_noise > 0 || k_lo != k_now - n + 1) return false;
  const std::int64_t old_lo = gpu.window_k - n + 1;
  return gpu.window_n == n && gpu.history.back().first <= static_cast<double>(old_lo) / hz;
}

GpuSample TelemetryWindows::noisy(GpuSample s, int g, std::int64_t k) const {
  auto jitter = [&](double x, std::uint64_t m) {
    if (x <= 0) return x;  // an idle GPU reads zero
    const auto key = static_cast<std::uint64_t>(g) * 8 + m;
    const double z = standard_normal(hash_keys(opt_.seed, 0x7e1e, key, static_cast<std::uint64_t>(k)),
                                     hash_keys(opt_.seed, 0x7e1f, key, static_cast<std::uint64_t>(k)));
    return std::clamp(x + opt_.sim.telemetry_noise * z, 0.0, 1.0);
  };
  return {jitter(s.smact, 0), jitter(s.smocc, 1), jitter(s.drama, 2), jitter(s.util, 3)};
}

bool TelemetryWindows::changing(const Server& srv, std::span<const int> locals, Seconds t) const {
  if (opt_.sim.telemetry_noise > 0) return true;
  const Seconds span = opt_.engine.telemetry_window_samples / opt_.engine.telemetry_sample_hz;
  for (int local : locals)
    if (st_.gpus[static_cast<std::size_t>(srv.first_gpu + local)].history.back().first > t - span) return true;
  return false;
}

// Each is full, never rises from one sample to the next, and the GPU's current value is
// at most its newest sample (activity that fell when a job ended). Each later sample drops
// the oldest and repeats the current value, so every statistic (sums in the same order,
// quantiles, an EWMA with positive weights) only falls, and so does the pressure verdict:
// once a window passes, every later one does.
bool TelemetryWindows::falling(Server& srv, std::span<const int> locals, Seconds t) {
  if (opt_.sim.telemetry_noise > 0) return false;
  const int n = opt_.engine.telemetry_window_samples;
  auto at_most = [](const GpuSample& a, const GpuSample& b) {
    return a.smact <= b.smact && a.smocc <= b.smocc && a.drama <= b.drama && a.util <= b.util;
  };
  for (int local : locals) {
    ensure_window(srv, local, t);
    const Gpu& gpu = st_.gpus[static_cast<std::size_t>(srv.first_gpu + local)];
    if (gpu.window_n != n || gpu.window.empty()) return false;
    const GpuSample* prev = nullptr;
    for (const auto& [x, count] : gpu.window) {
      if (prev && !at_most(x, *prev)) return false;
      prev = &x;
    }
    if (!at_most(gpu.sample, *prev)) return false;
  }
  return true;
}

}  // namespace aegis::simrun
