// The lifecycle's jobs by id (Lifecycle::jobs_): entries that stay where they are made
// until erased, found by id.
//
// Why not a std::unordered_map<JobId, LifeJob>, as it was: each job was a node allocated
// at submit and freed when the driver forgot it, and each look-up a division by a prime
// bucket count and a walk down a bucket's list. A simulation submits and forgets every job
// of its trace (1.07 million at --repeat 13) and looks each up about five times. Here the
// entries lie in chunks of 64 that are never freed while the table lives, an erased
// entry's place goes to the next job made (so a run allocates for the most jobs alive at
// once, not for every job), and ids are found in an open-addressed index (linear probing,
// a multiplicative hash of the id, at most half full; an erase shifts the entries after
// it back instead of leaving a tombstone, so probes stay short however many jobs pass).
//
// Contract: find/try_emplace/assign/erase behave as the std::unordered_map calls of the
// same names; an entry's address is stable from try_emplace/assign until its erase;
// for_each visits every entry once, in no stated order.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace aegis {

template <class T>
class IdTable {
 public:
  std::size_t size() const { return size_; }

  T* find(std::int64_t id) {
    const std::size_t i = position(id);
    return i == kNone ? nullptr : &*slot(index_[i].slot);
  }
  const T* find(std::int64_t id) const {
    const std::size_t i = position(id);
    return i == kNone ? nullptr : &*slot(index_[i].slot);
  }

  // The entry of `id`, made by T's default constructor if there was none (then true).
  std::pair<T*, bool> try_emplace(std::int64_t id) {
    if (T* t = find(id)) return {t, false};
    return {&insert(id).emplace(), true};
  }
  // The entry of `id` set to `value`, made if there was none.
  T& assign(std::int64_t id, T&& value) {
    if (T* t = find(id)) return *t = std::move(value);
    return insert(id).emplace(std::move(value));
  }
  // Destroys the entry of `id`, if there is one; its place is kept for the next.
  bool erase(std::int64_t id) {
    std::size_t i = position(id);
    if (i == kNone) return false;
    const std::uint32_t s = index_[i].slot;
    slot(s).reset();
    free_.push_back(s);
    --size_;
    // Backward shift: each following entry of the run that may sit earlier moves into the
    // hole, so every id stays reachable from its home without tombstones.
    const std::size_t mask = index_.size() - 1;
    for (std::size_t j = (i + 1) & mask; index_[j].slot != kEmpty; j = (j + 1) & mask) {
      const std::size_t home = this->home(index_[j].id);
      // index_[j] stays unless its home lies cyclically outside (i, j].
      const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (stays) continue;
      index_[i] = index_[j];
      i = j;
    }
    index_[i].slot = kEmpty;
    return true;
  }

  template <class F>
  void for_each(F&& f) const {
    for (const auto& chunk : chunks_)
      for (std::size_t k = 0; k < kChunk; ++k)
        if (chunk[k]) f(*chunk[k]);
  }

 private:
  static constexpr std::uint32_t kEmpty = ~std::uint32_t{0};
  static constexpr std::size_t kNone = ~std::size_t{0};
  static constexpr std::size_t kChunk = 64;
  struct Cell {
    std::int64_t id = 0;
    std::uint32_t slot = kEmpty;
  };

  std::optional<T>& slot(std::uint32_t s) { return chunks_[s / kChunk][s % kChunk]; }
  const std::optional<T>& slot(std::uint32_t s) const { return chunks_[s / kChunk][s % kChunk]; }
  // Fibonacci hashing: the top bits of id times 2^64/phi (ids in a run are consecutive).
  std::size_t home(std::int64_t id) const {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  std::size_t position(std::int64_t id) const {
    if (index_.empty()) return kNone;
    const std::size_t mask = index_.size() - 1;
    for (std::size_t i = home(id);; i = (i + 1) & mask) {
      if (index_[i].slot == kEmpty) return kNone;
      if (index_[i].id == id) return i;
    }
  }
  // An empty place for a new id (not in the table), indexed.
  std::optional<T>& insert(std::int64_t id) {
    if (2 * (size_ + 1) > index_.size()) grow();
    std::uint32_t s;
    if (!free_.empty()) {
      s = free_.back();
      free_.pop_back();
    } else {
      s = static_cast<std::uint32_t>(chunks_.size() * kChunk);
      chunks_.push_back(std::make_unique<std::optional<T>[]>(kChunk));
      for (std::size_t k = kChunk; k-- > 1;) free_.push_back(s + static_cast<std::uint32_t>(k));
    }
    place(id, s);
    ++size_;
    return slot(s);
  }
  void place(std::int64_t id, std::uint32_t s) {
    const std::size_t mask = index_.size() - 1;
    std::size_t i = home(id);
    while (index_[i].slot != kEmpty) i = (i + 1) & mask;
    index_[i] = Cell{id, s};
  }
  void grow() {
    const std::size_t n = index_.empty() ? 64 : 2 * index_.size();
    std::vector<Cell> old = std::move(index_);
    index_.assign(n, Cell{});
    shift_ = 64 - std::countr_zero(n);
    for (const Cell& c : old)
      if (c.slot != kEmpty) place(c.id, c.slot);
  }

  std::vector<std::unique_ptr<std::optional<T>[]>> chunks_;
  std::vector<std::uint32_t> free_;  // places of erased entries (and of a new chunk's unused ones)
  std::vector<Cell> index_;          // a power of two long, at most half full
  int shift_ = 64;
  std::size_t size_ = 0;
};

}  // namespace aegis
