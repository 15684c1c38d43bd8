#include "lifecycle/holds.h"

#include <algorithm>
#include <fmt/format.h>

#include "lifecycle/lifecycle.h"
#include "sched/config.h"

namespace aegis {

std::string_view to_string(AfterKind k) {
  switch (k) {
    case AfterKind::Ok: return "ok";
    case AfterKind::Any: return "any";
    case AfterKind::Failed: return "failed";
  }
  return "ok";
}

std::optional<AfterKind> parse_after_kind(std::string_view s) {
  if (s == "ok") return AfterKind::Ok;
  if (s == "any") return AfterKind::Any;
  if (s == "failed") return AfterKind::Failed;
  return std::nullopt;
}

namespace {

// Whether a job that ended as `s` meets a dependency of this kind. "failed" is any end
// but completion (failed or cancelled), as Slurm's afternotok.
bool meets(AfterKind k, JobState s) {
  switch (k) {
    case AfterKind::Ok: return s == JobState::Completed;
    case AfterKind::Failed: return s == JobState::Failed || s == JobState::Cancelled;
    case AfterKind::Any: return true;
  }
  return false;
}

}  // namespace

void Holds::add(const LifeJob& j, const JobLinks& links) {
  const JobSpec& s = j.spec();
  if (s.array_id) {
    Array& a = arrays_[*s.array_id];
    a.elements[s.array_index] = s.id;
    if (links.array_limit > 0) a.limit = links.array_limit;
    active_ = true;
  }
  if (links.after.empty()) return;
  std::vector<After> expanded;
  for (const After& d : links.after) {
    // An array's id stands for every element of it (its element 0 is among them).
    if (auto a = arrays_.find(d.job); a != arrays_.end() && d.job != s.id) {
      for (const auto& [index, id] : a->second.elements)
        if (id != s.id) expanded.push_back({id, d.kind});
    } else {
      expanded.push_back(d);
    }
  }
  if (expanded.empty()) return;
  after_[s.id] = std::move(expanded);
  active_ = true;
}

std::vector<After> Holds::after_of(JobId id) const {
  auto it = after_.find(id);
  return it == after_.end() ? std::vector<After>{} : it->second;
}

int Holds::array_limit_of(JobId array) const {
  auto it = arrays_.find(array);
  return it == arrays_.end() ? 0 : it->second.limit;
}

void Holds::finished(JobId id, JobState s) {
  finals_[id] = s;
  active_ = true;
}

void Holds::ended_element(JobId id, JobId array_id, int index, JobState s) {
  arrays_[array_id].elements[index] = id;
  finished(id, s);
}

void Holds::memory(const LifeJob& j, MiB mib, Seconds t, MiB tolerance) {
  const JobSpec& s = j.spec();
  if (!s.array_id || !j.current()) return;
  auto it = arrays_.find(*s.array_id);
  if (it == arrays_.end() || it->second.settled) return;
  Array& a = it->second;
  // Before the array settles only its probe runs; a new attempt starts from no readings.
  if (a.probe != s.id || a.attempt != j.current()->number) {
    a.probe = s.id;
    a.attempt = j.current()->number;
    a.max_mib = 0;
    a.mark_mib = 0;
    a.grew_at = t;
  }
  a.max_mib = std::max(a.max_mib, mib);
  // "Grew": past the level it last grew to by more than the tolerance (allocator caches
  // move by a few MiB; the anchor's plateau rule counts the same as steady).
  if (mib > a.mark_mib + tolerance) {
    a.mark_mib = mib;
    a.grew_at = t;
  }
}

std::optional<Seconds> Holds::peak_due(const LifeJob& j, const EngineConfig& c) const {
  const JobSpec& s = j.spec();
  if (!s.array_id || !j.current() || !j.current()->first_activity) return std::nullopt;
  auto it = arrays_.find(*s.array_id);
  if (it == arrays_.end()) return std::nullopt;
  const Array& a = it->second;
  if (!c.array_probe || a.settled || a.probe != s.id || a.attempt != j.current()->number || a.max_mib <= 0) return std::nullopt;
  // The same time held() settles at.
  return std::max(a.grew_at, *j.current()->first_activity) + c.array_probe_settle_s;
}

bool Holds::floor_from_array(const LifeJob& j, const Array& a) {
  // Only a released array gives floors, and the OOM ladder, the other source of a floor or of
  // running alone, counts what it does (oom_count): so an element never OOM-killed of a
  // settled array has its array's floor. The stored floor says so after a restart as well,
  // when the probe's peak itself is gone.
  return a.settled && j.queued.recovery.oom_count == 0;
}

bool Holds::drop_floor(LifeJob& j) const {
  const JobSpec& s = j.spec();
  if (!s.array_id) return false;
  auto it = arrays_.find(*s.array_id);
  auto& r = j.queued.recovery;
  if (it == arrays_.end() || !floor_from_array(j, it->second) || r.floor_mib <= 0) return false;
  // Its probe's peak, plus the margin, is more than any GPU here holds: the probe fitted with
  // less than the margin to spare, so the element gets a GPU of its own (as the OOM ladder's
  // "alone" rung does) rather than the estimator-free floor, where it would be collocated and
  // die of OOM (docs/lab-policies.md, "Arrays").
  r.floor_mib = 0;
  r.exclusive_only = true;
  return true;
}

void Holds::forget(JobId id) {
  after_.erase(id);
}

std::optional<JobState> Holds::final_state(JobId id, const Lookup& find) const {
  if (auto f = finals_.find(id); f != finals_.end()) return f->second;
  if (const LifeJob* j = find(id); j && is_final(j->state)) return j->state;
  return std::nullopt;
}

std::optional<std::string> Holds::doomed(const LifeJob& j, const Lookup& find) const {
  auto it = after_.find(j.id());
  if (it == after_.end()) return std::nullopt;
  for (const After& d : it->second) {
    const auto s = final_state(d.job, find);
    if (!s && !find(d.job))
      return fmt::format("dependency can no longer be met: job {} is unknown here (--after {}:{})", d.job, d.job,
                         to_string(d.kind));
    if (s && !meets(d.kind, *s))
      return fmt::format("dependency can no longer be met: job {} {} (--after {}:{})", d.job, to_string(*s), d.job,
                         to_string(d.kind));
  }
  return std::nullopt;
}

std::optional<JobId> Holds::probe_of(Array& a, const Lookup& find) const {
  // The first element that did not end without completing: a probe that failed or was
  // cancelled passes the part on to the next element (docs/lab-policies.md, "Arrays").
  for (const auto& [index, id] : a.elements) {
    const auto s = final_state(id, find);
    if (!s || *s == JobState::Completed) return id;
  }
  return std::nullopt;
}

void Holds::settle(Array& a, std::optional<MiB> peak, const EngineConfig& c, const Lookup& find,
                   std::vector<JobId>& floored) {
  a.settled = true;
  if (!peak) return;  // nothing measured: the elements go as any job does
  // The probe's peak plus the margin, as the floor each waiting element must find free: the
  // one requirement every policy honours (the estimator-free one reads no estimate), the
  // same the OOM ladder uses to carry a measured need.
  const MiB floor = *peak + c.memory_margin_mib;
  for (const auto& [index, id] : a.elements) {
    LifeJob* e = find(id);
    if (!e || e->state != JobState::Queued || e->queued.recovery.oom_count > 0) continue;
    if (e->queued.recovery.floor_mib >= floor) continue;
    e->queued.recovery.floor_mib = floor;
    floored.push_back(id);
  }
}

void Holds::begin_pass(const Lookup& find) {
  for (auto& [aid, a] : arrays_) {
    a.running = 0;
    // Every array (the cap and passed_over() read it); an array settled later this pass
    // counts its running probe too.
    for (const auto& [index, id] : a.elements)
      if (const LifeJob* e = find(id); e && e->holds_gpus()) ++a.running;
  }
}

void Holds::started(const LifeJob& j) {
  if (!j.spec().array_id) return;
  if (auto it = arrays_.find(*j.spec().array_id); it != arrays_.end()) ++it->second.running;
}

std::optional<std::string> Holds::passed_over(const LifeJob& j, const EngineConfig& c) const {
  const JobSpec& s = j.spec();
  if (!c.array_floor_pass_over || !s.array_id) return std::nullopt;
  auto it = arrays_.find(*s.array_id);
  if (it == arrays_.end()) return std::nullopt;
  const Array& a = it->second;
  const auto& r = j.queued.recovery;
  // Only the floor its array gave (or the GPU of its own drop_floor() gave instead): an
  // element the OOM ladder raised waits as any job does.
  if (!floor_from_array(j, a) || (r.floor_mib <= 0 && !r.exclusive_only) || a.running <= 0) return std::nullopt;
  // A running sibling will end and free a GPU sized for this element: until then the jobs
  // behind it may use what is free (a refusal at the head would idle the rest of the cluster).
  if (r.floor_mib <= 0)
    return fmt::format("array {}: needs an idle GPU to run alone, none is idle yet; passed over while {} of its "
                       "elements run",
                       *s.array_id, a.running);
  return fmt::format("array {}: needs {} MiB free (its probe's peak and the margin), no GPU offers it yet; "
                     "passed over while {} of its elements run",
                     *s.array_id, r.floor_mib, a.running);
}

std::optional<std::string> Holds::held(LifeJob& j, Seconds now, const EngineConfig& c, const Lookup& find,
                                       std::vector<JobId>& floored, std::optional<Seconds>& wake) {
  if (auto it = after_.find(j.id()); it != after_.end())
    for (const After& d : it->second)
      if (!final_state(d.job, find))
        return fmt::format("waiting for job {} to end (--after {}:{})", d.job, d.job, to_string(d.kind));
  const JobSpec& s = j.spec();
  if (!s.array_id) return std::nullopt;
  auto it = arrays_.find(*s.array_id);
  if (it == arrays_.end()) return std::nullopt;
  Array& a = it->second;
  if (!a.settled && c.array_probe) {
    const std::optional<JobId> p = probe_of(a, find);
    const LifeJob* pj = p ? find(*p) : nullptr;
    const auto ps = p ? final_state(*p, find) : std::nullopt;
    if (!p) {
      settle(a, std::nullopt, c, find, floored);  // every element failed as a probe: none left to wait for
    } else if (ps == JobState::Completed) {
      settle(a, a.probe == p && a.max_mib > 0 ? std::optional<MiB>(a.max_mib) : std::nullopt, c, find, floored);
    } else if (pj && pj->holds_gpus() && pj->current()->first_activity && a.probe == p &&
               a.attempt == pj->current()->number && a.max_mib > 0) {
      // Its peak: memory that has not grown for the settle window since its first activity.
      const Seconds since = std::max(a.grew_at, *pj->current()->first_activity);
      if (now >= since + c.array_probe_settle_s) settle(a, a.max_mib, c, find, floored);
      else wake = since + c.array_probe_settle_s;
    }
    if (!a.settled && p != j.id())
      return fmt::format("array {}: waiting for its probe, job {}, to reach its memory peak", *s.array_id, *p);
  }
  if (a.limit > 0 && a.running >= a.limit)
    return fmt::format("array {}: {} of its elements run, its limit (%{})", *s.array_id, a.running, a.limit);
  return std::nullopt;
}

}  // namespace aegis
