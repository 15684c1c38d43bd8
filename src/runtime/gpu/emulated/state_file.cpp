// State's access to its file (state.h, "by design"): open and the checks on whose file it
// is, the bounded flock, the parts in use read with pread into the private copy and checked,
// written back with pwrite under the `writer` mark, and the owner's restore.
#include "runtime/gpu/emulated/state.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <thread>
#include <unistd.h>

#include "runtime/gpu/emulated/state_table.h"

namespace aegis::emu {

using layout::File;
using table::now_ns;

namespace {

using Clock = std::chrono::steady_clock;

// (state.cpp has its own: the two share a unity build.)
bool pid_in_range(std::uint32_t pid) { return pid > 0 && pid <= static_cast<std::uint32_t>(INT_MAX); }

constexpr std::size_t kDeviceBytes = sizeof(layout::Device);
constexpr std::size_t kProcessesAt = offsetof(File, processes);

// A part of the file: [offset, offset + length).
struct Range {
  std::size_t offset = 0, length = 0;
};

// The parts of the file in use (counts already checked): the GPUs, the instances of the
// GPUs in MIG mode (one range from the first such GPU's to the last's), the live processes.
// The header is apart: read first, written last.
std::array<Range, 3> in_use(const File& f) {
  std::array<Range, 3> r;
  r[0] = {layout::kHeaderBytes, static_cast<std::size_t>(f.gpu_count) * kDeviceBytes};
  int lo = -1, hi = -1;
  for (int g = 0; g < f.gpu_count; ++g)
    if (f.devices[g].mig) {
      if (lo < 0) lo = g;
      hi = g;
    }
  if (lo >= 0)
    r[1] = {layout::kHeaderBytes + static_cast<std::size_t>(mig_device(lo, 0)) * kDeviceBytes,
            static_cast<std::size_t>((hi - lo + 1) * kMigSlices) * kDeviceBytes};
  r[2] = {kProcessesAt, static_cast<std::size_t>(f.process_count) * sizeof(layout::Process)};
  return r;
}

char* bytes_of(File& f, std::size_t offset) { return reinterpret_cast<char*>(&f) + offset; }
const char* bytes_of(const File& f, std::size_t offset) { return reinterpret_cast<const char*>(&f) + offset; }

// A fresh table: what a creator writes (magic last, by store(): the header goes last).
void make_new(File& f) {
  std::memset(static_cast<void*>(&f), 0, sizeof(File));
  f.version = layout::kVersion;
  f.bytes = sizeof(File);
  f.created_ns = f.updated_ns = now_ns(CLOCK_MONOTONIC);
  f.magic = layout::kMagic;
}

// The pid that holds the flock on `fd`'s file, from /proc/locks (0: not found), so that the
// error names who stalls the GPUs.
pid_t flock_holder(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return 0;
  char want[64];
  std::snprintf(want, sizeof want, "%02x:%02x:%llu ", major(st.st_dev), minor(st.st_dev),
                static_cast<unsigned long long>(st.st_ino));
  FILE* locks = std::fopen("/proc/locks", "re");
  if (!locks) return 0;
  char line[256];
  pid_t pid = 0;
  while (pid == 0 && std::fgets(line, sizeof line, locks)) {
    long p = 0;
    char dev[64] = "";
    if (std::strstr(line, "FLOCK") && std::sscanf(line, "%*s FLOCK %*s %*s %ld %63s", &p, dev) == 2 &&
        std::strncmp(dev, want, std::strlen(want) - 1) == 0)
      pid = static_cast<pid_t>(p);
  }
  std::fclose(locks);
  return pid;
}

std::string holder_text(int fd) {
  const pid_t pid = flock_holder(fd);
  if (pid <= 0) return "another process";
  struct stat st {};
  const std::string proc = "/proc/" + std::to_string(pid);
  if (stat(proc.c_str(), &st) != 0) return "pid " + std::to_string(pid);
  return "pid " + std::to_string(pid) + " (uid " + std::to_string(st.st_uid) + ")";
}

// AEGIS_EMULATED_LOCK_WAIT_MS, or the default; false (with `error`) for a bad value.
bool lock_wait_from_env(std::chrono::milliseconds* wait, std::string* error) {
  *wait = kDefaultLockWait;
  const char* v = std::getenv("AEGIS_EMULATED_LOCK_WAIT_MS");
  if (!v || !*v) return true;
  char* end = nullptr;
  errno = 0;
  const long ms = std::strtol(v, &end, 10);
  if (errno != 0 || *end != '\0' || ms < 1 || ms > 600'000) {
    *error = std::string("AEGIS_EMULATED_LOCK_WAIT_MS='") + v + "' (write milliseconds, 1 to 600000)";
    return false;
  }
  *wait = std::chrono::milliseconds(ms);
  return true;
}

}  // namespace

State::State(std::string path, int fd, uid_t owner, std::chrono::milliseconds lock_wait)
    : path_(std::move(path)), fd_(fd), owner_(owner), lock_wait_(lock_wait), file_(new File()), machine_(new File()) {}

State::~State() { ::close(fd_); }

void State::lock() const {
  // A try-lock with a growing pause: flock has no timed form, and an honest holder lets go
  // within microseconds, so the first retry nearly always takes it.
  const auto deadline = Clock::now() + lock_wait_;
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    if (flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK)
      throw StateError("emulated GPU state '" + path_ + "': flock: " + std::strerror(errno));
    const auto now = Clock::now();
    if (now >= deadline)
      throw StateError("emulated GPU state '" + path_ + "': its lock (flock) is held by " + holder_text(fd_) +
                       " for over " + std::to_string(lock_wait_.count()) + " ms");
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
  }
}

void State::unlock() const { flock(fd_, LOCK_UN); }

void State::load() const {
  File& f = *file_;
  auto damaged = [&](const std::string& why) {
    std::string what = "emulated GPU state '" + path_ + "': " + why;
    if (owner_ == geteuid()) {
      restore();
      what += "; restored by its owner (this process, uid " + std::to_string(owner_) + "), its processes forgotten";
      std::fprintf(stderr, "aegis emulated GPUs: %s\n", what.c_str());  // the owner's log says who reset them
    } else {
      what += "; its owner (uid " + std::to_string(owner_) + ") restores it at its next call";
    }
    throw StateError(what);
  };
  auto read = [&](Range r) {
    const ssize_t n = r.length ? pread(fd_, bytes_of(f, r.offset), r.length, static_cast<off_t>(r.offset)) : 0;
    if (n == static_cast<ssize_t>(r.length)) return;
    struct stat st {};
    if (n < 0 || fstat(fd_, &st) != 0) throw StateError("emulated GPU state '" + path_ + "': read: " + std::strerror(errno));
    damaged("truncated to " + std::to_string(st.st_size) + " bytes (its table takes " + std::to_string(sizeof(File)) + ")");
  };
  // The header and as many GPUs as last time in one read (a count that grew reads the rest).
  const int guess = std::clamp(f.gpu_count, 0, kMaxGpus);
  read({0, layout::kHeaderBytes + static_cast<std::size_t>(guess) * kDeviceBytes});
  if (f.magic != layout::kMagic || f.version != layout::kVersion || f.bytes != sizeof(File))
    damaged("its header was overwritten (not this build's table any more)");
  if (f.gpu_count < 0 || f.gpu_count > kMaxGpus || f.process_count < 0 || f.process_count > kMaxProcesses)
    damaged("its header was overwritten (" + std::to_string(f.gpu_count) + " GPUs, " +
            std::to_string(f.process_count) + " processes)");
  if (f.gpu_count > guess)  // the GPUs first: which are in MIG mode says which instances to read
    read({layout::kHeaderBytes + static_cast<std::size_t>(guess) * kDeviceBytes,
          static_cast<std::size_t>(f.gpu_count - guess) * kDeviceBytes});
  const auto parts = in_use(f);
  read(parts[1]);
  read(parts[2]);
  // Entries anyone may have written: each must name a device that exists before an index
  // is taken from it; a writer that died part-way leaves `writer` set (layout.h).
  bool bad = f.writer != 0;
  for (int i = 0; i < f.process_count && !bad; ++i)
    bad = !table::cuda_device(f, f.processes[i].device) || !pid_in_range(f.processes[i].pid);
  if (!bad) return;
  table::repair(f);
  store();
}

void State::store() const {
  File& f = *file_;
  auto write = [&](std::size_t offset, std::size_t length) {
    if (length == 0) return;
    if (pwrite(fd_, bytes_of(f, offset), length, static_cast<off_t>(offset)) != static_cast<ssize_t>(length))
      throw StateError("emulated GPU state '" + path_ + "': write: " + std::strerror(errno));
  };
  // Marked as being written first, unmarked by the header written last (state_layout.h).
  f.writer = static_cast<std::uint32_t>(getpid());
  write(offsetof(File, writer), sizeof f.writer);
  for (const Range& r : in_use(f)) write(r.offset, r.length);
  f.writer = 0;
  write(0, layout::kHeaderBytes);
}

void State::remember_machine() const {
  const File& f = *file_;
  File& m = *machine_;
  m.gpu_count = f.gpu_count;
  for (const Range& r : in_use(f))
    if (r.offset < kProcessesAt) std::memcpy(bytes_of(m, r.offset), bytes_of(f, r.offset), r.length);
}

void State::restore() const {
  File& f = *file_;
  const File& m = *machine_;
  if (ftruncate(fd_, sizeof(File)) != 0)
    throw StateError("emulated GPU state '" + path_ + "': damaged, and cannot resize it: " + std::strerror(errno));
  make_new(f);
  f.gpu_count = m.gpu_count;
  for (int g = 0; g < m.gpu_count; ++g) {
    auto copy = [&](int id) {
      layout::Device& d = f.devices[id];
      const layout::Device& was = m.devices[id];
      d.total_mib = was.total_mib;
      std::memcpy(d.name, was.name, sizeof d.name);
      std::memcpy(d.profile, was.profile, sizeof d.profile);
      d.slices = was.slices;
      d.mig = was.mig;
    };
    copy(g);
    for (int s = 0; s < kMigSlices && m.devices[g].mig; ++s) copy(mig_device(g, s));
  }
  table::recompute(f);
  store();
}

std::unique_ptr<State> State::open(const std::string& path, std::span<const GpuSpec> gpus, std::string* error,
                                   std::chrono::milliseconds lock_wait) {
  const std::string where = "emulated GPU state '" + path + "': ";
  auto fail = [&](const std::string& why) {
    *error = where + why;
    return nullptr;
  };
  if (path.empty()) return fail("no path (set AEGIS_EMULATED_STATE)");
  if (gpus.size() > static_cast<std::size_t>(kMaxGpus)) return fail("more than 64 GPUs");
  if (lock_wait.count() < 0) {
    std::string why;
    if (!lock_wait_from_env(&lock_wait, &why)) return fail(why);
  }
  // Opened, never created, when it exists (O_CREAT on another user's file in a sticky
  // directory may be refused by fs.protected_regular, and would hide whose it is); made
  // exclusively when it does not. Never through a link.
  constexpr int kFlags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
  int fd = -1;
  bool created = false;
  for (int tries = 0; fd < 0; ++tries) {
    fd = ::open(path.c_str(), kFlags);
    if (fd >= 0 || errno != ENOENT || tries == 3) break;
    fd = ::open(path.c_str(), kFlags | O_CREAT | O_EXCL, 0666);
    created = fd >= 0;
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return fail(errno == ELOOP ? "a symbolic link (refused)" : std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return fail(std::strerror(e));
  }
  // From here the State owns the descriptor.
  std::unique_ptr<State> s(new State(path, fd, st.st_uid, lock_wait));
  if (!S_ISREG(st.st_mode)) return fail("not a regular file (refused)");
  if (st.st_uid != geteuid() && st.st_uid != 0)
    return fail("owned by uid " + std::to_string(st.st_uid) + ", neither this user (uid " + std::to_string(geteuid()) +
                ") nor root: another user made it; it is not adopted (remove it)");
  if (st.st_nlink != 1) return fail("has " + std::to_string(st.st_nlink) + " links (refused: a link to another file?)");
  // Open to every user, as /dev/nvidia* is: jobs run under their owners' uids.
  if (created) fchmod(fd, 0666);
  try {
    // Creation under the lock, so two processes starting together neither both make the
    // table nor see a half-made one.
    s->lock();
    struct Unlock {
      const State& s;
      ~Unlock() { s.unlock(); }
    } unlock{*s};
    if (fstat(fd, &st) != 0) return fail(std::strerror(errno));
    File& f = *s->file_;
    bool fresh = st.st_size == 0;
    if (st.st_size != 0 && st.st_size != static_cast<off_t>(sizeof(File)))
      return fail("made by another build (" + std::to_string(st.st_size) + " bytes, this one uses " +
                  std::to_string(sizeof(File)) + "); delete it");
    if (!fresh) {
      if (pread(fd, &f, layout::kHeaderBytes, 0) != static_cast<ssize_t>(layout::kHeaderBytes))
        return fail(std::string("read: ") + std::strerror(errno));
      fresh = f.magic == 0;  // its creator died before finishing: nobody else uses it
      if (!fresh && f.magic != layout::kMagic) return fail("not an aegis emulated GPU state file");
      if (!fresh && (f.version != layout::kVersion || f.bytes != sizeof(File)))
        return fail("made by another build (layout version " + std::to_string(f.version) + "); delete it");
    }
    if (fresh) {
      if (ftruncate(fd, sizeof(File)) != 0) return fail(std::string("resize: ") + std::strerror(errno));
      make_new(f);
      s->store();
    }
    s->load();
    if (!gpus.empty()) {
      table::configure_gpus(f, gpus);
      s->store();
    }
    s->remember_machine();
  } catch (const StateError& e) {
    *error = e.what();
    return nullptr;
  }
  return s;
}

}  // namespace aegis::emu
