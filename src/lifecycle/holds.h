// What holds a queued job back besides the GPUs (issue 32, items 3 and 4; docs/lab-policies.md):
// its dependencies (`--after ID[:ok|any|failed]`) and its array (`--array 0-49%8`: element 0
// runs first as a probe, the others wait for its peak and then get it, plus the margin, as
// their memory floor; `%N` caps how many run at once). Pure, owned by the Lifecycle, which
// asks `held()` for each queued job before placing it: a held job keeps its place and blocks
// nothing behind it. A dependency that can no longer be met cancels the job (`doomed()`).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/job_state.h"
#include "core/units.h"

namespace aegis {

struct LifeJob;
struct EngineConfig;

enum class AfterKind { Ok, Any, Failed };
std::string_view to_string(AfterKind k);
// "ok", "any", "failed"; empty if unknown.
std::optional<AfterKind> parse_after_kind(std::string_view s);

// One dependency: the job may start only after `job` ended as `kind` asks (ok: completed;
// failed: failed or cancelled; any: any end).
struct After {
  JobId job = 0;
  AfterKind kind = AfterKind::Ok;
  bool operator==(const After&) const = default;
};

// What a driver says of a job beside its spec: its dependencies and its array's cap.
struct JobLinks {
  std::vector<After> after;  // an array's id stands for all its elements (expanded at submit)
  int array_limit = 0;       // %N: at most this many of its array's elements at once (0: no cap)
};

class Holds {
 public:
  using Lookup = std::function<LifeJob*(JobId)>;

  // Whether any job has links: when none has, the Lifecycle asks nothing (published loop).
  bool active() const { return active_; }
  // From now on, keep the final state of every job that ends (a driver that will submit
  // links to jobs it has already forgotten: the simulator, for a trace with links).
  void activate() { active_ = true; }

  // A job arrives (or is restored) with its links. Dependencies on an array's id become
  // dependencies on each of its elements known so far.
  void add(const LifeJob& j, const JobLinks& links);
  // Its dependencies after expansion (what a driver persists).
  std::vector<After> after_of(JobId id) const;
  int array_limit_of(JobId array) const;
  // A job reached a final state (the Lifecycle's finish), or a driver tells the final state
  // of a job it no longer holds (after a restart).
  void finished(JobId id, JobState s);
  // The same of an array's element the lifecycle never held (it ended before a restart).
  void ended_element(JobId id, JobId array_id, int index, JobState s);
  // Memory its processes use now (the largest per GPU), at t: the probe's peak is learned
  // from these (observe() in aegisd; the simulator tells its job's true peak at first activity).
  // A rise of no more than `tolerance` is not growth (anchor_plateau_tolerance_mib).
  void memory(const LifeJob& j, MiB mib, Seconds t, MiB tolerance);
  // When held() will find the peak of j's array's probe reached, if its memory grows no more
  // (its last growth or first activity, plus array_probe_settle_s): a driver that passes only
  // when something happens (the simulator) must ask again then. Empty unless j is the probe
  // of an array not yet settled, with readings of this attempt and a first activity.
  std::optional<Seconds> peak_due(const LifeJob& j, const EngineConfig& c) const;
  void forget(JobId id);
  // A queued element whose floor is the one its array gave, when no GPU here could offer it
  // (the probe's peak fits a GPU, the margin does not): it is sent alone on idle GPUs instead
  // (recovery.exclusive_only, floor 0), where its probe's peak fits. Whether it was.
  bool drop_floor(LifeJob& j) const;

  // A queued job with a dependency that can no longer be met: the reason to cancel it.
  std::optional<std::string> doomed(const LifeJob& j, const Lookup& find) const;
  // Why a queued job must wait (a dependency not yet met, its array's probe not yet at its
  // peak, its array at its cap); empty: it may be placed. When the probe has reached its
  // peak, this sets every waiting element's floor (recovery.floor_mib) and reports each in
  // `floored` (the driver persists them). `wake` gets the time a probe's peak will be reached.
  // With `array_probe` off (EngineConfig) no element waits for a probe; the cap still holds.
  std::optional<std::string> held(LifeJob& j, Seconds now, const EngineConfig& c, const Lookup& find,
                                  std::vector<JobId>& floored, std::optional<Seconds>& wake);
  // A queued element that no GPU can take now, with the floor its array gave it (or sent alone
  // by drop_floor()), while another element of its array runs: why it is passed over
  // instead of blocking the queue (array_floor_pass_over). Empty: it blocks as any head does,
  // so an array with none running always progresses. Needs begin_pass() this pass.
  std::optional<std::string> passed_over(const LifeJob& j, const EngineConfig& c) const;
  // Counts of running elements are made once per pass (schedule()) and kept up to date
  // by started() as the pass starts jobs.
  void begin_pass(const Lookup& find);
  void started(const LifeJob& j);

 private:
  struct Array {
    std::map<int, JobId> elements;  // index -> job
    int limit = 0;
    int running = 0;                // this pass
    bool settled = false;           // the probe's peak is known (or given up on): elements released
    // The current probe's readings: its attempt, largest memory, when it last grew.
    std::optional<JobId> probe;     // (job ids start at 0 in the simulator)
    int attempt = 0;
    MiB max_mib = 0;
    MiB mark_mib = 0;               // the level it last grew to
    Seconds grew_at = 0;
  };
  // Whether j's floor, or its running alone, is its array's doing (not the OOM ladder's).
  static bool floor_from_array(const LifeJob& j, const Array& a);
  // The probe an array waits for (the first element not ended without a peak); none left: empty.
  std::optional<JobId> probe_of(Array& a, const Lookup& find) const;
  void settle(Array& a, std::optional<MiB> peak, const EngineConfig& c, const Lookup& find,
              std::vector<JobId>& floored);
  std::optional<JobState> final_state(JobId id, const Lookup& find) const;

  bool active_ = false;
  std::map<JobId, std::vector<After>> after_;  // waiting jobs' dependencies
  std::map<JobId, Array> arrays_;              // by array id (its element 0's job id)
  std::map<JobId, JobState> finals_;           // jobs that ended (kept while holds are active)
};

}  // namespace aegis
