// Submissions per second through aegisd's socket: K connections, each sending M submit
// requests one after the other (each waits for its reply, which the daemon sends only
// after the job is committed). Target (issue 4): >= 1,000 per second with durable writes.
//   bench_submit SOCKET [connections=16] [per-connection=100]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

int connect_to(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    std::perror("connect");
    std::exit(1);
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_submit SOCKET [connections] [per-connection]\n");
    return 2;
  }
  const std::string sock = argv[1];
  const int conns = argc > 2 ? std::atoi(argv[2]) : 16;
  const int each = argc > 3 ? std::atoi(argv[3]) : 100;
  const std::string req =
      R"({"op":"submit","job":{"name":"bench","command":["/bin/sleep","3600"],"workdir":"/tmp","gpus":1,"mem_mib":1000}})"
      "\n";
  std::atomic<int> ok{0}, bad{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < conns; ++c)
    threads.emplace_back([&] {
      const int fd = connect_to(sock);
      std::string buf;
      char chunk[4096];
      for (int i = 0; i < each; ++i) {
        if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) break;
        while (buf.find('\n') == std::string::npos) {
          const ssize_t n = read(fd, chunk, sizeof chunk);
          if (n <= 0) return;
          buf.append(chunk, static_cast<std::size_t>(n));
        }
        const std::string line = buf.substr(0, buf.find('\n'));
        buf.erase(0, line.size() + 1);
        (line.find("\"ok\":true") != std::string::npos ? ok : bad)++;
      }
      close(fd);
    });
  for (auto& t : threads) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("submissions: %d accepted, %d refused, %d connections x %d, %.3f s: %.0f per second (target >= 1000)\n",
              ok.load(), bad.load(), conns, each, s, ok.load() / s);
  return bad.load() == 0 ? 0 : 1;
}
