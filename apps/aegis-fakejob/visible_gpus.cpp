#include "visible_gpus.h"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <utility>

namespace aegis::fakejob {

namespace {

// The device `item` names, or -1 with `error` set.
int resolve(std::string_view item, const emu::State& state, int gpu_count, std::string* error) {
  int id = -1;
  const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
  const bool index = ec == std::errc{} && end == item.data() + item.size() && id < gpu_count;
  if (!index) id = emu::emulated_device(item);
  const emu::DeviceInfo d = id >= 0 ? state.device(id) : emu::DeviceInfo{};
  if (!d.exists()) {
    *error = "CUDA_VISIBLE_DEVICES: '" + std::string(item) + "' names no emulated GPU (there are " +
             std::to_string(gpu_count) + ": indices 0.." + std::to_string(gpu_count - 1) + ", their UUIDs or MIG UUIDs)";
    return -1;
  }
  if (!d.mig_mode) return id;
  const auto instances = state.instances(id);
  if (instances.empty()) {
    *error = "CUDA_VISIBLE_DEVICES: GPU '" + std::string(item) + "' is in MIG mode and has no MIG instance to run on";
    return -1;
  }
  return instances.front();
}

}  // namespace

std::vector<int> visible_gpus(const char* cuda_visible_devices, const emu::State& state, std::string* error) {
  const int gpu_count = state.gpu_count();
  std::vector<int> out;
  std::string_view rest = cuda_visible_devices ? cuda_visible_devices : "0";
  bool mig_seen = false;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    const int id = resolve(item, state, gpu_count, error);
    if (id < 0) return {};
    if (std::find(out.begin(), out.end(), id) != out.end()) {
      *error = "CUDA_VISIBLE_DEVICES: GPU '" + std::string(item) + "' is listed twice";
      return {};
    }
    // CUDA enumerates a single MIG instance per process: the others stay invisible.
    if (emu::is_mig_device(id) && std::exchange(mig_seen, true)) continue;
    out.push_back(id);
  }
  if (out.empty()) *error = "CUDA_VISIBLE_DEVICES is empty: no GPU is visible";
  return out;
}

}  // namespace aegis::fakejob
