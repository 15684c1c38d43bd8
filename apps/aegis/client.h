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

// --socket, else AEGIS_SOCKET, else the default path.
std::string socket_path(const std::string& flag);

// Sends `request` and returns the reply's object when "ok" is true; throws ClientError
// with the daemon's message (or why it could not be reached) otherwise.
nlohmann::json call(const std::string& socket, const nlohmann::json& request);

}  // namespace aegis::cli
