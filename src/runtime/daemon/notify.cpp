#include "runtime/daemon/notify.h"

#include <array>
#include <nlohmann/json.hpp>
#include <utility>

namespace aegis {

std::optional<NoticeKind> notice_kind(std::string_view change_event) {
  using E = api::NotifyEvent;
  static constexpr std::array<std::pair<std::string_view, NoticeKind>, 6> kinds = {{
      {"launch", {"start", E::Start}},
      {"oom", {"oom", E::Oom}},
      {"requeue", {"requeue", E::Oom}},
      {"completed", {"end", E::End}},
      {"failed", {"fail", E::Fail}},
      {"cancelled", {"cancel", E::Cancel}},
  }};
  for (const auto& [change, kind] : kinds)
    if (change == change_event) return kind;
  return std::nullopt;
}

namespace {

// The latest attempt that has ended (0: none): what an oom or a requeue is about, even when
// the same pass already launched the next one (the record is persisted after the pass).
int last_ended_attempt(const DaemonJob& rec) {
  for (auto it = rec.attempts.rbegin(); it != rec.attempts.rend(); ++it)
    if (it->ended_at) return it->number;
  return 0;
}

}  // namespace

Notice make_notice(const DaemonJob& rec, std::string_view event, std::string_view reason, Seconds now,
                   const std::map<std::string, double>& extra) {
  std::string why(reason.substr(0, kNoticeReasonMaxBytes));
  if (reason.size() > kNoticeReasonMaxBytes) why += "...";
  nlohmann::json j = {{"version", 1},
                      {"job", rec.id},
                      {"user", rec.user},
                      {"uid", rec.uid},
                      {"name", rec.request.name},
                      {"event", event},
                      {"state", to_string(rec.state)},
                      {"reason", why},
                      {"time", now},
                      {"attempt", rec.current() ? rec.current()->number : 0}};
  // A requeue put it back in a queue, and is about the attempt that ended, whatever the
  // rest of the pass did with it afterwards (started it again at once, say).
  if (event == "requeue") j["state"] = "queued";
  if (event == "requeue" || event == "oom") j["attempt"] = last_ended_attempt(rec);
  for (const auto& [k, v] : extra) j[k] = v;
  Notice n;
  n.job = rec.id;
  n.uid = rec.uid;
  n.gid = rec.gid;
  n.user = rec.user;
  n.event = std::string(event);
  // A cut reason may end inside a UTF-8 sequence: replaced, never thrown over.
  n.payload = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return n;
}

std::optional<Notice> notice_for(const DaemonJob& rec, std::string_view change_event, std::string_view detail,
                                 Seconds now) {
  const auto kind = notice_kind(change_event);
  if (!kind || !rec.request.notify.has(kind->asked_by)) return std::nullopt;
  return make_notice(rec, kind->event, detail.empty() ? std::string_view(rec.reason) : detail, now);
}

std::optional<double> EtaSlipWatch::update(JobId id, Seconds eta) {
  auto [it, fresh] = promised_.try_emplace(id, eta);
  if (fresh) return std::nullopt;
  const double slip = eta - it->second;
  if (slip > threshold_s_) {
    it->second = eta;
    return slip;
  }
  if (slip < 0) it->second = eta;
  return std::nullopt;
}

}  // namespace aegis
