// `aegis calibrate`: fits the simulator's interference model on measured co-location
// pairs and prints the coefficients and the error, so the shipped defaults can be
// reproduced (docs/interference.md).
#include <fmt/format.h>

#include "apps/aegis/commands.h"
#include "sim/models/interference.h"
#include "sim/sim_config.h"

namespace aegis::cli {

void add_calibrate(CLI::App& app) {
  auto* cmd = app.add_subcommand("calibrate", "Fit the interference model on measured co-location pairs");
  static std::string colocate = "data/interference/lucid_colocate_info.csv";
  static std::string single = "data/interference/lucid_single_data.csv";
  cmd->add_option("--pairs", colocate, "Measured pairs (Lucid's colocate CSV)")->capture_default_str();
  cmd->add_option("--solo", single, "Solo profiles of the paired jobs (Lucid's single CSV)")->capture_default_str();
  cmd->callback([] {
    const auto pairs = load_lucid_pairs(colocate, single);
    const auto fit = fit_interference(pairs);
    const SimConfig shipped;
    fmt::print("pairs                      {}\n", fit.pairs);
    fmt::print("interference_util_coeff    {:.2f}   (shipped default {:.2f})\n", fit.model.util_coeff,
               shipped.interference_util_coeff);
    fmt::print("interference_dram_coeff    {:.2f}   (shipped default {:.2f})\n", fit.model.dram_coeff,
               shipped.interference_dram_coeff);
    fmt::print("rmse of per-job speed      {:.4f}\n", fit.rmse);
    fmt::print("mae of per-job speed       {:.4f}\n", fit.mae);
    fmt::print("rmse with no interference  {:.4f}\n", fit.rmse_no_model);
  });
}

}  // namespace aegis::cli
