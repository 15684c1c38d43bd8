#include "runtime/gpu/emulated/device_ids.h"
#include "runtime/gpu/emulated/whole_number.h"

#include <cstdint>
#include <cstdio>

namespace aegis::emu {

namespace {

constexpr std::string_view kGpuPrefix = "GPU-aeg15000-0000-0000-0000-";
constexpr std::string_view kMigPrefix = "MIG-aeg15000-0000-0000-0000-";
constexpr int kSlotDigits = 100;  // the tail is gpu * 100 + slot

// The GPU index of a full GPU UUID, or -1.
int gpu_index(std::string_view uuid) {
  std::int64_t v = -1;
  if (!uuid.starts_with(kGpuPrefix) || uuid.size() != kGpuPrefix.size() + 12) return -1;
  if (!parse_whole_number(uuid.substr(kGpuPrefix.size()), &v) || v < 0 || v >= kMaxGpus) return -1;
  return static_cast<int>(v);
}

// "MIG-aeg15000-0000-0000-0000-0000000GGGSS".
int mig_uuid_device(std::string_view uuid) {
  std::int64_t v = -1;
  if (!uuid.starts_with(kMigPrefix) || uuid.size() != kMigPrefix.size() + 12) return -1;
  if (!parse_whole_number(uuid.substr(kMigPrefix.size()), &v) || v < 0) return -1;
  const std::int64_t gpu = v / kSlotDigits, slot = v % kSlotDigits;
  if (gpu >= kMaxGpus || slot >= kMigSlices) return -1;
  return mig_device(static_cast<int>(gpu), static_cast<int>(slot));
}

// "MIG-GPU-<uuid>/<gi>/<ci>", CUDA 11's form; the emulation has compute instance 0 only.
int legacy_mig_device(std::string_view id) {
  const auto a = id.find('/');
  const auto b = a == std::string_view::npos ? a : id.find('/', a + 1);
  if (!id.starts_with("MIG-GPU-") || b == std::string_view::npos) return -1;
  const int gpu = gpu_index(id.substr(4, a - 4));
  std::int64_t gi = -1, ci = -1;
  if (gpu < 0 || !parse_whole_number(id.substr(a + 1, b - a - 1), &gi) || !parse_whole_number(id.substr(b + 1), &ci) || ci != 0)
    return -1;
  for (int slot = 0; slot < kMigSlices; ++slot)
    if (gpu_instance_id(slot) == static_cast<std::uint64_t>(gi)) return mig_device(gpu, slot);
  return -1;
}

}  // namespace

std::string emulated_uuid(int gpu) {
  char tail[16];
  std::snprintf(tail, sizeof tail, "%012d", gpu);
  return std::string(kGpuPrefix) + tail;
}

std::string emulated_mig_uuid(int gpu, int slot) {
  char tail[16];
  std::snprintf(tail, sizeof tail, "%012d", gpu * kSlotDigits + slot);
  return std::string(kMigPrefix) + tail;
}

int emulated_device(std::string_view id) {
  if (id.starts_with("MIG-GPU-")) return legacy_mig_device(id);
  if (id.starts_with("MIG-")) return mig_uuid_device(id);
  if (!id.starts_with("GPU-")) return gpu_index("GPU-" + std::string(id));
  return gpu_index(id);
}

}  // namespace aegis::emu
