// The processes of one job attempt, found in a way that a recycled pid cannot fool:
//  - cgroup: a cgroup v2 directory made for the attempt. Every process the job starts stays
//    in it, double-fork and setsid included (an unprivileged job cannot leave it), and
//    cgroup.kill ends them all at once. Used where cgroup v2 is delegated to root.
//  - descendants: otherwise, the descendants of the attempt's shim, which is a child
//    subreaper, so that orphans (double-fork) come back to it instead of to init.
//  - session: the last resort when the shim is gone and there is no cgroup: the processes
//    in the job's session, of its user, started after its shim. Processes that left the
//    session are lost to this mode (docs/security.md).
// Every process is signalled through a pidfd that was checked after it was opened (proc.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "runtime/launch/proc.h"

namespace aegis {

class JobProcesses {
 public:
  // `mount`: the cgroup v2 hierarchy's mount point; `path`: the job's cgroup under it ("/a/b").
  static JobProcesses cgroup(std::string mount, std::string path);
  static JobProcesses descendants(ProcessRef shim);
  static JobProcesses session(pid_t sid, uid_t uid, std::uint64_t not_before_ticks);

  std::vector<ProcessRef> list() const;
  bool any() const;
  // Sends `sig` to each process; returns how many got it.
  int signal(int sig) const;
  // SIGKILL to every process (cgroup.kill where the kernel has it, 5.14+).
  void kill() const;
  // Whether `pid` (a GPU process NVML reports) is one of them.
  bool contains(pid_t pid) const;
  std::string describe() const;

 private:
  enum class Mode { Cgroup, Descendants, Session };
  Mode mode_ = Mode::Session;
  std::string mount_, path_;
  ProcessRef shim_;
  pid_t sid_ = 0;
  uid_t uid_ = 0;
  std::uint64_t not_before_ = 0;
};

// The mount point of the cgroup v2 hierarchy (from /proc/self/mountinfo), "" if none.
std::string cgroup2_mount();
// This process's own cgroup v2 path ("/" at the root), "" if it has none.
std::string own_cgroup();

// Where the daemon puts its jobs' cgroups: `<own cgroup>/aegis/<instance>`, created if
// missing (mode 0755, owned by root). Empty, with `why` set to one line, when cgroup v2 is
// not mounted or the directory cannot be made (not root, not delegated).
std::optional<std::string> prepare_cgroup_base(const std::string& mount, const std::string& instance, std::string* why);

// Makes a job's cgroup directory (an empty one left from before is reused); false with errno.
bool create_cgroup(const std::string& dir);
// Moves `pid` into the cgroup; false with errno.
bool join_cgroup(const std::string& dir, pid_t pid);
// Removes an empty cgroup directory (a no-op when it is gone).
bool remove_cgroup(const std::string& dir);

}  // namespace aegis
