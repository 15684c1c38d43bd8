// Why a hand-written loop and not cpp-httplib (issue 33 item 6): httplib serves each
// connection on a worker thread from its first byte to its last, and its timeouts are per
// read. A client sending one header byte a second never reaches a timeout, so a handful of
// such clients held every worker (two per listener) and the dashboard stopped answering
// anyone for as long as they liked; more threads only raise the number needed. Here one
// thread polls every connection: a connection costs a descriptor and a buffer, never a
// thread, so the defence is a bound on each connection's life (the whole head within
// dashboard_timeout_s, the whole reply within it again), a bound on the head's size, and a
// bound on connections where the newcomer wins: when a listener is full, the connection
// that has been waiting longest for its head is dropped (then the oldest of any kind), not
// the newcomer. A browser sends its head at once, so it is served before the next
// newcomer could push it out. The routes and the feed are as before.
#include "runtime/daemon/dashboard_server.h"

#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "runtime/daemon/dashboard_http.h"

namespace aegis {

namespace {

namespace http = dashboard_http;
using Clock = std::chrono::steady_clock;

// Connections accepted per listener per pass, so that a connect flood cannot keep the loop
// from the connections it holds; at most half the limit, so that one pass's newcomers
// cannot push out a connection accepted in the same pass before its head is read.
constexpr std::size_t kAcceptsPerPass = 64;
// Out of descriptors: accepting pauses this long (the listen socket stays readable).
constexpr auto kAcceptPause = std::chrono::milliseconds(100);

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

namespace dashboard_conn {  // named: DashboardServer::Loop holds these

using Part = std::shared_ptr<const std::string> DashboardFeed::Replies::*;

enum class Stage { Head, Feed, Write };

struct Conn {
  int fd = -1;  // -1 once closed (removed at the end of the pass)
  std::size_t listener = 0;
  Stage stage = Stage::Head;
  std::uint64_t seq = 0;  // accept order: the oldest is the lowest
  Clock::time_point deadline;
  std::string in;  // the head so far, at most kMaxHead + 1 bytes
  std::string out;
  std::size_t sent = 0;
  bool head_only = false;
  Part part = nullptr;  // Feed: the reply waited for
  double asked = 0;     // Feed: when (the feed's clock)
};

}  // namespace dashboard_conn

using namespace dashboard_conn;

struct DashboardServer::Loop {
  Loop(const DaemonSettings& s, DashboardFeed& f, double tick_s)
      : settings(s),
        feed(f),
        timeout(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.dashboard_timeout_s))),
        // A reader waits at most two ticks for fresh replies (dashboard_feed.h), within its deadline.
        wait_s(std::min(2 * tick_s, s.dashboard_timeout_s)),
        max_conns(static_cast<std::size_t>(s.dashboard_max_connections)) {}
  ~Loop() { stop(); }

  void listen_on(const std::string& what, std::string& where);
  void start();
  void stop();

 private:
  void run();
  void accept_from(std::size_t l, Clock::time_point now);
  void make_room(std::size_t l);
  void read_head(Conn& c, Clock::time_point now);
  void dispatch(Conn& c, Clock::time_point now);
  void try_feed(Conn& c, Clock::time_point now);
  void reply(Conn& c, Clock::time_point now, int status, std::string_view type, std::string_view body);
  void write_out(Conn& c);

  const DaemonSettings settings;
  DashboardFeed& feed;
  const Clock::duration timeout;
  const double wait_s;
  const std::size_t max_conns;  // per listener
  struct Listener {
    int fd = -1;
    bool tcp = false;
    Clock::time_point paused_until{};
  };
  std::vector<Listener> listeners;
  std::vector<Conn> conns;
  std::uint64_t accepted = 0;
  int wake[2] = {-1, -1};  // the feed's publications and stop() write here
  std::atomic<bool> stopping{false};
  bool stopped = false;
  std::thread thread;
};

void DashboardServer::Loop::listen_on(const std::string& what, std::string& where) {
  const bool tcp = what == "dashboard_port";
  const std::string place = tcp ? fmt::format("127.0.0.1:{}", settings.dashboard_port) : settings.dashboard_socket;
  int fd = socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  bool ok = fd >= 0;
  if (ok && tcp) {
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(settings.dashboard_port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // loopback only, always
    ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  } else if (ok) {
    // main checked that the directory is root's alone; a stale socket file is replaced.
    unlink(place.c_str());
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, place.c_str(), place.size() + 1);  // length checked by check_dashboard_settings
    ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    if (ok) chmod(place.c_str(), static_cast<mode_t>(std::stoul(settings.dashboard_socket_mode, nullptr, 8)));
  }
  // The backlog holds connections the loop has not taken yet; they cost aegisd nothing.
  ok = ok && ::listen(fd, SOMAXCONN) == 0;
  if (!ok) {
    const int err = errno;
    if (fd >= 0) close(fd);
    throw ConfigError(fmt::format("{}: cannot listen on {} ({})", what, place, std::strerror(err)));
  }
  listeners.push_back({fd, tcp, {}});
  where += fmt::format("{}{}", where.empty() ? "" : " and ", place);
}

void DashboardServer::Loop::start() {
  if (pipe2(wake, O_NONBLOCK | O_CLOEXEC) != 0)
    throw ConfigError(fmt::format("dashboard: cannot create a pipe ({})", std::strerror(errno)));
  // Runs under the feed's lock (dashboard_feed.h); a full pipe already wakes the loop.
  feed.on_publish([fd = wake[1]] {
    const char c = 1;
    if (write(fd, &c, 1) < 0) {
    }
  });
  thread = std::thread([this] { run(); });
}

void DashboardServer::Loop::stop() {
  feed.on_publish(nullptr);  // no publication reaches the pipe after this
  if (thread.joinable()) {
    stopping = true;
    const char c = 1;
    if (write(wake[1], &c, 1) < 0) {
    }
    thread.join();
  }
  for (auto& c : conns) close_fd(c.fd);
  conns.clear();
  for (auto& l : listeners) close_fd(l.fd);
  listeners.clear();
  close_fd(wake[0]);
  close_fd(wake[1]);
  if (!stopped && !settings.dashboard_socket.empty()) unlink(settings.dashboard_socket.c_str());
  stopped = true;
}

void DashboardServer::Loop::run() {
  std::vector<pollfd> fds;
  while (!stopping) {
    auto now = Clock::now();
    // What each pollfd is: the pipe, then the listeners, then conns[i - 1 - listeners.size()].
    fds.assign(1, pollfd{wake[0], POLLIN, 0});
    auto next = now + std::chrono::seconds(1);  // a pause ends, or a deadline falls, sooner
    for (const auto& l : listeners) {
      const bool paused = l.paused_until > now;
      fds.push_back({paused ? -1 : l.fd, POLLIN, 0});
      if (paused) next = std::min(next, l.paused_until);
    }
    for (const auto& c : conns) {
      // A connection waiting for the feed is not polled: its hang-up would wake us without end.
      const short ev = c.stage == Stage::Head ? POLLIN : POLLOUT;
      fds.push_back({c.stage == Stage::Feed ? -1 : c.fd, ev, 0});
      next = std::min(next, c.deadline);
    }
    const auto wait_ms = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
    if (poll(fds.data(), fds.size(), static_cast<int>(std::max<std::int64_t>(0, wait_ms))) < 0 && errno != EINTR)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // cannot happen with valid fds; never spin
    if (stopping) break;
    now = Clock::now();
    if (fds[0].revents) {
      char buf[256];
      while (read(wake[0], buf, sizeof buf) > 0) {
      }
    }
    // The connections first (those accepted below are polled next pass), then the feed's
    // waiters, deadlines, and last the newcomers.
    const std::size_t first = 1 + listeners.size(), held = conns.size();
    for (std::size_t i = 0; i < held; ++i) {
      Conn& c = conns[i];
      const short rev = fds[first + i].revents;
      if (!rev || c.fd < 0) continue;
      if (c.stage == Stage::Head) read_head(c, now);
      else if (c.stage == Stage::Write) write_out(c);
    }
    for (auto& c : conns)
      if (c.fd >= 0 && c.stage == Stage::Feed) try_feed(c, now);
    for (auto& c : conns)
      if (c.fd >= 0 && now >= c.deadline) close_fd(c.fd);  // unfinished head, or a reply not read
    for (std::size_t l = 0; l < listeners.size(); ++l)
      if (fds[1 + l].revents) accept_from(l, now);
    std::erase_if(conns, [](const Conn& c) { return c.fd < 0; });
  }
}

void DashboardServer::Loop::accept_from(std::size_t l, Clock::time_point now) {
  const std::size_t per_pass = std::min(kAcceptsPerPass, std::max<std::size_t>(1, max_conns / 2));
  for (std::size_t n = 0; n < per_pass; ++n) {
    const int fd = accept4(listeners[l].fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        listeners[l].paused_until = now + kAcceptPause;
      return;  // EAGAIN: none left; ECONNABORTED and the like: the next pass
    }
    if (listeners[l].tcp) {
      const int one = 1;  // a reply leaves in one write; no wait for an ACK before its last bytes
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    make_room(l);
    Conn c;
    c.fd = fd;
    c.listener = l;
    c.seq = ++accepted;
    c.deadline = now + timeout;  // the whole head, not each read
    conns.push_back(std::move(c));
    read_head(conns.back(), now);  // a browser's head is usually there already
  }
}

// At the limit, the newcomer takes the place of the connection that has waited longest for
// its head (a slow or silent client: a browser sends its head at once); if every one has
// sent its head, of the oldest.
void DashboardServer::Loop::make_room(std::size_t l) {
  std::size_t open = 0;
  Conn *oldest_head = nullptr, *oldest = nullptr;
  for (auto& c : conns) {
    if (c.fd < 0 || c.listener != l) continue;
    ++open;
    if (!oldest || c.seq < oldest->seq) oldest = &c;
    if (c.stage == Stage::Head && (!oldest_head || c.seq < oldest_head->seq)) oldest_head = &c;
  }
  if (open < max_conns) return;
  close_fd(oldest_head ? oldest_head->fd : oldest->fd);
}

void DashboardServer::Loop::read_head(Conn& c, Clock::time_point now) {
  char buf[http::kMaxHead + 1];
  const ssize_t n = recv(c.fd, buf, http::kMaxHead + 1 - c.in.size(), 0);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    close_fd(c.fd);  // gone before asking
    return;
  }
  if (n < 0) return;
  c.in.append(buf, static_cast<std::size_t>(n));
  const std::size_t len = http::head_length(c.in);
  if ((len == 0 && c.in.size() > http::kMaxHead) || len > http::kMaxHead)
    return reply(c, now, 431, "application/json", http::error_json("request head over 8 KiB"));
  if (len > 0) dispatch(c, now);
}

void DashboardServer::Loop::dispatch(Conn& c, Clock::time_point now) {
  const http::Request req = http::parse_head(std::string_view(c.in).substr(0, http::head_length(c.in)));
  c.head_only = req.method == "HEAD";
  if (req.error) {
    const char* why = req.error == 405   ? "read-only: only GET is served"
                      : req.error == 413 ? "no request body is accepted"
                      : req.error == 505 ? "HTTP/1.x only"
                                         : "malformed request";
    return reply(c, now, req.error, "application/json", http::error_json(why));
  }
  if (req.path == "/") return reply(c, now, 200, "text/html; charset=utf-8", dashboard_page());
  Part part = req.path == "/api/gpus"     ? &DashboardFeed::Replies::gpus
              : req.path == "/api/queue"  ? &DashboardFeed::Replies::queue
              : req.path == "/api/active" ? &DashboardFeed::Replies::active
                                          : nullptr;
  if (part) {
    c.stage = Stage::Feed;
    c.part = part;
    c.asked = wall_now();
    c.deadline = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_s)) +
                 std::chrono::milliseconds(1);
    return try_feed(c, now);
  }
  if (req.path == "/api/history") {
    double since = 0;
    if (const auto it = req.query.find("since"); it != req.query.end()) {
      const std::string& v = it->second;
      char* end = nullptr;
      since = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !(since >= 0))
        return reply(c, now, 400, "application/json", http::error_json("since: expected seconds since the epoch"));
    }
    return reply(c, now, 200, "application/json", feed.frames_json(since));
  }
  reply(c, now, 404, "", "");
}

void DashboardServer::Loop::try_feed(Conn& c, Clock::time_point now) {
  // At the deadline, whatever the feed holds (the clocks differ: the feed's is the wall's).
  const auto r = feed.replies_ready(c.asked, now >= c.deadline ? c.asked + wait_s : wall_now(), wait_s);
  if (!r) {
    if (now < c.deadline) return;  // the next publication, or the deadline, wakes us
    return reply(c, now, 503, "application/json", http::error_json("aegisd has not published yet; try again"));
  }
  const auto& text = (*r).*c.part;
  if (!text) return reply(c, now, 503, "application/json", http::error_json("aegisd has not published yet; try again"));
  reply(c, now, 200, "application/json", *text);
}

void DashboardServer::Loop::reply(Conn& c, Clock::time_point now, int status, std::string_view type,
                                  std::string_view body) {
  c.out = http::format_reply(status, type, body, c.head_only);
  c.sent = 0;
  c.in.clear();
  c.stage = Stage::Write;
  c.deadline = now + timeout;  // the whole reply must be read within this
  write_out(c);
}

void DashboardServer::Loop::write_out(Conn& c) {
  while (c.sent < c.out.size()) {
    const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // POLLOUT says when
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return close_fd(c.fd);
    c.sent += static_cast<std::size_t>(n);
  }
  shutdown(c.fd, SHUT_WR);  // `Connection: close`: the reply ends here
  close_fd(c.fd);
}

std::string check_dashboard_settings(const DaemonSettings& s) {
  const std::string& m = s.dashboard_socket_mode;
  if (m.empty() || m.size() > 4 || m.find_first_not_of("01234567") != std::string::npos)
    return "dashboard_socket_mode: expected octal permissions such as 0660, got '" + m + "'";
  if (!s.dashboard_socket.empty() && s.dashboard_socket.front() != '/')
    return "dashboard_socket: " + s.dashboard_socket + " is not an absolute path";
  if (s.dashboard_socket.size() >= sizeof(sockaddr_un{}.sun_path))
    return "dashboard_socket: path too long: " + s.dashboard_socket;
  if (!s.dashboard_socket.empty() && s.dashboard_socket == s.socket)
    return "dashboard_socket: the same path as socket";
  return "";
}

DashboardServer::DashboardServer(const DaemonSettings& s, DashboardFeed& feed, double tick_s)
    : loop_(std::make_unique<Loop>(s, feed, tick_s)) {
  if (s.dashboard_port > 0) loop_->listen_on("dashboard_port", where_);
  if (!s.dashboard_socket.empty()) loop_->listen_on("dashboard_socket", where_);
  loop_->start();
}

DashboardServer::~DashboardServer() { loop_->stop(); }

}  // namespace aegis
