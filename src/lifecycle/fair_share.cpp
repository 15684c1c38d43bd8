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
  if (half_life > 0) {
    const double lambda = std::log(2.0) / half_life;
    const double keep = std::exp(-lambda * dt);
    a.usage = a.usage * keep + a.rate * (1 - keep) / lambda;
  } else {
    a.usage += a.rate * dt;
  }
  a.at = t;
}

void FairShare::seen(std::int64_t user, std::int64_t group) { account(user).group = group; }

void FairShare::started(std::int64_t user, std::int64_t group, double gpu_share, MiB admitted_mib, Seconds t) {
  Account& a = account(user);
  advance(a, t, half_life_s_);
  if (a.at < t) a.at = t;  // a new account starts now
  a.group = group;
  a.rate += gpu_share;
  a.running += 1;
  a.admitted_mib += admitted_mib;
}

void FairShare::stopped(std::int64_t user, double gpu_share, MiB admitted_mib, Seconds t) {
  Account& a = account(user);
  advance(a, t, half_life_s_);
  a.rate = std::max(0.0, a.rate - gpu_share);
  if (a.running > 0) a.running -= 1;
  if (a.running == 0) a.rate = 0;  // no rounding left over
  a.admitted_mib = std::max<MiB>(0, a.admitted_mib - admitted_mib);
}

void FairShare::charged_before(std::int64_t user, std::int64_t group, double gpu_share, Seconds from, Seconds to) {
  if (!(to > from)) return;
  Account& a = account(user);
  if (a.group < 0) a.group = group;
  if (a.at < to) advance(a, to, half_life_s_);
  // Its integral decayed to the account's time: share / lambda (e^{-lambda (at - to)} - e^{-lambda (at - from)}).
  a.charged += gpu_share * (to - from);
  if (half_life_s_ > 0) {
    const double lambda = std::log(2.0) / half_life_s_;
    a.usage += gpu_share / lambda * (std::exp(-lambda * (a.at - to)) - std::exp(-lambda * (a.at - from)));
  } else {
    a.usage += gpu_share * (to - from);
  }
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

std::map<std::int64_t, double> FairShare::factors(Seconds t) const {
  std::map<std::int64_t, double> usage;
  double total = 0;
  for (const auto& [u, a] : accounts_) total += usage[u] = this->usage(u, t);
  std::map<std::int64_t, double> out;
  for (const auto& [u, a] : accounts_) {
    const double norm = total > 0 ? usage[u] / total : 0;
    out[u] = std::exp2(-norm / shares(u));
  }
  return out;
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
