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

// Attempts that overlapped another attempt on one of their GPUs.
std::int64_t count_collocated(const SimResult& r) {
  struct Span {
    Seconds a, b;
    std::size_t id;
  };
  // Per GPU id (ids are dense: 0 .. gpu_total_mib.size() - 1; grown if a result says otherwise).
  std::vector<std::vector<Span>> by_gpu(r.gpu_total_mib.size());
  std::size_t id = 0;
  for (const auto& j : r.jobs)
    for (const auto& a : j.attempts) {
      for (int g : a.gpus) {
        const auto at = static_cast<std::size_t>(g);
        if (at >= by_gpu.size()) by_gpu.resize(at + 1);
        by_gpu[at].push_back({a.launch, a.end, id});
      }
      ++id;
    }
  std::vector<char> shared(id, 0);
  for (auto& spans : by_gpu) {
    std::sort(spans.begin(), spans.end(), [](const Span& x, const Span& y) { return x.a < y.a; });
    for (std::size_t i = 0; i < spans.size(); ++i)
      for (std::size_t k = i + 1; k < spans.size() && spans[k].a < spans[i].b; ++k) {
        shared[spans[i].id] = 1;
        shared[spans[k].id] = 1;
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
  for (const auto& j : r.jobs) {
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
      ++m.attempts;
      m.exec_total_s += a.end - a.launch;
      if (a.outcome != SimOutcome::Completed) ++m.failed_attempts;
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
  m.collocated_attempts = count_collocated(r);
  return m;
}

}  // namespace aegis
