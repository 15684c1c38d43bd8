// A queue of the lifecycle (main or recovery): its jobs in serving order, each at its
// queue position (LifeJob::queue_seq, unique and increasing as places are given).
//
// Why not a std::map<position, job>, as it was: every entry was a tree node, allocated
// when a job joined and freed when it left, about one per launch (the simulator placed
// ~97k times on the whole Philly trace, each a node made, rebalanced and freed). Here the
// entries lie in one array in position order: a job joins at the back (new places are
// after every queued one), leaves by having its entry cleared, and cleared entries are
// dropped at the front and back at once and elsewhere when they outnumber the rest
// (compact(), amortised O(1) per entry). A job back in an old place (a launch that never
// started, aegisd only) is put in at its position by a binary search and an insert.
//
// Contract: entries are read in position order from first() to end(), skipping those
// at() gives as null. A walk may erase() any entry, its own included, and goes on with
// the next index (an erase never moves an entry; it may only lower end(), or raise
// first()). push_back() and put() may move entries: not during a walk.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace aegis {

template <class T>
class SeqQueue {
 public:
  std::size_t size() const { return live_; }
  bool empty() const { return live_ == 0; }
  std::size_t first() const { return head_; }
  std::size_t end() const { return items_.size(); }
  T* at(std::size_t i) const { return items_[i].item; }

  // At the back: `seq` is greater than every position given so far.
  void push_back(std::int64_t seq, T* item) {
    compact();
    items_.push_back({seq, item});
    ++live_;
  }
  // At its position `seq` (an old place), replacing whatever holds it.
  void put(std::int64_t seq, T* item) {
    compact();
    // Cleared entries keep their positions, so the array stays sorted with them in it.
    auto it = std::lower_bound(items_.begin(), items_.end(), seq, [](const Entry& e, std::int64_t s) { return e.seq < s; });
    if (it != items_.end() && it->seq == seq) {
      if (!it->item) ++live_;
      it->item = item;
    } else {
      it = items_.insert(it, {seq, item});
      ++live_;
    }
    head_ = std::min(head_, static_cast<std::size_t>(it - items_.begin()));
  }
  // Removes the entry at `seq`, if there is one.
  void erase(std::int64_t seq) {
    // The head leaves most often (jobs are served in order): found without a search.
    const auto from = items_.begin() + static_cast<std::ptrdiff_t>(head_);
    auto it = head_ < items_.size() && items_[head_].seq == seq
                  ? from
                  : std::lower_bound(from, items_.end(), seq, [](const Entry& e, std::int64_t s) { return e.seq < s; });
    if (it == items_.end() || it->seq != seq || !it->item) return;
    it->item = nullptr;
    --live_;
    // Cleared entries at either end go now (a walk's indices stay valid: nothing moves).
    while (head_ < items_.size() && !items_[head_].item) ++head_;
    while (!items_.empty() && !items_.back().item) items_.pop_back();
    if (items_.empty()) head_ = 0;
  }

 private:
  struct Entry {
    std::int64_t seq;
    T* item;  // null: it left the queue
  };
  // Drops the cleared entries when they are more than the live ones (and a few).
  void compact() {
    if (items_.size() - live_ <= live_ + 16) return;
    items_.erase(std::remove_if(items_.begin(), items_.end(), [](const Entry& e) { return !e.item; }), items_.end());
    head_ = 0;
  }

  std::vector<Entry> items_;  // ascending seq
  std::size_t head_ = 0;      // entries before it are cleared
  std::size_t live_ = 0;
};

}  // namespace aegis
