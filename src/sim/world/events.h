// The simulator's clock: events in (time, push order) order, one heap plus a lane for
// memory-ramp ends (pushed in time order). drain() hands out every event of one instant
// in exactly the order a single heap would; handlers may push while it runs.
#pragma once
#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <vector>

#include "core/units.h"

namespace aegis::simrun {

// CheckpointDue: a periodic checkpoint of an attempt; CheckpointSaved: a warned job's
// (preemption, issue 32 item 1).
enum class EvKind : std::uint8_t {
  Arrival, FirstActivity, RampDone, Complete, Wake, SteadyPhase, Timeout, CheckpointDue, CheckpointSaved
};

// 24 bytes (the heap moves them at every push and pop): the kind rides in the low byte of
// the push order, which it does not reorder (each push has its own sequence number, so
// seq << 8 | kind orders as seq does); versions are a job's 32-bit attempt or version.
struct Event {
  Event(Seconds at, std::uint64_t seq, EvKind k, int who, std::uint32_t v)
      : t(at), order(seq << 8 | static_cast<std::uint8_t>(k)), id(who), version(v) {}
  Seconds t = 0;
  std::uint64_t order = 0;    // push order << 8 | kind
  int id = -1;                // job, or server for Wake
  std::uint32_t version = 0;
  EvKind kind() const { return static_cast<EvKind>(order & 0xff); }
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : order > o.order; }
};
static_assert(sizeof(Event) == 24);

class EventQueue {
 public:
  bool empty() const { return heap_.empty() && ramps_.empty(); }

  // Time of the earliest event; infinity when there is none.
  Seconds next_time() const {
    Seconds t = std::numeric_limits<Seconds>::infinity();
    if (!heap_.empty()) t = heap_.front().t;
    if (!ramps_.empty()) t = std::min(t, ramps_.front().t);
    return t;
  }

  void push(Seconds t, EvKind k, int id, std::uint32_t version) {
    // A ramp's end is its first activity's time plus the one ramp length, pushed as that
    // activity is handled, in time order: so ramp ends come in (time, push order) order
    // and queue in a lane of their own, a push and a pop of a few instructions instead of
    // the heap's (one event in five). One that would not keep the lane in order (none
    // does, but the merge needs the lane sorted) goes to the heap.
    if (k == EvKind::RampDone && (ramps_.empty() || ramps_.back().t <= t)) {
      ramps_.emplace_back(t, seq_++, k, id, version);
      return;
    }
    if (first_handled_) {
      first_handled_ = false;
      replace_first(Event{t, seq_++, k, id, version});
      return;
    }
    heap_.emplace_back(t, seq_++, k, id, version);
    std::push_heap(heap_.begin(), heap_.end(), std::greater<Event>());
  }

  // Hands every event at time t to handle(e), in order, counting them in `handled`.
  template <class Handle>
  void drain(Seconds t, Handle&& handle, std::uint64_t& handled) {
    // The earlier of the heap's first event and the lane's (ramps_, in (time, push
    // order) order): every event comes out in the one order a single heap gives.
    for (;;) {
      const bool lane = !ramps_.empty() && (heap_.empty() || heap_.front() > ramps_.front());
      const Event* next = lane ? &ramps_.front() : heap_.empty() ? nullptr : &heap_.front();
      if (!next || next->t != t) break;
      const Event e = *next;
      ++handled;
      if (lane) {
        ramps_.pop_front();
        handle(e);
        continue;
      }
      // The heap's first event leaves it only after it is handled: the first event its
      // handling pushes takes its place (replace_first), one sift where a pop and a
      // push take two (a rescheduled completion, a first activity's wake-up). Until then
      // it stays the heap's least: every event pushed meanwhile is at or after its time
      // and later in push order, so the pop below takes it and nothing else.
      first_handled_ = true;
      handle(e);
      if (first_handled_) {
        first_handled_ = false;
        std::pop_heap(heap_.begin(), heap_.end(), std::greater<Event>());
        heap_.pop_back();
      }
    }
  }

 private:
  // The heap's first event (handled) replaced by `e`, sifted down to its place. The heap
  // then holds what a pop and a push would leave, and as no two events are equal ((time,
  // push order) is unique) the events come out in the same order whatever its shape.
  void replace_first(const Event& e) {
    Event* h = heap_.data();
    const std::size_t n = heap_.size();
    std::size_t i = 0;
    for (;;) {
      std::size_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && h[c] > h[c + 1]) ++c;
      if (!(e > h[c])) break;
      h[i] = h[c];
      i = c;
    }
    h[i] = e;
  }

  // The event heap, earliest first (std::push_heap / std::pop_heap with std::greater, as
  // std::priority_queue keeps it; a vector so that its first event can be replaced).
  std::vector<Event> heap_;
  bool first_handled_ = false;  // heap_.front() is being handled: the next push replaces it
  std::deque<Event> ramps_;     // RampDone events, in (time, push order) order (push())
  std::uint64_t seq_ = 0;
};

}  // namespace aegis::simrun
