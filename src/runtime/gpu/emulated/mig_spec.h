// The emulated MIG layout as AEGIS_EMULATED_MIG writes it: per GPU, NVIDIA profile names,
// e.g. "0:3g.20gb,2g.10gb,1g.5gb,1g.5gb;2:7g.40gb" ("1g.5gb+me" for a media-extensions one). A GPU listed is in MIG mode (with no
// instances when its list is empty, as right after `nvidia-smi -mig 1`); the others are not.
// The rules are the simulator's (`--sharing mig`): the GPU's memory names its model
// (core/mig_models.h), whose profiles, real instance memory and placements are the rule.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/units.h"

namespace aegis::emu {

struct MigProfile {
  int slices = 0;  // of kMigSlices
  int gib = 0;     // memory: gib x 1024 MiB
  bool me = false;  // "+me": the media-extensions variant (one per GPU, mig_models.h)
  std::string name() const {
    return std::to_string(slices) + "g." + std::to_string(gib) + "gb" + (me ? "+me" : "");
  }
  MiB memory_mib() const { return MiB{gib} * 1024; }
  bool operator==(const MigProfile&) const = default;
};

struct MigGpu {
  int gpu = 0;
  std::vector<MigProfile> instances;  // in slot order
};

// The layout `text` describes (empty text: no GPU in MIG mode); nullopt with `error` set
// to one line for bad syntax or a GPU listed twice.
std::optional<std::vector<MigGpu>> parse_mig_layout(std::string_view text, std::string* error);

// "" when the layout fits GPUs of these sizes, else one line saying what does not fit: a
// GPU whose memory is no MIG model's, a profile not of its model, a layout NVIDIA would
// refuse (mig::check_layout).
std::string check_mig_layout(std::span<const MigGpu> layout, std::span<const MiB> gpu_total_mib);

// An instance of `profile` on a GPU of `gpu_total_mib` (a layout check_mig_layout passed):
// its real memory and its share of the GPU's SMs; nominal (gib x 1024, slices / 7) for a
// profile the tables do not have.
MiB instance_memory_mib(MiB gpu_total_mib, const MigProfile& profile);
double instance_sm_share(MiB gpu_total_mib, std::string_view profile, int slices);

}  // namespace aegis::emu
