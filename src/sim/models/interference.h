// How fast a job runs on a GPU it shares, relative to running alone (docs/interference.md).
// Model: speed_i = 1 / (1 + a * u_i * sum_j u_j + b * d_i * sum_j d_j) over the other
// active jobs j on the GPU, u = coarse utilisation, d = DRAM activity, each measured
// alone. a and b are fitted on measured co-location pairs (Lucid's RTX 3090 data), never
// on the published scheduling results. A job on several GPUs runs at its slowest GPU.
#pragma once
#include <span>
#include <string>
#include <vector>

namespace aegis {

struct ActivityProfile {
  double util = 0;   // coarse utilisation alone, [0,1]
  double drama = 0;  // DRAM activity alone, [0,1]
};

struct InterferenceModel {
  double util_coeff = 0.28;
  double dram_coeff = 0.44;

  // Speed of `self` next to `others` (all active on one GPU).
  double speed(const ActivityProfile& self, double others_util, double others_drama) const {
    return 1.0 / (1.0 + util_coeff * self.util * others_util + dram_coeff * self.drama * others_drama);
  }
};

// One measured pair: each job's solo profile and its speed next to the other.
struct MeasuredPair {
  ActivityProfile a, b;
  double speed_a = 1, speed_b = 1;
};

struct InterferenceFit {
  InterferenceModel model;
  double rmse = 0;           // over both jobs of every pair
  double mae = 0;
  double rmse_no_model = 0;  // predicting speed 1 (no interference)
  std::size_t pairs = 0;
};

// Least-squares fit of the two coefficients on the pairs: a grid over [0,3] in steps
// of 0.05, refined in steps of 0.01 around the best point.
InterferenceFit fit_interference(std::span<const MeasuredPair> pairs);

// Loads Lucid's measured pairs (lucid_colocate_info.csv joined with
// lucid_single_data.csv by model, dataset, batch size and AMP flag). Throws InputError.
std::vector<MeasuredPair> load_lucid_pairs(const std::string& colocate_csv, const std::string& single_csv);

// Combined normalised throughput (own speed + partner's speed) of every measured pair of
// Gavel's throughput table for one GPU type ("v100", "p100", "k80"); pairs that could not
// run together (zero throughput) are left out. Throws InputError.
std::vector<double> load_gavel_pair_sums(const std::string& json_path, const std::string& gpu_type);

}  // namespace aegis
