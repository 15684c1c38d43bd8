// Which free memory the engine believes a GPU has. Reported free memory races with jobs
// that have not allocated yet (the observation gate covers that race); booked memory
// (capacity minus the admitted estimates of its jobs) never admits more estimated
// memory than a GPU holds. Policies with an estimate use the smaller of the two.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <string_view>

#include "sched/stage.h"

namespace aegis {

enum class MemoryAccounting { Reported, Booked, Both };

inline MemoryAccounting parse_memory_accounting(std::string_view s) {
  if (s == "reported") return MemoryAccounting::Reported;
  if (s == "booked") return MemoryAccounting::Booked;
  if (s == "both") return MemoryAccounting::Both;
  throw std::invalid_argument("memory_accounting: unknown mode");
}

// The effective free memory of a GPU whose guard is `guard_mib` and whose jobs booked
// `booked_mib`: the figures GpuCandidate::reported_free() and booked_free() compute, from
// the view and the sums directly, for a server's room (Engine::room_update), which makes
// no candidate.
inline MiB effective_free(const GpuView& v, MiB guard_mib, MiB booked_mib, MemoryAccounting a) {
  const MiB reported = v.free_mib - guard_mib;
  const MiB booked = v.total_mib - guard_mib - booked_mib - v.foreign_mib;
  switch (a) {
    case MemoryAccounting::Reported: return reported;
    case MemoryAccounting::Booked: return booked;
    case MemoryAccounting::Both: return std::min(reported, booked);
  }
  return reported;
}

inline MiB effective_free(const GpuCandidate& g, MemoryAccounting a) {
  switch (a) {
    case MemoryAccounting::Reported: return g.reported_free();
    case MemoryAccounting::Booked: return g.booked_free();
    case MemoryAccounting::Both: return std::min(g.reported_free(), g.booked_free());
  }
  return g.reported_free();
}

}  // namespace aegis
