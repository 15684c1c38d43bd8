// aegisd's event loop: the Unix socket API (one JSON request per line), the telemetry
// timer, signals, and the optional Prometheus endpoint, all in one thread with poll().
// Requests read in one pass are committed together (group commit) before any reply.
//
// Clients are untrusted (docs/security.md). A connection's next requests are read only
// once its replies have left (a pipeline's replies, small, leave together after a pass's
// commit), long listings are produced as the client reads them, users are served in turn
// (rounds of one request per user, whatever their number of connections, while the pass's
// budget lasts), and every connection has deadlines. Connections are limited per user and in all, within the
// open-file limit with descriptors kept for the daemon's own work; when the process is
// out of descriptors anyway, accepting pauses instead of spinning.
#pragma once
#include <functional>
#include <list>
#include <map>
#include <string>

#include "runtime/daemon/daemon.h"
#include "runtime/daemon/gpu_sampler.h"

namespace aegis {

class Server {
 public:
  explicit Server(Daemon& daemon);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Runs until SIGTERM or SIGINT. Jobs keep running when it returns (their shims own them).
  void run();

  // Called on SIGHUP, between passes (aegisd's main reloads its configuration).
  void on_hangup(std::function<void()> f) { on_hangup_ = std::move(f); }
  // Called after each telemetry tick, with the tick's time (the dashboard's feed).
  void on_tick(std::function<void(double)> f) { on_tick_ = std::move(f); }

  // Connections the limits allow now (max_connections, lowered to fit the fd limit).
  std::size_t max_connections() const { return max_connections_; }

 private:
  struct Client {
    int fd = -1;
    Caller caller;
    std::string in;                               // bytes read, not yet a whole request
    std::string out;                              // reply bytes not yet written
    std::function<bool(std::string&)> more;       // the rest of a long reply, produced on demand
    double last_activity = 0;                     // connect, or the last reply finished
    double request_started = 0;                   // first byte of the request being read (0: none)
    double reply_started = 0;                     // the reply being written (0: none)
    bool closing = false;                         // no more requests come: close once served
    bool dead = false;                            // the connection failed: close now
    bool counted = true;                          // in connections_of_ (false once evicted)
    bool taken = false;                           // no more requests of it in this pass
    int served_in_pass = 0;                       // its requests served in this pass
    bool busy() const { return !out.empty() || more; }
    bool has_request() const { return in.find('\n') != std::string::npos; }
  };
  void accept_clients(double now);
  void read_client(Client& c, double now);
  void write_client(Client& c, double now);
  std::vector<Client*> next_round(std::size_t& budget_left);
  void serve_requests(double now, bool& changed);
  void expire(double now);
  void serve_metrics();
  void refuse(int fd, const std::string& why);
  std::size_t buffered_input(uid_t uid) const;
  void drop_input(Client& c, std::size_t n);
  bool evict_for(uid_t newcomer);

  Daemon& d_;
  GpuSampler sampler_;  // GPU samples off the loop: a telemetry tick asks, its completion ticks
  std::function<void()> on_hangup_;
  std::function<void(double)> on_tick_;
  int listen_fd_ = -1;
  int metrics_fd_ = -1;
  int signal_fd_ = -1;
  int timer_fd_ = -1;
  int spare_fd_ = -1;             // given up to accept (and refuse) a client when out of fds
  double accept_paused_until_ = 0;
  std::size_t max_connections_ = 0;
  std::string socket_path_;
  std::list<Client> clients_;
  std::map<uid_t, int> connections_of_;
  std::map<uid_t, std::size_t> input_of_;  // unfinished request bytes held, per user
  std::map<uid_t, double> last_served_;  // round robin between users: longest waiting first
  std::map<uid_t, double> produced_s_;   // this pass: seconds spent producing each user's replies
};

}  // namespace aegis
