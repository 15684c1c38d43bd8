#include "runtime/daemon/dashboard_feed.h"

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>

namespace aegis {

namespace {

using nlohmann::json;

// Listings show every caller the same (no environment, docs/api.md); the dashboard asks as
// an unprivileged caller so that nothing it serves could ever depend on root's view.
constexpr Caller kReader{65534, 65534, 0};

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

DashboardFrame frame_of(const json& gpus_reply, const std::map<JobId, std::map<std::string, MiB>>& job_memory,
                        double now) {
  DashboardFrame f;
  f.t = now;
  std::map<std::string, int> index_of;
  std::map<JobId, std::vector<int>> gpus_of;
  for (const auto& g : gpus_reply.at("gpus")) {
    DashboardFrame::Gpu v;
    v.used_mib = g.at("memory_used_mib").get<std::int64_t>();
    if (g.at("smact").is_number()) v.smact = g.at("smact").get<double>();
    v.observing = g.at("observing").get<bool>();
    const int i = static_cast<int>(f.gpus.size());
    index_of[g.at("uuid").get<std::string>()] = i;
    for (const auto& id : g.at("jobs")) gpus_of[id.get<JobId>()].push_back(i);
    f.gpus.push_back(v);
  }
  for (const auto& [id, on] : gpus_of) {
    DashboardFrame::Job j{id, on, {}};
    const auto mem = job_memory.find(id);
    for (int i : on) {
      MiB mib = 0;
      if (mem != job_memory.end())
        for (const auto& [uuid, m] : mem->second)
          if (index_of.count(uuid) && index_of.at(uuid) == i) mib = m;
      j.mib.push_back(mib);
    }
    f.jobs.push_back(std::move(j));
  }
  return f;
}

}  // namespace

std::string reply_text(Reply r) {
  if (!r.more) return dump(r.object);
  std::string out;
  while (r.more(out)) {
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void DashboardFeed::publish(Daemon& d, double now) {
  const Reply gpus = d.respond(api::GpusRequest{}, kReader);
  DashboardFrame frame = frame_of(gpus.object, d.job_memory(), now);
  bool wanted;
  {
    std::lock_guard lock(mu_);
    frames_.push_back(std::move(frame));
    while (frames_.size() > capacity_) frames_.pop_front();
    wanted = wanted_;  // the listings only when a reader asked since they were last built
    wanted_ = false;
  }
  if (!wanted) return;
  // Built outside the lock: readers keep the previous replies meanwhile. The listing is
  // the first max_jobs_ of `queue --all` (both are the store's newest jobs, one handler):
  // the event loop builds it, so its size is bounded whatever the store holds.
  auto gpus_text = std::make_shared<const std::string>(dump(gpus.object));
  // Issue 33 item 1: the fields the page shows only (kDashboardFields), each job's strings cut.
  const std::vector<std::string> fields(std::begin(kDashboardFields), std::end(kDashboardFields));
  auto queue_text =
      std::make_shared<const std::string>(reply_text(d.respond(api::HistoryRequest{max_jobs_, fields}, kReader)));
  auto active_text =
      std::make_shared<const std::string>(reply_text(d.respond(api::ListRequest{false, false, false, fields}, kReader)));
  {
    std::lock_guard lock(mu_);
    latest_ = Replies{std::move(gpus_text), std::move(queue_text), std::move(active_text), now};
    if (on_publish_) on_publish_();
  }
  fresh_.notify_all();
}

DashboardFeed::Replies DashboardFeed::replies(double now, double wait_s) {
  std::unique_lock lock(mu_);
  // Replies older than the wait are stale (built for an earlier poll, or long ago): the
  // next tick builds new ones, since this reader now wants them.
  const bool stale = !latest_.queue || now - latest_.at > wait_s;
  wanted_ = true;
  if (stale)
    fresh_.wait_for(lock, std::chrono::duration<double>(wait_s), [&] { return latest_.queue && latest_.at >= now; });
  return latest_;
}

std::optional<DashboardFeed::Replies> DashboardFeed::replies_ready(double asked, double now, double wait_s) {
  std::lock_guard lock(mu_);
  wanted_ = true;
  const bool stale = !latest_.queue || asked - latest_.at > wait_s;  // as in replies()
  if (!stale || (latest_.queue && latest_.at >= asked) || now - asked >= wait_s) return latest_;
  return std::nullopt;
}

void DashboardFeed::on_publish(std::function<void()> f) {
  std::lock_guard lock(mu_);
  on_publish_ = std::move(f);
}

std::string DashboardFeed::frames_json(double since) const {
  std::vector<DashboardFrame> copy;
  double oldest = 0;
  {
    std::lock_guard lock(mu_);
    if (!frames_.empty()) oldest = frames_.front().t;
    for (const auto& f : frames_)
      if (f.t > since) copy.push_back(f);
  }
  // Compact rows: [t, [[used_mib, smact, observing], ...per GPU], [[job, [gpu, ...], [mib, ...]], ...]].
  json out = json::array();
  for (const auto& f : copy) {
    json gpus = json::array(), jobs = json::array();
    for (const auto& g : f.gpus) gpus.push_back({g.used_mib, g.smact ? json(*g.smact) : json(nullptr), g.observing ? 1 : 0});
    for (const auto& j : f.jobs) jobs.push_back({j.id, j.gpus, j.mib});
    out.push_back({f.t, gpus, jobs});
  }
  // `oldest`: readers drop what they hold from before it (the ring's span).
  return dump(json{{"frames", out}, {"oldest", oldest}});
}

}  // namespace aegis
