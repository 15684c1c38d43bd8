#include "runtime/daemon/server.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <optional>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdexcept>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace aegis {

namespace {

// Descriptors kept for the daemon's own work (database, attempt files, /proc, pidfds of
// running jobs' shims, NVML): client connections get what the open-file limit leaves.
constexpr std::size_t kReservedFds = 256;
// One read of a client's socket, and the most read from one client in one pass.
constexpr std::size_t kReadChunk = 64 * 1024;
constexpr std::size_t kMaxReadPerPass = 1 << 20;
// A user's clients may hold this much unfinished input together (two whole requests).
constexpr std::size_t kInputPerUser = 2 * api::kMaxRequestBytes + kReadChunk;
// A long reply is produced in parts while less than this waits to be written.
constexpr std::size_t kReplyLowWater = 64 * 1024;
// Each busy connection gets one part of its reply produced per pass; more only while its
// user's production this pass is under this (seconds), so that a listing of thousands of
// cheap jobs takes a few passes, not one per page, while one user's many expensive
// listings still add at most one part each plus this to everyone's pass.
constexpr double kProducePerUserPerPassS = 0.005;
// Out of descriptors: accepting pauses this long instead of spinning on the listen socket.
constexpr double kAcceptPauseS = 0.1;
constexpr int kMaxAcceptsPerPass = 64;
// What one pass may spend on requests (bytes of request text; a small request counts as
// kRequestCost): a 4 MiB submission ends a pass by itself, ordinary requests come ~250 at
// a time (one group commit).
constexpr std::size_t kPassBudget = 1 << 20;
constexpr std::size_t kRequestCost = 4096;
// Requests of one connection served in one pass (pipelining); its replies, small, wait for
// the pass's commit together.
constexpr int kPipelinePerPass = 256;

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

[[noreturn]] void sys_fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

std::string error_line(const std::string& msg) {
  return nlohmann::json{{"ok", false}, {"error", msg}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

// Raises the soft open-file limit to the hard one and returns it.
std::size_t raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  if (rl.rlim_cur < rl.rlim_max) {
    rlimit want = rl;
    want.rlim_cur = std::min<rlim_t>(rl.rlim_max, 1 << 20);
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) rl = want;
  }
  return static_cast<std::size_t>(rl.rlim_cur);
}

}  // namespace

Server::Server(Daemon& d) : d_(d), sampler_(d.env()), socket_path_(d.config().daemon.socket) {
  const auto& cfg = d.config().daemon;
  const std::size_t fd_limit = raise_fd_limit();
  if (fd_limit < kReservedFds + 16)
    throw std::runtime_error(fmt::format("open-file limit {} is too low: aegisd needs at least {} (ulimit -n)",
                                         fd_limit, kReservedFds + 16));
  max_connections_ = std::min<std::size_t>(static_cast<std::size_t>(cfg.max_connections), fd_limit - kReservedFds);
  spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);

  // The socket's directory is created if missing (main checked who owns what is there);
  // a stale socket file is replaced.
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
  const auto mode = static_cast<mode_t>(std::stoul(cfg.socket_mode, nullptr, 8));
  chmod(socket_path_.c_str(), mode);
  if (listen(listen_fd_, 512) != 0) sys_fail("listen");

  if (cfg.metrics_port > 0) {
    metrics_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(metrics_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(static_cast<std::uint16_t>(cfg.metrics_port));
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(metrics_fd_, reinterpret_cast<sockaddr*>(&in), sizeof in) != 0 || listen(metrics_fd_, 16) != 0)
      sys_fail(fmt::format("metrics port {}", cfg.metrics_port));
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
  for (auto& c : clients_) close(c.fd);
  for (int fd : {listen_fd_, metrics_fd_, signal_fd_, timer_fd_, spare_fd_})
    if (fd >= 0) close(fd);
  unlink(socket_path_.c_str());
}

void Server::refuse(int fd, const std::string& why) {
  const std::string line = error_line(why);
  (void)!send(fd, line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  close(fd);
}

// At the connection limit, a newcomer takes the place of a connection of the user who
// holds the most, if that user holds more than the newcomer would: no user can keep the
// others out by holding every connection.
bool Server::evict_for(uid_t newcomer) {
  uid_t top = newcomer;
  int most = 0;
  for (const auto& [uid, n] : connections_of_)
    if (n > most) {
      most = n;
      top = uid;
    }
  const auto mine = connections_of_.find(newcomer);
  if (top == newcomer || most <= (mine == connections_of_.end() ? 0 : mine->second) + 1) return false;
  Client* victim = nullptr;
  for (auto& c : clients_)
    if (c.caller.uid == top && !c.dead && (!victim || c.last_activity < victim->last_activity)) victim = &c;
  if (!victim) return false;
  const std::string line = error_line("connection: closed to make room for another user's (max_connections)");
  (void)!send(victim->fd, line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  victim->out.clear();
  victim->more = nullptr;
  victim->dead = true;
  // It leaves the count now; the descriptor closes at the end of this pass.
  if (--connections_of_[top] <= 0) connections_of_.erase(top);
  victim->counted = false;
  return true;
}

void Server::accept_clients(double now) {
  const auto& cfg = d_.config().daemon;
  for (int n = 0; n < kMaxAcceptsPerPass; ++n) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: take the waiting client with the spare one, tell it, and
        // pause accepting, instead of spinning on a listen socket that stays readable.
        if (spare_fd_ >= 0) {
          close(spare_fd_);
          if (const int c = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC); c >= 0)
            refuse(c, "aegisd is out of file descriptors; try again shortly");
          spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
        }
        accept_paused_until_ = now + kAcceptPauseS;
      }
      return;
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      close(fd);
      continue;
    }
    int& mine = connections_of_[cred.uid];
    if (mine >= cfg.max_connections_per_user) {
      refuse(fd, fmt::format("connection: uid {} already has {} connections to aegisd, the most one user may have "
                             "(max_connections_per_user)", cred.uid, mine));
      continue;
    }
    std::size_t live = 0;
    for (const auto& [uid, count] : connections_of_) live += static_cast<std::size_t>(count);
    if (live >= max_connections_ && !evict_for(cred.uid)) {
      refuse(fd, fmt::format("connection: aegisd serves {} connections, its limit (max_connections); try again",
                             clients_.size()));
      continue;
    }
    ++mine;
    Client c;
    c.fd = fd;
    c.caller = Caller{cred.uid, cred.gid, cred.pid};
    c.last_activity = now;
    clients_.push_back(std::move(c));
  }
}

std::size_t Server::buffered_input(uid_t uid) const {
  const auto it = input_of_.find(uid);
  return it == input_of_.end() ? 0 : it->second;
}

void Server::drop_input(Client& c, std::size_t n) {
  n = std::min(n, c.in.size());
  c.in.erase(0, n);
  input_of_[c.caller.uid] -= n;
  if (c.in.empty()) c.in.shrink_to_fit();
}

void Server::read_client(Client& c, double now) {
  char buf[kReadChunk];
  std::size_t read_now = 0;
  // One request at a time: once a whole line is here, the rest waits in the kernel.
  while (!c.has_request() && read_now < kMaxReadPerPass) {
    if (!c.in.empty() && buffered_input(c.caller.uid) > kInputPerUser) return;  // its partial requests must finish first
    const ssize_t n = read(c.fd, buf, sizeof buf);
    if (n > 0) {
      if (c.in.empty()) c.request_started = now;
      c.in.append(buf, static_cast<std::size_t>(n));
      input_of_[c.caller.uid] += static_cast<std::size_t>(n);
      read_now += static_cast<std::size_t>(n);
      if (c.in.size() > api::kMaxRequestBytes + 1 && !c.has_request()) {
        c.out = error_line(fmt::format("request: longer than {} bytes", api::kMaxRequestBytes));
        c.reply_started = now;
        drop_input(c, c.in.size());
        c.request_started = 0;
        c.closing = true;
        return;
      }
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) c.closing = true;  // no more requests will come
    return;
  }
}

void Server::write_client(Client& c, double now) {
  // One page of a long reply per turn (issue 33 item 1), more within its user's budget
  // (kProducePerUserPerPassS): a client that reads as fast as aegisd writes must not have
  // its whole listing built while everyone else waits.
  bool produced = false;
  while (true) {
    double& spent = produced_s_[c.caller.uid];
    if (c.out.size() < kReplyLowWater && c.more && (!produced || spent < kProducePerUserPerPassS)) {
      produced = true;
      const auto t0 = std::chrono::steady_clock::now();
      if (!c.more(c.out)) c.more = nullptr;
      spent += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (c.out.empty()) break;
    const ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {  // the client went away: drop what it will never read
      c.out.clear();
      c.more = nullptr;
      c.dead = true;
      break;
    }
    c.out.erase(0, static_cast<std::size_t>(n));
    if (c.out.empty() && !c.more) break;
  }
  if (!c.busy() && c.reply_started > 0) {
    c.reply_started = 0;
    c.last_activity = now;
    c.out.shrink_to_fit();
  }
}

// Requests are served in rounds: one request per user per round, users in turn (the one
// served longest ago first), each from that user's connection that has waited longest, so
// that a user with many connections or a pipeline of requests gets no more turns than a
// user with one. Rounds go on (in one transaction: group commit) until no request is
// ready or the pass's budget is spent, so that one pass never keeps others waiting long.
std::vector<Server::Client*> Server::next_round(std::size_t& budget_left) {
  std::map<uid_t, Client*> next;
  for (auto& c : clients_) {
    if (c.busy() || !c.has_request() || c.dead || c.taken || c.served_in_pass >= kPipelinePerPass) continue;
    Client*& pick = next[c.caller.uid];
    if (!pick || c.request_started < pick->request_started) pick = &c;
  }
  std::vector<Client*> order;
  for (auto& [uid, c] : next) order.push_back(c);
  std::sort(order.begin(), order.end(), [&](Client* a, Client* b) {
    return last_served_[a->caller.uid] < last_served_[b->caller.uid];
  });
  std::vector<Client*> round;
  for (Client* c : order) {
    if (budget_left == 0) break;
    const std::size_t cost = std::max<std::size_t>(c->in.find('\n') + 1, kRequestCost);
    budget_left = cost >= budget_left ? 0 : budget_left - cost;
    ++c->served_in_pass;
    round.push_back(c);
  }
  return round;
}

void Server::serve_requests(double now, bool& changed) {
  std::size_t budget = kPassBudget;
  std::vector<Client*> order = next_round(budget);
  if (order.empty()) return;

  struct Pending {
    Client* client;
    Reply reply;
    bool mutating;
  };
  std::vector<Pending> pending;
  Store& store = d_.store();
  bool tx_lost = false;
  auto untake = [&] {
    for (auto& c : clients_) {
      c.taken = false;
      c.served_in_pass = 0;
    }
  };
  try {
    store.begin();
  } catch (const StoreError& e) {
    for (Client* c : order) {  // nothing is done without a transaction to record it
      drop_input(*c, c->in.find('\n') + 1);
      c->request_started = c->in.empty() ? 0 : now;
      c->out = error_line(std::string(e.what()) + ": try again later");
      c->reply_started = now;
    }
    untake();
    return;
  }
  for (std::size_t i = 0; i < order.size() && !tx_lost; ++i) {
    Client* c = order[i];
    const std::size_t nl = c->in.find('\n');
    const std::string line = c->in.substr(0, nl);
    drop_input(*c, nl + 1);
    c->request_started = c->in.empty() ? 0 : now;
    last_served_[c->caller.uid] = now;
    const auto parsed = api::parse_request(line);
    Pending p{c, {}, false};
    if (auto* e = std::get_if<api::ParseError>(&parsed)) {
      p.reply.object = {{"ok", false}, {"error", e->message}};
    } else {
      const auto& req = std::get<api::Request>(parsed);
      p.mutating = std::holds_alternative<api::SubmitRequest>(req) || std::holds_alternative<api::CancelRequest>(req);
      p.reply = d_.respond(req, c->caller);
      if (p.reply.more) c->taken = true;  // a long reply: its client's next request waits for it
    }
    pending.push_back(std::move(p));
    // SQLite rolls a transaction back by itself on some errors (a full disk): then what
    // this batch wrote is gone, and the later requests must not run outside it.
    if (!store.in_transaction()) tx_lost = true;
    // The next round: the same users again if they have more, while the budget lasts (a
    // pipelining client's replies wait for the commit, kPipelinePerPass at most).
    if (i + 1 == order.size() && !tx_lost && budget > 0) {
      auto more = next_round(budget);
      order.insert(order.end(), more.begin(), more.end());
    }
  }
  untake();
  std::string failure;
  if (tx_lost) {
    failure = "database: a write failed and SQLite rolled the transaction back";
  } else {
    try {
      store.commit();  // durable before any reply leaves
    } catch (const StoreError& e) {
      failure = e.what();
    }
  }
  bool any_mutating = false;
  for (auto& p : pending) {
    any_mutating |= p.mutating;
    if (!failure.empty() && p.mutating) {
      p.reply.object = {{"ok", false}, {"error", failure + ": the request was not carried out; try again later"}};
      p.reply.more = nullptr;
    }
    if (p.mutating && failure.empty()) changed = true;
    p.client->reply_started = now;
    if (p.reply.more) p.client->more = std::move(p.reply.more);
    else p.client->out += p.reply.object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  if (!failure.empty()) d_.reload_after_store_error(now, failure);
  else if (any_mutating) d_.storage_recovered();
}

void Server::expire(double now) {
  const auto& cfg = d_.config().daemon;
  for (auto& c : clients_) {
    if (c.closing || c.dead) continue;
    if (c.request_started > 0 && !c.has_request() && now - c.request_started > cfg.request_timeout_s) {
      c.out = error_line(fmt::format("request: incomplete after {} s (request_timeout_s)", cfg.request_timeout_s));
      c.more = nullptr;
      drop_input(c, c.in.size());
      c.request_started = 0;
      c.reply_started = now;
      c.closing = true;
    } else if (c.reply_started > 0 && now - c.reply_started > cfg.reply_timeout_s) {
      c.out.clear();  // it does not read: drop the reply and the connection
      c.more = nullptr;
      c.dead = true;
    } else if (!c.busy() && c.in.empty() && now - c.last_activity > cfg.client_idle_timeout_s) {
      c.closing = true;
    }
  }
}

void Server::serve_metrics() {
  const int fd = accept4(metrics_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return;
  // Any request gets the metrics; whatever the scraper sent is read without waiting.
  char buf[4096];
  (void)!recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  const std::string body = d_.metrics_text();
  const std::string resp = fmt::format(
      "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
      body.size(), body);
  (void)!send(fd, resp.data(), resp.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  close(fd);
}

void Server::run() {
  auto guarded = [&](auto&& step) {
    // A storage failure during a tick (a full disk) is survived: what did not commit is
    // forgotten and reloaded from the database, and the next tick tries again.
    try {
      step();
      if (!d_.storage_error().empty() && !d_.store().in_transaction()) d_.storage_recovered();
    } catch (const StoreError& e) {
      d_.reload_after_store_error(wall_now(), e.what());
    }
  };
  guarded([&] { d_.tick(wall_now()); });
  bool stop = false;
  while (!stop) {
    double now = wall_now();
    const bool accepting = now >= accept_paused_until_;
    std::vector<pollfd> fds = {{accepting ? listen_fd_ : -1, POLLIN, 0},
                               {signal_fd_, POLLIN, 0},
                               {timer_fd_, POLLIN, 0},
                               {sampler_.ready_fd(), POLLIN, 0}};
    if (metrics_fd_ >= 0) fds.push_back({metrics_fd_, POLLIN, 0});
    const std::size_t first_client = fds.size();
    bool work_waiting = false;
    for (auto& c : clients_) {
      short ev = 0;
      const bool request = c.has_request();
      // A client whose user is at kInputPerUser is not read (read_client), so it is not
      // polled for input either: its socket stays readable, and asking would wake this
      // loop at once, again and again, until request_timeout_s (a spin of a whole core).
      const bool held_back = !request && !c.in.empty() && buffered_input(c.caller.uid) > kInputPerUser;
      if (!request && !c.closing && !held_back) ev |= POLLIN;
      if (c.busy()) ev |= POLLOUT;
      work_waiting |= request && !c.busy();
      // Not polled at all when nothing is asked: a hang-up is always reported, and would
      // spin the same way; it is seen once the user's input drains.
      fds.push_back({ev ? c.fd : -1, ev, 0});
    }
    const int timeout_ms = work_waiting ? 0 : accepting ? 1000 : static_cast<int>(kAcceptPauseS * 1000);
    if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) sys_fail("poll");
    now = wall_now();

    if (fds[1].revents & POLLIN) {
      signalfd_siginfo si{};
      while (read(signal_fd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) stop = true;
        if (si.ssi_signo == SIGHUP && on_hangup_) on_hangup_();
      }
      while (waitpid(-1, nullptr, WNOHANG) > 0) {
      }  // shims end: their exit records are read at the next sample
    }
    // A telemetry tick asks the sampling thread for a sample and ticks when it is there;
    // while the last one is still being taken (a slow driver) it ticks without one.
    bool tick = false;
    std::optional<GpuReading> sampled;
    if (fds[2].revents & POLLIN) {
      std::uint64_t expirations = 0;
      (void)!read(timer_fd_, &expirations, sizeof expirations);
      tick = !sampler_.request(d_.sample_request());
    }
    if (fds[3].revents & POLLIN) {
      sampled = sampler_.take();
      tick = tick || sampled.has_value();
    }
    if (metrics_fd_ >= 0 && (fds[4].revents & POLLIN)) serve_metrics();
    if (fds[0].revents & POLLIN) accept_clients(now);

    std::size_t i = first_client;
    for (auto& c : clients_) {
      if (i < fds.size() && fds[i].fd == c.fd && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) && !c.has_request())
        read_client(c, now);
      ++i;
    }
    bool changed = false;
    serve_requests(now, changed);
    d_.send_stop_signals();
    produced_s_.clear();
    for (auto& c : clients_)
      if (c.busy()) write_client(c, now);
    expire(now);
    for (auto it = clients_.begin(); it != clients_.end();) {
      if (it->dead || (it->closing && !it->busy() && !it->has_request())) {
        close(it->fd);
        drop_input(*it, it->in.size());
        if (it->counted && --connections_of_[it->caller.uid] <= 0) connections_of_.erase(it->caller.uid);
        if (input_of_[it->caller.uid] == 0) input_of_.erase(it->caller.uid);
        it = clients_.erase(it);
      } else {
        ++it;
      }
    }
    if (tick) {
      guarded([&] { d_.tick_with(now, sampled ? &*sampled : nullptr); });
      if (on_tick_) guarded([&] { on_tick_(now); });
    } else if (changed) guarded([&] { d_.schedule(now); });
  }
}

}  // namespace aegis
