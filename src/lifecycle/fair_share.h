// Fair share (issue 32 item 2, docs/lab-policies.md "Fair share"): what each user used of
// the GPUs, decayed with a half-life, and Slurm's classic fair-share factor from it; and
// per-user caps. Pure: every call takes the time. The lifecycle charges a job from its start
// to its end (`fair_share_charge`: by the share of GPU memory it booked, or by its booking's
// share of each GPU it occupies) and orders its queues by level, then this factor, then FIFO;
// with `fair_share_committed` the factor also counts what running jobs are expected to add
// (the rest of their user's mean run time, learnt from ended attempts).
#pragma once
#include <cstdint>
#include <deque>
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

// One GPU a job holds, as the charge sees it: which (server, index), the memory booked for
// the job there, the GPU's capacity, and whether the job holds it exclusive.
struct GpuHold {
  int server = 0, gpu = 0;
  MiB booked_mib = 0, total_mib = 0;
  bool exclusive = false;
};
using GpuHolds = std::vector<GpuHold>;
GpuHolds gpu_holds(const Placement& p);

// An attempt that ran before this ledger began (aegisd's store at a restart), or one still
// running (no end): what FairShare::rebuild replays.
struct PastHold {
  std::int64_t user = 0, group = -1;
  GpuHolds gpus;
  Seconds from = 0;
  std::optional<Seconds> to;
};

// What a placement is charged: GPUs' worth (on each GPU its booked memory over the GPU's
// capacity, at most 1; a whole GPU when placed exclusive: nobody may join it) and the
// memory it books over all its GPUs.
double charged_gpus(const Placement& p);
double charged_gpus(int gpus, bool exclusive, MiB admitted_mib, MiB gpu_total_mib);  // one part
MiB booked_mib(const Placement& p);

// Ended attempts are remembered for this many half-lives after they end (older ones weigh
// less than 2^-10): aegisd reads back the attempts of this horizon at a restart, and the
// mean run time of `fair_share_committed` is over those that ended this long before the latest.
inline constexpr int kUsageHorizonHalfLives = 10;

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
  // A job of `user` holds `gpus` from `t` on; stopped() ends it. Calls come in time order.
  // Charged per GPU (`fair_share_charge`): `booked`, its booking over the GPU's capacity (a
  // whole GPU when exclusive); `occupied`, the GPU's time split among the jobs on it by
  // their bookings (alone on it, the whole GPU), so a job's charge moves as others come
  // and go.
  void started(std::int64_t user, std::int64_t group, const GpuHolds& gpus, Seconds t);
  void stopped(std::int64_t user, const GpuHolds& gpus, Seconds t);
  // The ledger again from attempts alone (aegisd at start: those its store kept, and the
  // running ones): every charge forgotten, then their starts and ends replayed in time
  // order, so each GPU is split as it was while they ran (users and groups seen are kept).
  void rebuild(std::vector<PastHold> attempts);

  // The user's usage at `t`, decayed (GPU-seconds), and all that was charged, undecayed.
  double usage(std::int64_t user, Seconds t) const;
  double charged(std::int64_t user, Seconds t) const;
  // Slurm's classic factor 2^(-U/S) in (0, 1]: U the user's share of all users' decayed
  // usage, S its normalised share (its group's weight among the groups seen, times its
  // weight among its group's users seen). Higher is served first.
  double factor(std::int64_t user, Seconds t) const;
  // Every user's factor at `t` at once (one pass orders by them): users not seen get 1.
  // `extra`: usage each user's running jobs are expected to add (expected_usage), counted
  // as if already used.
  std::map<std::int64_t, double> factors(Seconds t, const std::map<std::int64_t, double>* extra = nullptr) const;

  // --- What running jobs are committed to (`fair_share_committed`) ---------------------
  // Whether the order counts it: weights set and fair_share_committed = mean_run_time.
  bool counts_committed() const { return orders_ && committed_; }
  // An attempt of `user` that held GPUs for `seconds` ended at `t` (any outcome: what is
  // estimated is how long an attempt holds its GPUs; none that held no time, as rebuild()
  // replays none). Kept while counts_committed().
  void ran(std::int64_t user, Seconds seconds, Seconds t);
  // The mean run time of the user's own ended attempts remembered (kUsageHorizonHalfLives);
  // none before one ended (never another user's: no user's runs commit another).
  std::optional<Seconds> mean_run_time(std::int64_t user) const;
  // The usage a running job of `user` placed on `gpus`, `age` seconds after its launch, is
  // expected to add until it ends: its charge rate now (as started() set it) for what
  // remains of mean_run_time (nothing once it is older), no longer than its time limit
  // leaves (`limit_left`), decayed as usage is. 0 before an attempt of the user ended.
  double expected_usage(std::int64_t user, const Placement& gpus, Seconds age, std::optional<Seconds> limit_left) const;
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
  // Occupied mode: the user's share of one GPU now, and a change there at `t` (the
  // accounts of everyone on it advanced first, their rates moved by the change).
  struct GpuLoad {
    std::map<std::int64_t, std::pair<MiB, int>> users;  // user -> (booked MiB, jobs)
    MiB booked_mib = 0;
    int jobs = 0;
  };
  static double share_of(const GpuLoad& g, std::int64_t user);
  void occupy(std::int64_t user, const GpuHold& h, int sign, Seconds t);

  // The charge rate of one job of `user` on `gpus` now; usage `rate` adds over `span`
  // (advance()'s decay, and expected_usage()'s).
  double job_rate(std::int64_t user, const Placement& p) const;
  static double gained(double rate, Seconds span, Seconds half_life);

  bool orders_ = false, caps_ = false;
  bool occupied_ = false;  // fair_share_charge = occupied
  bool committed_ = false;  // fair_share_committed = mean_run_time
  // Ended attempts' run times (ran()), oldest end first, and their sums per user.
  struct Ran {
    Seconds end = 0, seconds = 0;
    std::int64_t user = 0;
  };
  struct RunSum {
    double seconds = 0;
    std::int64_t n = 0;
  };
  std::deque<Ran> runs_;  // with decay only: at most the attempts of kUsageHorizonHalfLives
  std::map<std::int64_t, RunSum> run_sums_;
  // Groups count only when group weights are set: on a system with a group per user (the
  // Debian default) each user would otherwise be alone in a group of weight 1, and the
  // user weights would have no effect.
  bool groups_ = false;
  ShareWeights w_;
  Seconds half_life_s_ = 0;
  MiB max_mem_mib_ = 0;
  int max_running_ = 0;
  std::map<std::int64_t, Account> accounts_;  // few users: a map, ordered for reports
  std::map<std::pair<int, int>, GpuLoad> gpus_;  // occupied mode: (server, GPU) -> who is on it
};

}  // namespace aegis
