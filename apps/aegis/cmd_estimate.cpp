// Placeholder: `aegis estimate` (train, eval, predict) lands with the learned estimator.
#include "apps/aegis/commands.h"

namespace aegis::cli {
void add_estimate(CLI::App&) {}
}  // namespace aegis::cli
