#include "lifecycle/placer.h"

#include <algorithm>
#include <fmt/format.h>

namespace aegis {

bool Placement::alone() const {
  return !parts.empty() && std::all_of(parts.begin(), parts.end(), [](const Part& p) { return p.launch.alone; });
}

bool Placement::exclusive() const {
  return std::any_of(parts.begin(), parts.end(), [](const Part& p) { return p.launch.exclusive; });
}

MiB Placement::admitted_mib() const { return parts.empty() ? 0 : parts.back().launch.admitted_mib; }

Feasibility::Offers Feasibility::offers(const Engine& engine, std::span<const DeviceInfo> devices, bool less_foreign,
                                        bool alone) {
  Offers out;
  for (const auto& d : devices) {
    if (alone && d.foreign_processes > 0) continue;
    const MiB held = std::max<MiB>(0, d.held_mib) + (less_foreign ? std::max<MiB>(0, d.foreign_mib) : 0);
    const Offer o{engine.usable_alone(d.total_mib, held), d.total_mib, held};
    out.all_parts.push_back(o);
    if (!d.mig_instance) out.whole_parts.push_back(o);
  }
  for (auto* parts : {&out.all_parts, &out.whole_parts})
    std::stable_sort(parts->begin(), parts->end(), [](const Offer& a, const Offer& b) { return a.usable > b.usable; });
  for (const auto& o : out.all_parts) out.all.push_back(o.usable);
  for (const auto& o : out.whole_parts) out.whole.push_back(o.usable);
  return out;
}

Feasibility::Feasibility(const Engine& engine, std::span<const DeviceInfo> devices)
    : engine_(engine),
      ever_(offers(engine, devices, false, false)),
      now_(offers(engine, devices, true, false)),
      now_alone_(offers(engine, devices, true, true)) {
  for (const auto& d : devices) any_foreign_ = any_foreign_ || d.foreign_mib > 0 || d.foreign_processes > 0;
}

std::optional<std::string> Feasibility::why_never_runs(const QueuedJob& job) const { return why_not(ever_, job, false); }

std::optional<std::string> Feasibility::why_waits_outside(const QueuedJob& job) const {
  if (!any_foreign_ || why_not(ever_, job, false)) return std::nullopt;
  // A job that may only run alone (exclusive, after the ladder's "retry alone", or a policy
  // that never collocates) needs idle GPUs: those with foreign processes are not.
  const bool alone = job.recovery.exclusive_only || !engine_.config().collocate;
  if (alone && static_cast<int>(now_alone_.all.size()) < std::max(job.spec.num_gpus, 1))
    return fmt::format("job.gpus: it must run alone and {} of {} GPU(s) carry processes outside aegis (never idle "
                       "while they run)", now_.all.size() - now_alone_.all.size(), now_.all.size());
  return why_not(alone ? now_alone_ : now_, job, true);
}

std::optional<std::string> Feasibility::why_not(const Offers& o, const QueuedJob& job, bool outside) const {
  const int n = job.spec.num_gpus;
  if (n > static_cast<int>(o.all.size()))
    return fmt::format("job.gpus: {} GPUs requested; {} can be scheduled here", n, o.all.size());
  // A process sees one MIG instance only: a job on several GPUs needs whole ones.
  if (n > 1 && n > static_cast<int>(o.whole.size()))
    return fmt::format("job.gpus: {} GPUs requested; a process can use only one MIG instance and {} whole GPU(s) "
                       "can be scheduled here", n, o.whole.size());
  const auto& usable = n == 1 ? o.all : o.whole;
  if (engine_.could_ever_run(job, usable)) return std::nullopt;
  // What the best n GPUs offer: the n-th largest (the one that refuses), with its parts.
  const auto& parts = n == 1 ? o.all_parts : o.whole_parts;
  const Offer best = parts.empty() ? Offer{} : parts[static_cast<std::size_t>(std::max(n, 1) - 1)];
  // (Without memory held, the words of earlier releases: scripts read them.)
  const std::string offered =
      best.held > 0 ? fmt::format("{} MiB of its {} MiB, after the guard and {} MiB held {}", best.usable, best.total,
                                  best.held,
                                  outside ? "by the driver and by processes outside aegis, which must end first"
                                          : "outside aegis jobs (the driver's own, NVIDIA's MPS server)")
                    : fmt::format("{} MiB after the guard", best.usable);
  const MiB need = engine_.need_alone(job);
  const std::string gpus = n == 1 ? "the largest GPU here" : fmt::format("the {} largest GPUs here", n);
  // Out of memory already: the recovery rule's floor is more than it had, and nothing here
  // offers that much (after an OOM alone on the largest GPU: "a larger GPU", none here).
  if (job.recovery.oom_count > 0 && need == job.recovery.floor_mib)
    return fmt::format("job.mem: after {} out-of-memory failure{} it needs {} MiB per GPU (its recovery floor, more "
                       "than it had); {} offer{} {}",
                       job.recovery.oom_count, job.recovery.oom_count == 1 ? "" : "s", need, gpus, n == 1 ? "s" : "",
                       offered);
  return fmt::format("job.mem: {} MiB per GPU needed; {} offer{} {}", need, gpus, n == 1 ? "s" : "", offered);
}

std::optional<Launch> ServerPlacer::probe(const QueuedJob& job, Seconds now, bool explain) {
  Snapshot snap;
  snap.now = now;
  snap.job = &job;
  snap.window_stats = window_stats;
  snap.gpus = views;
  snap.running = running;
  if (keep_loads_) snap.loads = loads();
  snap.state = state;
  snap.explain = explain;
  engine_.tick(snap, last_);  // into the last answer: its launch list's storage is reused
  if (last_.launches.empty()) return std::nullopt;
  state = last_.state;
  return std::move(last_.launches.front());
}

bool ServerPlacer::refuses_with(const QueuedJob& job, Seconds now, WindowStatsSource& windows, Decisions& out) {
  Snapshot snap;
  snap.now = now;
  snap.job = &job;
  snap.gpus = views;
  snap.running = running;
  snap.loads = loads();
  snap.state = state;
  snap.explain = false;
  snap.window_stats = window_stats ? &windows : nullptr;
  engine_.tick(snap, out);
  return out.launches.empty();
}

void ServerPlacer::add(const QueuedJob& job, const Launch& l, Seconds now) {
  // Made in its place at the end of `running` (a RunningJob moved is its spec's strings
  // and its GPU list moved once more).
  const auto pos = static_cast<std::uint32_t>(running.size());
  RunningJob& r = running.emplace_back();
  r.spec = job.spec;
  r.spec.num_gpus = static_cast<int>(l.gpus.size());
  r.recovery = job.recovery;
  r.gpus = l.gpus;
  r.launched_at = now;
  r.exclusive = l.exclusive;
  r.admitted_mib = l.admitted_mib;
  r.free_at_placement = l.free_at_placement;
  r.gpu_total_mib = 0;
  for (int g : l.gpus)
    if (g >= 0 && g < static_cast<int>(views.size()))
      r.gpu_total_mib = r.gpu_total_mib == 0 ? views[g].total_mib : std::min(r.gpu_total_mib, views[g].total_mib);
  if (keep_loads_) {
    // Last in `running`, so last in each of its GPUs' sums: added as a walk would add it.
    for (int g : r.gpus)
      if (g >= 0 && g < static_cast<int>(loads_.size())) {
        on_gpu_[static_cast<std::size_t>(g)].push_back(pos);
        engine_.add_load(loads_[static_cast<std::size_t>(g)], r);
      }
  }
}

void ServerPlacer::keep_loads() {
  keep_loads_ = true;
  loads_.assign(views.size(), GpuLoad{});
  on_gpu_.assign(views.size(), {});
  is_dirty_.assign(views.size(), 0);
  dirty_.clear();
  for (std::size_t p = 0; p < running.size(); ++p)
    for (int g : running[p].gpus)
      if (g >= 0 && g < static_cast<int>(loads_.size())) on_gpu_[static_cast<std::size_t>(g)].push_back(static_cast<std::uint32_t>(p));
  for (int g = 0; g < static_cast<int>(loads_.size()); ++g) reload(g);
}

void ServerPlacer::reload(int gpu) {
  if (gpu < 0 || gpu >= static_cast<int>(loads_.size())) return;
  GpuLoad& l = loads_[static_cast<std::size_t>(gpu)];
  l = GpuLoad{};
  for (std::uint32_t p : on_gpu_[static_cast<std::size_t>(gpu)]) engine_.add_load(l, running[p]);
}

void ServerPlacer::regate(int gpu) {
  GpuLoad& l = loads_[static_cast<std::size_t>(gpu)];
  l.gate_opens_at = GpuLoad{}.gate_opens_at;
  for (std::uint32_t p : on_gpu_[static_cast<std::size_t>(gpu)])
    l.gate_opens_at = std::max(l.gate_opens_at, engine_.gate_opens_at(running[p]));
}

void ServerPlacer::mark(int gpu, char what) {
  if (gpu < 0 || gpu >= static_cast<int>(loads_.size())) return;
  char& d = is_dirty_[static_cast<std::size_t>(gpu)];
  if (d == kClean) dirty_.push_back(gpu);
  d = std::max(d, what);  // a whole sum covers the gate
}

std::span<const GpuLoad> ServerPlacer::loads() {
  for (int g : dirty_) {
    char& d = is_dirty_[static_cast<std::size_t>(g)];
    if (d == kWhole) reload(g);
    else regate(g);
    d = kClean;
  }
  dirty_.clear();
  return loads_;
}

void ServerPlacer::set_first_activity(std::size_t pos, Seconds t) {
  running[pos].first_activity = t;
  if (keep_loads_)
    for (int g : running[pos].gpus) mark(g, kGate);
}

bool ServerPlacer::remove(std::size_t pos) {
  const std::size_t last = running.size() - 1;
  if (keep_loads_) {
    const auto p = static_cast<std::uint32_t>(pos), from = static_cast<std::uint32_t>(last);
    // The lists are sorted and hold each position once: found by binary search (a GPU
    // under naive sharing carries dozens of jobs).
    auto drop = [](std::vector<std::uint32_t>& list, std::uint32_t x) {
      auto it = std::lower_bound(list.begin(), list.end(), x);
      if (it != list.end() && *it == x) list.erase(it);
    };
    for (int g : running[pos].gpus)
      if (g >= 0 && g < static_cast<int>(loads_.size())) drop(on_gpu_[static_cast<std::size_t>(g)], p);
    // Marked before the move (sums are redone lazily, in loads(), from `running` as it
    // will be then): no copy of the removed job's GPU list.
    for (int g : running[pos].gpus) mark(g);
    if (pos != last)
      // The last entry moves to pos: in its GPUs' lists, at its new place in `running`'s
      // order. A GPU's sums add its jobs in that order; where the moved job is still the
      // last of its GPU's jobs (none lies between pos and the end), the order and the jobs
      // are the same, so are the sums, and the GPU is not summed again.
      for (int g : running[last].gpus) {
        if (g < 0 || g >= static_cast<int>(loads_.size())) continue;
        auto& list = on_gpu_[static_cast<std::size_t>(g)];
        drop(list, from);
        const auto at = list.insert(std::lower_bound(list.begin(), list.end(), p), p);
        if (at + 1 != list.end()) mark(g);
      }
  }
  const bool moved = pos != last;
  if (moved) running[pos] = std::move(running[last]);
  running.pop_back();
  return moved;
}

}  // namespace aegis

namespace aegis {

std::optional<Placement> OneServerPlacer::place(const QueuedJob& job, Seconds now) {
  auto l = server.probe(job, now, explain);
  if (!l) return std::nullopt;
  Placement p;
  MiB total = 0;
  for (int g : l->gpus) total = total == 0 ? server.views[g].total_mib : std::min(total, server.views[g].total_mib);
  p.parts.push_back({0, std::move(*l), total});
  return p;
}

void OneServerPlacer::started(const QueuedJob& job, const Placement& p, Seconds now) {
  server.add(job, p.parts.front().launch, now);
}

// The GPUs as they will be once `gone` stopped: their jobs off the running list, the memory
// they were admitted with free again and their processes gone (the driver reads the rest
// afresh after they stop). Asked of a copy, so the server's view is untouched.
std::optional<Launch> ServerPlacer::probe_without(const QueuedJob& job, Seconds now, std::span<const JobId> gone,
                                                  const std::function<void(const RunningJob&, int, GpuView&)>& take_away) const {
  ServerPlacer what_if(engine_);
  what_if.views = views;
  what_if.state = state;
  what_if.window_stats = window_stats;
  for (const RunningJob& r : running) {
    if (std::find(gone.begin(), gone.end(), r.spec.id) == gone.end()) {
      what_if.running.push_back(r);
      continue;
    }
    for (int g : r.gpus) take_away(r, g, what_if.views[static_cast<std::size_t>(g)]);
  }
  // A GPU none of the remaining jobs uses has no process of aegis left: only foreign ones.
  for (GpuView& v : what_if.views) {
    bool used = false;
    for (const RunningJob& r : what_if.running)
      used = used || std::find(r.gpus.begin(), r.gpus.end(), v.index) != r.gpus.end();
    if (!used) v.process_count = std::min(v.process_count, v.foreign_mib > 0 ? 1 : 0);
  }
  return what_if.probe(job, now, false);
}

std::optional<Placement> OneServerPlacer::place_without(const QueuedJob& job, Seconds now,
                                                        std::span<const JobId> gone) {
  auto l = server.probe_without(job, now, gone, [&](const RunningJob& r, int g, GpuView& v) {
    const auto used = used_mib.find(r.spec.id);
    MiB freed = r.admitted_mib;
    if (used != used_mib.end())
      if (auto u = used->second.find(g); u != used->second.end()) freed = u->second;
    v.free_mib = std::min(v.total_mib, v.free_mib + freed);
    v.process_count = std::max(0, v.process_count - 1);
  });
  if (!l) return std::nullopt;
  Placement p;
  MiB total = 0;
  for (int g : l->gpus) total = total == 0 ? server.views[g].total_mib : std::min(total, server.views[g].total_mib);
  p.parts.push_back({0, std::move(*l), total});
  return p;
}

std::optional<std::string> OneServerPlacer::never_runs(const QueuedJob& job) const {
  return feasibility ? feasibility->why_never_runs(job) : std::nullopt;
}

std::optional<std::string> OneServerPlacer::waits_outside(const QueuedJob& job) const {
  return feasibility ? feasibility->why_waits_outside(job) : std::nullopt;
}

std::variant<Requeue, Stop> OneServerPlacer::recover(const Failure& f) const { return engine_.recover(f); }

std::optional<Blocked> OneServerPlacer::blocked() const { return server.last().blocked; }

std::optional<Seconds> OneServerPlacer::wake_at() const { return server.last().wake_at; }

}  // namespace aegis

namespace aegis {

// One server: its GPU count, when they are alike (same memory, no MIG instance) and no
// process outside aegis holds memory on any (an idle GPU then offers what any other does).
std::span<const int> OneServerPlacer::server_gpus() const {
  server_gpus_.clear();
  const auto& v = server.views;
  if (v.empty()) return {};
  for (const GpuView& g : v)
    if (g.total_mib != v.front().total_mib || g.mig_instance || g.foreign_mib > 0) return {};
  server_gpus_.push_back(static_cast<int>(v.size()));
  return server_gpus_;
}

std::optional<HeadNeed> OneServerPlacer::head_need(const QueuedJob& head) const {
  if (server_gpus().empty()) return std::nullopt;
  return aegis::head_need(engine_, head, server.views.front().total_mib);
}

}  // namespace aegis
