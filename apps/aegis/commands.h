// Subcommands of the `aegis` command-line tool; each file registers one.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace aegis::cli {

void add_sim(CLI::App& app);
void add_config(CLI::App& app);
void add_policies(CLI::App& app);
void add_calibrate(CLI::App& app);
void add_job_commands(CLI::App& app);
// The words after `--` on the command line: the command of `aegis submit` (and `aegis run`).
void set_job_command(std::vector<std::string> command);
void add_estimate(CLI::App& app);  // aegis estimate train | eval | predict  // submit, queue, show, cancel, logs, gpus, history

}  // namespace aegis::cli
