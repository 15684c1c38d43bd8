#include "sim/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace aegis {

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

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
  std::map<int, std::vector<Span>> by_gpu;
  std::size_t id = 0;
  for (const auto& j : r.jobs)
    for (const auto& a : j.attempts) {
      for (int g : a.gpus) by_gpu[g].push_back({a.launch, a.end, id});
      ++id;
    }
  std::vector<char> shared(id, 0);
  for (auto& [g, spans] : by_gpu) {
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
  std::vector<double> jct, queue, slow;
  for (const auto& j : r.jobs) {
    if (j.completed) {
      ++m.completed;
      jct.push_back(j.end - j.submit);
      const auto& last = j.attempts.back();
      if (j.solo_runtime > 0) slow.push_back((last.end - last.launch) / j.solo_runtime);
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
  m.jct_mean_s = mean(jct);
  m.jct_p50_s = percentile(jct, 0.50);
  m.jct_p95_s = percentile(jct, 0.95);
  m.queue_mean_s = mean(queue);
  m.queue_p95_s = percentile(queue, 0.95);
  m.slowdown_mean = mean(slow);
  m.slowdown_max = slow.empty() ? 0 : *std::max_element(slow.begin(), slow.end());
  m.energy_j = r.energy_j;
  m.gpu_mem_util_mean = r.gpu_mem_util_mean;
  m.sm_util_mean = r.sm_util_mean;
  m.collocated_attempts = count_collocated(r);
  return m;
}

}  // namespace aegis
