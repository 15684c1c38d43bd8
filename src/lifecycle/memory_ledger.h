// What each GPU showed in its last few samples (free memory, each job's memory), so that
// an out-of-memory death is judged by the sample at or just before it (oom_blame.cpp), not
// by what the GPU offered when the job was placed. Fed by Lifecycle::observe (aegisd's
// readings, whose GPUs are engine indices of its one server, 0); a driver that gives no
// readings (the simulator) leaves it empty.
#pragma once
#include <cstddef>
#include <deque>
#include <map>

#include "core/units.h"

namespace aegis {

struct GpuMemorySample {
  Seconds t = 0;
  MiB free_mib = 0;           // the GPU's free memory as the driver read it
  std::map<JobId, MiB> jobs;  // each job's processes' memory there
};

class MemoryLedger {
 public:
  // A few samples per GPU: an OOM is collected within a tick or two of the sample before it.
  static constexpr std::size_t kKept = 4;
  void record(int gpu, GpuMemorySample s) {
    auto& q = gpus_[gpu];
    q.push_back(std::move(s));
    if (q.size() > kKept) q.pop_front();
  }
  bool empty() const { return gpus_.empty(); }
  // The last sample of `gpu` taken at or before `t`; else the oldest kept (the best there
  // is); null when the GPU was never sampled.
  const GpuMemorySample* at(int gpu, Seconds t) const {
    const auto it = gpus_.find(gpu);
    if (it == gpus_.end() || it->second.empty()) return nullptr;
    for (auto s = it->second.rbegin(); s != it->second.rend(); ++s)
      if (s->t <= t) return &*s;
    return &it->second.front();
  }

 private:
  std::map<int, std::deque<GpuMemorySample>> gpus_;
};

}  // namespace aegis
