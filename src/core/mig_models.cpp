#include "core/mig_models.h"

#include <algorithm>
#include <array>
#include <bitset>
#include <vector>

namespace aegis::mig {

namespace {

// Placements (`nvidia-smi mig -lgipp`), the same on every model here: a 1-slot profile
// starts on any of the first 7 slots, a 2-slot one on an even slot (a 2g not on slot 6), a
// 4-slot one on slot 0 or 4 (a 4g only on 0), the whole GPU on 0.
constexpr std::array kAny1{0, 1, 2, 3, 4, 5, 6};
constexpr std::array kEven{0, 2, 4, 6};
constexpr std::array kEven2g{0, 2, 4};
constexpr std::array kHalves{0, 4};
constexpr std::array kFirst{0};

// Where each row comes from (docs/sharing.md, "MIG: the profile tables", has the same per
// model):
// - Which profiles exist, their compute slices (SM fraction), memory slots (memory
//   fraction) and most instances: NVIDIA's MIG User Guide, "Supported MIG Profiles"
//   (docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html), checked
//   2026-12 for the A100 (40GB; 80GB by its renaming note); its H100/H200 tables could not
//   be read here, so those rows follow the driver listings below. Its A100 table gives
//   1g.10gb "1/8" of the memory; the driver places it on 2 slots
//   ({0,2,4,6}:2, as for every 1g.<2 slots> profile) and allows 4, which only 2 slots each
//   fit: we follow the driver.
// - Memory (MiB = the GiB `nvidia-smi mig -lgip` prints x 1024) and SM counts are not in
//   that guide; they are what a driver lists, and the memory moves a little between driver
//   versions (A100-40GB 7g.40gb: 39.25, 39.38 or 39.50 GiB in public captures):
//   A100-40GB: a public -lgip capture listing 4.75/9.75/9.75/19.62/19.62/39.38 GiB (other
//     drivers print 4.75/9.62/9.62/19.50/19.50/39.25);
//   A100-80GB: a public -lgip capture on driver 515.86.01 (9.50/19.50/39.25/39.25/79.00
//     GiB); 1g.20gb, absent from that driver, takes its 2-slot memory as every listing does;
//   H100-80GB: the -lgip capture at jbarrow.ai/field_notes/nvidia-mig (9.75/19.62/19.62/
//     39.50/39.50/79.25 GiB, 16/26/32/60/64/132 SMs), since confirmed by our own capture,
//     driver 580.159.04 (tests/data/mig/h100-580.159.04/, checked row by row as the H200's);
//   H200-141GB: our own capture, driver 580.159.04 (tests/data/mig/h200-580.159.04/, which
//     tests/test_mig_models.cpp checks this table against row by row).
// A +me profile is its 1-slice profile plus the GPU's media engines: same memory, SMs and
// placements, at most one per GPU.
constexpr std::array kA100_40{
    Profile{"1g.5gb", 1, 1, 4864, 14, kAny1, 7},    Profile{"1g.5gb+me", 1, 1, 4864, 14, kAny1, 1},
    Profile{"1g.10gb", 1, 2, 9984, 14, kEven, 4},   Profile{"2g.10gb", 2, 2, 9984, 28, kEven2g, 3},
    Profile{"3g.20gb", 3, 4, 20096, 42, kHalves, 2}, Profile{"4g.20gb", 4, 4, 20096, 56, kFirst, 1},
    Profile{"7g.40gb", 7, 8, 40320, 98, kFirst, 1},
};
constexpr std::array kA100_80{
    Profile{"1g.10gb", 1, 1, 9728, 14, kAny1, 7},   Profile{"1g.10gb+me", 1, 1, 9728, 14, kAny1, 1},
    Profile{"1g.20gb", 1, 2, 19968, 14, kEven, 4},  Profile{"2g.20gb", 2, 2, 19968, 28, kEven2g, 3},
    Profile{"3g.40gb", 3, 4, 40192, 42, kHalves, 2}, Profile{"4g.40gb", 4, 4, 40192, 56, kFirst, 1},
    Profile{"7g.80gb", 7, 8, 80896, 98, kFirst, 1},
};
constexpr std::array kH100_80{
    Profile{"1g.10gb", 1, 1, 9984, 16, kAny1, 7},   Profile{"1g.10gb+me", 1, 1, 9984, 16, kAny1, 1},
    Profile{"1g.20gb", 1, 2, 20096, 26, kEven, 4},  Profile{"2g.20gb", 2, 2, 20096, 32, kEven2g, 3},
    Profile{"3g.40gb", 3, 4, 40448, 60, kHalves, 2}, Profile{"4g.40gb", 4, 4, 40448, 64, kFirst, 1},
    Profile{"7g.80gb", 7, 8, 81152, 132, kFirst, 1},
};
// Every row as driver 580.159.04 lists it (3g/4g.71gb were derived as 65.25 GiB before the
// capture; the driver says 69.75).
constexpr std::array kH200_141{
    Profile{"1g.18gb", 1, 1, 16384, 16, kAny1, 7},   Profile{"1g.18gb+me", 1, 1, 16384, 16, kAny1, 1},
    Profile{"1g.35gb", 1, 2, 33280, 26, kEven, 4},   Profile{"2g.35gb", 2, 2, 33280, 32, kEven2g, 3},
    Profile{"3g.71gb", 3, 4, 71424, 60, kHalves, 2}, Profile{"4g.71gb", 4, 4, 71424, 64, kFirst, 1},
    Profile{"7g.141gb", 7, 8, 143360, 132, kFirst, 1},
};

constexpr std::array kModels{
    Model{"A100-40GB", 40960, 108, kA100_40, "NVIDIA MIG User Guide; nvidia-smi mig -lgip, A100 40GB"},
    Model{"A100-80GB", 81920, 108, kA100_80, "NVIDIA MIG User Guide; nvidia-smi mig -lgip, A100 80GB, driver 515.86.01"},
    Model{"H100-80GB", 81559, 132, kH100_80, "NVIDIA MIG User Guide; nvidia-smi mig -lgip, H100 80GB HBM3"},
    Model{"H200-141GB", 143771, 132, kH200_141, "nvidia-smi mig -lgip/-lgipp, H200, driver 580.159.04"},
};

// Tries placements for instances [i, end) on the slots still free.
bool place(const std::vector<const Profile*>& todo, std::size_t i, std::bitset<kMemorySlots> used) {
  if (i == todo.size()) return true;
  const Profile& p = *todo[i];
  for (const int start : p.starts) {
    std::bitset<kMemorySlots> mine;
    for (int s = start; s < start + p.slots && s < kMemorySlots; ++s) mine.set(static_cast<std::size_t>(s));
    if ((mine & used).none() && place(todo, i + 1, used | mine)) return true;
  }
  return false;
}

}  // namespace

std::span<const Model> models() { return kModels; }

const Model* model_for_memory(MiB total_mib) {
  for (const auto& m : kModels)
    if (m.total_mib == total_mib) return &m;
  return nullptr;
}

const Model* model_named(std::string_view name) {
  for (const auto& m : kModels)
    if (m.name == name) return &m;
  return nullptr;
}

const Profile* find_profile(const Model& model, std::string_view name) {
  for (const auto& p : model.profiles)
    if (p.name == name) return &p;
  return nullptr;
}

double sm_share(const Model& model, const Profile& profile) {
  return static_cast<double>(profile.sms) / model.sms;
}

std::string check_layout(const Model& model, std::span<const std::string> profile_names) {
  std::vector<const Profile*> todo;
  int slices = 0;
  for (const auto& name : profile_names) {
    const Profile* p = find_profile(model, name);
    if (!p) {
      std::string known;
      for (const auto& q : model.profiles) known += (known.empty() ? "" : ", ") + std::string(q.name);
      return "'" + name + "' is not a MIG profile of the " + std::string(model.name) + " (" + known + ")";
    }
    todo.push_back(p);
    slices += p->slices;
  }
  if (slices > kComputeSlices)
    return "its instances use " + std::to_string(slices) + " compute slices; an " + std::string(model.name) +
           " has " + std::to_string(kComputeSlices);
  // The driver's own limit; it binds where placements alone would allow more (one +me).
  for (const Profile* p : todo)
    if (std::count(todo.begin(), todo.end(), p) > p->instances)
      return "'" + std::string(p->name) + "' may have at most " + std::to_string(p->instances) + " instance" +
             (p->instances == 1 ? "" : "s") + " on an " + std::string(model.name) + " (nvidia-smi mig -lgip)";
  if (!place(todo, 0, {}))
    return "no placement of its instances fits the " + std::to_string(kMemorySlots) + " memory slices of an " +
           std::string(model.name) + " (nvidia-smi mig -lgipp)";
  return "";
}

std::string known_models() {
  std::string out;
  for (const auto& m : kModels)
    out += (out.empty() ? "" : ", ") + std::string(m.name) + " (" + std::to_string(m.total_mib) + " MiB)";
  return out;
}

}  // namespace aegis::mig
