// The simulator's event queue (src/sim/world/events.h) hands out events in the one order a
// single heap of (time, push order) gives, with ramp ends in their own lane and events
// pushed while one is handled; every simulated result depends on that order.
#include <gtest/gtest.h>

#include <cstdint>
#include <queue>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/world/events.h"

namespace aegis::simrun {
namespace {

// The reference: one heap, earliest (time, push order) first, popped before it is handled.
struct OneHeap {
  using Entry = std::tuple<Seconds, std::uint64_t, EvKind, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  std::uint64_t seq = 0;
  void push(Seconds t, EvKind k, int id) { heap.emplace(t, seq++, k, id); }
};

// Follow-ups a handled event pushes, a function of the event alone: so both queues get
// the same pushes exactly when they hand out the same order. Offsets of 0 push at the
// instant being drained; ramp ends pushed at earlier times than the lane's last leave it.
std::vector<std::tuple<Seconds, EvKind, int>> follow_ups(Seconds t, int id) {
  std::vector<std::tuple<Seconds, EvKind, int>> out;
  if (id >= 3000) return out;
  const Seconds offsets[] = {0, 1, 2.5, 0, 7};
  const EvKind kinds[] = {EvKind::Complete, EvKind::RampDone, EvKind::FirstActivity, EvKind::RampDone, EvKind::Wake};
  out.emplace_back(t + offsets[id % 5], kinds[(id / 5) % 5], id + 1000);
  if (id % 3 == 0) out.emplace_back(t + offsets[(id + 2) % 5], EvKind::RampDone, id + 1001);
  return out;
}

TEST(SimEventQueue, HandsOutEventsInTheOrderOfOneHeap) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> time(0, 30), kind(1, 4);
  EventQueue queue;
  OneHeap ref;
  for (int id = 0; id < 400; ++id) {
    const Seconds t = time(rng);  // many ties
    const auto k = static_cast<EvKind>(kind(rng));
    queue.push(t, k, id, 0);
    ref.push(t, k, id);
  }
  std::vector<std::pair<Seconds, int>> want, got;
  while (!ref.heap.empty()) {
    const auto [t, seq, k, id] = ref.heap.top();
    ref.heap.pop();
    want.emplace_back(t, id);
    for (const auto& [ft, fk, fid] : follow_ups(t, id)) ref.push(ft, fk, fid);
  }
  std::uint64_t handled = 0;
  while (!queue.empty()) {
    const Seconds t = queue.next_time();
    queue.drain(
        t,
        [&](const Event& e) {
          got.emplace_back(e.t, e.id);
          for (const auto& [ft, fk, fid] : follow_ups(e.t, e.id)) queue.push(ft, fk, fid, 0);
        },
        handled);
  }
  EXPECT_EQ(handled, got.size());
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace aegis::simrun
