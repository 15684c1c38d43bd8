#include "runtime/launch/attempt_dir.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <limits>
#include <string_view>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace aegis {

namespace {

using nlohmann::json;

const std::string kPending = "{\"pending\": true}";

std::string padded(const std::string& json_text) {
  std::string s = json_text.substr(0, kRecordBytes - 1);
  s.resize(kRecordBytes - 1, ' ');
  return s + "\n";
}

[[noreturn]] void fail(const std::string& what, int err) {
  throw LaunchError(what + ": " + std::strerror(err), err);
}

// Writes all of `data` to a new file (exclusive, no links followed); throws LaunchError.
void create_file(const std::string& path, const std::string& data, mode_t mode, uid_t uid, gid_t gid, bool chown_it) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) fail(path, errno);
  auto bail = [&](int err) {
    close(fd);
    fail(path, err);
  };
  if (chown_it && fchown(fd, uid, gid) != 0) bail(errno);
  if (fchmod(fd, mode) != 0) bail(errno);
  for (std::size_t done = 0; done < data.size();) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) bail(n < 0 ? errno : EIO);
    done += static_cast<std::size_t>(n);
  }
  if (close(fd) != 0) fail(path, errno);
}

void remove_tree(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") unlink((dir + "/" + n).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

// Reads a whole small file; false with errno (ENOENT when missing).
bool slurp(const std::string& path, std::string& out, int& err) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    err = errno;
    return false;
  }
  out.clear();
  char buf[4096];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      close(fd);
      return false;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > 64 * 1024) break;
  }
  close(fd);
  return true;
}

template <class T, class F>
Record<T> read_record(const std::string& path, F&& from_json) {
  Record<T> r;
  std::string text;
  if (!slurp(path, text, r.error)) {
    // Missing means pending: attempts recorded by an older aegisd have no placeholder.
    r.status = r.error == ENOENT ? Record<T>::Pending : Record<T>::Unreadable;
    return r;
  }
  try {
    const json j = json::parse(text);
    if (j.value("pending", false)) return r;
    r.value = from_json(j);
    r.status = Record<T>::Written;
  } catch (const std::exception&) {
    // Written in place in one write: a torn record is not a record.
    r.status = Record<T>::Pending;
  }
  return r;
}

// The entries of `dir` named by a plain decimal number (no sign, no leading space, not
// too large) of at least `from` that are directories themselves, not links; ascending.
std::vector<std::int64_t> numbered_dirs(const std::string& dir, std::int64_t from) {
  std::vector<std::int64_t> out;
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return out;
  DIR* d = fdopendir(fd);
  if (!d) {
    close(fd);
    return out;
  }
  while (const dirent* e = readdir(d)) {
    const std::string_view name = e->d_name;
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), v);
    if (name.empty() || name[0] == '-' || ec != std::errc() || end != name.data() + name.size() || v < from) continue;
    struct stat st {};
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) out.push_back(v);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<JobId> job_dirs(const std::string& state_dir, JobId from) {
  std::vector<JobId> out;
  for (auto id : numbered_dirs(state_dir + "/jobs", static_cast<std::int64_t>(from))) out.push_back(static_cast<JobId>(id));
  return out;
}

std::vector<int> attempt_numbers(const std::string& state_dir, JobId job) {
  std::vector<int> out;
  for (auto n : numbered_dirs(state_dir + "/jobs/" + std::to_string(job), 1))
    if (n > 0 && n <= std::numeric_limits<int>::max()) out.push_back(static_cast<int>(n));
  return out;
}

std::optional<LaunchFile> read_launch(const AttemptDir& d) {
  std::string data;
  const int fd = open(d.launch().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) data.append(buf, static_cast<std::size_t>(n));
  close(fd);
  if (n < 0) return std::nullopt;
  auto f = decode_launch_file(data);
  if (!std::holds_alternative<LaunchFile>(f)) return std::nullopt;
  return std::get<LaunchFile>(std::move(f));
}

AttemptDir attempt_dir(const std::string& state_dir, JobId id, int attempt) {
  return {state_dir + "/jobs/" + std::to_string(id) + "/" + std::to_string(attempt)};
}

bool LaunchError::transient() const {
  switch (error) {
    case ENOSPC: case EDQUOT: case EMFILE: case ENFILE: case ENOMEM: case EAGAIN: case EINTR: case EIO:
      return true;
    default:
      return false;
  }
}

void prepare_attempt(const AttemptDir& d, const LaunchFile& launch) {
  const std::string job_dir = d.dir.substr(0, d.dir.rfind('/'));
  const std::string jobs_dir = job_dir.substr(0, job_dir.rfind('/'));
  struct stat st {};
  for (const std::string& p : {jobs_dir, job_dir}) {
    if (mkdir(p.c_str(), 0700) != 0 && errno != EEXIST) fail(p, errno);
    if (lstat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
      throw LaunchError(p + ": not a directory owned by aegisd", EEXIST);
  }
  if (mkdir(d.dir.c_str(), 0700) != 0) {
    if (errno != EEXIST) fail(d.dir, errno);
    // Only the leftover of an attempt that never started may be replaced: its lock is
    // free and its shim never recorded a process. Anything else is another attempt's.
    const auto child = read_child(d);
    if (lstat(d.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        attempt_liveness(d) != Liveness::Gone || child.status != Record<ChildRecord>::Pending ||
        read_exit(d).written())
      throw LaunchError(d.dir + ": an attempt directory that is in use already exists; not reusing it", EEXIST);
    remove_tree(d.dir);
    if (mkdir(d.dir.c_str(), 0700) != 0) fail(d.dir, errno);
  }
  try {
    create_file(d.launch(), encode_launch_file(launch), 0600, 0, 0, false);
    create_file(d.child(), padded(kPending), 0600, 0, 0, false);
    create_file(d.exit(), padded(kPending), 0600, 0, 0, false);
    create_file(d.lock(), "", 0600, 0, 0, false);
    const bool root = geteuid() == 0;
    create_file(d.stdout_log(), "", 0600, launch.uid, launch.gid, root);
    create_file(d.stderr_log(), "", 0600, launch.uid, launch.gid, root);
  } catch (...) {
    remove_tree(d.dir);
    throw;
  }
}

Liveness attempt_liveness(const AttemptDir& d) {
  const int fd = open(d.lock().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return errno == ENOENT ? Liveness::Gone : Liveness::Unknown;
  Liveness l = Liveness::Gone;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) l = errno == EWOULDBLOCK ? Liveness::Alive : Liveness::Unknown;
  close(fd);  // releases our lock if we got it
  return l;
}

Record<ChildRecord> read_child(const AttemptDir& d) {
  return read_record<ChildRecord>(d.child(), [](const json& j) {
    ChildRecord r;
    r.pgid = j.at("pgid").get<pid_t>();
    r.shim.pid = j.value("shim_pid", pid_t{0});
    r.shim.start_ticks = j.value("shim_start_ticks", std::uint64_t{0});
    r.cgroup_mount = j.value("cgroup_mount", std::string());
    r.cgroup = j.value("cgroup", std::string());
    return r;
  });
}

Record<ExitRecord> read_exit(const AttemptDir& d) {
  return read_record<ExitRecord>(d.exit(), [](const json& j) {
    ExitRecord r;
    r.wait_status = j.at("wait_status").get<int>();
    r.ended_at = j.at("ended_at").get<double>();
    r.cancelled = j.value("cancelled", false);
    r.start_error = j.value("start_error", std::string());
    r.log_dropped_bytes = j.value("log_dropped_bytes", std::uint64_t{0});
    return r;
  });
}

std::string child_record_text(const ChildRecord& r) {
  return json{{"pgid", r.pgid},
              {"shim_pid", r.shim.pid},
              {"shim_start_ticks", r.shim.start_ticks},
              {"cgroup_mount", r.cgroup_mount},
              {"cgroup", r.cgroup}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string exit_record_text(const ExitRecord& r) {
  json j = {{"wait_status", r.wait_status},
            {"ended_at", r.ended_at},
            {"cancelled", r.cancelled},
            {"log_dropped_bytes", r.log_dropped_bytes}};
  // The record has a fixed size: the reason is cut to fit, never the fields before it.
  if (!r.start_error.empty()) j["start_error"] = r.start_error.substr(0, 300);
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool write_record(const std::string& path, const std::string& json_text) {
  const int fd = open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  const std::string data = padded(json_text);
  ssize_t n;
  do n = pwrite(fd, data.data(), data.size(), 0);
  while (n < 0 && errno == EINTR);
  const bool ok = n == static_cast<ssize_t>(data.size()) && fdatasync(fd) == 0;
  const int err = errno;
  close(fd);
  errno = err;
  return ok;
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
