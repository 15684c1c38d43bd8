#include "sim/dispatch/what_if.h"

#include <algorithm>

namespace aegis::simrun {

// The statistics of some GPUs' windows replaced (the others keep theirs as of now, built
// on demand): what the engine would decide if these GPUs' windows were those.
class PressureWhatIf::OverriddenWindows final : public WindowStatsSource {
 public:
  // A GPU's window replaced by runs of samples; each metric's statistics are worked out
  // only when the engine reads them (the pressure rule often reads SM activity alone).
  OverriddenWindows(TelemetryWindows& windows, WindowStatsSource* rest, std::span<const int> locals)
      : windows_(windows), rest_(rest), locals_(locals) {
    entries_.resize(locals.size());
  }
  // Entry i (for locals[i]) is these statistics for every metric.
  void set_stats(std::size_t i, const std::array<WindowStats, 4>& stats) {
    entries_[i].stats = stats;
    entries_[i].known = 0xf;
  }
  // Entry i is the window these runs spell out; the caller fills them.
  Runs& runs(std::size_t i) {
    entries_[i].known = 0;
    entries_[i].runs.clear();
    return entries_[i].runs;
  }
  const WindowStats& stats(int local, int metric) override {
    for (std::size_t i = 0; i < locals_.size(); ++i)
      if (locals_[i] == local) {
        Entry& e = entries_[i];
        const unsigned bit = 1u << metric;
        if (!(e.known & bit)) {
          e.stats[static_cast<std::size_t>(metric)] = windows_.stats_of_runs(e.runs, metric);
          e.known |= bit;
        }
        return e.stats[static_cast<std::size_t>(metric)];
      }
    return rest_->stats(local, metric);
  }

 private:
  struct Entry {
    Runs runs;
    std::array<WindowStats, 4> stats;
    unsigned known = 0;  // bit m: stats[m] is worked out
  };
  TelemetryWindows& windows_;
  WindowStatsSource* rest_;
  std::span<const int> locals_;
  std::vector<Entry> entries_;
};

// The server's engine asked whether it would start `job` at t with these windows: a
// what-if through the server's placer, not a placement (the server's state stays).
inline bool PressureWhatIf::refused_with(Server& srv, const QueuedJob& job, Seconds t, OverriddenWindows& windows) {
  ++st_.n_ticks;
  st_.n_visits += static_cast<std::uint64_t>(srv.ngpus);
  return srv.placer.refuses_with(job, t, windows, answer_);
}

// Until the next event, every window of these GPUs is made of samples already in it and
// of the GPU's current value. The pressure verdict only grows with activity (every risk
// statistic is at least the window's minimum times the weights' sum, and the rule is
// monotone), so if the engine refuses even windows holding just the component-wise
// minimum of those values, no later window of this quiet period can pass.
bool PressureWhatIf::refused_at_floor(Server& srv, const QueuedJob& job, Seconds t, std::span<const int> locals) {
  OverriddenWindows windows(windows_, srv.placer.window_stats, locals);
  for (std::size_t i = 0; i < locals.size(); ++i) {
    const Gpu& gpu = st_.gpus[static_cast<std::size_t>(srv.first_gpu + locals[i])];
    GpuSample m = gpu.sample;
    for (const auto& [x, count] : gpu.window) {
      m.smact = std::min(m.smact, x.smact);
      m.smocc = std::min(m.smocc, x.smocc);
      m.drama = std::min(m.drama, x.drama);
      m.util = std::min(m.util, x.util);
    }
    // A window of that one sample, as the engine would summarise it.
    const double one[4] = {m.smact, m.smocc, m.drama, m.util};
    std::array<WindowStats, 4> stats;
    for (std::size_t k = 0; k < 4; ++k) stats[k] = {one[k], one[k], one[k], one[k]};  // every statistic of one sample
    windows.set_stats(i, stats);
  }
  return refused_with(srv, job, t, windows);
}

std::int64_t PressureWhatIf::first_passing_sample(Server& srv, const QueuedJob& job, Seconds t,
                                                  std::span<const int> locals) {
  const std::int64_t n = n_;
  OverriddenWindows windows(windows_, srv.placer.window_stats, locals);
  // The window j samples on: the oldest j samples gone, the current value j times.
  auto refused_after = [&](std::int64_t j) {
    for (std::size_t i = 0; i < locals.size(); ++i) {
      const Gpu& gpu = st_.gpus[static_cast<std::size_t>(srv.first_gpu + locals[i])];
      auto& future = windows.runs(i);
      std::int64_t drop = j;
      for (const auto& [x, count] : gpu.window) {
        const std::int64_t gone = std::min<std::int64_t>(drop, count);
        drop -= gone;
        if (count > gone) future.push_back({x, static_cast<std::uint32_t>(count - gone)});
      }
      future.push_back({gpu.sample, static_cast<std::uint32_t>(j)});
    }
    return refused_with(srv, job, t, windows);
  };
  // Passes at n, without asking: n samples on, each window is n copies of the current
  // value, which for falling windows is the component-wise minimum of the window and
  // the current value, the one-sample window refused_at_floor() found passing (the
  // dispatcher asks it first, and a steady window's statistics are that value, every one).
  std::int64_t lo = 0, hi = n;  // refused at lo (now), passes at hi
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (refused_after(mid)) lo = mid;
    else hi = mid;
  }
  return hi;
}

}  // namespace aegis::simrun
