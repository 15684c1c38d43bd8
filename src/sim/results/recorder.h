// What a run leaves behind: one JobRecord per job (placed at once in trace-index order),
// the GPUs' and queue's timelines when asked for, and the SimResult built at the end.
// Written by the world as things happen; nothing here decides or feeds back into the run.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/simulator.h"
#include "sim/trace.h"
#include "sim/world/state.h"

namespace aegis::simrun {

// Where each job's record goes (its slot, by position in `jobs`): trace-index order, equal
// indices in the order they come, so the result's records are in order without a move.
std::vector<std::uint32_t> record_slots(const std::vector<TraceJob>& jobs);

class Recorder {
 public:
  Recorder(std::size_t jobs, int gpus, bool record_timeline);

  JobRecord& record(std::uint32_t slot) { return records_[slot]; }
  JobRecord& of(const Job& j) { return records_[j.slot]; }

  // GPU g's state at t, for its timeline (when recorded).
  void note(const Gpu& gpu, int g, Seconds t) {
    if (!timeline_on_) return;
    GpuPoint p{t, gpu.used, gpu.sample.smact, static_cast<int>(gpu.running.size()), gpu.sample.smocc,
               gpu.sample.drama, gpu.sample.util, static_cast<int>(gpu.active.size())};
    auto& tl = timeline_[static_cast<std::size_t>(g)];
    if (!tl.empty() && tl.back().t == t) tl.back() = p;
    else tl.push_back(p);
  }

  // Jobs waiting at t (when recorded).
  void note_queue(int waiting, Seconds t);

  // The last job end (the run's end; its start if none ended).
  Seconds end(Seconds start) const;

  // The result: the records and timelines moved out, the GPUs' integrals (already taken
  // up to `end`) summed.
  SimResult finish(const ClusterState& st, Seconds end, std::string policy, std::string engine);

 private:
  std::vector<JobRecord> records_;  // per job, in trace-index order (Job::slot)
  bool timeline_on_;
  std::vector<std::vector<GpuPoint>> timeline_;
  std::vector<std::pair<Seconds, int>> queue_timeline_;
};

}  // namespace aegis::simrun
