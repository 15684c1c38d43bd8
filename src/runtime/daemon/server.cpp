#include "runtime/daemon/server.h"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdexcept>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace aegis {

namespace {

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

[[noreturn]] void sys_fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

}  // namespace

Server::Server(Daemon& d) : d_(d), socket_path_(d.config().daemon.socket) {
  // The socket's directory is created if missing; a stale socket file is replaced.
  const auto slash = socket_path_.rfind('/');
  if (slash != std::string::npos && slash > 0) mkdir(socket_path_.substr(0, slash).c_str(), 0755);
  sockaddr_un addr{};
  if (socket_path_.size() >= sizeof addr.sun_path) throw std::runtime_error("socket: path too long: " + socket_path_);
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) sys_fail("socket");
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path_.c_str(), sizeof addr.sun_path - 1);
  unlink(socket_path_.c_str());
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) sys_fail("bind " + socket_path_);
  const auto mode = static_cast<mode_t>(std::stoul(d.config().daemon.socket_mode, nullptr, 8));
  chmod(socket_path_.c_str(), mode);
  if (listen(listen_fd_, 512) != 0) sys_fail("listen");

  if (d.config().daemon.metrics_port > 0) {
    metrics_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(metrics_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(static_cast<std::uint16_t>(d.config().daemon.metrics_port));
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(metrics_fd_, reinterpret_cast<sockaddr*>(&in), sizeof in) != 0 || listen(metrics_fd_, 16) != 0)
      sys_fail(fmt::format("metrics port {}", d.config().daemon.metrics_port));
  }

  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, s);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  signal_fd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd_ < 0) sys_fail("signalfd");

  timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer_fd_ < 0) sys_fail("timerfd");
  const double period = 1.0 / d.config().engine.telemetry_sample_hz;
  itimerspec its{};
  its.it_interval.tv_sec = static_cast<time_t>(period);
  its.it_interval.tv_nsec = static_cast<long>((period - std::floor(period)) * 1e9);
  its.it_value = its.it_interval;
  timerfd_settime(timer_fd_, 0, &its, nullptr);
}

Server::~Server() {
  for (int fd : {listen_fd_, metrics_fd_, signal_fd_, timer_fd_})
    if (fd >= 0) close(fd);
  unlink(socket_path_.c_str());
}

void Server::accept_clients() {
  while (true) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      close(fd);
      continue;
    }
    clients_.push_back(Client{fd, Caller{cred.uid, cred.gid, cred.pid}, {}, {}, false});
  }
}

void Server::read_client(Client& c) {
  char buf[65536];
  while (true) {
    const ssize_t n = read(c.fd, buf, sizeof buf);
    if (n > 0) {
      c.in.append(buf, static_cast<std::size_t>(n));
      if (c.in.size() > api::kMaxRequestBytes + 1 && c.in.find('\n') == std::string::npos) {
        c.out += nlohmann::json{{"ok", false}, {"error", fmt::format("request: longer than {} bytes", api::kMaxRequestBytes)}}.dump() + "\n";
        c.in.clear();
        c.closing = true;
        return;
      }
      continue;
    }
    if (n == 0) c.closing = true;
    return;  // EAGAIN or error
  }
}

void Server::write_client(Client& c) {
  while (!c.out.empty()) {
    const ssize_t n = write(c.fd, c.out.data(), c.out.size());
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {  // the client went away: drop what it will never read
      c.out.clear();
      c.closing = true;
      return;
    }
    c.out.erase(0, static_cast<std::size_t>(n));
  }
}

void Server::serve_metrics() {
  const int fd = accept4(metrics_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  // Any request gets the metrics; a scraper's request is read and ignored.
  timeval tv{0, 200000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[4096];
  (void)!read(fd, buf, sizeof buf);
  const std::string body = d_.metrics_text();
  const std::string resp = fmt::format(
      "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
      body.size(), body);
  (void)!write(fd, resp.data(), resp.size());
  close(fd);
}

void Server::run() {
  auto& clients = clients_;
  d_.sample_and_schedule(wall_now());
  bool stop = false;
  while (!stop) {
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}, {signal_fd_, POLLIN, 0}, {timer_fd_, POLLIN, 0}};
    if (metrics_fd_ >= 0) fds.push_back({metrics_fd_, POLLIN, 0});
    const std::size_t first_client = fds.size();
    for (auto& c : clients) fds.push_back({c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
    if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) sys_fail("poll");

    if (fds[1].revents & POLLIN) {
      signalfd_siginfo si{};
      while (read(signal_fd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) stop = true;
      }
      while (waitpid(-1, nullptr, WNOHANG) > 0) {
      }  // shims end: their exit records are read at the next sample
    }
    bool tick = false;
    if (fds[2].revents & POLLIN) {
      std::uint64_t expirations = 0;
      (void)!read(timer_fd_, &expirations, sizeof expirations);
      tick = true;
    }
    if (metrics_fd_ >= 0 && (fds[3].revents & POLLIN)) serve_metrics();
    if (fds[0].revents & POLLIN) accept_clients();

    // Every complete request line from every client, handled in one transaction.
    bool changed = false;
    std::size_t i = first_client;
    bool in_tx = false;
    for (auto& c : clients) {
      if (i < fds.size() && fds[i].fd == c.fd && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) read_client(c);
      ++i;
      std::size_t nl;
      while ((nl = c.in.find('\n')) != std::string::npos) {
        const std::string line = c.in.substr(0, nl);
        c.in.erase(0, nl + 1);
        if (!in_tx) {
          d_.store().begin();
          in_tx = true;
        }
        const auto parsed = api::parse_request(line);
        nlohmann::json reply;
        if (auto* e = std::get_if<api::ParseError>(&parsed)) {
          reply = {{"ok", false}, {"error", e->message}};
        } else {
          const auto& req = std::get<api::Request>(parsed);
          changed |= std::holds_alternative<api::SubmitRequest>(req) || std::holds_alternative<api::CancelRequest>(req);
          reply = d_.handle(req, c.caller);
        }
        c.out += reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
      }
    }
    if (in_tx) d_.store().commit();  // durable before any reply leaves
    const double now = wall_now();
    d_.send_cancel_signals(now);
    for (auto& c : clients) write_client(c);
    for (auto it = clients.begin(); it != clients.end();) {
      if (it->closing && it->out.empty()) {
        close(it->fd);
        it = clients.erase(it);
      } else {
        ++it;
      }
    }
    if (tick) d_.sample_and_schedule(now);
    else if (changed) d_.schedule(now);
  }
  for (auto& c : clients) close(c.fd);
  clients.clear();
}

}  // namespace aegis
