// What SIGHUP changes in a running aegisd: the settings read afresh at each use (the
// admin group, per-user limits, client deadlines, log caps) take the file's new values;
// any other change is reported as needing a restart and left as it runs.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "runtime/daemon/config.h"

namespace aegis {

// True for the settings a reload applies (the list `aegisd --print-default-config` marks).
bool is_live_setting(std::string_view name);

struct ReloadOutcome {
  DaemonConfig config;                    // the running config with the live settings replaced
  std::vector<std::string> applied;       // live settings whose value changed
  std::vector<std::string> need_restart;  // other settings (daemon or engine) whose value changed
};

// Compares the config aegisd last read (before it resolved defaults such as the MPS
// directories) with the one just read from the file and the command line.
ReloadOutcome reload_config(const DaemonConfig& loaded, const DaemonConfig& wanted);

// Copies the live settings of `from` into `to` (the daemon's running, resolved settings).
void copy_live_settings(const DaemonSettings& from, DaemonSettings& to);

// The one log line a reload writes, e.g. "aegisd: reload: applied admin_group; changed but
// needing a restart (systemctl restart aegisd): policy".
std::string reload_summary(const ReloadOutcome& r);

}  // namespace aegis
