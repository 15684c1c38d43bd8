#include "visible_gpus.h"

#include <algorithm>
#include <charconv>
#include <string_view>

#include "runtime/gpu/emulated/gpu_spec.h"

namespace aegis::fakejob {

std::vector<int> visible_gpus(const char* cuda_visible_devices, int gpu_count, std::string* error) {
  if (!cuda_visible_devices) return {0};
  std::vector<int> out;
  std::string_view rest = cuda_visible_devices;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    int index = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), index);
    if (ec != std::errc{} || end != item.data() + item.size()) index = emu::emulated_index(item);
    if (index < 0 || index >= gpu_count) {
      *error = "CUDA_VISIBLE_DEVICES: '" + std::string(item) + "' names no emulated GPU (there are " +
               std::to_string(gpu_count) + ": indices 0.." + std::to_string(gpu_count - 1) + " or their UUIDs)";
      return {};
    }
    if (std::find(out.begin(), out.end(), index) != out.end()) {
      *error = "CUDA_VISIBLE_DEVICES: GPU '" + std::string(item) + "' is listed twice";
      return {};
    }
    out.push_back(index);
  }
  if (out.empty()) *error = "CUDA_VISIBLE_DEVICES is empty: no GPU is visible";
  return out;
}

}  // namespace aegis::fakejob
