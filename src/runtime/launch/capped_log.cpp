#include "runtime/launch/capped_log.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/statvfs.h>
#include <unistd.h>

namespace aegis {

CappedLog::CappedLog(int fd, std::uint64_t max_bytes, std::size_t tail_bytes, std::uint64_t min_free_bytes)
    : fd_(fd), max_(max_bytes), tail_max_(tail_bytes), min_free_(min_free_bytes) {}

bool CappedLog::disk_has_room(std::size_t n) {
  if (min_free_ == 0) return true;
  since_check_ += n;
  if (checked_ && since_check_ < kFreeCheckBytes) return room_;
  since_check_ = 0;
  checked_ = true;
  struct statvfs v{};
  if (fstatvfs(fd_, &v) != 0) return room_ = true;  // unknown: write (an error is counted anyway)
  // f_bavail: what unprivileged writers may use. The shim is root; the blocks reserved for
  // root are left to aegisd's database too.
  const std::uint64_t avail = static_cast<std::uint64_t>(v.f_bavail) * v.f_frsize;
  room_ = avail >= min_free_ + kFreeCheckBytes;  // room for the output until the next look
  if (!room_)
    lost_why_ = "its filesystem keeps " + std::to_string(min_free_) + " bytes free for aegisd (log_min_free_bytes)";
  return room_;
}

bool CappedLog::put(const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd_, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      lost_why_ = std::strerror(w < 0 ? errno : EIO);
      return false;
    }
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

void CappedLog::note_losses() {
  // While the free-space guard holds output back, the note waits too (one per write
  // would fill the disk by itself).
  if (lost_ == lost_reported_ || !room_) return;
  const std::string line = "\n[aegis: " + std::to_string(lost_ - lost_reported_) +
                           " bytes of output were lost: " + lost_why_ + "]\n";
  if (put(line.data(), line.size())) lost_reported_ = lost_;
}

void CappedLog::write(const char* data, std::size_t n) {
  if (!capped_) {
    note_losses();
    std::size_t room = n;
    if (max_ > 0) room = static_cast<std::size_t>(std::min<std::uint64_t>(n, max_ - (written_ + lost_)));
    if (room > 0) {
      if (disk_has_room(room) && put(data, room)) written_ += room;
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
  // The kept tail obeys the free-space guard too, with a fresh look (jobs may end together).
  if (capped_ && !tail_.empty() && min_free_ > 0) {
    since_check_ = kFreeCheckBytes;
    if (!disk_has_room(tail_.size())) {
      lost_ += tail_.size();
      tail_.clear();
      tail_pos_ = 0;
    }
  }
  room_ = true;  // the last notes are a line each, and the log must say what it lost
  note_losses();
  if (!capped_) return;
  if (tail_.empty()) {
    const std::string line = "\n[aegis: " + std::to_string(dropped_) + " bytes of output were dropped]\n";
    put(line.data(), line.size());
    return;
  }
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
