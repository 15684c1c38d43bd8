// The fake job as an MPS client: what NVIDIA's client-side MPS variables ask of it, and the
// connection to the (emulated) MPS control daemon (fake_mps_control.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/units.h"

namespace aegis::fakejob {

struct MpsSettings {
  std::string pipe_dir;                    // CUDA_MPS_PIPE_DIRECTORY: "" when not an MPS client
  std::vector<std::optional<MiB>> limits;  // CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, per device ordinal
  double thread_fraction = 1;              // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE / 100
};

// "0=1024M,1=2G" (device ordinals within CUDA_VISIBLE_DEVICES; ordinals beyond `devices`
// are ignored) or "1024M" for every device; units K, M, G, T, with an optional B. Empty
// with `error` set for text CUDA would not understand.
std::optional<std::vector<std::optional<MiB>>> parse_mem_limits(std::string_view text, int devices,
                                                                 std::string* error);

// Reads the MPS variables for a job with `devices` visible devices; false with `error`
// set to one line for a malformed value.
bool read_mps_settings(int devices, MpsSettings* out, std::string* error);

// Whether an MPS control daemon listens in `pipe_dir` (its `control` FIFO has a reader).
// On success tells it that `pid` is a new client, as CUDA's client does, and waits until
// the daemon lets it in: at once, or when another user's MPS server is gone.
bool connect_mps(const std::string& pipe_dir, std::uint32_t pid);

}  // namespace aegis::fakejob
