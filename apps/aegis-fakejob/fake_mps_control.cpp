// nvidia-cuda-mps-control, emulated: enough of NVIDIA's MPS control tool for aegisd's
// managed MPS and for aegis-fakejob's MPS clients, with the real tool's interface:
//   nvidia-cuda-mps-control -d       start the control daemon in the background
//   nvidia-cuda-mps-control -f       the same in the foreground
//   echo quit | nvidia-cuda-mps-control    stop the running daemon
// The daemon listens on a FIFO, CUDA_MPS_PIPE_DIRECTORY/control (default /tmp/nvidia-mps),
// writes its pid to nvidia-cuda-mps-control.pid there and logs to
// CUDA_MPS_LOG_DIRECTORY/control.log (default /var/log/nvidia-mps). It runs no MPS server
// (the emulated GPUs need none) but keeps the real one's rule: one server per user at a
// time. A client ("client PID UID" on the FIFO) of the user whose server runs, or of anyone
// when none runs, is let in at once (the file granted.PID appears); a client of another
// user waits until every client of the running server is gone, as NVIDIA's daemon queues
// it (man nvidia-cuda-mps-control). Commands other than quit are logged and ignored.
#include <cerrno>
#include <deque>
#include <poll.h>
#include <set>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

namespace {

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_signal(int) { g_stop = 1; }

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

struct Paths {
  std::string pipe_dir = env_or("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps");
  std::string log_dir = env_or("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps");
  std::string control() const { return pipe_dir + "/control"; }
  std::string pid_file() const { return pipe_dir + "/nvidia-cuda-mps-control.pid"; }
};

void mkdirs(const std::string& dir) {
  for (std::size_t p = 1; p <= dir.size(); ++p)
    if (p == dir.size() || dir[p] == '/') mkdir(dir.substr(0, p).c_str(), 0755);
}

// A daemon is running when its FIFO has a reader (a FIFO left by a killed daemon has none).
bool daemon_running(const Paths& p) {
  const int fd = open(p.control().c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  close(fd);
  return true;
}

// "[2024-05-01 12:00:00.123 Control 4242] text", the real control.log's format.
void log_line(FILE* log, const std::string& text) {
  if (!log) return;
  timeval tv{};
  gettimeofday(&tv, nullptr);
  tm t{};
  localtime_r(&tv.tv_sec, &t);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &t);
  std::fprintf(log, "[%s.%03ld Control %d] %s\n", when, static_cast<long>(tv.tv_usec / 1000), getpid(), text.c_str());
  std::fflush(log);
}

bool alive(unsigned pid) { return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

// The MPS server of one user at a time, and the clients of other users waiting for it.
struct Servers {
  const Paths& paths;
  FILE* log;
  long user = -1;                  // whose server runs (-1: none)
  std::set<unsigned> clients;      // its live clients
  std::deque<std::pair<unsigned, unsigned>> waiting;  // (pid, uid), in arrival order

  std::string grant_file(unsigned pid) const { return paths.pipe_dir + "/granted." + std::to_string(pid); }
  void admit(unsigned pid) {
    clients.insert(pid);
    if (FILE* f = std::fopen(grant_file(pid).c_str(), "we")) std::fclose(f);
  }
  void arrive(unsigned pid, unsigned uid) {
    log_line(log, "NEW CLIENT " + std::to_string(pid) + " from user " + std::to_string(uid));
    if (user < 0) {
      user = uid;
      log_line(log, "Starting new server for user " + std::to_string(uid));
    }
    if (user == static_cast<long>(uid)) return admit(pid);
    log_line(log, "Client " + std::to_string(pid) + " of user " + std::to_string(uid) + " waits: the server of user " +
                      std::to_string(user) + " is running");
    waiting.emplace_back(pid, uid);
  }
  // Drops clients that ended; once the server has none, the next waiting user's starts.
  void reap() {
    for (auto it = clients.begin(); it != clients.end();) {
      if (alive(*it)) {
        ++it;
        continue;
      }
      unlink(grant_file(*it).c_str());
      it = clients.erase(it);
    }
    std::erase_if(waiting, [](const auto& w) { return !alive(w.first); });
    if (user < 0 || !clients.empty()) return;
    log_line(log, "Server of user " + std::to_string(user) + " exited");
    user = -1;
    if (waiting.empty()) return;
    user = waiting.front().second;
    log_line(log, "Starting new server for user " + std::to_string(user));
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (static_cast<long>(it->second) != user) {
        ++it;
        continue;
      }
      admit(it->first);
      it = waiting.erase(it);
    }
  }
};

// Handles one command line; false once the daemon should stop.
bool handle(Servers& servers, const std::string& line) {
  if (line == "quit" || line.rfind("quit ", 0) == 0) {
    log_line(servers.log, "Received quit command, shutting down");
    return false;
  }
  unsigned pid = 0, uid = 0;
  if (std::sscanf(line.c_str(), "client %u %u", &pid, &uid) == 2)
    servers.arrive(pid, uid);
  else if (!line.empty())
    log_line(servers.log, "Command not emulated, ignored: " + line);
  return true;
}

// The daemon: sets up, says so through `ready` (when >= 0), then serves until quit or a signal.
int serve(const Paths& p, int ready) {
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "nvidia-cuda-mps-control: %s\n", why.c_str());
    if (ready >= 0) (void)!write(ready, "n", 1);
    return 1;
  };
  mkdirs(p.pipe_dir);
  mkdirs(p.log_dir);
  if (daemon_running(p)) return fail("An instance of this daemon is already running");
  FILE* log = std::fopen((p.log_dir + "/control.log").c_str(), "ae");
  unlink(p.control().c_str());  // left by a daemon that was killed
  if (mkfifo(p.control().c_str(), 0666) != 0 || chmod(p.control().c_str(), 0666) != 0)
    return fail("cannot create " + p.control() + ": " + std::strerror(errno));
  // Read-write, so the FIFO never reads end-of-file between two clients.
  const int fd = open(p.control().c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return fail("cannot open " + p.control() + ": " + std::strerror(errno));
  if (FILE* pf = std::fopen(p.pid_file().c_str(), "we")) {
    std::fprintf(pf, "%d\n", getpid());
    std::fclose(pf);
  }
  log_line(log, "Starting control daemon using socket " + p.control());
  log_line(log, "To connect CUDA applications to this daemon, set env CUDA_MPS_PIPE_DIRECTORY=" + p.pipe_dir);
  // What its servers would see (the emulation's own line: aegisd starts one daemon per GPU).
  log_line(log, "Devices visible: " + env_or("CUDA_VISIBLE_DEVICES", "all"));
  if (ready >= 0) {  // started: let the caller go, and hold none of its streams open
    (void)!write(ready, "y", 1);
    close(ready);
    const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null > 2) {
      dup2(null, 2);
      close(null);
    }
  }
  std::string pending;
  char buf[512];
  bool running = true;
  Servers servers{p, log, -1, {}, {}};
  while (running && !g_stop) {
    // Every 50 ms at most, ended clients are noticed (a waiting user's server can start).
    pollfd pfd{fd, POLLIN, 0};
    const int ready_fds = poll(&pfd, 1, 50);
    servers.reap();
    if (ready_fds < 0 && errno == EINTR) continue;
    if (ready_fds <= 0) continue;
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<std::size_t>(n));
    for (auto nl = pending.find('\n'); running && nl != std::string::npos; nl = pending.find('\n')) {
      running = handle(servers, pending.substr(0, nl));
      pending.erase(0, nl + 1);
    }
  }
  for (unsigned pid : servers.clients) unlink(servers.grant_file(pid).c_str());
  if (g_stop) log_line(log, "Signalled, shutting down");
  unlink(p.control().c_str());
  unlink(p.pid_file().c_str());
  log_line(log, "Exit");
  if (log) std::fclose(log);
  return 0;
}

// -d: the daemon in its own session, detached from the caller's descriptors; the caller
// returns once it listens (0) or could not start (1).
int daemonise(const Paths& p) {
  int ready[2];
  if (pipe(ready) != 0) return 1;
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid > 0) {
    close(ready[1]);
    char c = 'n';
    const bool got = read(ready[0], &c, 1) == 1;
    return got && c == 'y' ? 0 : 1;
  }
  close(ready[0]);
  setsid();
  // Inherited descriptors (a caller's lock files, sockets) must not live on in the daemon.
  if (ready[1] > 3) close_range(3, static_cast<unsigned>(ready[1]) - 1, 0);
  close_range(static_cast<unsigned>(ready[1]) + 1, ~0U, 0);
  if (chdir("/") != 0) return 1;
  const int null = open("/dev/null", O_RDWR);
  if (null >= 0) {
    dup2(null, 0);
    dup2(null, 1);
    if (null > 2) close(null);
  }
  const int rc = serve(p, ready[1]);  // its stderr (the caller's) reports a failed start
  _exit(rc);
}

// The client: sends each line of stdin to the daemon; after quit, waits for it to go.
int client(const Paths& p) {
  if (!daemon_running(p)) {
    std::fprintf(stderr, "Cannot find MPS control daemon process\n");
    return 1;
  }
  char line[256];
  bool quit = false;
  while (std::fgets(line, sizeof line, stdin)) {
    std::string cmd = line;
    if (cmd.empty() || cmd.back() != '\n') cmd += '\n';
    const int fd = open(p.control().c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, cmd.data(), cmd.size()) != static_cast<ssize_t>(cmd.size())) {
      std::fprintf(stderr, "Cannot find MPS control daemon process\n");
      if (fd >= 0) close(fd);
      return 1;
    }
    close(fd);
    quit |= cmd == "quit\n" || cmd.rfind("quit ", 0) == 0;
  }
  for (int i = 0; quit && i < 500 && access(p.control().c_str(), F_OK) == 0; ++i) usleep(10'000);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (argc > 2 || (!mode.empty() && mode != "-d" && mode != "-f")) {
    std::fprintf(stderr, "usage: nvidia-cuda-mps-control [-d | -f]   (emulated: quit is the only command)\n");
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;  // no SA_RESTART: a signal ends the blocking read
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  const Paths p;
  if (mode == "-d") return daemonise(p);
  if (mode == "-f") return serve(p, -1);
  return client(p);
}
