// How the emulated machine numbers its CUDA-visible devices: a whole GPU is its index; a
// MIG instance gets a fixed id from its GPU and its slot in that GPU's layout, so ids
// never move when another GPU's layout changes. Also the UUIDs each device shows (stable
// per id, as a real driver's are per board and instance) and how CUDA_VISIBLE_DEVICES
// names them.
#pragma once
#include <string>
#include <string_view>

#include "runtime/gpu/emulated/gpu_spec.h"

namespace aegis::emu {

// At most 7 instances per GPU: every instance takes at least one of its 7 SM slices.
inline constexpr int kMigSlices = 7;
inline constexpr int kMaxDevices = kMaxGpus * (1 + kMigSlices);

constexpr int mig_device(int gpu, int slot) { return kMaxGpus + gpu * kMigSlices + slot; }
constexpr bool is_mig_device(int device) { return device >= kMaxGpus; }
// The GPU a device is, or is cut from.
constexpr int gpu_of(int device) { return is_mig_device(device) ? (device - kMaxGpus) / kMigSlices : device; }
// The slot of an instance in its GPU's layout; -1 for a whole GPU.
constexpr int slot_of(int device) { return is_mig_device(device) ? (device - kMaxGpus) % kMigSlices : -1; }
// NVML's GPU instance id of the instance in `slot` (a real driver numbers them by where
// the instance sits on the chip; the emulation by layout order, from 1).
constexpr unsigned gpu_instance_id(int slot) { return static_cast<unsigned>(slot) + 1; }

// "GPU-aeg15000-0000-0000-0000-000000000003" for GPU 3.
std::string emulated_uuid(int gpu);
// "MIG-aeg15000-0000-0000-0000-000000000301" for slot 1 of GPU 3 (the R470+ form): the
// last digits are GPU and slot, so that even a shortened UUID tells instances apart.
std::string emulated_mig_uuid(int gpu, int slot);
// The device an identifier names, as CUDA_VISIBLE_DEVICES may write it, or -1: a GPU UUID
// (the "GPU-" prefix may be left out), a MIG UUID, or the older
// "MIG-GPU-<uuid>/<GPU instance id>/<compute instance id>" (compute instance 0). Whether
// the device exists is for the caller to check.
int emulated_device(std::string_view id);

}  // namespace aegis::emu
