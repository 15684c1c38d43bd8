#include "runtime/daemon/dashboard_server.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fmt/format.h>
#include <httplib.h>
#include <mutex>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace aegis {

namespace {

// Worker threads per listener: a page loads its three endpoints at once; two threads keep
// that quick while bounding what the dashboard can take from the machine.
constexpr std::size_t kThreadsPerListener = 2;

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// httplib's own ThreadPool queues without limit: each waiting connection holds a
// descriptor. This one makes the accepting thread wait instead once `cap` connections are
// being served or queued, so that further clients wait in the kernel's backlog.
class BoundedPool : public httplib::TaskQueue {
 public:
  BoundedPool(std::size_t threads, std::size_t cap) : cap_(cap) {
    for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  }
  void enqueue(std::function<void()> fn) override {
    std::unique_lock lock(mu_);
    room_.wait(lock, [&] { return held_ < cap_ || shutdown_; });
    ++held_;
    jobs_.push_back(std::move(fn));
    ready_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard lock(mu_);
      shutdown_ = true;
    }
    ready_.notify_all();
    room_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  void work() {
    while (true) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mu_);
        ready_.wait(lock, [&] { return !jobs_.empty() || shutdown_; });
        if (jobs_.empty()) return;  // shut down, nothing left
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      fn();  // serves one connection and closes it (its deadlines bound this)
      {
        std::lock_guard lock(mu_);
        --held_;
      }
      room_.notify_one();
    }
  }
  const std::size_t cap_;
  std::mutex mu_;
  std::condition_variable ready_, room_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  std::size_t held_ = 0;
  bool shutdown_ = false;
};

// The page's script and styles are inline and it loads nothing else: the policy forbids
// every other load, and the endpoints send JSON that is never interpreted as a page.
void common_headers(httplib::Response& res) {
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Content-Security-Policy",
                 "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
                 "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
}

}  // namespace

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
    : feed_(feed), settings_(s), tick_s_(tick_s) {
  listeners_.reserve(2);
  try {
    if (s.dashboard_port > 0) {
      listeners_.emplace_back();
      listen(listeners_.back(), "dashboard_port");
    }
    if (!s.dashboard_socket.empty()) {
      listeners_.emplace_back();
      listen(listeners_.back(), "dashboard_socket");
    }
  } catch (...) {
    stop();
    throw;
  }
}

void DashboardServer::listen(Listener& l, const std::string& what) {
  l.http = std::make_unique<httplib::Server>();
  httplib::Server& http = *l.http;
  const std::size_t cap = static_cast<std::size_t>(settings_.dashboard_max_connections);
  http.new_task_queue = [cap] { return new BoundedPool(kThreadsPerListener, cap); };
  const auto timeout = std::chrono::duration<double>(settings_.dashboard_timeout_s);
  http.set_read_timeout(timeout);
  http.set_write_timeout(timeout);
  http.set_keep_alive_timeout(static_cast<time_t>(std::max(1.0, settings_.dashboard_timeout_s)));
  http.set_payload_max_length(0);  // read-only: no request carries a body

  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    common_headers(res);
    res.set_content(dashboard_page(), "text/html; charset=utf-8");
  });
  // A reader waits at most two ticks for fresh replies (dashboard_feed.h), within its deadline.
  const double wait_s = std::min(2 * tick_s_, settings_.dashboard_timeout_s);
  using Part = std::shared_ptr<const std::string> DashboardFeed::Replies::*;
  auto reply = [this, wait_s](Part part) {
    return [this, wait_s, part](const httplib::Request&, httplib::Response& res) {
      common_headers(res);
      const auto r = feed_.replies(wall_now(), wait_s);
      const auto& text = r.*part;
      if (!text) {
        res.status = 503;
        res.set_content("{\"ok\":false,\"error\":\"aegisd has not published yet; try again\"}", "application/json");
        return;
      }
      res.set_content(*text, "application/json");
    };
  };
  http.Get("/api/gpus", reply(&DashboardFeed::Replies::gpus));
  http.Get("/api/queue", reply(&DashboardFeed::Replies::queue));
  http.Get("/api/active", reply(&DashboardFeed::Replies::active));
  http.Get("/api/history", [this](const httplib::Request& req, httplib::Response& res) {
    common_headers(res);
    double since = 0;
    if (req.has_param("since")) {
      const std::string v = req.get_param_value("since");
      char* end = nullptr;
      since = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !(since >= 0)) {
        res.status = 400;
        res.set_content("{\"ok\":false,\"error\":\"since: expected seconds since the epoch\"}", "application/json");
        return;
      }
    }
    res.set_content(feed_.frames_json(since), "application/json");
  });

  bool bound = false;
  if (what == "dashboard_port") {
    bound = http.bind_to_port("127.0.0.1", static_cast<int>(settings_.dashboard_port));
    where_ += fmt::format("{}127.0.0.1:{}", where_.empty() ? "" : " and ", settings_.dashboard_port);
  } else {
    // main checked that the directory is root's alone; a stale socket file is replaced.
    const std::string& path = settings_.dashboard_socket;
    unlink(path.c_str());
    http.set_address_family(AF_UNIX);
    bound = http.bind_to_port(path, 80);
    if (bound) chmod(path.c_str(), static_cast<mode_t>(std::stoul(settings_.dashboard_socket_mode, nullptr, 8)));
    where_ += fmt::format("{}{}", where_.empty() ? "" : " and ", path);
  }
  if (!bound)
    throw ConfigError(fmt::format("{}: cannot listen on {} ({})", what,
                                  what == "dashboard_port" ? fmt::format("127.0.0.1:{}", settings_.dashboard_port)
                                                           : settings_.dashboard_socket,
                                  std::strerror(errno)));
  l.thread = std::thread([&http] { http.listen_after_bind(); });
  // stop() only reaches a server that is running: wait for it to be (microseconds).
  for (int i = 0; i < 5000 && !http.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void DashboardServer::stop() {
  for (auto& l : listeners_) {
    if (l.http) l.http->stop();
    if (l.thread.joinable()) l.thread.join();
  }
  listeners_.clear();
  if (!settings_.dashboard_socket.empty()) unlink(settings_.dashboard_socket.c_str());
}

DashboardServer::~DashboardServer() { stop(); }

}  // namespace aegis
