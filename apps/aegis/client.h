// The aegis command line's connection to aegisd: one JSON request per line over the
// daemon's Unix socket (docs/api.md). Errors are one line a person can act on.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

namespace aegis::cli {

struct ClientError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// aegisd could not be reached, went away before replying (it may be restarting), or did
// not answer in time (hung or overloaded).
struct ConnectionError : ClientError {
  ConnectionError(const std::string& what, bool received) : ClientError(what), maybe_received(received) {}
  bool maybe_received;  // the request may have reached the daemon (false: it was never sent)
};

// --socket, else AEGIS_SOCKET, else the default path; "%n" in it becomes the Slurm node's
// name (SLURMD_NODENAME), else the short host name.
std::string socket_path(const std::string& flag);

// This machine's host name up to the first dot (what Slurm node names usually are).
std::string short_hostname();

// How long one request may take, from connecting to the reply's last byte, in seconds.
inline constexpr double kDefaultTimeoutS = 30;
inline constexpr double kMinTimeoutS = 0.001;
inline constexpr double kMaxTimeoutS = 1e6;  // about 11 days: "wait as long as it takes"

// A timeout written as a number of seconds (`2`, `0.5`) in [kMinTimeoutS, kMaxTimeoutS];
// empty for anything else.
std::optional<double> parse_timeout(const std::string& text);
// What a bad timeout is told: "'abc' is not a number of seconds between 0.001 and 1000000".
std::string bad_timeout(const std::string& text);

// --timeout when given (`flag` > 0), else AEGIS_TIMEOUT, else kDefaultTimeoutS. Throws
// ConfigError naming AEGIS_TIMEOUT when it is not a number of seconds in range.
double request_timeout(double flag);

// Sends `request` and returns the reply's object when "ok" is true; throws ClientError
// with the daemon's message, or ConnectionError when it could not be reached or did not
// answer within `timeout_s` (connect, send and reply together).
nlohmann::json call(const std::string& socket, const nlohmann::json& request, double timeout_s);

}  // namespace aegis::cli
