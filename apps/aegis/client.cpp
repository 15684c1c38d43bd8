#include "apps/aegis/client.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

#include "core/param_table.h"

namespace aegis::cli {

namespace {

constexpr const char* kDefaultSocket = "/run/aegis/aegisd.sock";
using Clock = std::chrono::steady_clock;

// One request's connection to aegisd. The socket is non-blocking and every step waits
// with poll against one deadline: a daemon that is hung (accepts and never answers, or
// stops accepting and lets its backlog fill) must not hang `aegis` with it.
class Connection {
 public:
  Connection(std::string path, double timeout_s)
      : path_(std::move(path)),
        timeout_s_(timeout_s),
        deadline_(Clock::now() +
                  std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s))) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() {
    if (fd_ >= 0) close(fd_);
  }

  void open();
  void send_all(const std::string& data);
  std::string read_line();

 private:
  int ms_left() const;
  void wait_for(short events);
  void wait_for_backlog();
  [[noreturn]] void timed_out() const;
  [[noreturn]] void unreachable(int err) const;

  std::string path_;
  double timeout_s_;
  Clock::time_point deadline_;
  int fd_ = -1;
  bool sent_any_ = false;  // once a byte is out, the daemon may have acted on the request
  int backoff_ms_ = 5;
};

// Milliseconds to the deadline for poll, rounded up so that a wait never spins at 0.
int Connection::ms_left() const {
  const double ms = std::chrono::duration<double, std::milli>(deadline_ - Clock::now()).count();
  return ms <= 0 ? 0 : static_cast<int>(std::min<double>(std::ceil(ms), INT_MAX));
}

void Connection::timed_out() const {
  throw ConnectionError(fmt::format("aegisd at {} did not answer within {:g} s (it may be hung or overloaded); "
                                    "--timeout or AEGIS_TIMEOUT sets the limit",
                                    path_, timeout_s_),
                        sent_any_);
}

void Connection::unreachable(int err) const {
  if (err == EACCES)
    throw ClientError(fmt::format("permission denied on {}: ask the server's admin for access to aegisd", path_));
  throw ConnectionError(fmt::format(
      "cannot reach aegisd at {} ({}); start it with `aegisd --config /etc/aegis/aegisd.toml`, or point "
      "--socket or AEGIS_SOCKET at its socket",
      path_, std::strerror(err)), false);
}

// Until the socket is ready for `events` (or has an error the next call reports).
void Connection::wait_for(short events) {
  while (true) {
    const int ms = ms_left();
    if (ms == 0) timed_out();
    pollfd p{fd_, events, 0};
    const int n = poll(&p, 1, ms);
    if (n > 0) return;
    if (n < 0 && errno != EINTR)
      throw ConnectionError(std::string("waiting for aegisd: ") + std::strerror(errno), sent_any_);
  }
}

// A Unix socket's connect fails with EAGAIN, and cannot be polled for, while the
// listener's backlog is full: the daemon is not accepting. Retry, a little slower each
// time, until the deadline.
void Connection::wait_for_backlog() {
  const int ms = ms_left();
  if (ms == 0) timed_out();
  backoff_ms_ = std::min(backoff_ms_ * 2, 100);
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, backoff_ms_)));
}

void Connection::open() {
  sockaddr_un addr{};
  if (path_.size() >= sizeof addr.sun_path) throw ClientError("--socket: path too long: " + path_);
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw ClientError(std::string("socket: ") + std::strerror(errno));
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
  while (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    if (err == EAGAIN) {
      wait_for_backlog();
      continue;
    }
    if (err != EINPROGRESS && err != EALREADY && err != EINTR) unreachable(err);
    wait_for(POLLOUT);
    int so_error = 0;
    socklen_t len = sizeof so_error;
    if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) unreachable(errno);
    if (so_error == 0) return;
    if (so_error != EAGAIN) unreachable(so_error);
    wait_for_backlog();
  }
}

void Connection::send_all(const std::string& data) {
  for (std::size_t sent = 0; sent < data.size();) {
    // MSG_NOSIGNAL: a daemon that closes on us is an error to report, not a SIGPIPE.
    const ssize_t n = send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      sent_any_ = true;
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      wait_for(POLLOUT);
    } else {
      throw ConnectionError(std::string("sending to aegisd: ") + std::strerror(errno), sent_any_);
    }
  }
}

// The reply up to and with its first newline, or what came before the daemon closed.
std::string Connection::read_line() {
  std::string reply;
  char buf[65536];
  std::size_t scanned = 0;  // a large reply is searched for its newline once, not per read
  while (reply.find('\n', scanned) == std::string::npos) {
    scanned = reply.size();
    const ssize_t n = read(fd_, buf, sizeof buf);
    if (n > 0) {
      reply.append(buf, static_cast<std::size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      wait_for(POLLIN);
    } else {
      break;  // closed, or reset: what arrived is all there is
    }
  }
  return reply;
}

}  // namespace

std::optional<double> parse_timeout(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !(v >= kMinTimeoutS && v <= kMaxTimeoutS)) return std::nullopt;  // NaN fails the range too
  return v;
}

std::string bad_timeout(const std::string& text) {
  return fmt::format("'{}' is not a number of seconds between {:g} and {:.0f}", text, kMinTimeoutS, kMaxTimeoutS);
}

double request_timeout(double flag) {
  if (flag > 0) return flag;
  const char* env = std::getenv("AEGIS_TIMEOUT");
  if (!env || !*env) return kDefaultTimeoutS;
  const auto v = parse_timeout(env);
  if (!v) throw ConfigError("AEGIS_TIMEOUT: " + bad_timeout(env));
  return *v;
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

nlohmann::json call(const std::string& path, const nlohmann::json& request, double timeout_s) {
  Connection c(path, timeout_s);
  c.open();
  c.send_all(request.dump() + "\n");
  const std::string reply = c.read_line();
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
