#include "apps/aegis/run_pool.h"

#include <atomic>
#include <fmt/format.h>
#include <thread>

#include "apps/aegis/progress.h"

namespace aegis::cli {

std::vector<SimResult> run_all(std::vector<RunSpec>& runs, unsigned threads) {
  std::vector<SimResult> results(runs.size());
  std::vector<std::string> errors(runs.size());
  ProgressBar bar(runs.size());
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const unsigned n = std::max(1u, std::min<unsigned>(threads ? threads : hw, static_cast<unsigned>(runs.size())));
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < runs.size(); i = next++) {
      runs[i].options.progress = [&bar, i](double f) { bar.set(i, f); };
      try {
        results[i] = simulate(*runs[i].catalog, *runs[i].trace, runs[i].options);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
      bar.set(i, 1.0);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < n; ++i) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (!errors[i].empty())
      throw SimError(fmt::format("{} on {}: {}", runs[i].options.policy_name, runs[i].trace->name, errors[i]));
  return results;
}

}  // namespace aegis::cli
