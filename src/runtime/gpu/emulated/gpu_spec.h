// The emulated machine's GPUs as AEGIS_EMULATED_GPUS writes them ("3x40960" or
// "2x40960,1x81920": count x MiB), and the names they get (UUIDs: device_ids.h).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/units.h"

namespace aegis::emu {

inline constexpr int kMaxGpus = 64;  // the shared state's table size

struct GpuSpec {
  MiB total_mib = 0;
  bool operator==(const GpuSpec&) const = default;
};

// Empty, with `error` set to one line, for bad text.
std::vector<GpuSpec> parse_gpu_specs(std::string_view text, std::string* error);

std::string emulated_name(MiB total_mib);

}  // namespace aegis::emu
