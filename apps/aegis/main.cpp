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

namespace {

// Every error is one line on stderr, so that scripts and logs keep it whole: a newline
// in a message (quoted user input, a library's wording) becomes a space.
std::string one_line(std::string s) {
  std::replace_if(s.begin(), s.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

int fail(const std::string& message, int code) {
  fmt::print(stderr, "aegis: error: {}\n", one_line(message));
  return code;
}

// "aegis submit": the subcommands the arguments named, whose --help explains the error;
// "aegis" for an error about a global option (--socket, --timeout), which only it lists.
std::string help_for(const CLI::App& app, const std::string& message) {
  std::string path = app.get_name();
  if (app.get_option_no_throw(message.substr(0, message.find(':')))) return path;
  for (auto subs = app.get_subcommands(); !subs.empty(); subs = subs.front()->get_subcommands())
    path += " " + subs.front()->get_name();
  return path;
}

}  // namespace

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
  } catch (const CLI::ParseError& e) {  // a usage error: one line, and where the help is
    if (e.get_exit_code() == 0) return app.exit(e);
    return fail(fmt::format("{} (see {} --help)", e.what(), help_for(app, e.what())), 2);
  } catch (const aegis::cli::ClientError& e) {  // the daemon said no, or cannot be reached
    return fail(e.what(), 1);
  } catch (const aegis::ConfigError& e) {  // a bad parameter is a usage error
    return fail(e.what(), 2);
  } catch (const std::exception& e) {  // bad input files, stalled simulations, I/O
    return fail(e.what(), 1);
  }
  return 0;
}
