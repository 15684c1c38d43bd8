// `--checkpoint-signal SIG@SECONDS` (issue 32 item 1, request.h): the signal a job wants
// before a preemption and the seconds it may take to save a checkpoint.
#include <algorithm>
#include <array>
#include <charconv>
#include <csignal>
#include <fmt/format.h>
#include <string>
#include <utility>

#include "runtime/api/request.h"

namespace aegis::api {

namespace {

// Signals a job can catch and that mean nothing else to the shim; never KILL or STOP.
constexpr std::array<std::pair<std::string_view, int>, 10> kSignals = {{{"HUP", SIGHUP},
                                                                         {"INT", SIGINT},
                                                                         {"QUIT", SIGQUIT},
                                                                         {"USR1", SIGUSR1},
                                                                         {"USR2", SIGUSR2},
                                                                         {"ALRM", SIGALRM},
                                                                         {"TERM", SIGTERM},
                                                                         {"CONT", SIGCONT},
                                                                         {"URG", SIGURG},
                                                                         {"WINCH", SIGWINCH}}};

constexpr std::string_view kUsage = "must be SIGNAL@SECONDS, such as USR1@120";

}  // namespace

std::variant<CheckpointSignal, std::string> parse_checkpoint_signal(std::string_view text) {
  const auto at = text.find('@');
  if (at == std::string_view::npos || at == 0 || at + 1 == text.size()) return std::string(kUsage);
  std::string_view name = text.substr(0, at), lead = text.substr(at + 1);
  if (name.starts_with("SIG")) name.remove_prefix(3);
  CheckpointSignal out;
  int number = 0;
  if (auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), number);
      ec == std::errc{} && p == name.data() + name.size()) {
    for (const auto& [n, sig] : kSignals)
      if (sig == number) out.signal = sig;
  } else {
    for (const auto& [n, sig] : kSignals)
      if (n == name) out.signal = sig;
  }
  if (out.signal == 0)
    return fmt::format("'{}' is not a signal a job can catch here (HUP, INT, QUIT, USR1, USR2, ALRM, TERM, CONT, URG, "
                       "WINCH); {}",
                       text.substr(0, std::min<std::size_t>(at, 20)), kUsage);
  long seconds = 0;
  if (auto [p, ec] = std::from_chars(lead.data(), lead.data() + lead.size(), seconds);
      ec != std::errc{} || p != lead.data() + lead.size() || seconds < 1 ||
      seconds > static_cast<long>(kMaxCheckpointLeadS))
    return fmt::format("the lead time must be a whole number of seconds from 1 to {}; {}",
                       static_cast<long>(kMaxCheckpointLeadS), kUsage);
  out.lead_s = static_cast<double>(seconds);
  return out;
}

std::string checkpoint_signal_text(int signal, double lead_s) {
  std::string name = std::to_string(signal);
  for (const auto& [n, sig] : kSignals)
    if (sig == signal) name = std::string(n);
  return fmt::format("{}@{}", name, lead_s);
}

}  // namespace aegis::api
