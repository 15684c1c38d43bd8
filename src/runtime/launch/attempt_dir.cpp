#include "runtime/launch/attempt_dir.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace aegis {

AttemptDir attempt_dir(const std::string& state_dir, JobId id, int attempt) {
  return {state_dir + "/jobs/" + std::to_string(id) + "/" + std::to_string(attempt)};
}

void make_attempt_dir(const AttemptDir& d) {
  // mkdir -p, mode 0700: only the daemon reads these; users go through the API.
  for (std::size_t p = 1; p <= d.dir.size(); ++p) {
    if (p != d.dir.size() && d.dir[p] != '/') continue;
    const std::string part = d.dir.substr(0, p);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)
      throw std::runtime_error(part + ": cannot create directory: " + std::strerror(errno));
  }
}

bool attempt_alive(const AttemptDir& d) {
  const int fd = open(d.lock().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);  // releases our lock if we got it
  return held;
}

std::optional<ExitRecord> read_exit(const AttemptDir& d) {
  std::ifstream f(d.exit());
  if (!f) return std::nullopt;
  try {
    auto j = nlohmann::json::parse(f);
    return ExitRecord{j.at("wait_status").get<int>(), j.at("ended_at").get<double>(), j.value("cancelled", false)};
  } catch (const std::exception&) {
    return std::nullopt;  // written atomically, so a partial file means none
  }
}

std::optional<pid_t> read_child_pgid(const AttemptDir& d) {
  std::ifstream f(d.child());
  if (!f) return std::nullopt;
  try {
    return nlohmann::json::parse(f).at("pgid").get<pid_t>();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(tmp + ": " + std::strerror(errno));
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      close(fd);
      throw std::runtime_error(tmp + ": " + std::strerror(errno));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  fsync(fd);
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error(path + ": " + std::strerror(errno));
}

std::string read_tail(const std::string& path, std::size_t max_bytes) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return "";
  const auto size = static_cast<std::size_t>(f.tellg());
  const std::size_t start = size > max_bytes ? size - max_bytes : 0;
  f.seekg(static_cast<std::streamoff>(start));
  std::string out(size - start, '\0');
  f.read(out.data(), static_cast<std::streamsize>(out.size()));
  return out;
}

}  // namespace aegis
