#include <algorithm>
#include <charconv>
#include <cmath>
#include <fmt/format.h>


#include "estimate/source.h"
#include "sched/config_params.h"
#include "sched/share_weights.h"
#include "sched/stage_registry.h"

namespace aegis {

MiB EngineConfig::memory_guard(MiB total_mib) const {
  const auto frac = static_cast<MiB>(std::ceil(memory_guard_fraction * static_cast<double>(total_mib)));
  return std::max(memory_guard_min_mib, frac);
}

namespace {

constexpr double kInf = kParamInf;

// The documented parameter table. Defaults live in config.h; sources in docs/config.md.
// Built on first use: the choices of `order` are the stage registry's names.
#define P(...) AEGIS_PARAM(EngineConfig, __VA_ARGS__)
std::span<const ParamEntry<EngineConfig>> entries() {
  static const ParamEntry<EngineConfig> kEntries[] = {
    P("memory_guard_min_mib", memory_guard_min_mib, 0, kInf, "",
                "Free-memory guard: at least this many MiB are taken off reported free memory"),
    P("memory_guard_fraction", memory_guard_fraction, 0, 0.5, "",
                "Free-memory guard: or this fraction of total memory, whichever is larger"),
    P("memory_margin_mib", memory_margin_mib, 0, kInf, "",
                "Margin required on top of a job's memory estimate"),
    P("estimator_free_floor_mib", estimator_free_floor_mib, 0, kInf, "",
                "Free memory a GPU must offer a job without an estimate"),
    P("estimator", estimator, 0, 0,
                "none,declared,profiled,peak,analytical,horus,faketensor,learned,gpumemnet,history,auto",
                "Memory estimate the memory filter uses (none = estimator-free)"),
    P("memory_accounting", memory_accounting, 0, 0, "reported,booked,both",
                "Free memory seen by the filter: reported by the GPU, capacity minus booked "
                "estimates, or the smaller of the two"),
    P("observation", observation, 0, 0, "",
                "Close a GPU after a placement until the new job has been active for the window"),
    P("observation_window_s", observation_window_s, 0, kInf, "",
                "Seconds after a new job's first GPU activity before its GPU takes more work"),
    P("observation_max_wait_s", observation_max_wait_s, 0, kInf, "",
                "Reopen a GPU if its new job shows no GPU activity this long (0 = wait forever)"),
    P("anchor_process_util", anchor_process_util, 0, 1, "",
                "aegisd: a job's first activity is its own per-process utilisation samples reaching this"),
    P("anchor_activity_rise", anchor_activity_rise, 0, 1, "",
                "aegisd, without per-process samples: its GPU's activity rising this much above its "
                "level at the job's context creation, while no other new job waits there"),
    P("anchor_sustained_samples", anchor_sustained_samples, 1, 1000, "",
                "aegisd: the activity levels above count once held this many samples in a row (the "
                "window starts at the first): a job's warm-up kernels are not its training"),
    P("anchor_plateau_s", anchor_plateau_s, 0.001, kInf, "",
                "aegisd, last resort: the job's memory, grown past its context, steady this long"),
    P("anchor_plateau_tolerance_mib", anchor_plateau_tolerance_mib, 0, kInf, "",
                "Memory change the plateau rule still counts as steady"),
    P("array_probe_settle_s", array_probe_settle_s, 0, kInf, "",
                "Arrays: the probe's memory peak is reached when its memory has not grown this long "
                "after its first activity (or it completed)"),
    P("array_probe", array_probe, 0, 0, "",
                "Arrays: run the first element alone as a probe and give the others its peak plus the "
                "margin (false: elements keep their %N cap but go unprobed)"),
    P("array_floor_pass_over", array_floor_pass_over, 0, 0, "",
                "Arrays: an element whose learned floor no GPU offers yet is passed over, not the "
                "blocking head, while another element of its array runs"),
    P("pressure_filter", pressure_filter, 0, 0, "",
                "Exclude GPUs whose recent activity shows they are already busy"),
    P("telemetry_window_samples", telemetry_window_samples, 1, 100000, "",
                "Telemetry samples per GPU the risk scores are computed over"),
    P("telemetry_sample_hz", telemetry_sample_hz, 0.001, 1000, "",
                "Telemetry samples per second"),
    P("risk_weight_mean", risk_weights.mean, 0, 1, "", "Risk score weight of the window mean"),
    P("risk_weight_median", risk_weights.median, 0, 1, "", "Risk score weight of the window median"),
    P("risk_weight_p95", risk_weights.p95, 0, 1, "", "Risk score weight of the window p95"),
    P("risk_weight_ewma", risk_weights.ewma, 0, 1, "",
                "Risk score weight of the window EWMA (alpha = 2/(n+1))"),
    P("smact_threshold", smact_threshold, 0, 1000, "",
                "Pressure rule a: exclude iff SMACT risk >= a AND (SMOCC >= b OR DRAMA >= c)"),
    P("smocc_threshold", smocc_threshold, 0, 1000, "", "Pressure rule b (SM occupancy)"),
    P("drama_threshold", drama_threshold, 0, 1000, "", "Pressure rule c (DRAM activity)"),
    P("util_threshold", util_threshold, 0, 1000, "",
                "Coarse fallback when only utilisation exists: keep a GPU iff its risk < this"),
    P("collocate", collocate, 0, 0, "", "Allow more than one job per GPU"),
    P("exclusive_first", exclusive_first, 0, 0, "",
                "Give the head job idle GPUs to itself when enough are idle and open"),
    P("strict_head_of_line", strict_head_of_line, 0, 0, "",
                "If the head job cannot be placed, try no other job this tick"),
    P("backfill", backfill, 0, 0, "",
                "Conservative backfill: while the head waits, a later job may start if it fits now "
                "and its time limit (or history-predicted duration) ends it before the head's reserved start"),
    P("backfill_history_runs", backfill_history_runs, 0, 1000, "",
                "Backfill: a job is also expected to end by its signature's past durations once it "
                "has this many successful runs (0 = time limits only)"),
    P("backfill_history_quantile", backfill_history_quantile, 0, 1, "",
                "Backfill: the quantile of those durations (nearest rank) a job is expected to end by"),
    P("backfill_joins", backfill_joins, 0, 0, "any,earlier_ending,by_reservation,none",
                "Backfill: the running jobs a job started out of order may share GPUs with: any, "
                "only those expected to end no later than it, only those expected to end by the "
                "head's reserved start, or none (idle GPUs only)"),
    P("backfill_join_slowdown", backfill_join_slowdown, 1, 100, "",
                "Backfill, by_reservation: a running job a backfilled job joins is counted slowed by "
                "this factor over what it has left, and must still end by the head's reserved start "
                "(1 = counted as not slowed; 1.28, the default, is the 90th percentile of a job's "
                "slowdown beside another over Lucid's measured pairs)"),
    P("order", order, 0, 0, order_names(),
                "GPU order: most free memory, best fit, least SM activity, first fit, round "
                "robin, least projected utilisation, least predicted activity"),
    P("max_jobs_per_gpu", max_jobs_per_gpu, 0, 1000, "", "Jobs per GPU at most (0 = no cap)"),
    P("util_cap", util_cap, 0, 100, "",
                "Horus rule: profiled utilisation of a GPU's jobs sums to at most this (0 = off)"),
    P("sharing_score_cap", sharing_score_cap, -1, 1000, "",
                "Lucid rule: sharing scores of a GPU's jobs sum to at most this (-1 = off)"),
    P("same_gpu_count", same_gpu_count, 0, 0, "",
                "Lucid rule: only jobs with the same GPU count share a GPU"),
    P("mps_one_user_per_gpu", mps_one_user_per_gpu, 0, 0, "",
                "Under MPS, only one user's jobs share a GPU: NVIDIA's control daemon runs one "
                "server per user and makes another user's clients wait until it is gone"),
    P("recovery", recovery, 0, 0, "ladder,retry",
                "After an OOM: climb the memory-floor ladder, or retry then run alone"),
    P("ladder_fractions", ladder_fractions, 0, 0, "",
                "Ladder rungs as fractions of GPU memory, ascending, each in (0,1)"),
    P("ladder_max_step_mib", ladder_max_step_mib, 1, kInf, "",
                "Ladder rungs are at most this far apart (extra rungs are inserted)"),
    P("retries_before_exclusive", retries_before_exclusive, 0, 1000, "",
                "For recovery = retry: OOM retries under the same policy before running alone"),
    P("fair_share_users", fair_share_users, 0, 0, "",
                "Fair share: users' weights, NAME:WEIGHT,... (* = everyone else; \"\" with no group "
                "weights = FIFO)"),
    P("fair_share_groups", fair_share_groups, 0, 0, "",
                "Fair share: groups' weights, NAME:WEIGHT,... (* = every other group)"),
    P("fair_share_half_life_s", fair_share_half_life_s, 0, kInf, "",
                "Fair share: a user's GPU usage decays by half in this many seconds (0 = never decays)"),
    P("fair_share_charge", fair_share_charge, 0, 0, "booked,occupied",
                "Fair share: a job is charged per GPU its booked memory over the GPU's capacity "
                "(booked), or the GPU's time split among the jobs on it by their bookings (occupied)"),
    P("fair_share_committed", fair_share_committed, 0, 0, "mean_run_time,none",
                "Fair share: a pass's order also counts, per running job, its charge rate times what "
                "remains of the mean run time of its user's ended attempts (mean_run_time), or only "
                "usage so far (none, Slurm's classic factor)"),
    P("user_max_gpu_mem_mib", user_max_gpu_mem_mib, 0, kInf, "",
                "A user's jobs book at most this much GPU memory at once, all GPUs (0 = no cap)"),
    P("user_max_running_jobs", user_max_running_jobs, 0, 1000000, "",
                "A user runs at most this many jobs at once (0 = no cap)"),
    P("preempt_exempt_s", preempt_exempt_s, 0, 30 * 86400, "",
                "Preemption: a running attempt younger than this many seconds is not stopped for a "
                "higher level (Slurm's PreemptExemptTime; 0 = any may be)"),
    P("preempt_exempt_growth", preempt_exempt_growth, 1, 1000, "",
                "Preemption: preempt_exempt_s is multiplied by this for each time the job was "
                "preempted before (1 = the same for every attempt; 2 = doubled each time)"),
  };
  return kEntries;
}

#undef P

}  // namespace

std::span<const ParamEntry<EngineConfig>> engine_param_table() { return entries(); }

std::vector<ParamInfo> describe(const EngineConfig& c) { return describe_params<EngineConfig>(entries(), c); }

void set_param(EngineConfig& c, std::string_view name, std::string_view text) {
  EngineConfig next = c;  // all or nothing: a rejected value leaves `c` as it was
  if (!set_param_in<EngineConfig>(entries(), next, name, text))
    throw ConfigError(fmt::format("unknown parameter '{}' (see `aegis config`)", name));
  validate(next);
  c = std::move(next);
}

void validate(const EngineConfig& c) {
  if (!parse_estimate_source(c.estimator))
    throw ConfigError(fmt::format("estimator: '{}' is not one of {}", c.estimator, estimate_source_names()));
  if (c.ladder_fractions.empty()) throw ConfigError("ladder_fractions: needs at least one rung");
  for (std::size_t i = 0; i < c.ladder_fractions.size(); ++i) {
    const double f = c.ladder_fractions[i];
    if (!(f > 0 && f < 1)) throw ConfigError(fmt::format("ladder_fractions: {} is not in (0,1)", f));
    if (i > 0 && !(f > c.ladder_fractions[i - 1]))
      throw ConfigError("ladder_fractions: must be strictly ascending");
  }
  check_params<EngineConfig>(entries(), c);
  parse_share_weights(c.fair_share_users, "fair_share_users");  // throws naming the field
  parse_share_weights(c.fair_share_groups, "fair_share_groups");
}

}  // namespace aegis
