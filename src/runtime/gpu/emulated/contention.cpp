#include "runtime/gpu/emulated/contention.h"

#include <algorithm>
#include <string>

namespace aegis::emu {
namespace {

#define P(...) AEGIS_PARAM(ContentionConfig, __VA_ARGS__)

const ParamEntry<ContentionConfig> kEntries[] = {
    P("timeslice_overhead", timeslice_overhead, 0, 100, "",
      "Extra cost of each GPU phase of a time-sliced job next to co-runners that keep the GPU busy "
      "(fitted on Gavel's V100 pairs: aegis calibrate --emulated)"),
};

#undef P

// Alone on a fraction f of the SMs, a job busy a fraction u of its time spends
// (1 - u) + u / f as long per step.
double alone(double util, double f) { return f >= 1 ? 1.0 : 1.0 / ((1.0 - util) + util / f); }

}  // namespace

std::span<const ParamEntry<ContentionConfig>> contention_param_table() { return kEntries; }

std::vector<ParamInfo> describe(const ContentionConfig& c) {
  return describe_params<ContentionConfig>(kEntries, c);
}

void set_params(ContentionConfig& c, std::string_view text) {
  ContentionConfig next = c;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos)
      throw ConfigError("'" + std::string(item) + "' is not NAME=VALUE");
    const std::string_view name = param_detail::trim(item.substr(0, eq));
    if (!set_param_in<ContentionConfig>(kEntries, next, name, item.substr(eq + 1)))
      throw ConfigError("unknown contention parameter '" + std::string(name) + "'");
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  c = next;
}

double timesliced_speed(const ContentionConfig& c, double util, double others_util) {
  if (others_util <= 0 || util <= 0) return 1.0;
  const double phase = (1.0 + c.timeslice_overhead * std::min(1.0, others_util)) * std::max(1.0, util + others_util);
  return 1.0 / ((1.0 - util) + util * phase);
}

double speed_on_device(const ContentionConfig& c, const Activity& self, const CoRunners& others,
                       const DeviceShare& share) {
  const double own = alone(self.util, share.sm_fraction * share.thread_fraction);
  const double sliced = timesliced_speed(c, self.util, others.util);
  if (!share.mps) return own * sliced;
  const double oversubscribed =
      std::max({1.0, (self.smact + others.smact) / share.sm_fraction, self.drama + others.drama});
  return own * std::max(sliced, 1.0 / oversubscribed);
}

}  // namespace aegis::emu
