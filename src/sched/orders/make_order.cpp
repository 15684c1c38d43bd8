#include <stdexcept>
#include <string>

#include "sched/orders/orders.h"

namespace aegis {

std::unique_ptr<Order> make_order(std::string_view name, const EngineConfig& c) {
  if (name == "magm") return make_most_free_memory_order();
  if (name == "bf") return make_best_fit_order();
  if (name == "lug") return make_least_utilised_order(c);
  if (name == "ff") return make_first_fit_order();
  if (name == "rr") return make_round_robin_order();
  if (name == "lpu") return make_least_projected_util_order();
  throw std::invalid_argument("order: unknown name '" + std::string(name) + "'");
}

}  // namespace aegis
