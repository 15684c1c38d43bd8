#include "lifecycle/backfill.h"

#include <algorithm>
#include <cmath>
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
  ReservationBook book;
  book.reset(num_gpus, server_gpus, held, now, need);
  return book.start();
}

std::size_t ReservationBook::gpu_at(const HeldGpu& h) const {
  constexpr auto kNone = static_cast<std::size_t>(-1);
  if (h.server < 0 || static_cast<std::size_t>(h.server) >= server_gpus_.size()) return kNone;
  if (h.gpu < 0 || h.gpu >= server_gpus_[static_cast<std::size_t>(h.server)]) return kNone;
  return first_[static_cast<std::size_t>(h.server)] + static_cast<std::size_t>(h.gpu);
}

void ReservationBook::reset(int num_gpus, std::span<const int> server_gpus, std::span<const HeldGpu> held,
                            Seconds now, const std::optional<HeadNeed>& need) {
  num_gpus_ = num_gpus;
  now_ = now;
  need_ = need;
  server_gpus_.assign(server_gpus.begin(), server_gpus.end());
  first_.clear();
  std::size_t n = 0;
  for (int g : server_gpus_) {
    first_.push_back(n);
    n += static_cast<std::size_t>(std::max(g, 0));
  }
  // Cleared, not rebuilt: each GPU's list keeps its storage from pass to pass.
  if (jobs_.size() < n) jobs_.resize(n);
  for (std::size_t g = 0; g < n; ++g) jobs_[g].clear();
  for (const HeldGpu& h : held)
    if (const std::size_t g = gpu_at(h); g < n) jobs_[g].push_back(h);
  answers_.clear();
  if (num_gpus_ <= 0) return;
  for (std::size_t s = 0; s < server_gpus_.size(); ++s) answers_.push_back(answer(static_cast<int>(s), {}));
}

void ReservationBook::add(std::span<const HeldGpu> extra) {
  for (const HeldGpu& h : extra)
    if (const std::size_t g = gpu_at(h); g < jobs_.size()) jobs_[g].push_back(h);
  if (num_gpus_ <= 0) return;
  for (std::size_t i = 0; i < extra.size(); ++i)
    if (first_of_server(extra, i)) answers_[static_cast<std::size_t>(extra[i].server)] = answer(extra[i].server, {});
}

// Whether extra[i] is on a server of this book and the first of `extra` on its server (a
// job's GPUs on one server are a few entries: each server's answer is made once).
bool ReservationBook::first_of_server(std::span<const HeldGpu> extra, std::size_t i) const {
  if (gpu_at(extra[i]) >= jobs_.size()) return false;
  for (std::size_t k = 0; k < i; ++k)
    if (extra[k].server == extra[i].server && gpu_at(extra[k]) < jobs_.size()) return false;
  return true;
}

// One server's answer with what it holds, and `extra` (of that server) after it.
ReservationBook::ServerAnswer ReservationBook::answer(int server, std::span<const HeldGpu> extra) {
  constexpr Seconds kNever = std::numeric_limits<Seconds>::infinity();
  const auto s = static_cast<std::size_t>(server);
  ++answers_made_;
  ServerAnswer a;
  a.idle = now_;
  ready_.clear();
  for (int g = 0; g < server_gpus_[s]; ++g) {
    // The jobs on this GPU, in the order held (as reserved_start gathered them).
    on_gpu_.clear();
    for (const HeldGpu& h : jobs_[first_[s] + static_cast<std::size_t>(g)]) on_gpu_.push_back(&h);
    for (const HeldGpu& h : extra)
      if (h.server == server && h.gpu == g) on_gpu_.push_back(&h);
    for (const HeldGpu* h : on_gpu_) a.idle = std::max(a.idle, h->until);
    ready_.push_back(ready_at(on_gpu_, now_, need_));
  }
  // On this server: its num_gpus-th GPU to become ready.
  a.ready = kNever;
  if (static_cast<int>(ready_.size()) >= num_gpus_) {
    std::nth_element(ready_.begin(), ready_.begin() + (num_gpus_ - 1), ready_.end());
    a.ready = ready_[static_cast<std::size_t>(num_gpus_ - 1)];
  }
  return a;
}

std::optional<Seconds> ReservationBook::start() const { return start_from(answers_); }

std::optional<Seconds> ReservationBook::start_with(std::span<const HeldGpu> extra) {
  if (num_gpus_ <= 0) return std::nullopt;
  scratch_answers_ = answers_;
  for (std::size_t i = 0; i < extra.size(); ++i)
    if (first_of_server(extra, i))
      scratch_answers_[static_cast<std::size_t>(extra[i].server)] = answer(extra[i].server, extra);
  return start_from(scratch_answers_);
}

std::optional<Seconds> ReservationBook::start_from(std::span<const ServerAnswer> answers) const {
  constexpr Seconds kNever = std::numeric_limits<Seconds>::infinity();
  if (server_gpus_.empty() || num_gpus_ <= 0) return std::nullopt;
  Seconds best = kNever;
  for (const ServerAnswer& a : answers) best = std::min(best, a.ready);
  if (best == kNever) {
    // Larger than any server (the simulator's gang jobs): whole idle servers, earliest first.
    std::vector<std::pair<Seconds, int>> whole;
    for (std::size_t s = 0; s < answers.size(); ++s) whole.push_back({answers[s].idle, server_gpus_[s]});
    std::sort(whole.begin(), whole.end());
    int got = 0;
    for (const auto& [t, n] : whole) {
      got += n;
      if (got >= num_gpus_) {
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

Seconds slowed_end(Seconds end, Seconds now, double slowdown) {
  if (!std::isfinite(end) || end <= now) return end;
  return end + (end - now) * (slowdown - 1);  // this form: at 1, exactly `end` (no rounding)
}

bool BusyGpus::busy(int server, int gpu) const {
  return until(server, gpu) > -std::numeric_limits<Seconds>::infinity();
}

Seconds BusyGpus::until(int server, int gpu) const {
  const std::size_t i = at(server, gpu);
  return i < until_.size() ? until_[i] : -std::numeric_limits<Seconds>::infinity();
}

}  // namespace aegis
