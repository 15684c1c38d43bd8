// The stages the engine can compose, one table each (stage_registry.cpp). Adding a filter
// or an order is one new file in filters/ or orders/ (its factory declared in filters.h
// or orders.h) and one line in its table; the engine and `order = "..."` find it there.
#pragma once
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "sched/stage.h"

namespace aegis {

// What the engine itself needs to know of a filter, declared in its registry entry rather
// than read from its display name: the memory stage (Room summarises it), the observation
// gate (its openings are wake times), the pressure filter (its refusals are told apart,
// Blocked::by_pressure) and the exclusive guard (Room skips GPUs it guards). At most one
// composed filter has each role other than None.
enum class StageRole { None, Memory, Gate, Pressure, ExclusiveGuard };

struct FilterEntry {
  std::string_view name;                              // the filter's name(), as describe() shows it
  int place = 0;                                      // its place in the chain, lowest first
  bool (*used)(const EngineConfig&) = nullptr;        // whether a policy with this config composes it
  std::unique_ptr<Filter> (*make)(const EngineConfig&) = nullptr;
  bool binds_alone = false;                           // a hardware limit: also checked for GPUs a job takes alone
  StageRole role = StageRole::None;                   // what the engine treats it as (above)
};

struct OrderEntry {
  std::string_view name;  // `order = "..."`, and the order's name()
  std::unique_ptr<Order> (*make)(const EngineConfig&) = nullptr;
};

// Every filter, built in or registered by a test, in chain order (by place; ties keep
// the table's order, built-in ones first).
std::vector<FilterEntry> filter_registry();
// The filters a policy with this config composes, in chain order.
std::vector<FilterEntry> filters_for(const EngineConfig& c);

std::span<const OrderEntry> order_registry();
// "magm,bf,lug,ff,rr,lpu": the choices of the `order` parameter.
std::string_view order_names();
// By `order` name; throws std::invalid_argument for an unknown name.
std::unique_ptr<Order> make_order(std::string_view name, const EngineConfig& c);

// Tests only: adds a filter to the registry for every engine built while the returned
// handle lives, so a test can prove that a new filter is one file and one line
// (tests/test_stage_registry.cpp). Throws std::invalid_argument for a name already taken.
// Not thread-safe: register before building engines on other threads.
class TestFilterRegistration {
 public:
  explicit TestFilterRegistration(const FilterEntry& e);
  ~TestFilterRegistration();
  TestFilterRegistration(const TestFilterRegistration&) = delete;
  TestFilterRegistration& operator=(const TestFilterRegistration&) = delete;

 private:
  std::string_view name_;
};
[[nodiscard]] TestFilterRegistration register_filter_for_tests(const FilterEntry& e);

}  // namespace aegis
