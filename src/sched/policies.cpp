#include "sched/policies.h"

#include "sched/config_params.h"

namespace aegis {
namespace {

// Published AEGIS headline: estimator-free floor, observation, pressure, MAGM, ladder.
void aegis_defaults(EngineConfig&) {}

void exclusive(EngineConfig& c) {
  c.collocate = false;
}

void aegis_peak(EngineConfig& c) {
  c.estimator = "profiled";
  c.memory_accounting = "both";
}

void aegis_horus(EngineConfig& c) {
  c.estimator = "analytical";
  c.memory_accounting = "both";
}

// aegisd's default: aegis with the estimate chain a server can give (the user's --mem,
// else the peak of earlier runs, else the learned model, else the estimator-free floor).
void aegis_auto(EngineConfig& c) {
  c.estimator = "auto";
  c.memory_accounting = "both";  // as every policy that admits by estimates
}

// Learned estimates: the memory one (GPUMemNet's) admits, the predicted utilisation ranks
// the GPUs left: the one its jobs are predicted to keep busy least first (docs/estimators.md).
void aegis_learned(EngineConfig& c) {
  c.estimator = "learned";
  c.memory_accounting = "both";
  c.order = "lpa";
}

// CARMA (the predecessor): same skeleton, its thresholds and risk weights
// (0.2 mean + 0.2 median + 0.3 p95 + 0.1 p50 + 0.2 EWMA: median and p50 coincide),
// one retry under the same floor, then alone.
void carma(EngineConfig& c) {
  c.smact_threshold = 0.80;
  c.smocc_threshold = 0.45;
  c.drama_threshold = 0.40;
  c.risk_weights = {0.2, 0.3, 0.3, 0.2};
  c.recovery = "retry";
  c.retries_before_exclusive = 1;
}

// Lucid-style: at most two jobs per GPU, sharing scores summing to <= 2, equal GPU
// counts, the pair's profiled peaks must fit; no telemetry.
void lucid(EngineConfig& c) {
  c.estimator = "profiled";
  c.memory_margin_mib = 0;
  c.memory_accounting = "booked";
  c.observation = false;
  c.pressure_filter = false;
  c.max_jobs_per_gpu = 2;
  c.sharing_score_cap = 2;
  c.same_gpu_count = true;
}

// Horus-style: profiled mean utilisation of a GPU's jobs sums to <= 100 %, least
// projected utilisation first, memory from the analytical (Horus) estimate.
void horus(EngineConfig& c) {
  c.estimator = "analytical";
  c.memory_accounting = "both";
  c.observation = false;
  c.pressure_filter = false;
  c.util_cap = 1.0;
  c.order = "lpu";
}

// What the stages buy: first fit on reported free memory alone.
void naive(EngineConfig& c) {
  c.observation = false;
  c.pressure_filter = false;
  c.order = "ff";
}

const PolicyInfo kPolicies[] = {
    {"exclusive", "one job per GPU", exclusive},
    {"aegis", "estimator-free floor, observation window, pressure filter, MAGM, OOM ladder", aegis_defaults},
    {"aegis-peak", "aegis with the profiled peak as the memory estimate", aegis_peak},
    {"aegis-horus", "aegis with the analytical (Horus) memory estimate (this project's formula on the job's spec)",
     aegis_horus},
    {"aegis-horus-published", "aegis-horus replaying the catalog's published Horus estimates (simulator only)",
     aegis_horus, true},
    {"aegis-learned",
     "aegis with the learned memory estimate (the learned model, else the calibrated one, on the job's spec), GPUs "
     "by least predicted activity",
     aegis_learned},
    {"aegis-learned-published", "aegis-learned replaying the catalog's published GPUMemNet estimates (simulator only)",
     aegis_learned, true},
    {"aegis-auto", "aegis with the chain declared, else history, else learned, else the floor (aegisd's default)",
     aegis_auto},
    {"carma", "CARMA: thresholds 0.80/0.45/0.40, its risk weights, one retry then alone", carma},
    {"lucid", "Lucid-style: <= 2 jobs per GPU by sharing score, profiled peaks must fit", lucid},
    {"horus", "Horus-style: profiled utilisation sums to <= 100 %, least projected first, Horus' published estimates",
     horus, true},
    {"naive", "first fit on reported free memory alone: no estimate, observation or pressure", naive},
};

}  // namespace

std::span<const PolicyInfo> all_policies() { return kPolicies; }

const PolicyInfo* find_policy(std::string_view name) {
  for (const auto& p : kPolicies)
    if (p.name == name) return &p;
  return nullptr;
}

std::string policy_names() {
  std::string s;
  for (const auto& p : kPolicies) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

std::string_view policy_choices() {
  static const std::string list = [] {
    std::string s;
    for (const auto& p : kPolicies) s += (s.empty() ? "" : ",") + std::string(p.name);
    return s;
  }();
  return list;
}

EngineConfig policy_config(std::string_view name, const EngineConfig& base) {
  for (const auto& p : kPolicies) {
    if (p.name == name) {
      EngineConfig c = base;
      p.apply(c);
      return c;
    }
  }
  throw ConfigError("unknown policy '" + std::string(name) + "' (known: " + policy_names() + ")");
}

}  // namespace aegis
