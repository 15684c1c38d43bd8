// A job's log file as the shim writes it: what the job prints, up to a cap (the daemon's
// log_max_bytes, per stream). Past the cap the log says so in a line of its own, the rest
// is dropped except its last `tail_bytes`, which are appended when the job ends (so the
// final lines, where frameworks print why a job died, are always there). Write errors
// (a full disk) never stop the job: the bytes are counted as lost and the log says so
// as soon as a write succeeds again.
#pragma once
#include <cstdint>
#include <string>

namespace aegis {

class CappedLog {
 public:
  // `max_bytes` 0: no cap. The file descriptor stays the caller's.
  CappedLog(int fd, std::uint64_t max_bytes, std::size_t tail_bytes);
  void write(const char* data, std::size_t n);
  // Appends the kept tail and what was dropped or lost; call once, when the job has ended.
  void finish();
  std::uint64_t written() const { return written_; }
  std::uint64_t dropped() const { return dropped_ + lost_; }

 private:
  bool put(const char* data, std::size_t n);  // false: a write error (counted as lost)
  void note_losses();

  int fd_;
  std::uint64_t max_;
  std::size_t tail_max_;
  std::uint64_t written_ = 0;  // job bytes in the file
  std::uint64_t dropped_ = 0;  // job bytes past the cap, not kept in the tail
  std::uint64_t lost_ = 0;     // job bytes a write error lost
  std::uint64_t lost_reported_ = 0;
  int last_error_ = 0;
  bool capped_ = false;
  std::string tail_;           // ring buffer of the bytes past the cap
  std::size_t tail_pos_ = 0;   // next write position once the ring is full
};

}  // namespace aegis
