#include "lifecycle/eta.h"

#include <algorithm>
#include <map>
#include <set>

#include "lifecycle/backfill.h"

namespace aegis {
namespace {

// Whole GPUs: a job of k GPUs starts when k GPUs of one server are free (or, larger than
// any server, enough whole servers), as backfill's reservation counts them.
class WholeGpus : public Placer {
 public:
  explicit WholeGpus(std::span<const int> servers) : count_(servers.begin(), servers.end()) {
    for (int n : servers) held_.emplace_back(static_cast<std::size_t>(n), 0);
  }
  void hold(int server, int gpu, JobId id) {
    if (server >= 0 && static_cast<std::size_t>(server) < held_.size() && gpu >= 0 &&
        static_cast<std::size_t>(gpu) < held_[static_cast<std::size_t>(server)].size())
      held_[static_cast<std::size_t>(server)][static_cast<std::size_t>(gpu)] = id;
  }
  void release(JobId id) {
    for (auto& s : held_)
      for (auto& g : s)
        if (g == id) g = 0;
  }
  std::optional<Placement> place(const QueuedJob& job, Seconds) override {
    Placement p;
    for (std::size_t s = 0; s < held_.size(); ++s) {  // on one server
      Launch l = launch(job, s, job.spec.num_gpus);
      if (static_cast<int>(l.gpus.size()) == job.spec.num_gpus) {
        p.parts.push_back({static_cast<int>(s), l, 0});
        return p;
      }
    }
    int got = 0;  // whole servers
    for (std::size_t s = 0; s < held_.size() && got < job.spec.num_gpus; ++s) {
      Launch l = launch(job, s, count_[s]);
      if (static_cast<int>(l.gpus.size()) < count_[s]) continue;
      got += count_[s];
      p.parts.push_back({static_cast<int>(s), l, 0});
    }
    if (got < job.spec.num_gpus || held_.size() < 2) return std::nullopt;
    return p;
  }
  void started(const QueuedJob& job, const Placement& p, Seconds) override {
    for (const auto& part : p.parts)
      for (int g : part.launch.gpus) hold(part.server, g, job.spec.id);
  }
  std::optional<std::string> never_runs(const QueuedJob&) const override { return std::nullopt; }
  std::variant<Requeue, Stop> recover(const Failure& f) const override { return Stop{f.job.spec.id, ""}; }
  std::span<const int> server_gpus() const override { return count_; }

 private:
  Launch launch(const QueuedJob& job, std::size_t s, int want) const {
    Launch l;
    l.job = job.spec.id;
    l.alone = l.exclusive = true;
    const auto& gpus = held_[s];
    for (std::size_t g = 0; g < gpus.size() && static_cast<int>(l.gpus.size()) < want; ++g)
      if (!gpus[g]) l.gpus.push_back(static_cast<int>(g));
    return l;
  }
  std::vector<int> count_;
  std::vector<std::vector<JobId>> held_;  // per server, per GPU: the job on it, 0 when free
};

}  // namespace

StartEstimates estimate_starts(const Lifecycle& live, Seconds now, std::span<const int> server_gpus) {
  StartEstimates out;
  const std::vector<JobId> queued = live.queue_order();
  for (JobId id : queued) out.starts.push_back({id, std::nullopt});
  if (queued.empty() || server_gpus.empty()) return out;
  LifecycleOptions o;
  o.report_changes = false;
  Lifecycle fwd(live.config(), o);
  WholeGpus gpus(server_gpus);
  std::multimap<Seconds, JobId> ends;
  auto ends_at = [&](const LifeJob& j, Seconds from) {
    if (const auto end = expected_end(j.spec(), from, now)) ends.emplace(std::max(now, *end), j.id());
  };
  for (JobId id : live.holding_gpus()) {
    const LifeJob& j = *live.find(id);
    fwd.restore(j);
    for (const auto& part : j.current()->placement.parts)
      for (int g : part.launch.gpus) gpus.hold(part.server, g, id);
    ends_at(j, j.current()->launched_at);
  }
  for (JobId id : queued) fwd.restore(*live.find(id));
  std::map<JobId, Seconds> started;
  Effects fx;
  for (Seconds t = now;;) {
    fwd.schedule(t, gpus, fx);
    ++out.passes;
    for (const auto& s : fx.starts) {
      started[s.job] = t;
      ends_at(*fwd.find(s.job), t);
    }
    if (started.size() == queued.size() || ends.empty()) break;
    // The next instant a job ends: every job ending then leaves its GPUs.
    t = ends.begin()->first;
    while (!ends.empty() && ends.begin()->first == t) {
      const JobId id = ends.begin()->second;
      ends.erase(ends.begin());
      gpus.release(id);
      fwd.ended(id, {AttemptOutcome::Completed, ""}, t, fx);
      fwd.forget(id);
    }
  }
  for (auto& [id, at] : out.starts)
    if (auto it = started.find(id); it != started.end()) at = it->second;
  return out;
}

}  // namespace aegis
