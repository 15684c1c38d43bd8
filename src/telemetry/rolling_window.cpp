#include "telemetry/rolling_window.h"

#include <stdexcept>

namespace aegis {

RollingWindow::RollingWindow(std::size_t capacity) : ring_(capacity) {
  if (capacity == 0) throw std::invalid_argument("telemetry window capacity must be >= 1");
}

void RollingWindow::push(const GpuSample& s) {
  ring_[next_] = s;
  next_ = (next_ + 1) % ring_.size();
  if (count_ < ring_.size()) ++count_;
}

void RollingWindow::clear() {
  next_ = 0;
  count_ = 0;
}

void RollingWindow::copy_to(std::vector<GpuSample>& out) const {
  out.clear();
  out.reserve(count_);
  const std::size_t start = (next_ + ring_.size() - count_) % ring_.size();
  for (std::size_t i = 0; i < count_; ++i) out.push_back(ring_[(start + i) % ring_.size()]);
}

}  // namespace aegis
