// SeqQueue (src/lifecycle/seq_queue.h), the lifecycle's queues: on random joins at the
// back, returns to old places and leaves, including leaves during a walk as a pass makes
// them, it serves what the std::map it replaced served, in the same order.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "lifecycle/seq_queue.h"

namespace aegis {
namespace {

std::vector<int*> walk(const SeqQueue<int>& q) {
  std::vector<int*> out;
  for (std::size_t i = q.first(); i < q.end(); ++i)
    if (int* x = q.at(i)) out.push_back(x);
  return out;
}

std::vector<int*> walk(const std::map<std::int64_t, int*>& m) {
  std::vector<int*> out;
  for (const auto& [seq, x] : m) out.push_back(x);
  return out;
}

TEST(SeqQueue, ServesAsTheOrderedMapItReplaced) {
  std::vector<int> items(64);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    SeqQueue<int> q;
    std::map<std::int64_t, int*> model;
    std::map<int*, std::int64_t> place;  // each item's position, kept after it leaves
    std::int64_t next = 1;
    for (int step = 0; step < 300; ++step) {
      int* x = &items[rng() % items.size()];
      const auto op = static_cast<unsigned>(rng() % 10);
      const bool queued = place.count(x) && model.count(place[x]) && model[place[x]] == x;
      if (!queued && op < 5) {  // joins at the back
        place[x] = next++;
        q.push_back(place[x], x);
        model[place[x]] = x;
      } else if (!queued && place.count(x) && op < 7) {  // back in its old place
        q.put(place[x], x);
        model[place[x]] = x;
      } else if (queued && op >= 5) {  // leaves
        q.erase(place[x]);
        model.erase(place[x]);
      } else if (op == 9) {  // a pass: every other queued job leaves as the walk reaches it
        auto k = static_cast<unsigned>(rng() % 2);
        for (std::size_t i = q.first(); i < q.end(); ++i) {
          int* y = q.at(i);
          if (!y || ++k % 2 == 0) continue;
          q.erase(place[y]);
          model.erase(place[y]);
        }
      }
      ASSERT_EQ(walk(q), walk(model)) << "trial " << trial << " step " << step;
      ASSERT_EQ(q.size(), model.size());
      ASSERT_EQ(q.empty(), model.empty());
    }
  }
}

TEST(SeqQueue, AWalkSeesEveryEntryOnceWhileEntriesLeave) {
  std::vector<int> items(10);
  SeqQueue<int> q;
  for (int i = 0; i < 10; ++i) q.push_back(i + 1, &items[static_cast<std::size_t>(i)]);
  std::vector<int*> seen;
  for (std::size_t i = q.first(); i < q.end(); ++i) {
    int* x = q.at(i);
    if (!x) continue;
    seen.push_back(x);
    q.erase(static_cast<std::int64_t>(x - items.data()) + 1);  // its own entry: the head, then the last
  }
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.first(), q.end());
}

}  // namespace
}  // namespace aegis
