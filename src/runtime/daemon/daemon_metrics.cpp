// aegisd's Prometheus metrics (text format 0.0.4): the GPUs as the engine sees them, the
// queues, attempts by outcome, submissions, the latency of scheduling passes, and series
// per running job (at most metrics_max_jobs of them, so that their number stays bounded).
#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <vector>

#include "runtime/daemon/daemon.h"

namespace aegis {

namespace {

// A label value as the text format wants it (user names come from the system, but who
// knows what an admin allowed in them).
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

}  // namespace

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
  line("# HELP aegis_gpu_telemetry_source 1 for the source of the GPU's activity metrics (gpm, dcgm, coarse, memory-only)");
  line("# TYPE aegis_gpu_telemetry_source gauge");
  for (const auto& g : reply["gpus"])
    line(fmt::format("aegis_gpu_telemetry_source{{gpu=\"{}\",source=\"{}\"}} 1", g["uuid"].get<std::string>(),
                     g["telemetry_source"].get<std::string>()));
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

  // Per running job: lowest ids first, at most metrics_max_jobs (a running job holds a
  // GPU, so there are few; the cap bounds the series whatever the collocation).
  std::map<std::string, double> smact_of;
  for (const auto& g : reply["gpus"])
    smact_of[g["uuid"].get<std::string>()] = g["smact"].is_number() ? g["smact"].get<double>() : -1;
  std::vector<const DaemonJob*> jobs;
  for (const auto& [id, j] : records_)
    if (j.state == JobState::Running && j.current()) jobs.push_back(&j);
  const auto cap = static_cast<std::size_t>(cfg_.daemon.metrics_max_jobs);
  const std::size_t dropped = jobs.size() > cap ? jobs.size() - cap : 0;
  jobs.resize(jobs.size() - dropped);
  line("# HELP aegis_job_memory_used_mib GPU memory of a running job's processes on one of its GPUs (NVML)");
  line("# TYPE aegis_job_memory_used_mib gauge");
  for (const auto* j : jobs) {
    const auto mem = job_memory_now_.find(j->id);
    for (const auto& uuid : j->current()->gpu_uuids) {
      MiB mib = 0;
      if (mem != job_memory_now_.end())
        if (auto it = mem->second.find(uuid); it != mem->second.end()) mib = it->second;
      line(fmt::format("aegis_job_memory_used_mib{{job=\"{}\",user=\"{}\",gpu=\"{}\"}} {}", j->id, label(j->user),
                       uuid, mib));
    }
  }
  line("# HELP aegis_job_gpu_sm_activity SM activity of a GPU a running job is on (NVML reports it per GPU, not "
       "per process; absent without GPM)");
  line("# TYPE aegis_job_gpu_sm_activity gauge");
  for (const auto* j : jobs)
    for (const auto& uuid : j->current()->gpu_uuids)
      if (auto it = smact_of.find(uuid); it != smact_of.end() && it->second >= 0)
        line(fmt::format("aegis_job_gpu_sm_activity{{job=\"{}\",user=\"{}\",gpu=\"{}\"}} {}", j->id,
                         label(j->user), uuid, it->second));
  line("# HELP aegis_job_state 1 for the state of a running job: starting (no GPU process seen yet) or active");
  line("# TYPE aegis_job_state gauge");
  for (const auto* j : jobs)
    line(fmt::format("aegis_job_state{{job=\"{}\",user=\"{}\",state=\"{}\"}} 1", j->id, label(j->user),
                     j->current()->first_activity ? "active" : "starting"));
  line("# HELP aegis_job_attempts Attempts of a running job so far, the current one included");
  line("# TYPE aegis_job_attempts gauge");
  for (const auto* j : jobs)
    line(fmt::format("aegis_job_attempts{{job=\"{}\",user=\"{}\"}} {}", j->id, label(j->user), j->attempts.size()));
  line("# HELP aegis_job_oom_recoveries Out-of-memory failures a running job has recovered from");
  line("# TYPE aegis_job_oom_recoveries gauge");
  for (const auto* j : jobs)
    line(fmt::format("aegis_job_oom_recoveries{{job=\"{}\",user=\"{}\"}} {}", j->id, label(j->user),
                     j->recovery.oom_count));
  line("# HELP aegis_job_series_dropped Running jobs without per-job series (beyond metrics_max_jobs)");
  line("# TYPE aegis_job_series_dropped gauge");
  line(fmt::format("aegis_job_series_dropped {}", dropped));
  line("# HELP aegis_attempts_total Job attempts that ended, by outcome (since the daemon started)");
  line("# TYPE aegis_attempts_total counter");
  for (const char* k : {"completed", "oom", "failed", "failed-start", "cancelled", "lost", "unknown"})
    line(fmt::format("aegis_attempts_total{{outcome=\"{}\"}} {}", k, stats_.outcomes.count(k) ? stats_.outcomes.at(k) : 0));
  line("# HELP aegis_oom_attempts_total Attempts that died of out-of-memory");
  line("# TYPE aegis_oom_attempts_total counter");
  line(fmt::format("aegis_oom_attempts_total {}", stats_.outcomes.count("oom") ? stats_.outcomes.at("oom") : 0));
  // Issue 33 item 6 (docs/daemon.md, "Nothing lost, nothing twice").
  line("# HELP aegis_lost_records_total Jobs found at start with attempts on disk but no (or an older) record");
  line("# TYPE aegis_lost_records_total counter");
  line(fmt::format("aegis_lost_records_total {}", stats_.lost_records));
  line("# HELP aegis_database_wal_lost Whether the database's write-ahead log was found lost at start");
  line("# TYPE aegis_database_wal_lost gauge");
  line(fmt::format("aegis_database_wal_lost {}", stats_.wal_lost ? 1 : 0));
  line("# HELP aegis_submissions_total Jobs accepted");
  line("# TYPE aegis_submissions_total counter");
  line(fmt::format("aegis_submissions_total {}", stats_.submissions));
  {  // issue 32 item 6
    const auto n = notifier_->counts();
    line("# HELP aegis_notifications_total Notifications by what became of them (delivered, failed, dropped: queue full)");
    line("# TYPE aegis_notifications_total counter");
    line(fmt::format("aegis_notifications_total{{result=\"delivered\"}} {}", n.delivered));
    line(fmt::format("aegis_notifications_total{{result=\"failed\"}} {}", n.failed));
    line(fmt::format("aegis_notifications_total{{result=\"dropped\"}} {}", n.dropped));
    line("# HELP aegis_notifications_waiting Notifications queued for delivery");
    line("# TYPE aegis_notifications_waiting gauge");
    line(fmt::format("aegis_notifications_waiting {}", n.waiting));
  }
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
