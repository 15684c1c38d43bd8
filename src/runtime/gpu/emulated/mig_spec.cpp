#include "runtime/gpu/emulated/mig_spec.h"


#include "core/mig_models.h"
#include "runtime/gpu/emulated/device_ids.h"
#include "runtime/gpu/emulated/whole_number.h"

namespace aegis::emu {

namespace {

constexpr std::string_view kHelp =
    " (write GPU:PROFILE,...;GPU:..., e.g. 0:3g.20gb,2g.10gb,1g.5gb,1g.5gb;2:7g.40gb)";

// "<slices>g.<GiB>gb" or "<slices>g.<GiB>gb+me", written exactly as NVIDIA names profiles
// (no leading zeros).
std::optional<MigProfile> parse_profile(std::string_view text) {
  MigProfile p;
  std::string_view s = text;
  if (s.ends_with("+me")) {
    p.me = true;
    s.remove_suffix(3);
  }
  const auto g = s.find("g.");
  if (g == std::string_view::npos || !s.ends_with("gb")) return std::nullopt;
  if (!parse_whole_number(s.substr(0, g), &p.slices) || !parse_whole_number(s.substr(g + 2, s.size() - g - 4), &p.gib))
    return std::nullopt;
  if (p.slices < 1 || p.slices > kMigSlices || p.gib < 1 || p.gib > (1 << 14) || p.name() != text) return std::nullopt;
  return p;
}

}  // namespace

std::optional<std::vector<MigGpu>> parse_mig_layout(std::string_view text, std::string* error) {
  std::vector<MigGpu> out;
  auto fail = [&](std::string_view part, const std::string& why) {
    *error = "AEGIS_EMULATED_MIG: '" + std::string(part) + "' " + why + std::string(kHelp);
    return std::nullopt;
  };
  while (!text.empty()) {
    const auto semi = text.find(';');
    const std::string_view part = text.substr(0, semi);
    text = semi == std::string_view::npos ? std::string_view{} : text.substr(semi + 1);
    const auto colon = part.find(':');
    MigGpu m;
    if (colon == std::string_view::npos || !parse_whole_number(part.substr(0, colon), &m.gpu) || m.gpu < 0 || m.gpu >= kMaxGpus)
      return fail(part, "does not start with a GPU index and ':'");
    for (const auto& o : out)
      if (o.gpu == m.gpu) return fail(part, "lists GPU " + std::to_string(m.gpu) + " again");
    std::string_view list = part.substr(colon + 1);
    while (!list.empty()) {
      const auto comma = list.find(',');
      const std::string_view name = list.substr(0, comma);
      list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
      const auto p = parse_profile(name);
      if (!p) return fail(part, "has '" + std::string(name) + "', not a MIG profile like 3g.20gb");
      m.instances.push_back(*p);
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::string check_mig_layout(std::span<const MigGpu> layout, std::span<const MiB> gpu_total_mib) {
  for (const auto& m : layout) {
    const std::string gpu = "AEGIS_EMULATED_MIG: GPU " + std::to_string(m.gpu);
    if (static_cast<std::size_t>(m.gpu) >= gpu_total_mib.size())
      return gpu + " does not exist (there are " + std::to_string(gpu_total_mib.size()) + " GPUs)";
    const MiB total = gpu_total_mib[static_cast<std::size_t>(m.gpu)];
    const mig::Model* model = mig::model_for_memory(total);
    if (!model)
      return gpu + " has " + std::to_string(total) + " MiB, the memory of no MIG-capable model aegis knows (" +
             mig::known_models() + ")";
    std::vector<std::string> names;
    for (const auto& p : m.instances) names.push_back(p.name());
    if (const std::string why = mig::check_layout(*model, names); !why.empty()) return gpu + ": " + why;
  }
  return "";
}

MiB instance_memory_mib(MiB gpu_total_mib, const MigProfile& profile) {
  const mig::Model* model = mig::model_for_memory(gpu_total_mib);
  const mig::Profile* p = model ? mig::find_profile(*model, profile.name()) : nullptr;
  return p ? p->memory_mib : profile.memory_mib();
}

double instance_sm_share(MiB gpu_total_mib, std::string_view profile, int slices) {
  const mig::Model* model = mig::model_for_memory(gpu_total_mib);
  const mig::Profile* p = model ? mig::find_profile(*model, profile) : nullptr;
  return p ? mig::sm_share(*model, *p) : slices / static_cast<double>(kMigSlices);
}

}  // namespace aegis::emu
