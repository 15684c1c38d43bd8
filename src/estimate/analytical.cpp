#include "estimate/analytical.h"

namespace aegis {
namespace {
constexpr double kMiB = 1024.0 * 1024.0;
}

double horus_mib(const ModelFeatures& f) {
  const double a = f.total_activations, p = f.total_parameters, b = f.batch_size;
  return 4.0 * (a * b + p + b * p) / kMiB;
}

double analytical_full_mib(const ModelFeatures& f, const AnalyticalAssumptions& a) {
  const double params = f.total_parameters * (1.0 + a.gradient_copies + a.optimizer_copies);
  const double activations = f.total_activations * f.batch_size;
  return a.context_mib + a.bytes_per_value * (params + activations) / kMiB;
}

}  // namespace aegis
