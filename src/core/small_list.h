// A list that keeps its first N elements inside itself and moves to the heap only past
// them: a simulation result holds a million of these (attempts of a job, GPUs of an
// attempt), and almost all hold one attempt of one GPU. As a std::vector they cost one
// heap block each, allocated in launch order wherever the allocator had room; inline they
// cost nothing more than the record and lie where the record lies. The engine's and the
// lifecycle's per-launch lists (a launch's GPUs, a placement's parts, a job's attempts)
// use it for the same reason: made and dropped hundreds of thousands of times a run, each
// a heap block as a vector (core/gpu_indices.h).
//
// Contract: the container interface its users need (range-for, reverse iteration, size,
// empty, [], at, front, back, data, push_back, emplace_back, pop_back, assign, clear, ==,
// initializer lists), elements contiguous in both modes. Copies copy the elements; a move takes a
// heap block over and moves inline elements one by one. Elements must be nothrow-movable
// (they are moved when the list leaves its inline room).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace aegis {

template <class T, std::size_t N>
class SmallList {
  static_assert(N >= 1, "a SmallList keeps at least one element inline");
  static_assert(std::is_nothrow_move_constructible_v<T>, "elements are moved when the list grows");

 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  SmallList() noexcept {}
  SmallList(std::initializer_list<T> items) { assign(items.begin(), items.end()); }
  SmallList(const SmallList& o) {
    if (!o.on_heap() && kWhole) copy_room(o);
    else assign(o.begin(), o.end());
  }
  SmallList(SmallList&& o) noexcept { take(std::move(o)); }
  SmallList& operator=(const SmallList& o) {
    if (this == &o) return *this;
    if (!on_heap() && !o.on_heap() && kWhole) copy_room(o);
    else assign(o.begin(), o.end());
    return *this;
  }
  SmallList& operator=(SmallList&& o) noexcept {
    if (this != &o) {
      release();
      take(std::move(o));
    }
    return *this;
  }
  SmallList& operator=(std::initializer_list<T> items) {
    assign(items.begin(), items.end());
    return *this;
  }
  ~SmallList() { release(); }

  template <class It>
  void assign(It first, It last) {
    clear();
    reserve(static_cast<size_type>(std::distance(first, last)));
    for (; first != last; ++first) emplace_back(*first);
  }

  T* data() noexcept { return on_heap() ? heap_ : std::launder(reinterpret_cast<T*>(inline_)); }
  const T* data() const noexcept { return on_heap() ? heap_ : std::launder(reinterpret_cast<const T*>(inline_)); }
  iterator begin() noexcept { return data(); }
  iterator end() noexcept { return data() + size_; }
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept { return data() + size_; }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

  size_type size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_type capacity() const noexcept { return cap_; }

  T& operator[](size_type i) noexcept { return data()[i]; }
  const T& operator[](size_type i) const noexcept { return data()[i]; }
  T& at(size_type i) {
    if (i >= size_) throw std::out_of_range("SmallList::at");
    return data()[i];
  }
  const T& at(size_type i) const {
    if (i >= size_) throw std::out_of_range("SmallList::at");
    return data()[i];
  }
  T& front() noexcept { return data()[0]; }
  const T& front() const noexcept { return data()[0]; }
  T& back() noexcept { return data()[size_ - 1]; }
  const T& back() const noexcept { return data()[size_ - 1]; }

  void reserve(size_type n) {
    if (n > cap_) move_to(n);
  }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == cap_) {
      // Made before the elements move: the arguments may name one of them.
      T made(std::forward<Args>(args)...);
      move_to(std::max<size_type>(2 * cap_, N + 1));
      return *::new (static_cast<void*>(data() + size_++)) T(std::move(made));
    }
    return *::new (static_cast<void*>(data() + size_++)) T(std::forward<Args>(args)...);
  }
  void push_back(const T& x) { emplace_back(x); }
  void push_back(T&& x) { emplace_back(std::move(x)); }
  // Destroys the last element (the list must not be empty); a heap block is kept.
  void pop_back() noexcept { std::destroy_at(data() + --size_); }
  void clear() noexcept {
    std::destroy_n(data(), size_);
    size_ = 0;
  }

  friend bool operator==(const SmallList& a, const SmallList& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator!=(const SmallList& a, const SmallList& b) { return !(a == b); }
  // Compares with a vector of the same elements (tests write expected lists so).
  friend bool operator==(const SmallList& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const std::vector<T>& a, const SmallList& b) { return b == a; }

 private:
  bool on_heap() const noexcept { return cap_ > N; }
  // Inline elements are copied as the whole room's bytes: trivially copyable elements in a
  // room of at most 64 bytes (the bytes past size() are copied too, and never read).
  static constexpr bool kWhole = std::is_trivially_copyable_v<T> && N * sizeof(T) <= 64;

  // Moves the elements to a heap block of n (> N) places.
  void move_to(size_type n) {
    T* block = std::allocator<T>().allocate(n);
    std::uninitialized_move_n(data(), size_, block);
    const std::uint32_t kept = size_;
    release();
    heap_ = block;
    cap_ = static_cast<std::uint32_t>(n);
    size_ = kept;
  }
  // Destroys the elements and frees a heap block; leaves the list empty and inline.
  void release() noexcept {
    clear();
    if (on_heap()) std::allocator<T>().deallocate(heap_, cap_);
    cap_ = N;
  }
  // Takes o's elements (this is empty and inline); leaves o empty and inline.
  void take(SmallList&& o) noexcept {
    if (o.on_heap()) {
      heap_ = o.heap_;
      cap_ = o.cap_;
      size_ = o.size_;
      o.cap_ = N;
      o.size_ = 0;
      return;
    }
    if constexpr (kWhole) {
      copy_room(o);
      o.size_ = 0;
    } else {
      std::uninitialized_move_n(o.data(), o.size_, data());
      size_ = o.size_;
      o.clear();
    }
  }
  // Copies o's inline room whole (this is inline and holds nothing that needs destroying):
  // a fixed-size copy the compiler does in a few moves, where an element count made it a
  // call to memmove (a launch's GPU list is copied or moved about ten times).
  void copy_room(const SmallList& o) noexcept {
    std::memcpy(inline_, o.inline_, sizeof inline_);
    size_ = o.size_;
  }

  std::uint32_t size_ = 0;
  std::uint32_t cap_ = N;  // N: the elements are inline; more: in heap_
  union {
    alignas(T) unsigned char inline_[N * sizeof(T)];
    T* heap_;
  };
};

}  // namespace aegis
