// aegisd's event loop: the Unix socket API (one JSON request per line), the telemetry
// timer, signals, and the optional Prometheus endpoint, all in one thread with poll().
// Requests read in one pass are committed together (group commit) before any reply.
#pragma once
#include <list>
#include <string>

#include "runtime/daemon/daemon.h"

namespace aegis {

class Server {
 public:
  explicit Server(Daemon& daemon);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Runs until SIGTERM or SIGINT. Jobs keep running when it returns (their shims own them).
  void run();

 private:
  struct Client {
    int fd = -1;
    Caller caller;
    std::string in, out;
    bool closing = false;  // close once `out` is flushed
  };
  void accept_clients();
  void read_client(Client& c);
  void write_client(Client& c);
  void serve_metrics();

  Daemon& d_;
  int listen_fd_ = -1;
  int metrics_fd_ = -1;
  int signal_fd_ = -1;
  int timer_fd_ = -1;
  std::string socket_path_;
  std::list<Client> clients_;
};

}  // namespace aegis
