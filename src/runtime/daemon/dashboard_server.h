// aegisd's read-only web dashboard (docs/dashboard.md): one page and four JSON endpoints
// from a DashboardFeed, on a loopback TCP port and/or a Unix socket, served by one thread
// of its own polling non-blocking sockets. A slow or hostile client holds one connection
// slot until a whole-request deadline; never another client's turn, nor the event loop.
#pragma once
#include <memory>
#include <string>

#include "runtime/daemon/config.h"
#include "runtime/daemon/dashboard_feed.h"

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
  struct Loop;  // dashboard_server.cpp
  std::unique_ptr<Loop> loop_;
  std::string where_;
};

// "" when the dashboard settings are usable, else one line naming the setting.
std::string check_dashboard_settings(const DaemonSettings& s);

// The page itself (dashboard.html, embedded at build time).
const std::string& dashboard_page();

}  // namespace aegis
