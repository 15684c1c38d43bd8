// The activity of a running attempt, summed sample by sample, and its means when it ends
// (the history of its signature keeps them: estimate/history.h RunActivity). A sample
// counts only where the figure is the job's own: the GPU's per-process utilisation, or a
// whole-GPU figure over an interval in which the job's processes were the only ones there.
#pragma once
#include <optional>
#include <set>
#include <string>

#include "estimate/history.h"
#include "runtime/gpu/gpu_source.h"

namespace aegis {

class RunActivityTotals {
 public:
  // One sample of a GPU the job has a process on. `own_util`: its processes' utilisation
  // sample where the driver gives one (GpuStatus::process_samples); `alone`: no other
  // job's or foreign process is on that GPU now. Whole-GPU figures are means over the
  // interval since the previous sample (GPM, DCGM, utilization.gpu), so they count only
  // when the job was alone there at that sample too: the first interval began before its
  // process showed, and may hold another job's last kernels.
  void add(const GpuStatus& gpu, std::optional<double> own_util, bool alone) {
    const bool whole_interval = alone && alone_before_.contains(gpu.uuid);
    if (alone) alone_before_.insert(gpu.uuid);
    else alone_before_.erase(gpu.uuid);
    if (gpu.process_samples && own_util) util_.add(*own_util);
    else if (whole_interval && gpu.util) util_.add(*gpu.util);
    if (!whole_interval) return;
    if (gpu.smact) smact_.add(*gpu.smact);
    if (gpu.smocc) smocc_.add(*gpu.smocc);
    if (gpu.drama) drama_.add(*gpu.drama);
  }
  RunActivity means() const { return {util_.mean(), smact_.mean(), smocc_.mean(), drama_.mean()}; }
  int attempt = 0;  // the attempt these samples are of

 private:
  struct Sum {
    double total = 0;
    int n = 0;
    void add(double v) { total += v, ++n; }
    std::optional<double> mean() const { return n ? std::optional<double>(total / n) : std::nullopt; }
  };
  Sum util_, smact_, smocc_, drama_;
  std::set<std::string> alone_before_;  // GPUs (UUIDs) where it was alone at the previous sample
};

}  // namespace aegis
