#include "sim/results/recorder.h"

#include <algorithm>
#include <limits>

namespace aegis::simrun {

// Positions of `jobs` in the order of their index, equal ones in the order they come (a
// stable sort). Indices are usually distinct and dense (rows of a file, and the copies of
// --repeat after them): then each goes straight to its slot, in linear time.
static std::vector<std::uint32_t> trace_index_order(const std::vector<TraceJob>& jobs) {
  const std::size_t n = jobs.size();
  std::vector<std::uint32_t> order;
  if (n == 0) return order;
  std::int64_t lo = jobs.front().index, hi = lo;
  for (const auto& j : jobs) {
    lo = std::min(lo, j.index);
    hi = std::max(hi, j.index);
  }
  constexpr auto kEmpty = std::numeric_limits<std::uint32_t>::max();
  const auto range = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo) + 1;
  if (range != 0 && range <= 2 * static_cast<std::uint64_t>(n)) {
    std::vector<std::uint32_t> slot(range, kEmpty);
    bool distinct = true;
    for (std::uint32_t i = 0; i < n && distinct; ++i) {
      auto& s = slot[static_cast<std::uint64_t>(jobs[i].index - lo)];
      distinct = s == kEmpty;
      s = i;
    }
    if (distinct) {
      order.reserve(n);
      for (std::uint32_t s : slot)
        if (s != kEmpty) order.push_back(s);
      return order;
    }
  }
  // Sparse or repeated indices: sort (index, position) pairs, which is the stable order.
  std::vector<std::pair<std::int64_t, std::uint32_t>> keyed(n);
  for (std::uint32_t i = 0; i < n; ++i) keyed[i] = {jobs[i].index, i};
  std::sort(keyed.begin(), keyed.end());
  order.resize(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = keyed[i].second;
  return order;
}

std::vector<std::uint32_t> record_slots(const std::vector<TraceJob>& jobs) {
  std::vector<std::uint32_t> slot_of(jobs.size());
  const std::vector<std::uint32_t> order = trace_index_order(jobs);
  for (std::uint32_t k = 0; k < order.size(); ++k) slot_of[order[k]] = k;
  return slot_of;
}

Recorder::Recorder(std::size_t jobs, int gpus, bool record_timeline) : records_(jobs), timeline_on_(record_timeline) {
  if (record_timeline) timeline_.resize(static_cast<std::size_t>(gpus));
}

void Recorder::note_queue(int waiting, Seconds t) {
  if (!timeline_on_) return;
  if (queue_timeline_.empty() || queue_timeline_.back().second != waiting) {
    if (!queue_timeline_.empty() && queue_timeline_.back().first == t) queue_timeline_.back().second = waiting;
    else queue_timeline_.push_back({t, waiting});
  }
}

Seconds Recorder::end(Seconds start) const {
  Seconds e = start;
  for (const auto& rec : records_) e = std::max(e, rec.end);
  return e;
}

SimResult Recorder::finish(const ClusterState& st, Seconds end, std::string policy, std::string engine) {
  SimResult r;
  r.policy = std::move(policy);
  r.engine = std::move(engine);
  r.start = st.start;
  r.end = end;
  double mem = 0, sm = 0;
  for (const Gpu& gpu : st.gpus) {
    r.energy_j += gpu.energy_j;
    mem += gpu.mem_integral;
    sm += gpu.sm_integral;
    r.gpu_total_mib.push_back(gpu.total);
    r.gpu_server.push_back(gpu.server);
  }
  const double span = (r.end - r.start) * static_cast<double>(st.gpus.size());
  r.gpu_mem_util_mean = span > 0 ? mem / span : 0;
  r.sm_util_mean = span > 0 ? sm / span : 0;
  r.jobs = std::move(records_);  // in trace-index order from the start
  r.gpu_timeline = std::move(timeline_);
  r.queue_timeline = std::move(queue_timeline_);
  r.events = st.n_events;
  r.ticks = st.n_ticks;
  r.visits = st.n_visits;
  return r;
}

}  // namespace aegis::simrun
