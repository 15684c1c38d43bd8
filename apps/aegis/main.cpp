// aegis: the command-line tool. `aegis sim` replays traces through the scheduling engine;
// `aegis config` and `aegis policies` show what the engine will do and with which numbers.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>
#include <fmt/format.h>

#include "apps/aegis/client.h"
#include "apps/aegis/commands.h"
#include "core/param_table.h"
#include "sim/csv.h"
#include "sim/simulator.h"

int main(int argc, char** argv) {
  CLI::App app{"aegis: share a server's GPUs between training jobs safely (talks to aegisd), and simulate policies"};
  app.name("aegis");
  app.require_subcommand(1);
  app.set_version_flag("--version", "aegis 0.1.0");
  aegis::cli::add_sim(app);
  aegis::cli::add_config(app);
  aegis::cli::add_policies(app);
  aegis::cli::add_calibrate(app);
  aegis::cli::add_job_commands(app);
  aegis::cli::add_estimate(app);
  // Everything after the first `--` is the job's command, untouched: CLI11 would otherwise
  // end a repeatable option's values at `--` and read the command's own options as ours.
  std::vector<std::string> args(argv + 1, argv + argc);
  const auto dashes = std::find(args.begin(), args.end(), "--");
  if (dashes != args.end()) {
    aegis::cli::set_job_command(std::vector<std::string>(dashes + 1, args.end()));
    args.erase(dashes, args.end());
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    fmt::print(stderr, "aegis: error: {}\n", e.what());
    fmt::print(stderr, "Run with --help for more information.\n");
    return 2;
  } catch (const aegis::cli::ClientError& e) {  // the daemon said no, or cannot be reached
    fmt::print(stderr, "aegis: error: {}\n", e.what());
    return 1;
  } catch (const aegis::ConfigError& e) {  // a bad parameter is a usage error
    fmt::print(stderr, "aegis: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {  // bad input files, stalled simulations, I/O
    fmt::print(stderr, "aegis: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
