// A job's log file as the shim writes it: what the job prints, up to a cap (the daemon's
// log_max_bytes, per stream). Past the cap the log says so in a line of its own, the rest
// is dropped except its last `tail_bytes`, which are appended when the job ends (so the
// final lines, where frameworks print why a job died, are always there). Write errors
// (a full disk) never stop the job: the bytes are counted as lost and the log says so
// as soon as a write succeeds again. Nor can a log fill its filesystem: output is dropped
// (and counted) while fewer than `min_free_bytes` are left to unprivileged writers, so
// that aegisd's database always has room (a cancel on a full disk; docs/security.md, 4).
#pragma once
#include <cstdint>
#include <string>

namespace aegis {

class CappedLog {
 public:
  // `max_bytes` 0: no cap; `min_free_bytes` 0: no free-space guard. The file descriptor
  // stays the caller's.
  CappedLog(int fd, std::uint64_t max_bytes, std::size_t tail_bytes, std::uint64_t min_free_bytes = 0);
  // Output between two looks at the filesystem's free space (a statvfs per write would
  // cost more than the write); the guard keeps this much more than min_free_bytes.
  static constexpr std::uint64_t kFreeCheckBytes = 256 << 10;
  void write(const char* data, std::size_t n);
  // Appends the kept tail and what was dropped or lost; call once, when the job has ended.
  void finish();
  std::uint64_t written() const { return written_; }
  std::uint64_t dropped() const { return dropped_ + lost_; }

 private:
  bool put(const char* data, std::size_t n);  // false: a write error (counted as lost)
  bool disk_has_room(std::size_t n);          // the free-space guard, for n more bytes
  void note_losses();

  int fd_;
  std::uint64_t max_;
  std::size_t tail_max_;
  std::uint64_t written_ = 0;  // job bytes in the file
  std::uint64_t dropped_ = 0;  // job bytes past the cap, not kept in the tail
  std::uint64_t lost_ = 0;     // job bytes a write error lost
  std::uint64_t lost_reported_ = 0;
  std::string lost_why_;       // why the last bytes were lost
  std::uint64_t min_free_;
  std::uint64_t since_check_ = 0;  // output since the last look at free space
  bool checked_ = false, room_ = true;
  bool capped_ = false;
  std::string tail_;           // ring buffer of the bytes past the cap
  std::size_t tail_pos_ = 0;   // next write position once the ring is full
};

}  // namespace aegis
