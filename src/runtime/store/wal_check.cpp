#include "runtime/store/wal_check.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace aegis {

namespace {

// The WAL index header (walformat.html, "The WAL-Index Header"), in the host's byte order;
// SQLite keeps two copies of it (0 and 48) and the checkpoint information after them.
struct IndexHeader {
  std::uint32_t version, unused, change;
  std::uint8_t is_init, big_endian_checksum;
  std::uint16_t page_size;  // 1 stands for 65536
  std::uint32_t max_frame, pages, frame_checksum[2], salt[2], checksum[2];
};
static_assert(sizeof(IndexHeader) == 48);
constexpr std::uint32_t kIndexVersion = 3007000;
constexpr std::size_t kBackfillOffset = 96;  // nBackfill: frames copied into the database
constexpr std::uint64_t kWalHeaderBytes = 32, kFrameHeaderBytes = 24;

// The file's first `n` bytes; false when it is missing, not a regular file, or shorter.
bool read_start(const std::string& path, void* buf, std::size_t n) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  ssize_t got = -1;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    do got = pread(fd, buf, n, 0); while (got < 0 && errno == EINTR);
  }
  close(fd);
  return got == static_cast<ssize_t>(n);
}

}  // namespace

std::optional<std::string> lost_wal(const std::string& db_path) {
  unsigned char shm[kBackfillOffset + 4];
  if (!read_start(db_path + "-shm", shm, sizeof shm)) return std::nullopt;
  IndexHeader h1{}, h2{};
  std::memcpy(&h1, shm, sizeof h1);
  std::memcpy(&h2, shm + sizeof h1, sizeof h2);
  std::uint32_t backfilled = 0;
  std::memcpy(&backfilled, shm + kBackfillOffset, sizeof backfilled);
  // Two copies that differ: a writer died while changing it, and SQLite rebuilds the index
  // from the -wal; nothing can be told from it then.
  if (std::memcmp(&h1, &h2, sizeof h1) != 0 || !h1.is_init || h1.version != kIndexVersion || h1.page_size == 0)
    return std::nullopt;
  if (h1.max_frame <= backfilled) return std::nullopt;  // all in the database already
  const std::uint64_t page = h1.page_size == 1 ? 65536 : h1.page_size;
  const std::uint64_t needed = kWalHeaderBytes + std::uint64_t{h1.max_frame} * (kFrameHeaderBytes + page);
  struct stat st {};
  const bool missing = lstat((db_path + "-wal").c_str(), &st) != 0;
  if (!missing && static_cast<std::uint64_t>(st.st_size) >= needed) return std::nullopt;
  const auto name = db_path.substr(db_path.rfind('/') + 1);
  return name + "-wal " + (missing ? "is missing" : "is shorter than its index says") + ": " +
         std::to_string(h1.max_frame - backfilled) + " committed pages not yet in " + name + " are gone";
}

}  // namespace aegis
