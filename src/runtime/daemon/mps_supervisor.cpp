#include "runtime/daemon/mps_supervisor.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "runtime/daemon/mps.h"

namespace aegis {

MpsSupervisor::MpsSupervisor(const DaemonSettings& s, std::vector<std::string> gpu_uuids, Seconds now)
    : s_(s), last_check_(now) {
  if (s.sharing != "mps" || s.mps_control != "managed") return;  // an external daemon is its admin's
  for (auto& u : gpu_uuids) gpus_.push_back(Watch{std::move(u), now, false, false, 0, 0, "", {}});
}

std::vector<std::string> MpsSupervisor::check(Seconds now, bool force) {
  std::vector<std::string> log;
  const bool due = force || now - last_check_ >= s_.mps_check_interval_s;
  if (due) last_check_ = now;
  for (auto& w : gpus_) {
    if (w.given_up) continue;
    if (!w.down) {
      if (!due) continue;
      if (mps_daemon_alive(s_, w.uuid)) {
        w.last_alive = now;
        continue;
      }
      w.down = true;
      w.failed_tries = 0;
      w.next_try = now;
      w.outages.emplace_back(w.last_alive, kOngoing);
      if (w.outages.size() > kOutagesKept) w.outages.pop_front();
      log.push_back(fmt::format("MPS control daemon of GPU {} is gone (a user's quit through its pipe, or a crash; "
                                "last seen running {:.1f} s ago); restarting it",
                                w.uuid, now - w.last_alive));
    }
    if (now >= w.next_try) restart(w, now, log);
  }
  return log;
}

void MpsSupervisor::restart(Watch& w, Seconds now, std::vector<std::string>& log) {
  const std::string error = restart_mps_daemon(s_, w.uuid);
  if (error.empty()) {
    w.down = false;
    w.last_alive = now;
    if (!w.outages.empty()) w.outages.back().second = now;
    log.push_back(fmt::format("MPS control daemon of GPU {} restarted ({:.1f} s after it was last seen running); "
                              "jobs that could not connect meanwhile are requeued, not counted against them",
                              w.uuid, now - (w.outages.empty() ? now : w.outages.back().first)));
    return;
  }
  w.last_error = error;
  ++w.failed_tries;
  if (w.failed_tries >= s_.mps_restart_limit) {
    w.given_up = true;
    log.push_back(fmt::format("MPS control daemon of GPU {} could not be restarted ({} tries in a row, last: {}); "
                              "no job is placed on that GPU until aegisd restarts",
                              w.uuid, w.failed_tries, error));
    return;
  }
  const Seconds wait = s_.mps_restart_backoff_s * std::pow(2.0, w.failed_tries - 1);
  w.next_try = now + wait;
  log.push_back(fmt::format("MPS control daemon of GPU {}: restart {} of {} failed ({}); next try in {:.1f} s", w.uuid,
                            w.failed_tries, s_.mps_restart_limit, error, wait));
}

std::string MpsSupervisor::unavailable(const std::string& gpu_uuid) const {
  for (const auto& w : gpus_) {
    if (w.uuid != gpu_uuid) continue;
    if (w.given_up)
      return fmt::format("its MPS control daemon could not be restarted ({} tries; last: {}); aegisd places no job "
                         "there until it restarts", w.failed_tries, w.last_error);
    if (w.down) return "its MPS control daemon stopped and is being restarted";
  }
  return "";
}

bool MpsSupervisor::outage_during(const std::string& gpu_uuid, Seconds from, Seconds to) const {
  for (const auto& w : gpus_)
    if (w.uuid == gpu_uuid)
      for (const auto& [a, b] : w.outages)
        if (from <= b && to >= a) return true;
  return false;
}

}  // namespace aegis
