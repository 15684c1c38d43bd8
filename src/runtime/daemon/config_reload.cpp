#include "runtime/daemon/config_reload.h"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <type_traits>
#include <variant>

#include "sched/config_params.h"

namespace aegis {

namespace {

// Each of these is read from the running config where it is used (daemon_api.cpp,
// server.cpp, daemon_metrics.cpp, the launch file written per attempt), so a new value holds from the next
// request, connection or attempt on. Everything else is fixed at start: paths, sockets and
// ports already open, the GPUs, the store, the engine and its policy.
constexpr std::array<std::string_view, 11> kLive = {
    "admin_group",           "max_jobs_per_user", "max_connections_per_user", "request_timeout_s",
    "client_idle_timeout_s", "reply_timeout_s",   "log_max_bytes",            "log_tail_bytes",
    "log_min_free_bytes",    "metrics_max_jobs",  "priority_levels"};

}  // namespace

bool is_live_setting(std::string_view name) { return std::find(kLive.begin(), kLive.end(), name) != kLive.end(); }

void copy_live_settings(const DaemonSettings& from, DaemonSettings& to) {
  DaemonSettings source = from;  // ParamEntry::ref takes a mutable struct
  for (const auto& entry : daemon_param_table())
    if (is_live_setting(entry.name))
      std::visit(
          [](auto* dst, auto* src) {
            if constexpr (std::is_same_v<decltype(dst), decltype(src)>) *dst = *src;
          },
          entry.ref(to), entry.ref(source));
}

ReloadOutcome reload_config(const DaemonConfig& loaded, const DaemonConfig& wanted) {
  ReloadOutcome r{loaded, {}, {}};
  const auto now = describe_params<DaemonSettings>(daemon_param_table(), loaded.daemon);
  const auto next = describe_params<DaemonSettings>(daemon_param_table(), wanted.daemon);
  for (std::size_t i = 0; i < now.size(); ++i)
    if (now[i].value != next[i].value)
      (is_live_setting(now[i].name) ? r.applied : r.need_restart).emplace_back(now[i].name);
  copy_live_settings(wanted.daemon, r.config.daemon);
  const auto engine_now = describe(loaded.engine);
  const auto engine_next = describe(wanted.engine);
  for (std::size_t i = 0; i < engine_now.size(); ++i)
    if (engine_now[i].value != engine_next[i].value) r.need_restart.emplace_back(engine_now[i].name);
  return r;
}

std::string reload_summary(const ReloadOutcome& r) {
  std::string line = "aegisd: reload: ";
  if (r.applied.empty() && r.need_restart.empty()) return line + "no setting changed";
  if (!r.applied.empty()) line += fmt::format("applied {}", fmt::join(r.applied, ", "));
  if (!r.need_restart.empty())
    line += fmt::format("{}changed but kept until a restart (systemctl restart aegisd): {}",
                        r.applied.empty() ? "" : "; ", fmt::join(r.need_restart, ", "));
  return line;
}

}  // namespace aegis
