#include "runtime/store/id_floor.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <optional>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/store/store.h"

namespace aegis {

namespace {

// A job id written in decimal digits only ("12"; not "+12", "1e3", "12.old" or "").
std::optional<JobId> parse_id(std::string_view s) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  JobId v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;  // too large
  return v;
}

[[noreturn]] void fail(const std::string& path, const char* what, int err) {
  throw StoreError(path + ": " + what + ": " + std::strerror(err), err == ENOSPC);
}

// The watermark: 0 when missing, not a regular file, or not a number.
JobId read_watermark(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ELOOP) return 0;
    fail(path, "cannot read", errno);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return 0;
  }
  char buf[64];
  ssize_t n;
  do n = read(fd, buf, sizeof buf); while (n < 0 && errno == EINTR);
  const int err = errno;
  close(fd);
  if (n < 0) fail(path, "cannot read", err);
  std::string_view text(buf, static_cast<std::size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  return parse_id(text).value_or(0);
}

void write_all(int fd, const std::string& text, const std::string& path) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path, "cannot write", errno);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

JobId highest_job_id_on_disk(const std::string& state_dir) {
  JobId best = read_watermark(state_dir + "/id-floor");
  const std::string jobs = state_dir + "/jobs";
  const int fd = open(jobs.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR) return best;  // none, or not ours to follow
    fail(jobs, "cannot read", errno);
  }
  DIR* dir = fdopendir(fd);
  if (!dir) {
    const int err = errno;
    close(fd);
    fail(jobs, "cannot read", err);
  }
  while (const dirent* e = readdir(dir)) {
    const auto id = parse_id(e->d_name);
    if (!id || *id <= best) continue;
    struct stat st {};
    if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
    best = *id;
  }
  closedir(dir);
  return best;
}

void record_id_floor(const std::string& state_dir, JobId id) {
  const std::string path = state_dir + "/id-floor";
  if (id <= read_watermark(path)) return;
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = open(tmp.c_str(), flags, 0600);
  if (fd < 0 && errno == EEXIST) {
    unlink(tmp.c_str());  // left by an earlier daemon with our pid that died mid-write
    fd = open(tmp.c_str(), flags, 0600);
  }
  if (fd < 0) fail(tmp, "cannot create", errno);
  try {
    write_all(fd, std::to_string(id) + "\n", tmp);
    if (fsync(fd) != 0) fail(tmp, "cannot write", errno);
    const int rc = close(fd);
    fd = -1;
    if (rc != 0) fail(tmp, "cannot write", errno);
    if (rename(tmp.c_str(), path.c_str()) != 0) fail(path, "cannot replace", errno);
  } catch (...) {
    if (fd >= 0) close(fd);
    unlink(tmp.c_str());
    throw;
  }
  // The rename itself must survive a power cut.
  const int dfd = open(state_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) fail(state_dir, "cannot sync", errno);
  const int rc = fsync(dfd);
  const int err = errno;
  close(dfd);
  if (rc != 0) fail(state_dir, "cannot sync", err);
}

}  // namespace aegis
