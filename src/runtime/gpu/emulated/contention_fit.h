// Calibration of the emulated GPU's contention model (contention.h) on Gavel's measured
// pairs (Narayanan et al., OSDI 2020; data/interference/gavel_simulation_throughputs.json):
// for one GPU type, each single-GPU job type's throughput alone and next to each other job
// type. Gavel did not record the jobs' utilisation, so each job type's GPU demand (its u)
// is fitted too, as a nuisance parameter; only the overhead k is shipped
// (docs/emulated-gpu.md, "Contention"). Reproduce with `aegis calibrate --emulated`.
#pragma once
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "runtime/gpu/emulated/contention.h"

namespace aegis::emu {

// One measured pair: job types a and b (indices into GavelPairs::jobs, a <= b) and each
// one's throughput next to the other divided by its throughput alone.
struct GavelPair {
  std::size_t a = 0, b = 0;
  double speed_a = 1, speed_b = 1;
};

struct GavelPairs {
  std::vector<std::string> jobs;  // single-GPU job types, sorted by name
  std::vector<GavelPair> pairs;   // each unordered pair once; pairs that could not run together left out
};

// Reads one GPU type's table ("v100", "p100", "k80"). Throws std::runtime_error naming the
// file and the problem.
GavelPairs load_gavel_pairs(const std::string& json_path, const std::string& gpu_type);

struct ContentionFit {
  double timeslice_overhead = 0;
  std::vector<double> demand;  // fitted u of each job type (nuisance parameters)
  double rmse = 0;             // over both jobs of every pair
  double mae = 0;
  double rmse_no_model = 0;    // predicting speed 1 (no contention)
  std::size_t pairs = 0;
  int sweeps = 0;
};

// Least squares over both jobs' speeds in every pair, by coordinate descent: the overhead
// in [0, 10] and each job type's demand in [0, 1] in turn, each by golden-section search,
// until no parameter moves by 1e-6 (at most 500 sweeps). Deterministic.
ContentionFit fit_contention(std::span<const GavelPair> pairs, std::size_t job_types);

// Root-mean-square error of the model with `overhead` and `demand` on `pairs`.
double contention_rmse(std::span<const GavelPair> pairs, double overhead, std::span<const double> demand);

}  // namespace aegis::emu
