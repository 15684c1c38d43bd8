// Subcommands of the `aegis` command-line tool; each file registers one.
#pragma once
#include <CLI/CLI.hpp>

namespace aegis::cli {

void add_sim(CLI::App& app);
void add_config(CLI::App& app);
void add_policies(CLI::App& app);
void add_calibrate(CLI::App& app);
void add_job_commands(CLI::App& app);
void add_estimate(CLI::App& app);  // aegis estimate train | eval | predict  // submit, queue, show, cancel, logs, gpus, history

}  // namespace aegis::cli
