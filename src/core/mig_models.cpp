#include "core/mig_models.h"

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

// Memory: the GiB `nvidia-smi mig -lgip` prints, x 1024. Rows marked "derived" were not
// in a capture we could read; scripts/gpu-validate.sh records the real table of the GPU
// it runs on (docs/sharing.md, "MIG").
constexpr std::array kA100_40{
    Profile{"1g.5gb", 1, 1, 4864, 14, kAny1},   Profile{"1g.10gb", 1, 2, 9984, 14, kEven},
    Profile{"2g.10gb", 2, 2, 9984, 28, kEven2g}, Profile{"3g.20gb", 3, 4, 20096, 42, kHalves},
    Profile{"4g.20gb", 4, 4, 20096, 56, kFirst}, Profile{"7g.40gb", 7, 8, 40320, 98, kFirst},
};
constexpr std::array kA100_80{
    Profile{"1g.10gb", 1, 1, 9728, 14, kAny1},   Profile{"1g.20gb", 1, 2, 19968, 14, kEven},
    Profile{"2g.20gb", 2, 2, 19968, 28, kEven2g}, Profile{"3g.40gb", 3, 4, 40192, 42, kHalves},
    Profile{"4g.40gb", 4, 4, 40192, 56, kFirst}, Profile{"7g.80gb", 7, 8, 80896, 98, kFirst},
};
constexpr std::array kH100_80{
    Profile{"1g.10gb", 1, 1, 9984, 16, kAny1},   Profile{"1g.20gb", 1, 2, 20096, 26, kEven},
    Profile{"2g.20gb", 2, 2, 20096, 32, kEven2g}, Profile{"3g.40gb", 3, 4, 40448, 60, kHalves},
    Profile{"4g.40gb", 4, 4, 40448, 64, kFirst}, Profile{"7g.80gb", 7, 8, 81152, 132, kFirst},
};
// H200: 1g.18gb, 2g.35gb and 7g.141gb from a capture; 1g.35gb takes 2g.35gb's memory and
// H100's 1g.20gb SM count, 3g/4g.71gb H100's SM counts and twice 2g.35gb's memory plus
// H100's 4-slot overhead (derived).
constexpr std::array kH200_141{
    Profile{"1g.18gb", 1, 1, 16384, 16, kAny1},   Profile{"1g.35gb", 1, 2, 33280, 26, kEven},
    Profile{"2g.35gb", 2, 2, 33280, 32, kEven2g}, Profile{"3g.71gb", 3, 4, 66816, 60, kHalves},
    Profile{"4g.71gb", 4, 4, 66816, 64, kFirst},  Profile{"7g.141gb", 7, 8, 143360, 132, kFirst},
};

constexpr std::array kModels{
    Model{"A100-40GB", 40960, 108, kA100_40, "nvidia-smi mig -lgip, A100-SXM4-40GB"},
    Model{"A100-80GB", 81920, 108, kA100_80, "nvidia-smi mig -lgip, A100-SXM4-80GB"},
    Model{"H100-80GB", 81559, 132, kH100_80, "nvidia-smi mig -lgip, H100 80GB HBM3"},
    Model{"H200-141GB", 143771, 132, kH200_141, "nvidia-smi mig -lgip, H200 (partly derived)"},
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
