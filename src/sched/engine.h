// The scheduling engine: a pure function from a Snapshot to Decisions. It reads no
// clock, opens no file and starts no process; the simulator and the daemon drive it.
// One tick: classify failures (recovery rule), then place queued jobs head first:
// idle GPUs to the head job alone (exclusive first), else the policy's filters and order.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "estimate/source.h"
#include "sched/config.h"
#include "sched/memory_accounting.h"
#include "sched/snapshot.h"
#include "sched/stage.h"

namespace aegis {

class Engine {
 public:
  // Validates the config (throws ConfigError) and composes the stages it names.
  explicit Engine(EngineConfig config);
  ~Engine();
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;

  Decisions tick(const Snapshot& s) const;

  // The recovery half of a tick on its own: what becomes of a job that failed. Drivers
  // that place jobs one at a time (the cluster simulator's dispatcher) use it directly;
  // tick() applies it to Snapshot::failures.
  std::variant<Requeue, Stop> recover(const Failure& f) const;

  const EngineConfig& config() const { return config_; }
  // True when some stage reads telemetry windows (pressure filter or LUG order):
  // drivers without telemetry changes may then skip re-evaluating.
  bool uses_telemetry() const { return uses_telemetry_; }
  // "memory > observing > pressure | magm | ladder", for logs and reports.
  std::string describe() const;

 private:
  EngineConfig config_;
  EstimateSource estimate_source_;
  MemoryAccounting accounting_;
  std::vector<std::unique_ptr<Filter>> filters_;
  std::unique_ptr<Order> order_;
  std::unique_ptr<RecoveryRule> recovery_;
  bool uses_telemetry_ = false;
};

}  // namespace aegis
