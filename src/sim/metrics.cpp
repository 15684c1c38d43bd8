#include "sim/metrics.h"

#include <algorithm>
#include <cmath>

namespace aegis {

namespace {

// percentile() without a full sort: the value at the lower rank is selected (nth_element)
// and the next one is the least of those above it, which are exactly the values a sorted
// copy has there. Reorders `v`; linear time (a million JCTs cost a sort each before).
double select_percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto at = v.begin() + static_cast<std::ptrdiff_t>(lo);
  std::nth_element(v.begin(), at, v.end());
  const double low = *at;
  const double high = lo + 1 < v.size() ? *std::min_element(at + 1, v.end()) : low;
  return low + (high - low) * (pos - static_cast<double>(lo));
}

}  // namespace

double percentile(std::vector<double> v, double q) { return select_percentile(v, q); }

namespace {

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// A record holds its first attempt and that attempt's first GPUs itself, but the
// attempts of a job run more than once, and GPU lists longer than the inline ones, sit
// wherever they were allocated, in launch order, not in record order: a walk would wait
// on memory at each of those. So each walk asks for the attempts a few records ahead,
// and for the GPU list of the record half as far ahead (whose attempts have arrived by
// then).
inline void prefetch_ahead(const std::vector<JobRecord>& jobs, std::size_t i) {
  constexpr std::size_t kAhead = 16;
  if (i + kAhead < jobs.size() && !jobs[i + kAhead].attempts.empty())
    __builtin_prefetch(jobs[i + kAhead].attempts.data());
  if (i + kAhead / 2 < jobs.size() && !jobs[i + kAhead / 2].attempts.empty())
    __builtin_prefetch(jobs[i + kAhead / 2].attempts.front().gpus.data());
}

// Attempts that overlapped another attempt on one of their GPUs. `per_gpu[g]`: how many
// attempts ran on GPU id g (counted by the caller's walk), so that the spans of all GPUs
// fit one array, GPU after GPU, each GPU's in record order as they come.
std::int64_t count_collocated(const SimResult& r, const std::vector<std::size_t>& per_gpu, std::size_t attempts) {
  struct Span {
    Seconds a, b;
    std::size_t id;
  };
  std::vector<std::size_t> start(per_gpu.size() + 1, 0);
  for (std::size_t g = 0; g < per_gpu.size(); ++g) start[g + 1] = start[g] + per_gpu[g];
  std::vector<Span> spans(start.back());
  std::vector<std::size_t> next(start.begin(), start.end() - 1);
  std::size_t id = 0;
  for (std::size_t i = 0; i < r.jobs.size(); ++i) {
    prefetch_ahead(r.jobs, i);
    for (const auto& a : r.jobs[i].attempts) {
      for (int g : a.gpus) spans[next[static_cast<std::size_t>(g)]++] = {a.launch, a.end, id};
      ++id;
    }
  }
  std::vector<char> shared(attempts, 0);
  for (std::size_t g = 0; g < per_gpu.size(); ++g) {
    // The same sort of the same sequence as one vector per GPU: ties come out alike.
    const auto first = spans.begin() + static_cast<std::ptrdiff_t>(start[g]);
    const auto last = spans.begin() + static_cast<std::ptrdiff_t>(start[g + 1]);
    std::sort(first, last, [](const Span& x, const Span& y) { return x.a < y.a; });
    const std::size_t n = start[g + 1] - start[g];
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = i + 1; k < n && first[k].a < first[i].b; ++k) {
        shared[first[i].id] = 1;
        shared[first[k].id] = 1;
      }
  }
  std::int64_t n = 0;
  for (char c : shared) n += c;
  return n;
}

}  // namespace

RunMetrics summarize(const SimResult& r) {
  RunMetrics m;
  m.policy = r.policy;
  m.trace = r.trace;
  m.jobs = static_cast<std::int64_t>(r.jobs.size());
  m.makespan_s = r.end - r.start;
  std::vector<double> jct, queue;
  jct.reserve(r.jobs.size());
  queue.reserve(r.jobs.size());
  double slow_sum = 0;  // summed in job order, as a mean over a list of them would be
  std::size_t slow_n = 0;
  // Attempts per GPU id (ids are dense: 0 .. gpu_total_mib.size() - 1; grown if a
  // result says otherwise), for count_collocated.
  std::vector<std::size_t> per_gpu(r.gpu_total_mib.size(), 0);
  for (std::size_t i = 0; i < r.jobs.size(); ++i) {
    prefetch_ahead(r.jobs, i);
    const JobRecord& j = r.jobs[i];
    if (j.completed) {
      ++m.completed;
      jct.push_back(j.end - j.submit);
      const auto& last = j.attempts.back();
      if (j.solo_runtime > 0) {
        const double slow = (last.end - last.launch) / j.solo_runtime;
        slow_sum += slow;
        m.slowdown_max = slow_n++ == 0 ? slow : std::max(m.slowdown_max, slow);
      }
    } else {
      ++m.stopped;
    }
    if (j.first_launch >= 0) queue.push_back(j.first_launch - j.submit);
    for (const auto& a : j.attempts) {
      for (int g : a.gpus) {
        const auto at = static_cast<std::size_t>(g);
        if (at >= per_gpu.size()) per_gpu.resize(at + 1, 0);
        ++per_gpu[at];
      }
      ++m.attempts;
      m.exec_total_s += a.end - a.launch;
      if (a.outcome != SimOutcome::Completed && a.outcome != SimOutcome::Preempted) ++m.failed_attempts;
      if (a.outcome == SimOutcome::Oom) ++m.oom_attempts;
      if (a.neighbour_oom) ++m.neighbour_oom_attempts;
      if (a.mps_limit) ++m.mps_limit_attempts;
    }
  }
  // Means first, in job order (selecting reorders the values, which would change their
  // rounding).
  m.jct_mean_s = mean(jct);
  m.queue_mean_s = mean(queue);
  m.jct_p50_s = select_percentile(jct, 0.50);
  m.jct_p95_s = select_percentile(jct, 0.95);
  m.queue_p95_s = select_percentile(queue, 0.95);
  m.slowdown_mean = slow_n > 0 ? slow_sum / static_cast<double>(slow_n) : 0;
  m.energy_j = r.energy_j;
  m.gpu_mem_util_mean = r.gpu_mem_util_mean;
  m.sm_util_mean = r.sm_util_mean;
  m.lab = r.lab;
  double charged = 0;
  for (const auto& [u, s] : r.user_gpu_seconds) charged += s;
  for (const auto& [u, s] : r.user_gpu_seconds) m.user_shares.emplace_back(u, charged > 0 ? s / charged : 0);
  // The lists go before count_collocated makes its spans (24 bytes per attempt and GPU):
  // a million-job summary holds one or the other, and their pages are the ones the
  // simulation let go (held by the allocator), not new ones on top of its peak.
  jct = std::vector<double>();
  queue = std::vector<double>();
  m.collocated_attempts = count_collocated(r, per_gpu, static_cast<std::size_t>(m.attempts));
  return m;
}

}  // namespace aegis
