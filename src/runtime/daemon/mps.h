// MPS for aegisd: deciding whether to use it, starting NVIDIA's MPS control daemon when
// aegisd manages it, and the environment a job gets to run as an MPS client. aegisd never
// changes a GPU's compute mode or MIG layout; it only reads them (docs/sharing.md).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <sys/types.h>

#include "core/units.h"
#include "runtime/daemon/config.h"

namespace aegis {

// Resolves `sharing = "auto"` (MPS when the control tool is on PATH or an external control
// daemon's pipe exists), fills the default pipe and log directories, and, for managed MPS,
// starts the control daemon unless one already runs there. Throws ConfigError with what
// is missing when MPS is asked for and cannot be had. True when it started one.
bool setup_mps(DaemonSettings& s);

// Stops the control daemon aegisd started, when no job runs (clients would lose it).
void stop_mps(const DaemonSettings& s);

// The environment of a job attempt under MPS: the pipe directory, and, when the lifecycle
// gave it one (every job not placed exclusive), its memory limit on each of its `ngpus`
// devices and the optional SM share.
std::map<std::string, std::string> mps_environment(const DaemonSettings& s, std::optional<MiB> limit_mib, int ngpus);

}  // namespace aegis
