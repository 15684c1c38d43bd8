// Starts a job attempt: the daemon forks the attempt's shim (`aegis-shim`) in a session of
// its own, holding the attempt's lock across the fork so that there is never a moment
// when the attempt runs and its lock is free. The shim is root: it starts with a fixed
// environment (root_environment()) and only two arguments, and reads what to run from the
// attempt's launch file (launch_file.h); the job's own environment is applied only by the
// process that has already become the job's user (apps/aegisd/shim.cpp).
#pragma once
#include <string>
#include <sys/types.h>
#include <vector>

#include "runtime/launch/attempt_dir.h"

namespace aegis {

// The whole environment of every root process on the launch path: nothing a user could
// have set (LD_PRELOAD, LD_LIBRARY_PATH, GCONV_PATH, locale paths, ...).
const std::vector<std::string>& root_environment();

struct StartedShim {
  pid_t pid = 0;
  int pidfd = -1;  // names this shim for good (the caller closes it)
};

// Starts the shim of an attempt made by prepare_attempt. Throws LaunchError (with the
// errno of the failed step, an exec failure included) and leaves no process behind.
StartedShim start_shim(const std::string& shim, const AttemptDir& d);

}  // namespace aegis
