#include "lifecycle/backfill.h"

#include <algorithm>
#include <limits>

namespace aegis {

std::optional<Seconds> reserved_start(int num_gpus, std::span<const int> server_gpus,
                                      std::span<const HeldGpu> held, Seconds now) {
  constexpr Seconds kNever = std::numeric_limits<Seconds>::infinity();
  if (server_gpus.empty() || num_gpus <= 0) return std::nullopt;
  // When each GPU is idle: now, or when the last job holding it ends.
  std::vector<std::vector<Seconds>> idle(server_gpus.size());
  for (std::size_t s = 0; s < server_gpus.size(); ++s) idle[s].assign(static_cast<std::size_t>(server_gpus[s]), now);
  for (const HeldGpu& h : held) {
    if (h.server < 0 || static_cast<std::size_t>(h.server) >= idle.size()) continue;
    auto& gpus = idle[static_cast<std::size_t>(h.server)];
    if (h.gpu < 0 || static_cast<std::size_t>(h.gpu) >= gpus.size()) continue;
    Seconds& t = gpus[static_cast<std::size_t>(h.gpu)];
    t = std::max(t, h.until);
  }
  Seconds best = kNever;
  // On one server: its num_gpus-th GPU to become idle.
  for (auto& gpus : idle) {
    if (static_cast<int>(gpus.size()) < num_gpus) continue;
    std::nth_element(gpus.begin(), gpus.begin() + (num_gpus - 1), gpus.end());
    best = std::min(best, gpus[static_cast<std::size_t>(num_gpus - 1)]);
  }
  if (best == kNever) {
    // Larger than any server (the simulator's gang jobs): whole servers, earliest idle first.
    std::vector<std::pair<Seconds, int>> whole;
    for (std::size_t s = 0; s < idle.size(); ++s) {
      Seconds t = now;
      for (Seconds g : idle[s]) t = std::max(t, g);
      whole.push_back({t, server_gpus[s]});
    }
    std::sort(whole.begin(), whole.end());
    int got = 0;
    for (const auto& [t, n] : whole) {
      got += n;
      if (got >= num_gpus) {
        best = t;
        break;
      }
    }
  }
  if (best == kNever) return std::nullopt;
  return best;
}

bool may_backfill(const JobSpec& job, Seconds now, Seconds reserved) {
  return job.time_limit && now + *job.time_limit <= reserved;
}

}  // namespace aegis
