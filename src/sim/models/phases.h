// A job's GPU activity over one attempt, in phases (docs/interference.md, "Job phases"):
// nothing until its first activity (sim/models/startup.h), then `startup_s` seconds at its
// start-up levels (process up, memory rising, few kernels), then its steady levels to the end.
// A profile without phase columns has one phase at its whole-run means: the simulator as before.
#pragma once
#include <string>

#include "core/units.h"

namespace aegis {

class CsvReader;

struct ActivityLevels {
  double smact = 0;  // SM activity, [0,1]
  double smocc = 0;  // SM occupancy, [0,1]
  double drama = 0;  // DRAM activity, [0,1]
  double util = 0;   // coarse utilisation, [0,1]
  bool operator==(const ActivityLevels&) const = default;
};

struct JobPhases {
  Seconds startup_s = 0;   // from first activity to the steady phase; 0: no start-up phase
  ActivityLevels startup;  // levels while starting up
  ActivityLevels steady;   // levels from then on (the whole-run means without phase columns)

  // Levels `since` seconds after the attempt's first activity.
  const ActivityLevels& at(Seconds since) const { return since < startup_s ? startup : steady; }

  // Whether the lifecycle's anchor (lifecycle/activity_anchor.h: the job's own utilisation
  // held at `process_util` or more) starts at its first activity; if not, it starts with the
  // steady phase. A job whose steady level stays under the threshold too is anchored at its
  // first activity (aegisd would fall back to the GPU's rise or the memory plateau).
  bool anchored_at_first_activity(double process_util) const {
    return startup_s <= 0 || startup.util >= process_util || steady.util < process_util;
  }
};

// The optional phase columns of a workloads CSV row: startup_s, startup_{smact,smocc,drama,util}
// and steady_{smact,smocc,drama,util} (levels in [0,1]). Absent or empty, a steady level is
// the whole-run mean `whole` and a start-up level 0. A bad value names its column (InputError).
JobPhases read_phases(const CsvReader& r, const ActivityLevels& whole);

}  // namespace aegis
