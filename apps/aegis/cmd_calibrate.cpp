// `aegis calibrate`: fits the simulator's interference model on measured co-location
// pairs (Lucid's and Gavel's) and prints the coefficients and the error, so the shipped defaults can be
// reproduced (docs/interference.md). `aegis calibrate --emulated` fits the emulated GPU's
// own contention model on Gavel's pairs instead (docs/emulated-gpu.md, "Contention").
#include <cmath>
#include <fmt/format.h>

#include "apps/aegis/commands.h"
#include "runtime/gpu/emulated/contention_fit.h"
#include "sim/models/interference.h"
#include "sim/metrics.h"
#include "sim/sim_config.h"
#include "sim/workload.h"

namespace aegis::cli {

namespace {

// The emulated GPU's contention model, fitted on one GPU type's Gavel pairs; with a
// held-out check (fitted on every other pair, scored on the rest) and the other GPU types'
// fits as a sensitivity.
void calibrate_emulated(const std::string& gavel, const std::string& gpu_type) {
  const auto data = emu::load_gavel_pairs(gavel, gpu_type);
  const auto fit = emu::fit_contention(data.pairs, data.jobs.size());
  const emu::ContentionConfig shipped;
  fmt::print("{} ({}, {} single-GPU job types, {} pairs that ran together)\n", gavel, gpu_type, data.jobs.size(),
             fit.pairs);
  fmt::print("timeslice_overhead         {:.2f}   (shipped default {:.2f})\n", fit.timeslice_overhead,
             shipped.timeslice_overhead);
  fmt::print("rmse of per-job speed      {:.4f}\n", fit.rmse);
  fmt::print("mae of per-job speed       {:.4f}\n", fit.mae);
  fmt::print("rmse with no contention    {:.4f}\n", fit.rmse_no_model);
  fmt::print("coordinate-descent sweeps  {}\n", fit.sweeps);
  fmt::print("\nfitted GPU demand of each job type (nuisance parameters; Gavel recorded no utilisation):\n");
  for (std::size_t i = 0; i < data.jobs.size(); ++i) fmt::print("  {:.3f}  {}\n", fit.demand[i], data.jobs[i]);

  std::vector<emu::GavelPair> train, test;
  for (std::size_t i = 0; i < data.pairs.size(); ++i) (i % 2 ? test : train).push_back(data.pairs[i]);
  const auto half = emu::fit_contention(train, data.jobs.size());
  fmt::print("\nheld out: fitted on {} pairs (overhead {:.2f}, rmse {:.4f}); on the other {}: rmse {:.4f}\n",
             train.size(), half.timeslice_overhead, half.rmse, test.size(),
             emu::contention_rmse(test, half.timeslice_overhead, half.demand));
  for (const char* other : {"v100", "p100", "k80"}) {
    if (other == gpu_type) continue;
    const auto d = emu::load_gavel_pairs(gavel, other);
    const auto f = emu::fit_contention(d.pairs, d.jobs.size());
    fmt::print("on {} ({} pairs): overhead {:.2f}, rmse {:.4f} (none: {:.4f})\n", other, f.pairs,
               f.timeslice_overhead, f.rmse, f.rmse_no_model);
  }
}

}  // namespace

void add_calibrate(CLI::App& app) {
  auto* cmd = app.add_subcommand("calibrate", "Fit the interference model on measured co-location pairs");
  static std::string colocate = "data/interference/lucid_colocate_info.csv";
  static std::string single = "data/interference/lucid_single_data.csv";
  static std::string workloads = "data/aegis/workloads.csv";
  static std::string gavel = "data/interference/gavel_simulation_throughputs.json";
  cmd->add_option("--pairs", colocate, "Measured pairs (Lucid's colocate CSV)")->capture_default_str();
  cmd->add_option("--solo", single, "Solo profiles of the paired jobs (Lucid's single CSV)")->capture_default_str();
  cmd->add_option("--workloads", workloads, "Catalog to apply the fitted model to, as a cross-check")
      ->capture_default_str();
  cmd->add_option("--gavel", gavel, "Gavel's measured pair throughputs (V100 pairs of networks Lucid profiled are fitted on too)")->capture_default_str();
  static bool emulated = false;
  static std::string gpu_type = "v100";
  cmd->add_flag("--emulated", emulated,
                "Fit the emulated GPU's contention model (aegis-fakejob) on Gavel's pairs instead");
  cmd->add_option("--gpu-type", gpu_type, "With --emulated: Gavel's GPU type to fit on")
      ->check(CLI::IsMember({"v100", "p100", "k80"}))
      ->capture_default_str();
  cmd->callback([] {
    if (emulated) {
      calibrate_emulated(gavel, gpu_type);
      return;
    }
    // Both sources of measured pairs (docs/interference.md, "Calibration"): Lucid's RTX 3090
    // pairs and Gavel's V100 pairs whose job types Lucid profiled.
    const auto lucid = load_lucid_pairs(colocate, single);
    const auto gavel_pairs = load_gavel_pairs(gavel, "v100", single);
    std::vector<MeasuredPair> pairs = lucid;
    pairs.insert(pairs.end(), gavel_pairs.begin(), gavel_pairs.end());
    const auto fit = fit_interference(pairs);
    const auto no_saturation = fit_interference(pairs, false);
    const SimConfig shipped;
    fmt::print("pairs                          {} (Lucid {}, Gavel v100 {})\n", fit.pairs, lucid.size(),
               gavel_pairs.size());
    fmt::print("interference_util_coeff        {:.2f}   (shipped default {:.2f})\n", fit.model.util_coeff,
               shipped.interference_util_coeff);
    fmt::print("interference_dram_coeff        {:.2f}   (shipped default {:.2f})\n", fit.model.dram_coeff,
               shipped.interference_dram_coeff);
    fmt::print("interference_saturation_coeff  {:.2f}   (shipped default {:.2f})\n", fit.model.saturation_coeff,
               shipped.interference_saturation_coeff);
    fmt::print("rmse of per-job speed          {:.4f}  (Lucid {:.4f}, Gavel {:.4f})\n", fit.rmse,
               interference_rmse(fit.model, lucid), interference_rmse(fit.model, gavel_pairs));
    fmt::print("mae of per-job speed           {:.4f}\n", fit.mae);
    fmt::print("rmse without saturation term   {:.4f}  (a {:.2f}, b {:.2f})\n", no_saturation.rmse,
               no_saturation.model.util_coeff, no_saturation.model.dram_coeff);
    fmt::print("rmse with no interference      {:.4f}\n", fit.rmse_no_model);
    fmt::print("held-out errors (leave one network out): scripts/interference/forms.py\n");

    // Cross-check: combined throughput of every pair of catalog workloads under the fit
    // (published measurements put pairs between about 1.05x and 1.9x).
    const auto cat = WorkloadCatalog::load(workloads);
    std::vector<const WorkloadProfile*> ws;
    for (const auto& [name, w] : cat.all())
      if (w.problem.empty()) ws.push_back(&w);
    std::vector<double> sums, each;
    auto pair_sums = [&](const InterferenceModel& m, std::vector<double>* speeds) {
      std::vector<double> out;
      for (std::size_t i = 0; i < ws.size(); ++i)
        for (std::size_t k = i; k < ws.size(); ++k) {
          const ActivityProfile a{ws[i]->util, ws[i]->drama}, b{ws[k]->util, ws[k]->drama};
          const double sa = m.speed(a, b.util, b.drama), sb = m.speed(b, a.util, a.drama);
          out.push_back(sa + sb);
          if (speeds) {
            speeds->push_back(sa);
            speeds->push_back(sb);
          }
        }
      return out;
    };
    sums = pair_sums(fit.model, &each);
    fmt::print("\non {} ({} profiled workloads, {} pairs):\n", workloads, ws.size(), sums.size());
    fmt::print("pair throughput (sum of speeds)  min {:.2f}  median {:.2f}  max {:.2f}\n", percentile(sums, 0),
               percentile(sums, 0.5), percentile(sums, 1));
    fmt::print("per-job speed when paired        min {:.2f}  median {:.2f}  max {:.2f}\n", percentile(each, 0),
               percentile(each, 0.5), percentile(each, 1));

    // Gavel's pairs (other jobs, other GPUs) say how much heavier interference can be. The
    // scale k that moves the catalog's median pair throughput onto Gavel's V100 median is
    // a sensitivity setting (docs/interference.md), not the default.
    const auto v100 = load_gavel_pair_sums(gavel, "v100");
    fmt::print("\n{} (v100, {} pairs that ran together):\n", gavel, v100.size());
    fmt::print("pair throughput (sum of speeds)  p10 {:.2f}  median {:.2f}  p90 {:.2f}\n", percentile(v100, 0.1),
               percentile(v100, 0.5), percentile(v100, 0.9));
    const double target = percentile(v100, 0.5);
    double lo = 1, hi = 1000;
    for (int it = 0; it < 60; ++it) {
      const double k = std::sqrt(lo * hi);
      const InterferenceModel m{fit.model.util_coeff * k, fit.model.dram_coeff * k, fit.model.saturation_coeff * k};
      (percentile(pair_sums(m, nullptr), 0.5) > target ? lo : hi) = k;
    }
    const double k = std::sqrt(lo * hi);
    fmt::print("scale matching its median: k = {:.2f} -> --set sim.interference_util_coeff={:.2f} "
               "--set sim.interference_dram_coeff={:.2f} --set sim.interference_saturation_coeff={:.2f}\n",
               k, fit.model.util_coeff * k, fit.model.dram_coeff * k, fit.model.saturation_coeff * k);
  });
}

}  // namespace aegis::cli
