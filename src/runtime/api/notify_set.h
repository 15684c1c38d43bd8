// Issue 32 item 6: the events a job's owner asks to be told of (`aegis submit --notify`,
// the API's and a YAML spec's `notify`), a small set with one spelling: parsed here, printed
// here, stored as the printed text (store/schema.h jobs.notify). Default: none.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace aegis::api {

// start: each attempt launched; oom: an attempt ran out of GPU memory, and the job's
// requeue (its recovery); end: completed; fail: failed for good; cancel: cancelled;
// eta: its expected start slipped by more than the daemon's notify_eta_slip_s.
enum class NotifyEvent : std::uint8_t { Start, Oom, End, Fail, Cancel, Eta };
inline constexpr std::array<std::string_view, 6> kNotifyEventNames = {"start", "oom", "end", "fail", "cancel", "eta"};

struct NotifySet {
  std::uint8_t bits = 0;
  bool has(NotifyEvent e) const { return (bits >> static_cast<int>(e)) & 1U; }
  void add(NotifyEvent e) { bits = static_cast<std::uint8_t>(bits | (1U << static_cast<int>(e))); }
  bool empty() const { return bits == 0; }
  bool operator==(const NotifySet&) const = default;
};

// "start,end", "all" (every event), "none" or "" (no event); case-sensitive, no spaces.
// On error the text says what is wrong without naming the field (callers prefix it).
std::variant<NotifySet, std::string> parse_notify(std::string_view text);

// The canonical text: the events in kNotifyEventNames order, comma-separated; "" for none.
std::string to_string(NotifySet s);

}  // namespace aegis::api
