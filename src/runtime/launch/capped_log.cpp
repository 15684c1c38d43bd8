#include "runtime/launch/capped_log.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace aegis {

CappedLog::CappedLog(int fd, std::uint64_t max_bytes, std::size_t tail_bytes)
    : fd_(fd), max_(max_bytes), tail_max_(tail_bytes) {}

bool CappedLog::put(const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd_, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      last_error_ = w < 0 ? errno : EIO;
      return false;
    }
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

void CappedLog::note_losses() {
  if (lost_ == lost_reported_) return;
  const std::string line = "\n[aegis: " + std::to_string(lost_ - lost_reported_) +
                           " bytes of output were lost: " + std::strerror(last_error_) + "]\n";
  if (put(line.data(), line.size())) lost_reported_ = lost_;
}

void CappedLog::write(const char* data, std::size_t n) {
  if (!capped_) {
    note_losses();
    std::size_t room = n;
    if (max_ > 0) room = static_cast<std::size_t>(std::min<std::uint64_t>(n, max_ - (written_ + lost_)));
    if (room > 0) {
      if (put(data, room)) written_ += room;
      else lost_ += room;
    }
    data += room;
    n -= room;
    if (max_ > 0 && written_ + lost_ >= max_ && n > 0) {
      capped_ = true;
      const std::string line = "\n[aegis: output cut at " + std::to_string(max_) +
                               " bytes (log_max_bytes); what follows is dropped, except its last " +
                               std::to_string(tail_max_) + " bytes, written here when the job ends]\n";
      put(line.data(), line.size());
    }
  }
  if (n == 0) return;
  // Past the cap: keep the last tail_max_ bytes in a ring.
  if (tail_max_ == 0) {
    dropped_ += n;
    return;
  }
  if (n >= tail_max_) {
    dropped_ += tail_.size() + (n - tail_max_);
    tail_.assign(data + (n - tail_max_), tail_max_);
    tail_pos_ = 0;
    return;
  }
  if (tail_.size() < tail_max_) {
    const std::size_t take = std::min(n, tail_max_ - tail_.size());
    tail_.append(data, take);
    data += take;
    n -= take;
  }
  while (n > 0) {  // the ring is full: overwrite the oldest bytes
    const std::size_t take = std::min(n, tail_max_ - tail_pos_);
    std::memcpy(tail_.data() + tail_pos_, data, take);
    dropped_ += take;
    data += take;
    n -= take;
    tail_pos_ = (tail_pos_ + take) % tail_max_;
  }
}

void CappedLog::finish() {
  note_losses();
  if (!capped_) return;
  const std::string line = "\n[aegis: " + std::to_string(dropped_) + " bytes of output were dropped; the last " +
                           std::to_string(tail_.size()) + " bytes follow]\n";
  put(line.data(), line.size());
  // Oldest first: from the write position to the end, then the start.
  if (!put(tail_.data() + tail_pos_, tail_.size() - tail_pos_) || !put(tail_.data(), tail_pos_)) {
    lost_ += tail_.size();
    note_losses();
  }
  tail_.clear();
  tail_pos_ = 0;
}

}  // namespace aegis
