// IdTable (src/lifecycle/id_table.h), the lifecycle's jobs by id: on random makes,
// assigns and erases of dense, spread and negative ids it holds what the
// std::unordered_map it replaced held, and an entry stays where it was made.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <unordered_map>

#include "lifecycle/id_table.h"

namespace aegis {
namespace {

TEST(IdTable, HoldsWhatTheUnorderedMapHeld) {
  std::mt19937_64 rng(11);
  for (int kind = 0; kind < 3; ++kind) {
    IdTable<std::string> t;
    std::unordered_map<std::int64_t, std::string> model;
    std::unordered_map<std::int64_t, const std::string*> where;
    auto pick = [&]() -> std::int64_t {
      const auto r = static_cast<std::int64_t>(rng() % 3000);
      if (kind == 0) return r;                       // dense, as the simulator's job ids
      if (kind == 1) return r * 1'000'003;           // spread
      return -r * 64;                                // negative, colliding low bits
    };
    for (int step = 0; step < 40000; ++step) {
      const std::int64_t id = pick();
      const unsigned op = static_cast<unsigned>(rng() % 10);
      if (op < 4) {
        auto [e, fresh] = t.try_emplace(id);
        auto [m, mfresh] = model.try_emplace(id);
        ASSERT_EQ(fresh, mfresh) << id;
        if (fresh) {
          *e = m->second = "job " + std::to_string(id) + std::string(20, 'x');  // past SSO
          where[id] = e;
        }
        ASSERT_EQ(where[id], e) << "an entry moved: " << id;
      } else if (op < 5) {
        std::string v = "assigned " + std::to_string(step);
        const std::string& e = t.assign(id, std::string(v));
        if (auto w = where.find(id); w != where.end()) {
          ASSERT_EQ(w->second, &e) << id;
        }
        where[id] = &e;
        model.insert_or_assign(id, v);
      } else if (op < 8) {
        ASSERT_EQ(t.erase(id), model.erase(id) == 1) << id;
        where.erase(id);
      }
      const std::string* f = t.find(id);
      auto m = model.find(id);
      ASSERT_EQ(f != nullptr, m != model.end()) << id;
      if (f) {
        ASSERT_EQ(*f, m->second);
      }
      ASSERT_EQ(t.size(), model.size());
    }
    for (const auto& [id, v] : model) {
      const std::string* f = t.find(id);
      ASSERT_TRUE(f) << id;
      EXPECT_EQ(*f, v);
    }
    std::size_t visited = 0;
    t.for_each([&](const std::string&) { ++visited; });
    EXPECT_EQ(visited, model.size());
  }
}

}  // namespace
}  // namespace aegis
