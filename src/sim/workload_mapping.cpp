#include "sim/workload_mapping.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>

#include "sim/csv.h"
#include "sim/models/random.h"

namespace aegis {

namespace {

using Candidates = std::vector<const WorkloadProfile*>;
using ByCount = std::map<int, Candidates>;

// Keeps these draws apart from the simulator's other uses of the same seed.
constexpr std::uint64_t kMappingStream = 0x3a9b;

// Profiled workloads by GPU count, each list shortest solo runtime first (name breaks ties
// so that the order never depends on the catalog's row order).
ByCount profiled_by_count(const WorkloadCatalog& catalog) {
  ByCount by;
  for (const auto& [name, w] : catalog.all())
    if (w.problem.empty()) by[w.num_gpus].push_back(&w);
  for (auto& [count, list] : by)
    std::sort(list.begin(), list.end(), [](const WorkloadProfile* a, const WorkloadProfile* b) {
      return a->solo_runtime_s != b->solo_runtime_s ? a->solo_runtime_s < b->solo_runtime_s : a->name < b->name;
    });
  return by;
}

// The count itself when the catalog has it, else the nearest one (the smaller on a tie).
int nearest_count(const ByCount& by, int want) {
  int best = by.begin()->first;
  for (const auto& [count, list] : by)
    if (std::abs(count - want) < std::abs(best - want)) best = count;
  return best;
}

// A pod that asked for part of a GPU borrows a workload that would fit in that part; when
// none would, the lightest one, which is the closest to fitting.
Candidates fractional_candidates(const Candidates& single_gpu, double fraction) {
  Candidates fit;
  std::copy_if(single_gpu.begin(), single_gpu.end(), std::back_inserter(fit),
               [&](const WorkloadProfile* w) { return w->util <= fraction; });
  if (fit.empty()) {
    auto lighter = [](const WorkloadProfile* a, const WorkloadProfile* b) { return a->util < b->util; };
    fit.push_back(*std::min_element(single_gpu.begin(), single_gpu.end(), lighter));
  }
  return fit;
}

// Ranks the group's jobs by duration and gives each the candidate at its quantile. The
// draw spreads equal durations over neighbouring candidates and depends only on the seed
// and the job, so the input order never changes the result.
template <class PoolOf>
void assign_by_quantile(std::vector<TraceJob*>& members, std::uint64_t seed, PoolOf pool_of) {
  std::sort(members.begin(), members.end(), [](const TraceJob* a, const TraceJob* b) {
    return *a->duration_s != *b->duration_s ? *a->duration_s < *b->duration_s : a->index < b->index;
  });
  const double n = static_cast<double>(members.size());
  std::map<const WorkloadProfile*, WorkloadName> names;  // each looked up once, not per job
  for (std::size_t r = 0; r < members.size(); ++r) {
    TraceJob& j = *members[r];
    const Candidates& pool = pool_of(j);
    const double u = unit_uniform(hash_keys(seed, kMappingStream, static_cast<std::uint64_t>(j.index)));
    const double q = (static_cast<double>(r) + u) / n;
    const auto pick = static_cast<std::size_t>(std::floor(q * static_cast<double>(pool.size())));
    const WorkloadProfile* w = pool[std::min(pick, pool.size() - 1)];
    auto name = names.find(w);
    if (name == names.end()) name = names.emplace(w, WorkloadName(w->name)).first;
    j.workload = name->second;
  }
}

struct GroupKey {
  int count;
  bool fractional;
  auto operator<=>(const GroupKey&) const = default;
};

std::string describe(std::uint64_t seed, bool fractional, bool workload_runtime) {
  return fmt::format(
      "nearest runtime quantile among profiled workloads with the job's GPU count (nearest count when absent), "
      "seed {}{}; durations from {}",
      seed, fractional ? "; fractional requests borrow workloads using at most their fraction" : "",
      workload_runtime ? "the workloads' solo runtimes" : "the trace");
}

}  // namespace

std::string map_workloads(std::vector<TraceJob>& jobs, const WorkloadCatalog& catalog, std::uint64_t seed,
                          bool workload_runtime) {
  const ByCount by_count = profiled_by_count(catalog);
  if (by_count.empty())
    throw InputError(fmt::format("{}: no profiled workload for trace jobs to borrow", catalog.path()));

  std::map<GroupKey, std::vector<TraceJob*>> groups;
  bool any_fractional = false;
  for (auto& j : jobs) {
    if (!j.duration_s)
      throw InputError(
          fmt::format("job {} (line {}) has no duration, which the workload mapping ranks by", j.index, j.line));
    const bool fractional = j.gpu_fraction < 1.0;
    any_fractional = any_fractional || fractional;
    groups[{nearest_count(by_count, fractional ? 1 : j.num_gpus), fractional}].push_back(&j);
  }

  for (auto& [key, members] : groups) {
    const Candidates& base = by_count.at(key.count);
    if (!key.fractional) {
      assign_by_quantile(members, seed, [&](const TraceJob&) -> const Candidates& { return base; });
      continue;
    }
    std::map<double, Candidates> pools;  // requests repeat a few fractions many times
    assign_by_quantile(members, seed, [&](const TraceJob& j) -> const Candidates& {
      auto it = pools.find(j.gpu_fraction);
      if (it == pools.end()) it = pools.emplace(j.gpu_fraction, fractional_candidates(base, j.gpu_fraction)).first;
      return it->second;
    });
  }

  if (workload_runtime)
    for (auto& j : jobs) j.duration_s.reset();
  return describe(seed, any_fractional, workload_runtime);
}

}  // namespace aegis
