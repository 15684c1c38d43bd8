// The MIG profiles of the GPUs aegis knows (A100-40GB, A100-80GB, H100-80GB, H200-141GB):
// each profile's real instance memory and SM count, and where on the GPU it may be placed.
// One table for the simulator and the emulated GPU; on a real GPU NVML is the truth.
#pragma once
#include <span>
#include <string>
#include <string_view>

#include "core/units.h"

namespace aegis::mig {

inline constexpr int kComputeSlices = 7;  // compute slices of a GPU
inline constexpr int kMemorySlots = 8;    // memory slices of a GPU: what placements index

// One GPU instance profile, as `nvidia-smi mig -lgip` lists it, and its placements as
// `nvidia-smi mig -lgipp` lists them: memory slots [start, start + slots).
struct Profile {
  std::string_view name;  // "3g.20gb"; "1g.5gb+me" for the media-extensions profile
  int slices = 0;         // compute slices
  int slots = 0;          // memory slots it takes
  MiB memory_mib = 0;     // the instance's memory (NVML's memorySizeMB)
  int sms = 0;            // the instance's SMs
  std::span<const int> starts;  // allowed first slots
  int instances = 0;      // most instances on one GPU (-lgip's "Total"): 1 for a +me profile,
                          // which holds the GPU's only JPEG and OFA engines
};

struct Model {
  std::string_view name;  // "A100-40GB"
  MiB total_mib = 0;      // the whole GPU's memory as NVML reports it (MIG off)
  int sms = 0;            // the whole GPU's SMs (MIG off)
  std::span<const Profile> profiles;
  std::string_view source;  // where the numbers come from (docs/sharing.md, "MIG")
};

std::span<const Model> models();

// The model whose whole-GPU memory is `total_mib` (NVML's figure, or the nominal 40960 /
// 81920 for the A100s); nullptr for a GPU aegis has no MIG table for.
const Model* model_for_memory(MiB total_mib);
const Model* model_named(std::string_view name);
const Profile* find_profile(const Model& model, std::string_view name);

// The instance's share of the whole GPU's SMs (3g.20gb on an A100: 42 / 108).
double sm_share(const Model& model, const Profile& profile);

// "" when instances of these profiles can exist together on one GPU of `model` (every
// profile is the model's, no profile has more instances than the driver allows, compute
// slices sum to at most 7 and some placement puts each on its own memory slots); otherwise
// one line saying why.
std::string check_layout(const Model& model, std::span<const std::string> profile_names);

// "A100-40GB (40960 MiB), A100-80GB (81920 MiB), ...": for error lines.
std::string known_models();

}  // namespace aegis::mig
