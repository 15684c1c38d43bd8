#include "lifecycle/backfill.h"

#include <algorithm>
#include <limits>

#include "sched/engine.h"

namespace aegis {

HeadNeed head_need(const Engine& engine, const QueuedJob& head, MiB gpu_total_mib) {
  HeadNeed n;
  const auto shape = engine.request_shape(head);
  n.shares = engine.config().collocate && !head.recovery.exclusive_only && head.spec.num_gpus >= 1;
  n.need_mib = shape.need_shared;
  n.usable_mib = engine.usable_alone(gpu_total_mib);
  return n;
}

namespace {

// When one GPU can take the head: its jobs sorted by end, latest first; the GPU can take it
// from the time the jobs ending later than that leave room (memory and no exclusive job;
// for a head that does not share, none at all).
Seconds ready_at(std::vector<const HeldGpu*>& on_gpu, Seconds now, const std::optional<HeadNeed>& need) {
  if (on_gpu.empty()) return now;
  std::sort(on_gpu.begin(), on_gpu.end(), [](const HeldGpu* a, const HeldGpu* b) { return a->until > b->until; });
  const bool shares = need && need->shares;
  MiB booked = 0;
  bool exclusive = false;
  // Walk from the latest end: after on_gpu[i]'s end only on_gpu[0..i) remain.
  for (std::size_t i = 0; i < on_gpu.size(); ++i) {
    const HeldGpu& h = *on_gpu[i];
    // Before h ends, on_gpu[0..i] are there: can the head share with them?
    booked += h.mib;
    exclusive = exclusive || h.exclusive;
    const bool fits = shares && !exclusive && need->usable_mib - booked >= need->need_mib;
    if (fits) continue;  // room beside on_gpu[0..i]: look earlier
    return std::max(now, h.until);  // no room until h ends
  }
  return now;  // room beside all of them now
}

}  // namespace

std::optional<Seconds> reserved_start(int num_gpus, std::span<const int> server_gpus,
                                      std::span<const HeldGpu> held, Seconds now,
                                      const std::optional<HeadNeed>& need) {
  constexpr Seconds kNever = std::numeric_limits<Seconds>::infinity();
  if (server_gpus.empty() || num_gpus <= 0) return std::nullopt;
  // The jobs on each GPU.
  std::vector<std::vector<std::vector<const HeldGpu*>>> on(server_gpus.size());
  for (std::size_t s = 0; s < server_gpus.size(); ++s) on[s].resize(static_cast<std::size_t>(server_gpus[s]));
  for (const HeldGpu& h : held) {
    if (h.server < 0 || static_cast<std::size_t>(h.server) >= on.size()) continue;
    auto& gpus = on[static_cast<std::size_t>(h.server)];
    if (h.gpu < 0 || static_cast<std::size_t>(h.gpu) >= gpus.size()) continue;
    gpus[static_cast<std::size_t>(h.gpu)].push_back(&h);
  }
  // When each GPU is idle, and when it can take the head.
  std::vector<std::vector<Seconds>> idle(server_gpus.size()), ready(server_gpus.size());
  for (std::size_t s = 0; s < on.size(); ++s)
    for (auto& jobs : on[s]) {
      Seconds t = now;
      for (const HeldGpu* h : jobs) t = std::max(t, h->until);
      idle[s].push_back(t);
      ready[s].push_back(ready_at(jobs, now, need));
    }
  Seconds best = kNever;
  // On one server: its num_gpus-th GPU to become ready.
  for (auto& gpus : ready) {
    if (static_cast<int>(gpus.size()) < num_gpus) continue;
    std::nth_element(gpus.begin(), gpus.begin() + (num_gpus - 1), gpus.end());
    best = std::min(best, gpus[static_cast<std::size_t>(num_gpus - 1)]);
  }
  if (best == kNever) {
    // Larger than any server (the simulator's gang jobs): whole idle servers, earliest first.
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

std::optional<Seconds> expected_end(const JobSpec& job, Seconds launched_at, Seconds now) {
  std::optional<Seconds> end;
  if (job.time_limit) end = launched_at + *job.time_limit;
  // A prediction counts until it is reached: from then on only the limit says when the job
  // ends (a driver that runs no pass in between wakes at it: the simulator does).
  if (job.predicted_duration && *job.predicted_duration > 0) {
    const Seconds predicted = launched_at + *job.predicted_duration;
    if (predicted > now && (!end || predicted < *end)) end = predicted;
  }
  return end;
}

bool may_backfill(const JobSpec& job, Seconds now, Seconds reserved) {
  const auto end = expected_end(job, now, now);
  return end && *end <= reserved;
}

void BusyGpus::reset(std::span<const int> server_gpus) {
  first_.clear();
  std::size_t n = 0;
  for (int g : server_gpus) {
    first_.push_back(n);
    n += static_cast<std::size_t>(std::max(g, 0));
  }
  first_.push_back(n);
  until_.assign(n, -std::numeric_limits<Seconds>::infinity());
}

std::size_t BusyGpus::at(int server, int gpu) const {
  constexpr auto kNone = static_cast<std::size_t>(-1);
  if (server < 0 || static_cast<std::size_t>(server) + 1 >= first_.size() || gpu < 0) return kNone;
  const std::size_t i = first_[static_cast<std::size_t>(server)] + static_cast<std::size_t>(gpu);
  return i < first_[static_cast<std::size_t>(server) + 1] ? i : kNone;
}

void BusyGpus::mark(int server, int gpu, Seconds until) {
  const std::size_t i = at(server, gpu);
  if (i < until_.size()) until_[i] = std::max(until_[i], until);
}

bool BusyGpus::busy(int server, int gpu) const {
  return until(server, gpu) > -std::numeric_limits<Seconds>::infinity();
}

Seconds BusyGpus::until(int server, int gpu) const {
  const std::size_t i = at(server, gpu);
  return i < until_.size() ? until_[i] : -std::numeric_limits<Seconds>::infinity();
}

}  // namespace aegis
