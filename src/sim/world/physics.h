// Job physics on the simulated GPUs: launches, work done at a speed set by the neighbours
// (interference model), first activity and the memory ramp, OOM, completion, and each
// GPU's activity, history, energy and utilisation integrals. Tells nobody but the cluster
// state (bump, events) and the recorder; the caller tells the lifecycle what happened.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "lifecycle/placer.h"
#include "sim/models/interference.h"
#include "sim/models/startup.h"
#include "sim/results/recorder.h"
#include "sim/simulator.h"
#include "sim/world/state.h"

namespace aegis::simrun {

class JobPhysics {
 public:
  JobPhysics(ClusterState& st, Recorder& rec, const SimOptions& opt);

  // Starts an attempt whose parts (server, launch with local GPU indices) were all accepted.
  void launch(const QueuedJob& job, const Placement& placement, Seconds t);
  // The attempt of job `id` showed its first activity: its servers' engines and its record hear of it.
  void first_activity(int id, Seconds t);
  // Then it takes its first memory and starts loading its GPUs; false if it died of OOM.
  bool begin_activity(int id, Seconds t);
  // Its memory ramp ended: it takes the rest of its peak; false if it died of OOM.
  bool ramp_done(int id, Seconds t);
  // Its start-up is over: the steady levels from now on (its GPUs' sums and speeds redone).
  void steady_phase(int id, Seconds t);
  // Its completion event came: true if its work is done (attempt ended, record completed),
  // false if it was slowed since and was rescheduled.
  bool complete(int id, Seconds t);
  // Its attempt is stopped (its time limit passed: issue 32 item 5); its GPUs are freed.
  void stop(int id, Seconds t) { finish_attempt(id, t, SimOutcome::Stopped); }
  // Preemption (issue 32 item 1): the attempt saves a checkpoint at t (Live::saved_work);
  // it is stopped at t, and its next attempt resumes from that checkpoint. preempt()
  // returns the work it loses (done since the checkpoint).
  void checkpoint(int id, Seconds t) {
    Job& j = st_.jobs[id];
    advance(j, t);
    j.live->saved_work = j.live->work_done;
  }
  double preempt(int id, Seconds t);

  // Takes the energy and utilisation integrals of every GPU up to t.
  void integrate_all(Seconds t) {
    for (int g = 0; g < static_cast<int>(st_.gpus.size()); ++g) integrate(g, t);
  }

 private:
  bool allocate(Job& j, MiB mib, Seconds t);
  void finish_attempt(int id, Seconds t, SimOutcome outcome);
  void advance(Job& j, Seconds t) {
    j.live->work_done += j.live->speed * (t - j.live->last_update);
    j.live->last_update = t;
  }
  void sum_activity(int g);
  double speed_of(int id) const;
  static double device_speed(double util, double f) {
    // Alone on a device with a fraction f of the SMs, a job busy on the GPU a fraction u
    // of its time alone spends (1 - u) + u / f as long per step.
    if (f >= 1.0) return 1.0;
    return 1.0 / ((1.0 - util) + util / f);
  }
  void touch(int g) {
    if (st_.gpus[g].touched == stamp_) return;
    st_.gpus[g].touched = stamp_;
    touched_.push_back(g);
  }
  void refresh(std::span<const int> changed, Seconds t);
  void resample(int g, Seconds t);
  void integrate(int g, Seconds t) {
    Gpu& gpu = st_.gpus[g];
    const double dt = t - gpu.last_t;
    if (dt <= 0) return;
    const double power = opt_.sim.power_idle_w + (opt_.sim.power_max_w - opt_.sim.power_idle_w) * gpu.sample.smact;
    gpu.energy_j += dt * power;
    gpu.mem_integral += dt * static_cast<double>(gpu.used) / static_cast<double>(gpu.total);
    gpu.sm_integral += dt * gpu.sample.smact;
    gpu.last_t = t;
  }
  void note(int g, Seconds t) { rec_.note(st_.gpus[g], g, t); }

  ClusterState& st_;
  Recorder& rec_;
  const SimOptions& opt_;
  InterferenceModel model_;
  FirstActivityDelay first_activity_delay_;  // of opt_.sim, its constants worked out once
  bool union_util_;       // sim.util_combination
  bool mps_;              // --sharing mps
  Seconds history_span_;  // how far back a GPU's history must reach (resample): one division, once
  std::vector<int> touched_;
  std::uint64_t stamp_ = 0;
};

}  // namespace aegis::simrun
