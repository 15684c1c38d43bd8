#include "apps/aegis/client.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace aegis::cli {

namespace {
constexpr const char* kDefaultSocket = "/run/aegis/aegisd.sock";
}

std::string short_hostname() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string h = host;
  return h.substr(0, h.find('.'));
}

std::string socket_path(const std::string& flag) {
  std::string path = kDefaultSocket;
  if (!flag.empty()) path = flag;
  else if (const char* env = std::getenv("AEGIS_SOCKET"); env && *env) path = env;
  // %n: this node's name, for several Slurm nodes (one aegisd each) on one host.
  for (std::size_t at = path.find("%n"); at != std::string::npos; at = path.find("%n", at)) {
    std::string node;
    if (const char* n = std::getenv("SLURMD_NODENAME"); n && *n) {
      node = n;
    } else {
      node = short_hostname();
    }
    path.replace(at, 2, node);
    at += node.size();
  }
  return path;
}

nlohmann::json call(const std::string& path, const nlohmann::json& request) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) throw ClientError("--socket: path too long: " + path);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw ClientError(std::string("socket: ") + std::strerror(errno));
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    close(fd);
    if (err == EACCES)
      throw ClientError(fmt::format("permission denied on {}: ask the server's admin for access to aegisd", path));
    throw ConnectionError(fmt::format(
        "cannot reach aegisd at {} ({}); start it with `aegisd --config /etc/aegis/aegisd.toml`, or point "
        "--socket or AEGIS_SOCKET at its socket",
        path, std::strerror(err)), false);
  }
  const std::string line = request.dump() + "\n";
  for (std::size_t sent = 0; sent < line.size();) {
    const ssize_t n = write(fd, line.data() + sent, line.size() - sent);
    if (n <= 0) {
      close(fd);
      throw ConnectionError(std::string("sending to aegisd: ") + std::strerror(errno), sent > 0);
    }
    sent += static_cast<std::size_t>(n);
  }
  std::string reply;
  char buf[65536];
  while (reply.find('\n') == std::string::npos) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    reply.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  if (reply.empty()) throw ConnectionError("aegisd closed the connection without a reply", true);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(reply.substr(0, reply.find('\n')));
  } catch (const nlohmann::json::exception& e) {
    throw ClientError(std::string("unreadable reply from aegisd: ") + e.what());
  }
  if (!j.value("ok", false)) throw ClientError(j.value("error", std::string("request failed")));
  return j;
}

}  // namespace aegis::cli
