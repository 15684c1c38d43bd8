// jobs/<id>/<attempt>/launch: what aegis-shim runs, written by aegisd before it starts the
// shim (root-owned, mode 0600, in the root-only state directory). The shim itself starts
// with a fixed environment and two arguments (--lock-fd, --dir); everything a user
// supplied reaches it here, as data that only the process that has already become the
// user applies.
//
// Format (version 1): a sequence of fields, each "KEY=VALUE" ended by a NUL byte. Keys, in
// any order: version (1), uid, gid, user, workdir, grace (seconds), log_max_bytes (0 = no
// cap), log_tail_bytes, log_min_free_bytes, cgroup_mount and cgroup (both empty: track the shim's
// descendants), then one `arg=` per argv entry in order (at least one) and one `env=NAME=VALUE`
// per environment entry. Values never hold NUL (the API refuses it).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <variant>
#include <vector>

namespace aegis {

struct LaunchFile {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user;                  // for initgroups
  std::string workdir = "/";
  std::vector<std::string> argv;
  std::vector<std::string> env;      // "NAME=VALUE": the job's whole environment
  double kill_grace_s = 10;          // SIGTERM to SIGKILL, on cancel and for leftovers
  std::uint64_t log_max_bytes = 0;   // per stream; 0 = no cap
  std::uint64_t log_tail_bytes = 0;  // kept past the cap and written at the end
  std::uint64_t log_min_free_bytes = 0;  // output is dropped below this much free space (0 = off)
  std::string cgroup_mount;          // the cgroup v2 hierarchy
  std::string cgroup;                // the attempt's cgroup under it ("" = no cgroup)
};

std::string encode_launch_file(const LaunchFile& f);
// The file's contents back, or one line saying what is wrong.
std::variant<LaunchFile, std::string> decode_launch_file(std::string_view data);

}  // namespace aegis
