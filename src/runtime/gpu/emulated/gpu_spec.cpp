#include "runtime/gpu/emulated/gpu_spec.h"
#include "runtime/gpu/emulated/whole_number.h"

#include <cstdint>

namespace aegis::emu {

namespace {

constexpr MiB kMaxMib = MiB{1} << 24;  // 16 TiB: anything larger is a typo

}  // namespace

std::vector<GpuSpec> parse_gpu_specs(std::string_view text, std::string* error) {
  std::vector<GpuSpec> out;
  auto fail = [&](std::string_view part, const char* why) {
    *error = "AEGIS_EMULATED_GPUS: '" + std::string(part) + "' " + why + " (write COUNTxMIB, e.g. 3x40960 or 2x40960,1x81920)";
    return std::vector<GpuSpec>{};
  };
  if (text.empty()) return fail(text, "is empty");
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    const auto x = part.find('x');
    std::int64_t count = 1, mib = 0;
    if (x != std::string_view::npos && !parse_whole_number(part.substr(0, x), &count)) return fail(part, "has a bad count");
    if (!parse_whole_number(x == std::string_view::npos ? part : part.substr(x + 1), &mib)) return fail(part, "has a bad size");
    if (count < 1) return fail(part, "has a count below 1");
    if (mib < 1 || mib > kMaxMib) return fail(part, "has a size out of range");
    if (static_cast<std::int64_t>(out.size()) + count > kMaxGpus) return fail(part, "makes more than 64 GPUs");
    out.insert(out.end(), static_cast<std::size_t>(count), GpuSpec{mib});
  }
  return out;
}

std::string emulated_name(MiB total_mib) { return "Aegis Emulated GPU " + std::to_string(total_mib) + " MiB"; }

}  // namespace aegis::emu
