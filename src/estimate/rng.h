// Seeded random numbers whose values are fixed by the C++ standard (std::mt19937_64's
// output is; std::uniform_*_distribution and std::shuffle are not), so that training and
// fold splits give the same bytes with every standard library.
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace aegis {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : g_(seed) {}
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(g_() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform in [0, n); the modulo bias (n / 2^64) is far below anything measured here.
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(g_() % n); }
  template <class T>
  void shuffle(std::vector<T>& v) {  // Fisher-Yates
    for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

 private:
  std::mt19937_64 g_;
};

// A seed for a sub-task ("fold 2", "classifier") derived from a parent seed: streams of
// different sub-tasks do not overlap in practice (SplitMix64 finaliser).
inline std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t salt) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (salt + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace aegis
