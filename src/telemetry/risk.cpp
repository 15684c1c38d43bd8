#include "telemetry/risk.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <vector>

namespace aegis {

namespace {

// Quantile q in [0,1] of sorted values, linear between closest ranks.
double quantile_sorted(std::span<const double> sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

// Windows come back: a simulated GPU runs the same few jobs for long, so the same runs of
// samples are summarised again and again (whole Philly trace under aegis: 486,502
// windows, 43,803 distinct). A small per-thread table of recent summaries, each checked
// against its whole key, skips the sample-by-sample sums; a hit returns what the
// computation gave for the same key, so the result is the same bit for bit.
struct MemoSlot {
  std::uint32_t nruns = 0;  // 0: empty
  std::array<SampleRun, 4> runs;
  WindowStats stats;
};
constexpr std::size_t kMemoSlots = 4096;  // a power of two

std::uint64_t memo_hash(const SampleRun* runs, std::size_t nruns) {
  std::uint64_t h = 0x9e3779b97f4a7c15ull;
  for (std::size_t i = 0; i < nruns; ++i) {
    h = (h ^ std::bit_cast<std::uint64_t>(runs[i].value)) * 0xff51afd7ed558ccdull;
    h = (h ^ runs[i].count) * 0xc4ceb9fe1a85ec53ull;
  }
  return h ^ (h >> 29);
}

WindowStats summarise_runs(std::span<const SampleRun> runs, std::size_t n);

}  // namespace

WindowStats window_stats(std::span<const double> samples) {
  WindowStats s;
  const std::size_t n = samples.size();
  if (n == 0) return s;

  // Telemetry that changes in steps (a steady GPU, simulated telemetry) is a few runs of
  // equal consecutive values: summarised from the runs, which sorts only the runs.
  constexpr std::size_t kMaxRuns = 8;
  std::array<SampleRun, kMaxRuns> runs;  // uninitialised: only the first nruns are read
  std::size_t nruns = 0;
  bool few = true;
  for (double x : samples) {
    if (nruns > 0 && runs[nruns - 1].value == x) ++runs[nruns - 1].count;
    else if (nruns < kMaxRuns) runs[nruns++] = {x, 1};
    else { few = false; break; }
  }
  if (few) return window_stats(std::span<const SampleRun>(runs.data(), nruns));

  // Many distinct values: the sum and EWMA in sample order (the results depend on it),
  // the quantiles from a sorted copy (windows are small, 30 samples by default).
  double sum = 0;
  const double alpha = 2.0 / (static_cast<double>(n) + 1.0);
  double ewma = samples[0];
  for (std::size_t i = 0; i < n; ++i) {
    sum += samples[i];
    if (i > 0) ewma = alpha * samples[i] + (1 - alpha) * ewma;
  }
  s.mean = sum / static_cast<double>(n);
  s.ewma = ewma;
  std::array<double, 128> small;
  std::vector<double> big;
  std::span<double> sorted;
  if (n <= small.size()) {
    std::copy(samples.begin(), samples.end(), small.begin());
    sorted = std::span<double>(small.data(), n);
  } else {
    big.assign(samples.begin(), samples.end());
    sorted = std::span<double>(big);
  }
  std::sort(sorted.begin(), sorted.end());
  s.median = quantile_sorted(sorted, 0.5);
  s.p95 = quantile_sorted(sorted, 0.95);
  return s;
}

WindowStats window_stats_of_runs(std::span<const SampleRun> runs) {
  WindowStats s;
  std::size_t n = 0;
  const SampleRun* oldest = nullptr;  // the first run with samples
  bool steady = true;
  for (const auto& r : runs) {
    if (r.count == 0) continue;
    n += r.count;
    if (!oldest) oldest = &r;
    else if (r.value != oldest->value) steady = false;
  }
  if (n == 0) return s;
  if (steady) {  // the all-equal shortcut of the sample version
    s.mean = s.median = s.p95 = s.ewma = oldest->value;
    return s;
  }
  // The runs with samples, for the memo's key (windows of up to 4 values).
  std::array<SampleRun, 4> key;
  std::size_t nkey = 0;
  for (const auto& r : runs) {
    if (r.count == 0) continue;
    if (nkey == key.size()) return summarise_runs(runs, n);
    key[nkey++] = r;
  }
  thread_local std::vector<MemoSlot> memo;
  if (memo.empty()) memo.resize(kMemoSlots);
  MemoSlot& slot = memo[memo_hash(key.data(), nkey) & (kMemoSlots - 1)];
  bool hit = slot.nruns == nkey;
  for (std::size_t i = 0; hit && i < nkey; ++i)
    hit = std::bit_cast<std::uint64_t>(slot.runs[i].value) == std::bit_cast<std::uint64_t>(key[i].value) &&
          slot.runs[i].count == key[i].count;
  if (hit) return slot.stats;
  slot.nruns = static_cast<std::uint32_t>(nkey);
  slot.runs = key;
  slot.stats = summarise_runs(runs, n);
  return slot.stats;
}

namespace {

// window_stats() over runs that are not all equal, n samples in all.
WindowStats summarise_runs(std::span<const SampleRun> runs, std::size_t n) {
  WindowStats s;

  // The sum and EWMA sample by sample, as the sample version adds them (floating-point
  // addition is not associative, so a run is not multiplied out). An EWMA that stops
  // moving inside a run stays put for the rest of it: same inputs, same result.
  const double alpha = 2.0 / (static_cast<double>(n) + 1.0);
  double sum = 0, ewma = 0;
  bool first = true;
  for (const auto& r : runs) {
    const double x = r.value;
    std::uint32_t i = 0;
    if (first && r.count > 0) {
      ewma = x;
      sum += x;
      i = 1;
      first = false;
    }
    bool settled = false;
    for (; i < r.count; ++i) {
      sum += x;
      if (settled) continue;
      const double next = alpha * x + (1 - alpha) * ewma;
      settled = next == ewma;
      ewma = next;
    }
  }
  s.mean = sum / static_cast<double>(n);
  s.ewma = ewma;

  // Quantiles read the sorted multiset of values: sort the runs (few) by value.
  std::array<SampleRun, 64> small;  // uninitialised: only the first runs.size() are read
  std::vector<SampleRun> big;
  std::span<SampleRun> sorted;
  if (runs.size() <= small.size()) {
    std::copy(runs.begin(), runs.end(), small.begin());
    sorted = std::span<SampleRun>(small.data(), runs.size());
  } else {
    big.assign(runs.begin(), runs.end());
    sorted = std::span<SampleRun>(big);
  }
  if (sorted.size() <= 16) {
    for (std::size_t i = 1; i < sorted.size(); ++i)
      for (std::size_t k = i; k > 0 && sorted[k].value < sorted[k - 1].value; --k) std::swap(sorted[k], sorted[k - 1]);
  } else {
    std::sort(sorted.begin(), sorted.end(), [](const SampleRun& a, const SampleRun& b) { return a.value < b.value; });
  }
  auto at = [&](std::size_t r) {  // the value at rank r of the sorted window
    for (const auto& run : sorted) {
      if (r < run.count) return run.value;
      r -= run.count;
    }
    return sorted.back().value;
  };
  auto quantile = [&](double q) {  // as quantile_sorted() over the expanded samples
    const double pos = q * static_cast<double>(n - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = std::min(lo + 1, n - 1);
    const double frac = pos - static_cast<double>(lo);
    const double a = at(lo);
    return a + (at(hi) - a) * frac;
  };
  s.median = quantile(0.5);
  s.p95 = quantile(0.95);
  return s;
}

}  // namespace

double risk_score(std::span<const double> samples, const RiskWeights& w) {
  if (samples.empty()) return 0;
  return risk_score(window_stats(samples), w);
}

}  // namespace aegis
