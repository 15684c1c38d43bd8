#include "lifecycle/fair_share.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <set>

namespace aegis {

ShareWeights resolve_share_weights(const EngineConfig& c,
                                   const std::function<std::optional<std::int64_t>(std::string_view, bool)>& id_of) {
  ShareWeights w;
  for (const bool group : {false, true}) {
    for (const auto& [name, weight] :
         parse_share_weights(group ? c.fair_share_groups : c.fair_share_users, group ? "fair_share_groups" : "fair_share_users")) {
      if (name == "*") {
        (group ? w.other_group : w.other_user) = weight;
      } else if (auto id = id_of(name, group)) {
        (group ? w.groups : w.users)[*id] = weight;
      }
    }
  }
  return w;
}

double charged_gpus(int gpus, bool exclusive, MiB admitted_mib, MiB gpu_total_mib) {
  const double each = exclusive || gpu_total_mib <= 0
                          ? 1.0
                          : std::min(1.0, static_cast<double>(admitted_mib) / static_cast<double>(gpu_total_mib));
  return gpus * each;
}

double charged_gpus(const Placement& p) {
  double gpus = 0;
  for (const auto& part : p.parts)
    gpus += charged_gpus(static_cast<int>(part.launch.gpus.size()), part.launch.exclusive, part.launch.admitted_mib,
                         part.gpu_total_mib);
  return gpus;
}

GpuHolds gpu_holds(const Placement& p) {
  GpuHolds out;
  for (const auto& part : p.parts)
    for (int g : part.launch.gpus)
      out.push_back({part.server, g, part.launch.admitted_mib, part.gpu_total_mib, part.launch.exclusive});
  return out;
}

MiB booked_mib(const Placement& p) {
  MiB m = 0;
  for (const auto& part : p.parts) m += static_cast<MiB>(part.launch.gpus.size()) * part.launch.admitted_mib;
  return m;
}

bool fair_share_orders(const EngineConfig& c) { return !c.fair_share_users.empty() || !c.fair_share_groups.empty(); }
bool fair_share_caps(const EngineConfig& c) { return c.user_max_gpu_mem_mib > 0 || c.user_max_running_jobs > 0; }

FairShare::FairShare(const EngineConfig& c, ShareWeights w)
    : orders_(fair_share_orders(c)),
      caps_(fair_share_caps(c)),
      occupied_(c.fair_share_charge == "occupied"),
      committed_(c.fair_share_committed == "mean_run_time"),
      groups_(!c.fair_share_groups.empty()),
      w_(std::move(w)),
      half_life_s_(c.fair_share_half_life_s),
      max_mem_mib_(c.user_max_gpu_mem_mib),
      max_running_(c.user_max_running_jobs) {}

FairShare::Account& FairShare::account(std::int64_t user) { return accounts_[user]; }

// Usage U decays as U' = -lambda U + r (r the GPU shares held, constant between events):
// U(t) = U e^{-lambda dt} + r (1 - e^{-lambda dt}) / lambda, lambda = ln 2 / half-life.
void FairShare::advance(Account& a, Seconds t, Seconds half_life) {
  const double dt = t - a.at;
  if (!(dt > 0)) return;
  a.charged += a.rate * dt;
  const double keep = half_life > 0 ? std::exp(-std::log(2.0) / half_life * dt) : 1.0;
  a.usage = a.usage * keep + gained(a.rate, dt, half_life);
  a.at = t;
}

// What `rate` held for `span` adds to usage by its end, decayed meanwhile.
double FairShare::gained(double rate, Seconds span, Seconds half_life) {
  if (!(span > 0) || !(rate > 0)) return 0;
  if (!(half_life > 0)) return rate * span;
  const double lambda = std::log(2.0) / half_life;
  return rate * (1 - std::exp(-lambda * span)) / lambda;
}

void FairShare::seen(std::int64_t user, std::int64_t group) { account(user).group = group; }

void FairShare::started(std::int64_t user, std::int64_t group, const GpuHolds& gpus, Seconds t) {
  Account& a = account(user);
  advance(a, t, half_life_s_);
  if (a.at < t) a.at = t;  // a new account starts now
  a.group = group;
  a.running += 1;
  for (const auto& h : gpus) {
    a.admitted_mib += h.booked_mib;
    if (occupied_) occupy(user, h, +1, t);
    else a.rate += charged_gpus(1, h.exclusive, h.booked_mib, h.total_mib);
  }
}

void FairShare::stopped(std::int64_t user, const GpuHolds& gpus, Seconds t) {
  Account& a = account(user);
  advance(a, t, half_life_s_);
  for (const auto& h : gpus) {
    a.admitted_mib = std::max<MiB>(0, a.admitted_mib - h.booked_mib);
    if (occupied_) occupy(user, h, -1, t);
    else a.rate = std::max(0.0, a.rate - charged_gpus(1, h.exclusive, h.booked_mib, h.total_mib));
  }
  if (a.running > 0) a.running -= 1;
  if (a.running == 0) a.rate = 0;  // no rounding left over
}

// A GPU's time goes to the jobs on it by their bookings; with nothing booked (no estimate
// and no floor), by their number.
double FairShare::share_of(const GpuLoad& g, std::int64_t user) {
  auto it = g.users.find(user);
  if (it == g.users.end()) return 0;
  if (g.booked_mib > 0) return static_cast<double>(it->second.first) / static_cast<double>(g.booked_mib);
  return g.jobs > 0 ? static_cast<double>(it->second.second) / g.jobs : 0;
}

void FairShare::occupy(std::int64_t user, const GpuHold& h, int sign, Seconds t) {
  GpuLoad& g = gpus_[{h.server, h.gpu}];
  // Everyone on the GPU is charged at the old split up to now, then at the new one.
  for (const auto& [u, held] : g.users) {
    Account& other = account(u);
    advance(other, t, half_life_s_);
    other.rate = std::max(0.0, other.rate - share_of(g, u));
  }
  auto& mine = g.users[user];
  mine.first += sign * h.booked_mib;
  mine.second += sign;
  g.booked_mib += sign * h.booked_mib;
  g.jobs += sign;
  if (mine.second <= 0) g.users.erase(user);
  for (const auto& [u, held] : g.users) account(u).rate += share_of(g, u);
  if (g.users.empty()) gpus_.erase({h.server, h.gpu});
}

void FairShare::rebuild(std::vector<PastHold> attempts) {
  // A user's group is the one its latest job came with (seen()), not its old attempts'.
  std::map<std::int64_t, std::int64_t> groups;
  for (auto& [u, a] : accounts_) {
    if (a.group >= 0) groups[u] = a.group;
    a = Account{.group = a.group};
  }
  gpus_.clear();
  runs_.clear();
  run_sums_.clear();
  // Starts and ends in time order; at one instant ends first (what ended left room for
  // what started; no time passes between them, so nothing is charged by the order).
  struct Event {
    Seconds t;
    bool start;
    std::size_t i;
  };
  std::vector<Event> events;
  for (std::size_t i = 0; i < attempts.size(); ++i) {
    const auto& a = attempts[i];
    if (a.to && !(*a.to > a.from)) continue;
    events.push_back({a.from, true, i});
    if (a.to) events.push_back({*a.to, false, i});
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& x, const Event& y) { return x.t != y.t ? x.t < y.t : (!x.start && y.start); });
  for (const auto& e : events) {
    const PastHold& a = attempts[e.i];
    if (e.start) {
      started(a.user, a.group, a.gpus, e.t);
    } else {
      stopped(a.user, a.gpus, e.t);
      ran(a.user, e.t - a.from, e.t);
    }
  }
  for (const auto& [u, g] : groups) accounts_[u].group = g;
}

double FairShare::usage(std::int64_t user, Seconds t) const {
  auto it = accounts_.find(user);
  if (it == accounts_.end()) return 0;
  Account a = it->second;
  advance(a, t, half_life_s_);
  return a.usage;
}

double FairShare::charged(std::int64_t user, Seconds t) const {
  auto it = accounts_.find(user);
  if (it == accounts_.end()) return 0;
  Account a = it->second;
  advance(a, t, half_life_s_);
  return a.charged;
}

// Two levels, as Slurm's classic tree with groups as accounts: a group's weight among the
// groups seen, times the user's among its group's users seen.
double FairShare::shares(std::int64_t user) const {
  auto weight_of = [](const std::map<std::int64_t, double>& m, std::int64_t id, double other) {
    auto it = m.find(id);
    return it == m.end() ? other : it->second;
  };
  auto group_of = [this](const Account& a) { return groups_ ? a.group : std::int64_t{-1}; };
  const auto me = accounts_.find(user);
  const std::int64_t group = me == accounts_.end() ? -1 : group_of(me->second);
  std::set<std::int64_t> groups;
  double users_in_group = 0;
  for (const auto& [u, a] : accounts_) {
    groups.insert(group_of(a));
    if (group_of(a) == group) users_in_group += weight_of(w_.users, u, w_.other_user);
  }
  if (me == accounts_.end()) {
    groups.insert(group);
    users_in_group += weight_of(w_.users, user, w_.other_user);
  }
  double all_groups = 0;
  for (auto g : groups) all_groups += weight_of(w_.groups, g, w_.other_group);
  return weight_of(w_.groups, group, w_.other_group) / all_groups * weight_of(w_.users, user, w_.other_user) /
         users_in_group;
}

std::map<std::int64_t, double> FairShare::factors(Seconds t, const std::map<std::int64_t, double>* extra) const {
  std::map<std::int64_t, double> usage;
  double total = 0;
  for (const auto& [u, a] : accounts_) {
    double x = this->usage(u, t);
    if (extra)
      if (auto it = extra->find(u); it != extra->end()) x += it->second;
    total += usage[u] = x;
  }
  std::map<std::int64_t, double> out;
  for (const auto& [u, a] : accounts_) {
    const double norm = total > 0 ? usage[u] / total : 0;
    out[u] = std::exp2(-norm / shares(u));
  }
  return out;
}

void FairShare::ran(std::int64_t user, Seconds seconds, Seconds t) {
  // An attempt that held no time is not counted (FairShare::rebuild skips it too).
  if (!counts_committed() || !(seconds > 0) || !std::isfinite(seconds)) return;
  run_sums_[user].seconds += seconds;
  run_sums_[user].n += 1;
  if (!(half_life_s_ > 0)) return;  // usage never decays: every attempt counts, none is kept
  runs_.push_back({t, seconds, user});  // kept only to be forgotten past the horizon
  const Seconds horizon = t - kUsageHorizonHalfLives * half_life_s_;
  while (!runs_.empty() && runs_.front().end < horizon) {
    const Ran& old = runs_.front();
    RunSum& mine = run_sums_[old.user];
    mine.seconds -= old.seconds;
    if (--mine.n <= 0) run_sums_.erase(old.user);  // (no rounding left over)
    runs_.pop_front();
  }
}

// The user's own attempts only: another user's run times never commit this one (a user
// running long jobs cannot make a newcomer's jobs count as long).
std::optional<Seconds> FairShare::mean_run_time(std::int64_t user) const {
  if (auto it = run_sums_.find(user); it != run_sums_.end() && it->second.n > 0)
    return it->second.seconds / static_cast<double>(it->second.n);
  return std::nullopt;
}

// Its part of each GPU's charge now: under `booked` its booking's share of the GPU; under
// `occupied` its user's share of the GPU, split among the user's jobs there by booking.
double FairShare::job_rate(std::int64_t user, const Placement& p) const {
  if (!occupied_) return charged_gpus(p);
  double r = 0;
  for (const auto& part : p.parts)
    for (int gpu : part.launch.gpus) {
      const auto it = gpus_.find({part.server, gpu});
      if (it == gpus_.end()) continue;
      const GpuLoad& g = it->second;
      const auto mine = g.users.find(user);
      if (mine == g.users.end()) continue;
      const double of_mine = mine->second.first > 0 ? static_cast<double>(part.launch.admitted_mib) /
                                                          static_cast<double>(mine->second.first)
                                                    : 1.0 / std::max(1, mine->second.second);
      r += share_of(g, user) * of_mine;
    }
  return r;
}

double FairShare::expected_usage(std::int64_t user, const Placement& gpus, Seconds age,
                                 std::optional<Seconds> limit_left) const {
  const auto mean = mean_run_time(user);
  if (!mean) return 0;
  Seconds rest = std::max(0.0, *mean - age);
  if (limit_left) rest = std::min(rest, std::max(0.0, *limit_left));
  if (!(rest > 0)) return 0;
  return gained(job_rate(user, gpus), rest, half_life_s_);
}

double FairShare::factor(std::int64_t user, Seconds t) const {
  const auto all = factors(t);
  auto it = all.find(user);
  return it == all.end() ? 1.0 : it->second;
}

std::optional<std::string> FairShare::capped(std::int64_t user, std::optional<MiB> admitted_mib) const {
  auto it = accounts_.find(user);
  const int running = it == accounts_.end() ? 0 : it->second.running;
  const MiB booked = it == accounts_.end() ? 0 : it->second.admitted_mib;
  if (max_running_ > 0 && running >= max_running_)
    return fmt::format("its user's cap: {} jobs running (user_max_running_jobs = {})", running, max_running_);
  // Before placement (no booking known yet) only a user already at its cap waits.
  if (max_mem_mib_ > 0 && (admitted_mib ? booked + *admitted_mib > max_mem_mib_ : booked >= max_mem_mib_))
    return admitted_mib
               ? fmt::format("its user's cap: {} MiB of GPU memory booked, {} more would pass user_max_gpu_mem_mib = {}",
                             booked, *admitted_mib, max_mem_mib_)
               : fmt::format("its user's cap: {} MiB of GPU memory booked (user_max_gpu_mem_mib = {})", booked,
                             max_mem_mib_);
  return std::nullopt;
}

std::vector<std::int64_t> FairShare::users() const {
  std::vector<std::int64_t> out;
  for (const auto& [u, a] : accounts_) out.push_back(u);
  return out;
}

}  // namespace aegis
