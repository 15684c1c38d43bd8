// aegisd's API: each request of docs/api.md, checked and answered. Changes go through the
// job lifecycle (src/lifecycle) and are on disk before the reply (the event loop's group
// commit); long listings are produced as the client reads them.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <memory>
#include <unistd.h>

#include "lifecycle/eta.h"
#include "lifecycle/inputs.h"
#include "lifecycle/time_limits.h"
#include "runtime/daemon/daemon.h"
#include "runtime/daemon/priority_levels.h"
#include "runtime/daemon/daemon_util.h"
#include "runtime/store/id_floor.h"

namespace aegis {

using nlohmann::json;

Reply Daemon::respond(const api::Request& request, const Caller& caller) {
  try {
    if (const auto* l = std::get_if<api::ListRequest>(&request)) return list(*l, caller);
    if (const auto* h = std::get_if<api::HistoryRequest>(&request)) return history(*h);
  } catch (const std::exception& e) {
    return Reply{error_reply(e.what()), nullptr};
  }
  Reply r;
  r.object = handle(request, caller);
  return r;
}

namespace {

// The fields asked for (and `id`), and `cut` naming those of them that were cut.
json project(const json& j, const std::vector<std::string>& fields) {
  json out = json::object();
  out["id"] = j.at("id");
  for (const auto& f : fields)
    if (auto it = j.find(f); it != j.end() && f != "cut") out[f] = *it;
  if (auto cut = j.find("cut"); cut != j.end()) {
    json kept = json::array();
    for (const auto& c : *cut) {
      const auto& name = c.get_ref<const std::string&>();
      if (out.contains(name.substr(0, name.find('.')))) kept.push_back(c);
    }
    if (!kept.empty()) out["cut"] = std::move(kept);
  }
  return out;
}

// A listing sent in parts: `{"ok":true,"jobs":[`, then pages of jobs as the client reads
// them, then `],` the closing fields `}`. A page that fails to read (a damaged database)
// ends the listing early with "incomplete": the reason (the reply was already "ok").
// Issue 33 item 1: each job carries only `fields` (all when empty; `id` always).
Reply stream_jobs(std::function<std::vector<json>()> next_page, json tail, std::vector<std::string> fields) {
  struct State {
    bool started = false, first = true;
  };
  auto st = std::make_shared<State>();
  Reply r;
  r.more = [st, next_page = std::move(next_page), tail = std::move(tail),
            fields = std::move(fields)](std::string& out) mutable {
    auto dump = [](const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };
    if (!st->started) {
      st->started = true;
      out += "{\"ok\":true,\"jobs\":[";
      return true;
    }
    std::vector<json> page;
    try {
      page = next_page();
    } catch (const std::exception& e) {
      tail["incomplete"] = e.what();
    }
    if (page.empty()) {
      out += "]";
      for (auto it = tail.begin(); it != tail.end(); ++it) out += "," + dump(it.key()) + ":" + dump(it.value());
      out += "}\n";
      return false;
    }
    for (auto& j : page) {
      if (!st->first) out += ",";
      st->first = false;
      if (!fields.empty()) j = project(j, fields);
      out += dump(j);
    }
    return true;
  };
  return r;
}

}  // namespace

json Daemon::handle(const api::Request& request, const Caller& caller) {
  try {
    return std::visit(
        [&](const auto& r) -> json {
          using T = std::decay_t<decltype(r)>;
          if constexpr (std::is_same_v<T, api::SubmitRequest>) return submit(r, caller);
          else if constexpr (std::is_same_v<T, api::ListRequest>) return error_reply("internal: listings stream");
          else if constexpr (std::is_same_v<T, api::ShowRequest>) return show(r, caller);
          else if constexpr (std::is_same_v<T, api::CancelRequest>) return cancel(r, caller);
          else if constexpr (std::is_same_v<T, api::LogsRequest>) return logs(r, caller);
          else if constexpr (std::is_same_v<T, api::GpusRequest>) return gpus_reply();
          else if constexpr (std::is_same_v<T, api::HistoryRequest>) return error_reply("internal: listings stream");
          else if constexpr (std::is_same_v<T, api::WaitRequest>) return wait_reply(r);
          else {
            return {{"ok", true}, {"version", "aegisd 0.1.0"}};
          }
        },
        request);
  } catch (const StoreError& e) {
    // A damaged database or a full disk fails this request, not the daemon.
    return error_reply(e.what());
  } catch (const std::exception& e) {
    return error_reply(std::string("internal error: ") + e.what());
  }
}

bool Daemon::may_manage(const Caller& c, uid_t owner) const {
  if (c.uid == 0 || c.uid == owner) return true;
  return !cfg_.daemon.admin_group.empty() && env_.in_group(c.uid, c.gid, cfg_.daemon.admin_group);
}

json Daemon::submit(const api::SubmitRequest& r, const Caller& c) {
  const auto& req = r.job;
  const auto user = env_.user_name(c.uid);
  if (!user) return error_reply(fmt::format("caller: uid {} has no user account on this server", c.uid));
  if (geteuid() != 0 && c.uid != geteuid())
    return error_reply(fmt::format("permission denied: aegisd runs as uid {} and can only run that user's jobs", geteuid()));
  if (!req.workdir.empty() && !env_.is_directory_for(req.workdir, c.uid, c.gid))
    return error_reply("job.workdir: " + req.workdir + " is not a directory on this server (that you can reach)");
  // Issue 32 items 3-4: the array's elements and the dependencies, checked before anything
  // is queued (the syntax was checked with the request; here: what it names).
  std::vector<int> indices{-1};
  JobLinks links;
  if (!req.array.empty()) {
    auto a = api::parse_array(req.array);
    if (auto* e = std::get_if<api::ParseError>(&a)) return error_reply("job." + e->message);
    indices = std::get<api::ArraySpec>(a).indices;
    links.array_limit = std::get<api::ArraySpec>(a).limit;
  }
  if (auto why = check_after(req, c, links.after)) return error_reply(*why);
  const auto count = static_cast<std::int64_t>(indices.size());
  if (cfg_.daemon.max_jobs_per_user > 0) {
    std::int64_t mine = 0;
    for (const auto& [id, j] : records_) mine += j.uid == c.uid;
    if (mine + count > cfg_.daemon.max_jobs_per_user)
      return error_reply(fmt::format("job: {} has {} jobs queued or running, the most one user may have "
                                     "(max_jobs_per_user); submit more when some have ended",
                                     *user, mine));
  }
  // Issue 32 item 5: its time limit, the server's default when it gives none, at most the
  // server's maximum (a default over the maximum is capped to it).
  std::optional<std::int64_t> limit = req.time_limit_s;
  const auto max_limit = static_cast<std::int64_t>(cfg_.daemon.max_time_limit_s);
  if (!limit && cfg_.daemon.default_time_limit_s > 0) {
    limit = static_cast<std::int64_t>(cfg_.daemon.default_time_limit_s);
    if (max_limit > 0) limit = std::min(*limit, max_limit);
  }
  if (limit && max_limit > 0 && *limit > max_limit)
    return error_reply(fmt::format("job.time (--time): {} is over this server's maximum, {} (max_time_limit_s)",
                                   format_time_limit(static_cast<Seconds>(*limit)),
                                   format_time_limit(static_cast<Seconds>(max_limit))));
  // Issue 32 item 1: only the priority levels the admin allows this user (priority_levels).
  if (const auto rules = parse_priority_levels(cfg_.daemon.priority_levels);
      const auto* levels = std::get_if<std::vector<LevelRule>>(&rules))
    if (auto why = why_priority_refused(*levels, req.priority, *user,
                                        [&](const std::string& g) { return env_.in_group(c.uid, c.gid, g); }))
      return error_reply(*why);
  DaemonJob j;
  j.uid = c.uid;
  j.gid = c.gid;
  j.user = *user;
  j.request = req;
  j.request.time_limit_s = limit;  // item 5
  j.state = JobState::Queued;
  j.submitted_at = env_.now();
  j.recovery.exclusive_only = req.exclusive;
  // Its predicted utilisation, made now and stored with it: what the lpa order ranks its
  // GPUs by while it runs, across restarts.
  predict_utilisation(j);
  // What the policy needs of a job, and whether it can ever run here: the lifecycle's
  // rules, the same as for the queue and the simulator.
  const JobSpec spec = spec_of(j);
  if (auto why = missing_for_job(cfg_.daemon.policy, cfg_.engine, spec)) return error_reply(*why);
  if (auto why = Feasibility(engine_, devices()).why_never_runs(QueuedJob{spec, j.recovery})) return error_reply(*why);
  if (r.attach) {
    const auto start = env_.process_start_ticks(c.pid);
    if (!start) return error_reply("attach: the calling process cannot be identified (no peer pid)");
    j.attached_to = ClientProcess{c.pid, *start};
  }
  // The watermark first: nothing is inserted when it cannot be written (a full disk).
  if (const JobId last = store_.next_id() + count - 1; last > id_floor_recorded_) {
    record_id_floor(cfg_.daemon.state_dir, last + kIdFloorStep - 1);
    id_floor_recorded_ = last + kIdFloorStep - 1;
  }
  Tx tx(store_);
  JobId first = 0;
  json ids = json::array();
  // One job, or each element of the array in index order (element 0 first: the probe).
  for (const int index : indices) {
    DaemonJob e = j;
    if (index >= 0) {
      e.request = api::element_request(req, index);
      e.array_id = first;  // 0 for the first: its own id, known after the insert
      e.array_index = index;
      e.array_limit = links.array_limit;
    }
    store_.insert(e);
    const JobId id = e.id;
    if (index >= 0 && !first) e.array_id = first = id;
    JobSpec with_id = spec_of(e);
    with_id.id = id;
    Effects fx = life_.submitted(with_id, req.exclusive, req.restartable, e.submitted_at, links);
    for (const After& d : life_.after_of(id)) e.after.emplace_back(d.job, std::string(to_string(d.kind)));
    store_.write_links(id, e);
    for (auto& ch : fx.changes) ch.detail = fmt::format("by {} (uid {})", e.user, e.uid);
    records_.emplace(id, std::move(e));
    persist(fx, records_.at(id).submitted_at);
    ids.push_back(id);
  }
  tx.commit();
  stats_.submissions += count;
  if (req.array.empty()) return {{"ok", true}, {"id", ids.front()}};
  return {{"ok", true}, {"id", first}, {"array_id", first}, {"ids", ids}};
}

// `queue`: everyone's queued and running jobs (running first, then the queue in the order
// it will be served), or with `all` every job, newest first; `mine`: the caller's only.
Reply Daemon::list(const api::ListRequest& r, const Caller& c) {
  const std::optional<uid_t> only = r.mine ? std::optional<uid_t>(c.uid) : std::nullopt;
  if (r.all) return jobs_from_store(kMaxListed, only, r.fields);
  std::vector<std::pair<std::tuple<int, std::int64_t>, JobId>> order;
  // Queued jobs in the lifecycle's serving order (priority level, fair share, FIFO).
  std::map<JobId, std::int64_t> served_at;
  for (JobId id : life_.queue_order()) served_at.emplace(id, static_cast<std::int64_t>(served_at.size()));
  for (const auto& [id, j] : records_)
    if (!only || j.uid == *only) {
      const auto at = served_at.find(id);
      order.push_back({{j.state == JobState::Running ? 0 : at != served_at.end() ? 1 : 2,
                        at != served_at.end() ? at->second : j.queue_seq},
                       id});
    }
  // [fair share] Each user's factor at the last pass, shown beside its queued jobs.
  auto factors = std::make_shared<std::map<std::int64_t, double>>();
  if (life_.fair_share().orders()) *factors = life_.fair_share_factors(life_.last_pass());
  std::sort(order.begin(), order.end());
  auto ids = std::make_shared<std::vector<JobId>>();
  for (const auto& o : order) ids->push_back(o.second);
  auto pos = std::make_shared<std::size_t>(0);
  // A queued job that can never start here (the lifecycle's rule) fails at the next pass;
  // until then (a GPU lost while launches back off, say) the queue says so, with why.
  auto never = std::make_shared<std::map<JobId, std::string>>();
  const Feasibility feasible(engine_, devices());
  for (JobId id : life_.queue_order())
    if (auto why = feasible.why_never_runs(life_.find(id)->queued)) (*never)[id] = std::move(*why);
  // The last pass's reason, while the job it is about still waits (a cancel or an end
  // empties the queue before the next pass).
  const auto blocked = records_.find(blocked_job_);
  const bool still = blocked != records_.end() && blocked->second.state == JobState::Queued;
  json tail{{"waiting_because", still ? blocked_reason_ : std::string()},
            {"waiting_job", still ? blocked_job_ : JobId{0}},
            {"waiting_never_starts", false}};
  if (const auto served = life_.queue_order(); !served.empty() && never->count(served.front()))
    tail = {{"waiting_because", never->at(served.front())}, {"waiting_job", served.front()}, {"waiting_never_starts", true}};
  // Issue 32 item 5: each waiting job's expected start, the queue served forward from now
  // (lifecycle/eta.h); null where none can be told. Once per request.
  auto eta = std::make_shared<std::map<JobId, std::optional<Seconds>>>();
  if (r.eta) {
    OneServerPlacer placer(engine_);
    placer.server.views = views();
    for (const auto& [id, at] : estimate_starts(life_, env_.now(), placer.server_gpus()).starts) (*eta)[id] = at;
  }
  // Built as the client reads: a job that ended meanwhile is shown as it is by then.
  return stream_jobs(
      [this, ids, pos, never, factors, eta, max = static_cast<std::size_t>(cfg_.daemon.listing_string_bytes)] {
        std::vector<json> page;
        for (; *pos < ids->size() && page.size() < kListPage; ++*pos) {
          const JobId id = (*ids)[*pos];
          if (auto it = records_.find(id); it != records_.end()) page.push_back(listing_view(it->second, max));
          else if (auto j = store_.get(id)) page.push_back(listing_view(*j, max));
          else continue;
          if (auto n = never->find(id); n != never->end() && page.back()["state"] == "queued")
            page.back()["never_starts"] = n->second;
          // Issue 32: why a held job waits (its dependencies, its array) is the lifecycle's
          // word of the last pass, not written to the store at each pass.
          if (const LifeJob* l = life_.find(id); l && l->state == JobState::Queued && !l->reason.empty())
            page.back()["reason"] = l->reason;
          if (page.back()["state"] == "queued" && !factors->empty()) {
            const auto it = records_.find(id);
            const auto f = it == records_.end() ? factors->end() : factors->find(static_cast<std::int64_t>(it->second.uid));
            page.back()["fair_share"] = f == factors->end() ? 1.0 : f->second;
          }
          if (auto e = eta->find(id); e != eta->end() && page.back()["state"] == "queued")  // item 5
            page.back()["eta"] = e->second ? json(*e->second) : json(nullptr);
        }
        return page;
      },
      std::move(tail), r.fields);
}

Reply Daemon::history(const api::HistoryRequest& r) { return jobs_from_store(r.limit, std::nullopt, r.fields); }

// The newest `limit` jobs of the store (only `uid`'s when given), a page at a time.
Reply Daemon::jobs_from_store(std::int64_t limit, std::optional<uid_t> uid, std::vector<std::string> fields) {
  auto before = std::make_shared<JobId>(0);
  auto left = std::make_shared<std::int64_t>(limit);
  // Issue 33 item 1: a job cut in a listing may be megabytes in the store (a few ms to read
  // even in part): pages start at one job and double up to kStoreListPage while none was
  // cut, and go back to one after a page with a cut job, so that a turn stays short.
  auto per_page = std::make_shared<std::int64_t>(1);
  // A listing that does not show the request (`aegis queue`, the dashboard) reads no argv.
  const bool argv = fields.empty() || std::find(fields.begin(), fields.end(), "request") != fields.end();
  return stream_jobs(
      [this, before, left, uid, per_page, argv, max = static_cast<std::size_t>(cfg_.daemon.listing_string_bytes)] {
        std::vector<json> page;
        if (*left <= 0) return page;
        bool cut = false;
        for (const auto& j : store_.list_page(*before, std::min(*left, *per_page), uid, max, argv)) {
          page.push_back(listing_view(j, max));
          cut = cut || page.back().contains("cut");
          *before = j.id;
        }
        *per_page = cut ? 1 : std::min(*per_page * 2, kStoreListPage);
        *left = page.empty() ? 0 : *left - static_cast<std::int64_t>(page.size());
        return page;
      },
      json::object(), std::move(fields));
}

std::optional<DaemonJob> Daemon::find(JobId id) {
  auto it = records_.find(id);
  if (it != records_.end()) return it->second;
  return store_.get(id);
}

json Daemon::show(const api::ShowRequest& r, const Caller& c) {
  const auto j = find(r.id);
  if (!j) return error_reply(fmt::format("job {}: no such job", r.id));
  json v = public_view(*j, may_manage(c, j->uid));
  // What the chain gives the job now (a queued job waits with it; docs/daemon.md).
  const UtilisationEstimate u = utilisation_of(*j);
  auto source = [](const char* s) { return s ? json(s) : json(nullptr); };
  v["utilisation"] = {{"gpu_util", u.gpu_util ? json(*u.gpu_util) : json(nullptr)},
                      {"gpu_util_source", source(u.gpu_util_source)},
                      {"sharing_score", u.sharing_score ? json(*u.sharing_score) : json(nullptr)},
                      {"sharing_score_source", source(u.sharing_score_source)},
                      {"predicted_util", j->predicted_util ? json(*j->predicted_util) : json(nullptr)},
                      {"predicted_util_source",
                       j->predicted_util ? json(j->predicted_util_source) : json(nullptr)}};
  json events = json::array();
  for (const auto& e : store_.events(r.id)) events.push_back({{"t", e.t}, {"kind", e.kind}, {"detail", e.detail}});
  v["events"] = events;
  return {{"ok", true}, {"job", v}};
}

json Daemon::cancel(const api::CancelRequest& r, const Caller& c) {
  // Every id must exist and be the caller's to cancel, or nothing is cancelled (a typo never
  // cancels half a list). A job of the caller's that already ended is where a cancel would
  // take it: it is reported, not an error, and the others are cancelled.
  json ended = json::array();
  for (JobId id : r.ids) {
    auto it = records_.find(id);
    if (it == records_.end()) {
      const auto old = store_.get(id);
      if (!old) return error_reply(fmt::format("job {}: no such job", id));
      if (!may_manage(c, old->uid))
        return error_reply(fmt::format("job {}: permission denied (it belongs to {})", id, old->user));
      ended.push_back({{"id", id}, {"state", to_string(old->state)}});
      continue;
    }
    if (!may_manage(c, it->second.uid))
      return error_reply(fmt::format("job {}: permission denied (it belongs to {})", id, it->second.user));
  }
  const Seconds now = env_.now();
  json ids = json::array();
  Tx tx(store_);
  for (JobId id : r.ids) {
    if (!records_.count(id)) continue;  // listed twice
    apply(life_.cancel(id, "", now), now);
    ids.push_back(id);
  }
  tx.commit();
  if (!store_.in_transaction()) send_stop_signals();  // else after the group commit
  return {{"ok", true}, {"cancelled", ids}, {"already_ended", ended}};
}

json Daemon::logs(const api::LogsRequest& r, const Caller& c) {
  const auto j = find(r.id);
  if (!j) return error_reply(fmt::format("job {}: no such job", r.id));
  if (!may_manage(c, j->uid)) return error_reply(fmt::format("job {}: permission denied (it belongs to {})", r.id, j->user));
  if (j->attempts.empty()) return {{"ok", true}, {"data", ""}, {"offset", 0}, {"eof", is_final(j->state)}};
  const auto chunk = env_.read_log(j->id, j->current()->number, r.stderr_stream, r.offset,
                                   std::min<std::uint64_t>(r.max_bytes, kMaxLogReply));
  const std::uint64_t from = std::min(r.offset, chunk.size);
  const std::uint64_t next = from + chunk.data.size();
  const bool attempt_over = j->current()->ended_at.has_value() || is_final(j->state);
  return {{"ok", true},
          {"data", chunk.data},
          {"offset", next},
          {"attempt", j->current()->number},
          {"eof", attempt_over && next >= chunk.size}};
}

json Daemon::gpus_reply() const {
  const std::vector<GpuView> gpu_views = views();
  std::vector<RunningJob> running;
  std::map<int, std::vector<JobId>> jobs_on;
  for (const auto& r : life_.running_on(0)) {
    running.push_back(r);
    for (int g : r.gpus) jobs_on[g].push_back(r.spec.id);
  }
  Snapshot s;
  s.now = env_.now();
  s.gpus = gpu_views;
  s.running = running;
  const auto reports = engine_.report(s);
  json out = json::array();
  const std::string tracking = env_.tracking();  // how the jobs' GPU processes are attributed
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    const auto& st = gpus_[i].status;
    const auto& r = reports[i];
    auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
    json foreign = json::array();
    for (const auto& p : gpus_[i].foreign)
      foreign.push_back({{"pid", p.pid}, {"used_mib", p.used_mib ? json(*p.used_mib) : json(nullptr)}});
    out.push_back({{"index", i},
                   {"nvml_index", st.index},
                   {"uuid", st.uuid},
                   {"name", st.name},
                   {"memory_total_mib", st.total_mib},
                   {"memory_used_mib", st.used_mib},
                   {"memory_free_mib", st.free_mib},
                   {"utilization", opt(st.util)},
                   {"smact", opt(st.smact)},
                   {"smocc", opt(st.smocc)},
                   {"drama", opt(st.drama)},
                   {"power_w", opt(st.power_w)},
                   {"telemetry", st.level() == TelemetryLevel::Full     ? "full"
                                 : st.level() == TelemetryLevel::Coarse ? "coarse"
                                                                        : "memory-only"},
                   {"telemetry_source", st.telemetry_source()},
                   {"risk", {{"smact", r.risk_smact}, {"smocc", r.risk_smocc}, {"drama", r.risk_drama}, {"util", r.risk_util}}},
                   {"observing", r.observing},
                   {"opens_at", r.opens_at ? json(*r.opens_at) : json(nullptr)},
                   {"jobs", jobs_on[static_cast<int>(i)]},
                   {"processes", st.processes.size()},
                   {"foreign", foreign},
                   {"process_samples", gpus_[i].process_samples},
                   {"job_tracking", tracking}});
  }
  return {{"ok", true},
          {"gpus", out},
          {"source", env_.describe_gpus()},
          {"tracking", env_.tracking()},
          {"error", gpu_error_}};
}

}  // namespace aegis
