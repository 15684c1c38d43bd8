#include "sched/stage_registry.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "sched/filters/filters.h"
#include "sched/orders/orders.h"

namespace aegis {
namespace {

bool always(const EngineConfig&) { return true; }

// The filter chain. Cheap, structural filters first; the pressure filter (telemetry)
// last, so that a GPU it rejects passed everything else (Blocked::by_pressure).
constexpr FilterEntry kFilters[] = {
    // name           place  composed when                                             factory, binds alone, role
    {"exclusive",       10, always,                                                    make_exclusive_guard, false, StageRole::ExclusiveGuard},
    {"mig-single-gpu",  20, always,                                                    make_mig_single_gpu, true},
    {"job-count",       30, [](const EngineConfig& c) { return c.max_jobs_per_gpu > 0; },  make_job_count_cap},
    {"gpu-count",       40, [](const EngineConfig& c) { return c.same_gpu_count; },        make_same_gpu_count},
    {"mps-one-user",    45, [](const EngineConfig& c) { return c.mps && c.mps_one_user_per_gpu; }, make_mps_one_user},
    {"sharing-score",   50, [](const EngineConfig& c) { return c.sharing_score_cap >= 0; }, make_sharing_score_cap},
    {"util-cap",        60, [](const EngineConfig& c) { return c.util_cap > 0; },          make_util_cap},
    {"memory",          70, always,                                                    make_memory_fit, false, StageRole::Memory},
    {"observing",       80, [](const EngineConfig& c) { return c.observation; },           make_observation_gate, false, StageRole::Gate},
    {"pressure",        90, [](const EngineConfig& c) { return c.pressure_filter; },       make_pressure_filter, false, StageRole::Pressure},
};

// The orders, by their `order = "..."` names.
constexpr OrderEntry kOrders[] = {
    {"magm", make_most_free_memory_order},
    {"bf", make_best_fit_order},
    {"lug", make_least_utilised_order},
    {"ff", make_first_fit_order},
    {"rr", make_round_robin_order},
    {"lpu", make_least_projected_util_order},
    {"lpa", make_least_predicted_activity_order},
};

std::vector<FilterEntry>& test_filters() {
  static std::vector<FilterEntry> v;
  return v;
}

}  // namespace

std::vector<FilterEntry> filter_registry() {
  std::vector<FilterEntry> all(std::begin(kFilters), std::end(kFilters));
  all.insert(all.end(), test_filters().begin(), test_filters().end());
  std::stable_sort(all.begin(), all.end(),
                   [](const FilterEntry& a, const FilterEntry& b) { return a.place < b.place; });
  return all;
}

std::vector<FilterEntry> filters_for(const EngineConfig& c) {
  std::vector<FilterEntry> used;
  for (const auto& e : filter_registry())
    if (e.used(c)) used.push_back(e);
  return used;
}

std::span<const OrderEntry> order_registry() { return kOrders; }

std::string_view order_names() {
  static const std::string names = [] {
    std::string s;
    for (const auto& o : kOrders) s += (s.empty() ? "" : ",") + std::string(o.name);
    return s;
  }();
  return names;
}

std::unique_ptr<Order> make_order(std::string_view name, const EngineConfig& c) {
  for (const auto& o : kOrders)
    if (o.name == name) return o.make(c);
  throw std::invalid_argument("order: unknown name '" + std::string(name) + "'");
}

TestFilterRegistration::TestFilterRegistration(const FilterEntry& e) : name_(e.name) {
  if (!e.used || !e.make) throw std::invalid_argument("register_filter_for_tests: needs a predicate and a factory");
  for (const auto& f : filter_registry())
    if (f.name == e.name)
      throw std::invalid_argument("register_filter_for_tests: '" + std::string(e.name) + "' is taken");
  test_filters().push_back(e);
}

TestFilterRegistration::~TestFilterRegistration() {
  auto& v = test_filters();
  v.erase(std::remove_if(v.begin(), v.end(), [&](const FilterEntry& f) { return f.name == name_; }), v.end());
}

TestFilterRegistration register_filter_for_tests(const FilterEntry& e) { return TestFilterRegistration(e); }

}  // namespace aegis
