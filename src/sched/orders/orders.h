// Factories for the GPU orders; each lives in its own file in this folder and is named
// in the registry (sched/stage_registry.cpp), which `order = "..."` looks up.
#pragma once
#include <algorithm>
#include <memory>
#include <string_view>

#include "sched/stage.h"

namespace aegis {

std::unique_ptr<Order> make_most_free_memory_order(const EngineConfig& c);      // "magm": most free memory first
std::unique_ptr<Order> make_best_fit_order(const EngineConfig& c);              // "bf": least free memory first
std::unique_ptr<Order> make_least_utilised_order(const EngineConfig& c);        // "lug": least SM activity
std::unique_ptr<Order> make_first_fit_order(const EngineConfig& c);             // "ff": GPU index order
std::unique_ptr<Order> make_round_robin_order(const EngineConfig& c);           // "rr": after the last GPU chosen
std::unique_ptr<Order> make_least_projected_util_order(const EngineConfig& c);  // "lpu": Horus
std::unique_ptr<Order> make_least_predicted_activity_order(const EngineConfig& c);  // "lpa": predicted, union rule

// Shared helper: stable sort by key ascending, ties by GPU index.
template <class Key>
void sort_by_key(std::vector<const GpuCandidate*>& gpus, Key key) {
  auto before = [&](const GpuCandidate* a, const GpuCandidate* b) {
    const auto ka = key(*a), kb = key(*b);
    if (ka != kb) return ka < kb;
    return a->view->index < b->view->index;
  };
  // A server's GPUs are few: sorted by insertion, without std::sort's set-up. Keys and then
  // distinct indices order the GPUs totally, so every sort gives this one order.
  if (gpus.size() <= 16) {
    for (std::size_t i = 1; i < gpus.size(); ++i) {
      const GpuCandidate* g = gpus[i];
      std::size_t k = i;
      for (; k > 0 && before(g, gpus[k - 1]); --k) gpus[k] = gpus[k - 1];
      gpus[k] = g;
    }
    return;
  }
  std::sort(gpus.begin(), gpus.end(), before);
}

}  // namespace aegis
