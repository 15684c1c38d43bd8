#include "apps/aegis/progress.h"

#include <cstdio>
#include <fmt/format.h>
#include <unistd.h>

namespace aegis::cli {

ProgressBar::ProgressBar(std::size_t slots)
    : done_(slots), start_(std::chrono::steady_clock::now()), tty_(isatty(STDERR_FILENO) != 0) {
  for (auto& d : done_) d = 0;
  if (!tty_) return;
  thread_ = std::thread([this] {
    std::unique_lock lock(m_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; })) {
      if (std::chrono::steady_clock::now() - start_ > std::chrono::seconds(1)) draw(false);
    }
  });
}

ProgressBar::~ProgressBar() {
  if (!tty_) return;
  {
    std::lock_guard lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (drawn_) fmt::print(stderr, "\r{:<72}\r", "");
}

void ProgressBar::set(std::size_t slot, double fraction) {
  if (slot < done_.size()) done_[slot] = fraction;
}

void ProgressBar::draw(bool) {
  double sum = 0;
  std::size_t finished = 0;
  for (const auto& d : done_) {
    sum += d;
    finished += d >= 1.0;
  }
  const double f = done_.empty() ? 1 : sum / static_cast<double>(done_.size());
  const int width = 30;
  const int full = static_cast<int>(f * width);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  fmt::print(stderr, "\r[{:#<{}}{:.<{}}] {:3.0f}%  {}/{} runs  {:.0f} s", "", full, "", width - full, 100 * f, finished,
             done_.size(), secs);
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace aegis::cli
