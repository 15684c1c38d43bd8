// open_gpus: NVML, plus DCGM for the GPUs GPM does not cover (telemetry_select.h).
#include "runtime/gpu/telemetry_select.h"

#include <stdexcept>
#include <utility>
#include <vector>

namespace aegis {

namespace {

class SelectedSource final : public GpuSource {
 public:
  SelectedSource(std::unique_ptr<GpuSource> nvml, std::unique_ptr<DcgmActivity> dcgm, std::string dcgm_note)
      : nvml_(std::move(nvml)), dcgm_(std::move(dcgm)), dcgm_note_(std::move(dcgm_note)) {}

  using GpuSource::sample;
  std::vector<GpuStatus> sample(const SampleRequest& what) override {
    auto gpus = nvml_->sample(what);
    if (dcgm_) dcgm_->fill(gpus);
    return gpus;
  }

  std::string describe() const override {
    return nvml_->describe() + ", DCGM: " + (dcgm_ ? dcgm_->describe() : dcgm_note_);
  }

 private:
  std::unique_ptr<GpuSource> nvml_;
  std::unique_ptr<DcgmActivity> dcgm_;
  std::string dcgm_note_;  // why there is no DCGM
};

// The whole GPUs DCGM should profile: those without GPM, or all with `everywhere`. A MIG
// instance is not a DCGM GPU; its GPU in MIG mode is not listed at all.
std::vector<std::string> dcgm_candidates(const std::vector<GpuStatus>& gpus, bool everywhere) {
  std::vector<std::string> out;
  for (const auto& g : gpus)
    if (g.parent_uuid.empty() && !g.mig_enabled && (everywhere || !g.gpm)) out.push_back(g.uuid);
  return out;
}

}  // namespace

std::unique_ptr<GpuSource> open_gpus(const std::string& nvml_library, const DcgmOptions& dcgm, std::string* error,
                                     bool dcgm_everywhere) {
  auto nvml = open_nvml(nvml_library, error);
  if (!nvml) return nullptr;
  std::vector<std::string> wanted;
  std::string note = "off (dcgm = \"off\")";
  if (dcgm.mode != "off") {
    try {
      wanted = dcgm_candidates(nvml->sample(), dcgm_everywhere);
    } catch (const std::runtime_error& e) {
      note = std::string("not started: ") + e.what();
    }
    if (wanted.empty() && note.starts_with("off")) note = "not needed (GPM on every GPU)";
  }
  std::unique_ptr<DcgmActivity> reader;
  if (!wanted.empty()) {
    reader = open_dcgm(dcgm, wanted, &note);
    if (!reader) note = "not used: " + note;
  }
  return std::make_unique<SelectedSource>(std::move(nvml), std::move(reader), std::move(note));
}

}  // namespace aegis
