#include "runtime/gpu/nvml_process_util.h"

#include <algorithm>
#include <map>

namespace aegis::nvml {

void ProcessUtilReader::read(nvmlDeviceGetProcessUtilization_fn fn, nvmlDevice_t device, GpuStatus& s) {
  if (!fn || !supported_) return;
  std::map<unsigned int, unsigned int> busiest;  // pid -> its largest sample since the last read
  for (int attempt = 0; attempt < 3; ++attempt) {
    unsigned int count = static_cast<unsigned int>(buf_.size());
    const nvmlReturn_t rc = fn(device, buf_.empty() ? nullptr : buf_.data(), &count, last_seen_);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
      buf_.resize(count + count / 2 + 4);
      continue;
    }
    if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_FUNCTION_NOT_FOUND) {
      supported_ = false;
      return;
    }
    if (rc == NVML_ERROR_NOT_FOUND) break;  // supported; no process ran a kernel
    if (rc != NVML_SUCCESS) return;         // this time unknown: no samples, no conclusions
    for (unsigned int i = 0; i < count && i < buf_.size(); ++i) {
      busiest[buf_[i].pid] = std::max(busiest[buf_[i].pid], buf_[i].smUtil);
      last_seen_ = std::max(last_seen_, buf_[i].timeStamp);
    }
    break;
  }
  s.process_samples = true;
  for (auto& p : s.processes) {
    if (p.mps_client) continue;  // its work is reported against its MPS server's pid
    const auto it = busiest.find(p.pid);
    p.sm_util = it == busiest.end() ? 0.0 : std::min(1.0, it->second / 100.0);
  }
}

}  // namespace aegis::nvml
