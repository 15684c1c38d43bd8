// The commented config file the package installs, written from the same tables that read
// it, so that the defaults it shows cannot drift from the code's.
#include <fmt/format.h>

#include "runtime/daemon/config.h"
#include "runtime/daemon/config_reload.h"
#include "sched/config_params.h"
#include "sched/policies.h"

namespace aegis {

namespace {

std::string toml_literal(const ParamInfo& p) {
  const std::string v = format_value(p.value);
  if (std::holds_alternative<std::string>(p.value)) return "\"" + v + "\"";
  if (std::holds_alternative<std::vector<double>>(p.value)) return "[" + v + "]";
  return v;
}

// "# DOC" lines of at most ~88 columns, then "#name = default".
std::string entry(const ParamInfo& p, std::string_view note) {
  std::string out, line = "#";
  std::string doc = std::string(p.doc) + std::string(note);
  std::size_t start = 0;
  while (start < doc.size()) {
    auto end = doc.find(' ', start);
    if (end == std::string::npos) end = doc.size();
    const std::string word = doc.substr(start, end - start);
    if (line.size() + 1 + word.size() > 88 && line != "#") {
      out += line + "\n";
      line = "#";
    }
    line += " " + word;
    start = end + 1;
  }
  out += line + "\n";
  return out + fmt::format("#{} = {}\n\n", p.name, toml_literal(p));
}

}  // namespace

std::string config_file_template() {
  const DaemonConfig defaults = load_daemon_config("", {});
  std::string out =
      "# /etc/aegis/aegisd.toml: the configuration of aegisd, the GPU-sharing scheduler of this server.\n"
      "# Every setting is listed with its meaning and default, commented out: uncomment a line\n"
      "# to change it. `aegisd --print-config` shows what aegisd makes of this file; docs:\n"
      "# man aegisd, and docs/daemon.md and docs/config.md in aegis's source.\n"
      "# Settings marked [reload] take effect on `systemctl reload aegisd` (SIGHUP); the others\n"
      "# need `systemctl restart aegisd` (running jobs continue and are re-adopted).\n"
      "# Written by `aegisd --print-default-config`.\n\n"
      "# ---- the daemon ----\n\n";
  for (const auto& p : describe_params<DaemonSettings>(daemon_param_table(), defaults.daemon))
    out += entry(p, is_live_setting(p.name) ? " [reload]" : "");
  out += fmt::format(
      "# ---- engine parameters (names as in `aegis config`) ----\n"
      "# The values below are those of the default policy ({}). The chosen policy's preset is\n"
      "# applied first; a parameter set here (at the top level or in an [engine] table)\n"
      "# overrides it, so set only those you mean to change.\n\n",
      defaults.daemon.policy);
  for (const auto& p : describe(defaults.engine)) out += entry(p, "");
  return out;
}

}  // namespace aegis
