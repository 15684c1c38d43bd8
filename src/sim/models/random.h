// Counter-based randomness: a value depends only on (seed, keys), never on the order in
// which the simulator asks, so the same seed gives the same run byte for byte.
#pragma once
#include <cmath>
#include <cstdint>

namespace aegis {

inline std::uint64_t mix64(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline std::uint64_t hash_keys(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0) {
  return mix64(mix64(mix64(mix64(seed) ^ a) ^ b) ^ c);
}

// Uniform in (0,1).
inline double unit_uniform(std::uint64_t h) {
  return (static_cast<double>(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Standard normal from two hashes (Box-Muller).
inline double standard_normal(std::uint64_t h1, std::uint64_t h2) {
  const double u1 = unit_uniform(h1), u2 = unit_uniform(h2);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
}

}  // namespace aegis
