// aegisd's read-only web dashboard (docs/dashboard.md): cpp-httplib serving one page and
// three JSON endpoints from a DashboardFeed, on a loopback TCP port and/or a Unix socket,
// in threads of its own. A slow or hostile client can hold at most the dashboard's own
// bounded threads and queue (deadlines on every read and write); never the event loop.
#pragma once
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/daemon/config.h"
#include "runtime/daemon/dashboard_feed.h"

namespace httplib {
class Server;
}

namespace aegis {

class DashboardServer {
 public:
  // Binds what `s` enables (dashboard_port, dashboard_socket) and starts serving. Throws
  // ConfigError naming the setting when a listener cannot be opened. `tick_s`: how long a
  // reader may wait for the event loop's next publication.
  DashboardServer(const DaemonSettings& s, DashboardFeed& feed, double tick_s);
  ~DashboardServer();
  DashboardServer(const DashboardServer&) = delete;
  DashboardServer& operator=(const DashboardServer&) = delete;

  // "dashboard on 127.0.0.1:8080 and /run/aegis/dashboard.sock", for the start line.
  const std::string& describe() const { return where_; }

 private:
  struct Listener {
    std::unique_ptr<httplib::Server> http;
    std::thread thread;
  };
  void listen(Listener& l, const std::string& what);
  void stop();

  DashboardFeed& feed_;
  const DaemonSettings settings_;
  const double tick_s_;
  std::vector<Listener> listeners_;
  std::string where_;
};

// "" when the dashboard settings are usable, else one line naming the setting.
std::string check_dashboard_settings(const DaemonSettings& s);

// The page itself (dashboard.html, embedded at build time).
const std::string& dashboard_page();

}  // namespace aegis
