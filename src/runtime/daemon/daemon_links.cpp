// aegisd's side of arrays and dependencies (issue 32 items 3-4): what a submission's
// --after names is checked here (it exists, it is the caller's); the rules themselves are the
// lifecycle's (lifecycle/holds.h). A restart gives the lifecycle each restored job's links
// and the final states of the jobs they name that ended before it.
#include <algorithm>
#include <fmt/format.h>

#include "runtime/daemon/daemon.h"
#include "runtime/daemon/daemon_util.h"

namespace aegis {

using nlohmann::json;

std::optional<std::string> Daemon::check_after(const api::JobRequest& req, const Caller& c, std::vector<After>& out) {
  for (std::size_t i = 0; i < req.after.size(); ++i) {
    auto parsed = api::parse_after(req.after[i], "job.after[" + std::to_string(i) + "]");
    if (auto* e = std::get_if<api::ParseError>(&parsed)) return e->message;
    const auto& ref = std::get<api::AfterRef>(parsed);
    std::optional<uid_t> owner;
    std::optional<JobState> ended;  // a job no longer held ended: the lifecycle is told how
    if (auto it = records_.find(ref.id); it != records_.end()) {
      owner = it->second.uid;
    } else if (auto j = store_.get(ref.id)) {
      owner = j->uid;
      if (is_final(j->state)) ended = j->state;
    }
    if (!owner) return fmt::format("job.after: job {} does not exist", ref.id);
    // Only on one's own jobs: another user's job's fate is not theirs to wait on (root may).
    if (c.uid != 0 && *owner != c.uid) return fmt::format("job.after: job {} is another user's", ref.id);
    if (ended) life_.known_final(ref.id, *ended);
    out.push_back({ref.id, *parse_after_kind(ref.kind)});
    // An array's id stands for each element (the lifecycle expands it): those it no longer
    // holds (ended before a restart) are named to it here, with their end.
    for (JobId e : store_.array_elements(ref.id))
      if (e != ref.id && !records_.contains(e))
        if (auto j = store_.get(e); j && is_final(j->state)) life_.known_element(e, ref.id, j->array_index, j->state);
  }
  return std::nullopt;
}

JobLinks Daemon::links_of(const DaemonJob& j) const {
  JobLinks l;
  l.array_limit = j.array_limit;
  for (const auto& [id, kind] : j.after)
    if (auto k = parse_after_kind(kind)) l.after.push_back({id, *k});
  return l;
}

void Daemon::restore_finals() {
  auto tell = [&](JobId id) {
    if (records_.contains(id)) return;
    if (auto j = store_.get(id); j && is_final(j->state)) {
      if (j->array_id) life_.known_element(id, *j->array_id, j->array_index, j->state);
      else life_.known_final(id, j->state);
    }
  };
  std::vector<JobId> arrays;
  for (const auto& [id, rec] : records_) {
    for (const auto& [dep, kind] : rec.after) tell(dep);
    if (rec.array_id) arrays.push_back(*rec.array_id);
  }
  std::sort(arrays.begin(), arrays.end());
  arrays.erase(std::unique(arrays.begin(), arrays.end()), arrays.end());
  for (JobId a : arrays)
    for (JobId e : store_.array_elements(a)) tell(e);
}

json Daemon::wait_reply(const api::WaitRequest& r) {
  json jobs = json::array(), missing = json::array();
  bool all_final = true, all_completed = true;
  auto add = [&](JobId id) {
    std::optional<JobState> state;
    if (auto it = records_.find(id); it != records_.end()) state = it->second.state;
    else if (auto j = store_.get(id)) state = j->state;
    if (!state) return false;
    all_final = all_final && is_final(*state);
    all_completed = all_completed && *state == JobState::Completed;
    jobs.push_back({{"id", id}, {"state", std::string(to_string(*state))}});
    return true;
  };
  for (std::int64_t id : r.ids) {
    const auto elements = store_.array_elements(id);
    if (elements.empty()) {
      if (!add(id)) missing.push_back(id);
    } else {
      for (JobId e : elements) add(e);  // an array's id: every element
    }
  }
  return {{"ok", true}, {"jobs", jobs}, {"missing", missing}, {"all_final", all_final},
          {"all_completed", all_completed}};
}

}  // namespace aegis
