// aegisd's Prometheus metrics (text format 0.0.4): the GPUs as the engine sees them, the
// queues, attempts by outcome, submissions and the latency of scheduling passes.
#include <algorithm>
#include <fmt/format.h>

#include "runtime/daemon/daemon.h"

namespace aegis {

std::string Daemon::metrics_text() const {
  std::string o;
  auto line = [&](const std::string& s) { o += s + "\n"; };
  line("# HELP aegis_gpu_memory_used_mib GPU memory in use (NVML)");
  line("# TYPE aegis_gpu_memory_used_mib gauge");
  for (const auto& g : gpus_) line(fmt::format("aegis_gpu_memory_used_mib{{gpu=\"{}\"}} {}", g.uuid, g.status.used_mib));
  line("# HELP aegis_gpu_memory_total_mib GPU memory capacity (NVML)");
  line("# TYPE aegis_gpu_memory_total_mib gauge");
  for (const auto& g : gpus_) line(fmt::format("aegis_gpu_memory_total_mib{{gpu=\"{}\"}} {}", g.uuid, g.status.total_mib));
  const auto reply = gpus_reply();
  line("# HELP aegis_gpu_risk Risk score of the telemetry window per metric (engine's pressure filter input)");
  line("# TYPE aegis_gpu_risk gauge");
  for (const auto& g : reply["gpus"])
    for (const char* m : {"smact", "smocc", "drama", "util"})
      line(fmt::format("aegis_gpu_risk{{gpu=\"{}\",metric=\"{}\"}} {}", g["uuid"].get<std::string>(), m,
                       g["risk"][m].get<double>()));
  line("# HELP aegis_gpu_jobs Jobs running on the GPU");
  line("# TYPE aegis_gpu_jobs gauge");
  for (const auto& g : reply["gpus"])
    line(fmt::format("aegis_gpu_jobs{{gpu=\"{}\"}} {}", g["uuid"].get<std::string>(), g["jobs"].size()));
  line("# HELP aegis_gpu_observing 1 while the GPU's observation window is closed");
  line("# TYPE aegis_gpu_observing gauge");
  for (const auto& g : reply["gpus"])
    line(fmt::format("aegis_gpu_observing{{gpu=\"{}\"}} {}", g["uuid"].get<std::string>(), g["observing"].get<bool>() ? 1 : 0));
  std::int64_t main_q = 0, rec_q = 0, running = 0;
  for (const auto& [id, j] : records_) {
    if (j.state == JobState::Running) ++running;
    else if (j.in_recovery_queue) ++rec_q;
    else ++main_q;
  }
  line("# HELP aegis_queue_length Jobs waiting, per queue");
  line("# TYPE aegis_queue_length gauge");
  line(fmt::format("aegis_queue_length{{queue=\"main\"}} {}", main_q));
  line(fmt::format("aegis_queue_length{{queue=\"recovery\"}} {}", rec_q));
  line("# HELP aegis_jobs_running Jobs running");
  line("# TYPE aegis_jobs_running gauge");
  line(fmt::format("aegis_jobs_running {}", running));
  line("# HELP aegis_attempts_total Job attempts that ended, by outcome (since the daemon started)");
  line("# TYPE aegis_attempts_total counter");
  for (const char* k : {"completed", "oom", "failed", "failed-start", "cancelled", "lost", "unknown"})
    line(fmt::format("aegis_attempts_total{{outcome=\"{}\"}} {}", k, stats_.outcomes.count(k) ? stats_.outcomes.at(k) : 0));
  line("# HELP aegis_oom_attempts_total Attempts that died of out-of-memory");
  line("# TYPE aegis_oom_attempts_total counter");
  line(fmt::format("aegis_oom_attempts_total {}", stats_.outcomes.count("oom") ? stats_.outcomes.at("oom") : 0));
  line("# HELP aegis_submissions_total Jobs accepted");
  line("# TYPE aegis_submissions_total counter");
  line(fmt::format("aegis_submissions_total {}", stats_.submissions));
  std::vector<double> v = stats_.recent_tick_seconds, e = stats_.recent_decide_seconds;
  std::sort(v.begin(), v.end());
  std::sort(e.begin(), e.end());
  auto quant = [](const std::vector<double>& x, double p) {
    return x.empty() ? 0.0 : x[static_cast<std::size_t>(p * static_cast<double>(x.size() - 1))];
  };
  auto q = [&](double p) { return quant(v, p); };
  line("# HELP aegis_decide_seconds Snapshot building and engine tick (no actions), recent passes");
  line("# TYPE aegis_decide_seconds summary");
  line(fmt::format("aegis_decide_seconds{{quantile=\"0.5\"}} {:.9f}", quant(e, 0.5)));
  line(fmt::format("aegis_decide_seconds{{quantile=\"0.99\"}} {:.9f}", quant(e, 0.99)));
  line(fmt::format("aegis_decide_seconds_count {}", e.size()));
  line("# HELP aegis_tick_seconds Scheduling pass latency (engine tick and actions), recent passes");
  line("# TYPE aegis_tick_seconds summary");
  line(fmt::format("aegis_tick_seconds{{quantile=\"0.5\"}} {:.9f}", q(0.5)));
  line(fmt::format("aegis_tick_seconds{{quantile=\"0.99\"}} {:.9f}", q(0.99)));
  line(fmt::format("aegis_tick_seconds_sum {:.9f}", stats_.tick_seconds_sum));
  line(fmt::format("aegis_tick_seconds_count {}", stats_.ticks));
  return o;
}

}  // namespace aegis
