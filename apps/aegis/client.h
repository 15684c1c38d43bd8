// The aegis command line's connection to aegisd: one JSON request per line over the
// daemon's Unix socket (docs/api.md). Errors are one line a person can act on.
#pragma once
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace aegis::cli {

struct ClientError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// aegisd could not be reached, or went away before replying (it may be restarting).
struct ConnectionError : ClientError {
  ConnectionError(const std::string& what, bool received) : ClientError(what), maybe_received(received) {}
  bool maybe_received;  // the request may have reached the daemon (false: it was never sent)
};

// --socket, else AEGIS_SOCKET, else the default path; "%n" in it becomes the Slurm node's
// name (SLURMD_NODENAME), else the short host name.
std::string socket_path(const std::string& flag);

// This machine's host name up to the first dot (what Slurm node names usually are).
std::string short_hostname();

// Sends `request` and returns the reply's object when "ok" is true; throws ClientError
// with the daemon's message, or ConnectionError when it could not be reached.
nlohmann::json call(const std::string& socket, const nlohmann::json& request);

}  // namespace aegis::cli
