// Every number of the simulator's world models, in one place, with documented sources
// (docs/simulator.md). The engine's own numbers are in sched/config.h.
#pragma once
#include <span>
#include <string_view>
#include <vector>

#include "core/param_table.h"
#include "core/units.h"

namespace aegis {

struct SimConfig {
  // First GPU activity after launch: log-normal through the published median and p95,
  // capped at the published maximum.
  Seconds first_activity_median_s = 8.2;
  Seconds first_activity_p95_s = 20.6;
  Seconds first_activity_max_s = 55.5;

  // Memory ramp: at first activity a job holds this fraction of its peak; it reaches
  // the peak this many seconds later.
  double memory_initial_fraction = 0.5;
  Seconds memory_ramp_s = 10;

  // Interference (process time-slicing): a job's speed on a shared GPU is
  // 1 / (1 + util_coeff * u_i * U + dram_coeff * d_i * D + saturation_coeff * u_i *
  // max(0, u_i + U - 1)) with U, D the sums over the other active jobs; fitted on measured
  // pairs, Lucid's and Gavel's (`aegis calibrate`, docs/interference.md).
  double interference_util_coeff = 0.22;
  double interference_dram_coeff = 0.20;
  double interference_saturation_coeff = 0.34;

  // Power per GPU: idle + (max - idle) * SM activity (A100 SXM4 40 GB: 400 W TDP).
  double power_idle_w = 50;
  double power_max_w = 400;

  // How co-located jobs' coarse utilisation (share of time any kernel runs) combines in a
  // GPU's telemetry: "union", 1 - prod(1 - speed x util), independent busy periods (10.4
  // points from Lucid's measured pairs, docs/estimators.md "Additivity"), or "sum", the
  // speed-weighted sum capped at 1 (14.9 points). SM activity, occupancy and DRAM activity
  // are always summed: no pair measurement says otherwise.
  std::string util_combination = "union";

  // Telemetry synthesis: standard deviation of seeded per-sample noise (0 = exact means).
  double telemetry_noise = 0;

  // How jobs share a GPU (docs/sharing.md): "process" (time slicing, the interference
  // model above) or "mps" (kernels of all clients run side by side: SMs are shared until
  // their summed activity exceeds the GPU; DRAM contention as above).
  std::string sharing = "process";
  // Under MPS, cap each job not placed exclusive by what is known of it (the lifecycle's
  // rule, lifecycle/mps_limit.h; CUDA_MPS_PINNED_DEVICE_MEM_LIMIT): a job that outgrows it dies alone.
  bool mps_memory_limits = true;

  // Memory the driver keeps of every device while no job runs on it (an idle H200 showed
  // 616 MiB used of 143,771, docs/gpu-validation.md): never free to a job, and what the
  // scheduler's "can it ever run" rule takes off (lifecycle/placer.h). 0: the published
  // testbed's figures, which count a GPU's memory as all free.
  MiB gpu_driver_reserved_mib = 0;

  // The dispatcher remembers which requests each server refused and asks it again only
  // when something that can turn a refusal into a placement changed (docs/dispatcher.md).
  // Used only when every stage of the policy declares its refusals monotone; results are
  // the same either way (a test says so), only the time differs.
  bool refusal_cache = true;

  // Issue 32 item 5 (docs/lab-policies.md, "Backfill"): a job the trace gives no time
  // limit gets this many times its own solo runtime (0 = none). Limits are enforced: an
  // attempt past its limit is stopped and the job fails ("timeout").
  double time_limit_factor = 0;

  // Issue 32 item 1 (docs/lab-policies.md, "Priorities and preemption"): the lifecycle's
  // preemption, as aegisd's `preemption` turns it on (off: a trace's priorities only order
  // the queue). Every job is taken to ask for a checkpoint signal with this lead time
  // (aegis submit --checkpoint-signal USR1@120, the example; 0: stopped at once,
  // unwarned). A warned job saves its checkpoint this many seconds later and says so (it
  // then loses nothing); one that needs longer than its lead is stopped at the lead and
  // loses its work since its last periodic checkpoint, taken every checkpoint_interval_s of
  // an attempt (0: none: it loses the whole attempt).
  bool preemption = false;
  Seconds checkpoint_lead_s = 120;
  Seconds checkpoint_save_s = 30;
  Seconds checkpoint_interval_s = 0;
};

std::span<const ParamEntry<SimConfig>> sim_param_table();
std::vector<ParamInfo> describe(const SimConfig& c);
// Throws ConfigError for an unknown name or a bad value.
void set_param(SimConfig& c, std::string_view name, std::string_view text);
void validate(const SimConfig& c);

}  // namespace aegis
