// Fair share (issue 32 item 2, docs/lab-policies.md "Fair share"): what each user used of
// the GPUs, decayed with a half-life, and Slurm's classic fair-share factor from it; and
// per-user caps. Pure: every call takes the time. The lifecycle charges a job from its start
// to its end by the share of GPU memory it booked (admitted / capacity, a whole GPU when
// placed exclusive) and orders its queues by priority level, then this factor, then FIFO.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/units.h"
#include "lifecycle/placer.h"
#include "sched/config.h"
#include "sched/share_weights.h"

namespace aegis {

// Weights by user and group id (aegisd: uid and gid; the simulator: its trace's numbers).
struct ShareWeights {
  std::map<std::int64_t, double> users, groups;
  double other_user = 1, other_group = 1;  // the `*` entry, else 1
};
// The config's names resolved by `id_of` (a driver's: aegisd asks the system, the
// simulator its trace); a name it cannot resolve is left out (no job of it can come).
ShareWeights resolve_share_weights(const EngineConfig& c,
                                   const std::function<std::optional<std::int64_t>(std::string_view, bool group)>& id_of);

// What a placement is charged: GPUs' worth (on each GPU its booked memory over the GPU's
// capacity, at most 1; a whole GPU when placed exclusive: nobody may join it) and the
// memory it books over all its GPUs.
double charged_gpus(const Placement& p);
double charged_gpus(int gpus, bool exclusive, MiB admitted_mib, MiB gpu_total_mib);  // one part
MiB booked_mib(const Placement& p);

// Whether the config asks for fair-share ordering (any weight) or a per-user cap.
bool fair_share_orders(const EngineConfig& c);
bool fair_share_caps(const EngineConfig& c);

class FairShare {
 public:
  FairShare() = default;
  FairShare(const EngineConfig& c, ShareWeights w);

  bool orders() const { return orders_; }
  bool caps() const { return caps_; }

  // A user's job arrived (its group is the last one it came with).
  void seen(std::int64_t user, std::int64_t group);
  // A job of `user` holds `gpu_share` GPUs' worth (sum over its GPUs of the booked share) and
  // `admitted_mib` booked memory from `t` on; stopped() ends it.
  void started(std::int64_t user, std::int64_t group, double gpu_share, MiB admitted_mib, Seconds t);
  void stopped(std::int64_t user, double gpu_share, MiB admitted_mib, Seconds t);
  // A job that held `gpu_share` from `from` to `to`, before this ledger began (aegisd's
  // store after a restart): its usage as decayed by now.
  void charged_before(std::int64_t user, std::int64_t group, double gpu_share, Seconds from, Seconds to);

  // The user's usage at `t`, decayed (GPU-seconds), and all that was charged, undecayed.
  double usage(std::int64_t user, Seconds t) const;
  double charged(std::int64_t user, Seconds t) const;
  // Slurm's classic factor 2^(-U/S) in (0, 1]: U the user's share of all users' decayed
  // usage, S its normalised share (its group's weight among the groups seen, times its
  // weight among its group's users seen). Higher is served first.
  double factor(std::int64_t user, Seconds t) const;
  // Every user's factor at `t` at once (one pass orders by them): users not seen get 1.
  std::map<std::int64_t, double> factors(Seconds t) const;
  // Why a job of `user` booking `admitted_mib` must wait for its own jobs (a cap), or nothing.
  std::optional<std::string> capped(std::int64_t user, std::optional<MiB> admitted_mib) const;

  // Users charged or seen, ascending (for reports).
  std::vector<std::int64_t> users() const;

 private:
  struct Account {
    std::int64_t group = -1;
    double usage = 0;     // decayed, at `at`
    double charged = 0;   // undecayed, at `at`
    double rate = 0;      // GPU shares held now
    Seconds at = 0;
    int running = 0;
    MiB admitted_mib = 0;
  };
  Account& account(std::int64_t user);
  static void advance(Account& a, Seconds t, Seconds half_life);
  double shares(std::int64_t user) const;

  bool orders_ = false, caps_ = false;
  // Groups count only when group weights are set: on a system with a group per user (the
  // Debian default) each user would otherwise be alone in a group of weight 1, and the
  // user weights would have no effect.
  bool groups_ = false;
  ShareWeights w_;
  Seconds half_life_s_ = 0;
  MiB max_mem_mib_ = 0;
  int max_running_ = 0;
  std::map<std::int64_t, Account> accounts_;  // few users: a map, ordered for reports
};

}  // namespace aegis
