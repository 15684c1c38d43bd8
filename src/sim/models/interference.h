// How fast a job runs on a GPU it shares, relative to running alone (docs/interference.md).
// Model: speed_i = 1 / (1 + a*u_i*U + b*d_i*D + c*u_i*max(0, u_i + U - 1)) with U, D the
// sums of u_j, d_j over the other active jobs j on the GPU, u = coarse utilisation, d = DRAM
// activity, each measured alone; the c term is time slicing's saturation (together the jobs
// ask for more than the whole GPU). a, b, c are fitted on measured co-location pairs
// (Lucid's RTX 3090 and Gavel's V100 pairs), never on the published scheduling results.
#pragma once
#include <algorithm>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace aegis {

struct ActivityProfile {
  double util = 0;   // coarse utilisation alone, [0,1]
  double drama = 0;  // DRAM activity alone, [0,1]
};

struct InterferenceModel {
  double util_coeff = 0;  // the shipped values are SimConfig's interference_*_coeff
  double dram_coeff = 0;
  double saturation_coeff = 0;

  // Speed of `self` next to `others` (all active on one GPU).
  double speed(const ActivityProfile& self, double others_util, double others_drama) const {
    const double over = std::max(0.0, self.util + others_util - 1.0);
    return 1.0 / (1.0 + util_coeff * self.util * others_util + dram_coeff * self.drama * others_drama +
                  saturation_coeff * self.util * over);
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

// Least-squares fit of the three coefficients on the pairs (with_saturation false: c = 0,
// the form before issue 31): a grid over [0,3] in steps of 0.1, refined in steps of 0.01
// within 0.1 of the best point.
InterferenceFit fit_interference(std::span<const MeasuredPair> pairs, bool with_saturation = true);

// Root-mean-square error of `m` over both jobs of every pair.
double interference_rmse(const InterferenceModel& m, std::span<const MeasuredPair> pairs);

// Loads Lucid's measured pairs (lucid_colocate_info.csv joined with
// lucid_single_data.csv by model, dataset, batch size and AMP flag). Throws InputError.
std::vector<MeasuredPair> load_lucid_pairs(const std::string& colocate_csv, const std::string& single_csv);

// Gavel's measured pairs of one GPU type whose two job types have a solo profile in Lucid's
// single CSV: Gavel recorded no utilisation, so a job type takes the profile of the same
// network and dataset (ResNet-18/CIFAR-10, ResNet-50/ImageNet, Transformer/Multi30k,
// LM = LSTM/Wikitext-2; no AMP) at the batch size nearest in ratio (ties: the smaller).
// Each unordered pair once; pairs that could not run together are left out. `networks`,
// when given, receives each pair's two network names (for held-out folds). Throws InputError.
std::vector<MeasuredPair> load_gavel_pairs(const std::string& json_path, const std::string& gpu_type,
                                           const std::string& lucid_single_csv,
                                           std::vector<std::pair<std::string, std::string>>* networks = nullptr);

// Combined normalised throughput (own speed + partner's speed) of every measured pair of
// Gavel's throughput table for one GPU type ("v100", "p100", "k80"); pairs that could not
// run together (zero throughput) are left out. Throws InputError.
std::vector<double> load_gavel_pair_sums(const std::string& json_path, const std::string& gpu_type);

}  // namespace aegis
