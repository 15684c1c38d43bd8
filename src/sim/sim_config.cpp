#include "sim/sim_config.h"

#include <string>

namespace aegis {
namespace {

#define P(...) AEGIS_PARAM(SimConfig, __VA_ARGS__)

const ParamEntry<SimConfig> kEntries[] = {
    P("first_activity_median_s", first_activity_median_s, 0.001, kParamInf, "",
      "Median delay from launch to first GPU activity (published: 8.2 s)"),
    P("first_activity_p95_s", first_activity_p95_s, 0.001, kParamInf, "",
      "95th percentile of that delay (published: 20.6 s)"),
    P("first_activity_max_s", first_activity_max_s, 0, kParamInf, "",
      "Cap on that delay (published maximum: 55.5 s)"),
    P("memory_initial_fraction", memory_initial_fraction, 0, 1, "",
      "Fraction of its peak a job allocates at its first GPU activity"),
    P("memory_ramp_s", memory_ramp_s, 0, kParamInf, "",
      "Seconds from first activity until a job holds its full peak"),
    P("interference_util_coeff", interference_util_coeff, 0, 100, "",
      "Slowdown per unit of utilisation product with co-located jobs (fitted on Lucid and Gavel pairs)"),
    P("interference_dram_coeff", interference_dram_coeff, 0, 100, "",
      "Slowdown per unit of DRAM-activity product with co-located jobs (fitted on Lucid and Gavel pairs)"),
    P("interference_saturation_coeff", interference_saturation_coeff, 0, 100, "",
      "Slowdown per unit of own utilisation times the demand past the whole GPU (u + U - 1)"),
    P("power_idle_w", power_idle_w, 0, 10000, "", "GPU power when idle, W"),
    P("power_max_w", power_max_w, 0, 10000, "", "GPU power at full SM activity, W"),
    P("util_combination", util_combination, 0, 0, "union,sum",
      "Co-located jobs' utilisation: union 1 - prod(1 - u) (closest to measured pairs) or capped sum"),
    P("telemetry_noise", telemetry_noise, 0, 1, "",
      "Std. deviation of seeded noise added to each synthesised telemetry sample"),
    P("sharing", sharing, 0, 0, "process,mps",
      "process: time slicing (fitted interference); mps: side by side until SMs are full"),
    P("mps_memory_limits", mps_memory_limits, 0, 0, "",
      "Under MPS, each job not placed exclusive is capped by what is known of it (estimate, declared or recorded peak, else its free memory at placement)"),
    P("gpu_driver_reserved_mib", gpu_driver_reserved_mib, 0, kParamInf, "",
      "MiB the driver keeps of every idle device, never free to a job (an H200 measured 616)"),
    P("refusal_cache", refusal_cache, 0, 0, "",
      "Remember servers' refusals while the policy's stages declare them monotone (false = ask every time)"),
    P("time_limit_factor", time_limit_factor, 0, 1000, "",
      "A job without a trace time limit gets this many times its solo runtime as one (0 = none); limits are enforced"),
    P("preemption", preemption, 0, 0, "",
      "A waiting job that cannot start may stop running jobs of lower trace priority levels (the lifecycle's "
      "preemption, as aegisd's `preemption`); they are warned, checkpoint, and go back to their place in the queue"),
    P("checkpoint_lead_s", checkpoint_lead_s, 0, 86400, "",
      "Lead time of every job's checkpoint signal, as --checkpoint-signal USR1@120 (0 = stopped at once, unwarned)"),
    P("checkpoint_save_s", checkpoint_save_s, 0, 86400, "",
      "Seconds a warned job takes to save its checkpoint; above the lead it is stopped at the lead unsaved"),
    P("checkpoint_interval_s", checkpoint_interval_s, 0, 30 * 86400, "",
      "A running job also checkpoints every this many seconds of its attempt (0 = never): what a stop without "
      "a saved checkpoint loses is its work since the last one"),
};

#undef P

}  // namespace

std::span<const ParamEntry<SimConfig>> sim_param_table() { return kEntries; }

std::vector<ParamInfo> describe(const SimConfig& c) { return describe_params<SimConfig>(kEntries, c); }

void set_param(SimConfig& c, std::string_view name, std::string_view text) {
  SimConfig next = c;  // all or nothing: a rejected value leaves `c` as it was
  if (!set_param_in<SimConfig>(kEntries, next, name, text))
    throw ConfigError("unknown simulator parameter '" + std::string(name) + "'");
  validate(next);
  c = std::move(next);
}

void validate(const SimConfig& c) {
  check_params<SimConfig>(kEntries, c);
  if (c.first_activity_p95_s < c.first_activity_median_s)
    throw ConfigError("first_activity_p95_s: must be >= first_activity_median_s");
  if (c.power_max_w < c.power_idle_w) throw ConfigError("power_max_w: must be >= power_idle_w");
}

}  // namespace aegis
