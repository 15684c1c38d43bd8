// A fixed-capacity ring of the most recent telemetry samples of one GPU.
// The daemon appends one sample per tick; the engine reads it oldest first.
#pragma once
#include <cstddef>
#include <vector>

#include "core/gpu.h"

namespace aegis {

class RollingWindow {
 public:
  explicit RollingWindow(std::size_t capacity);

  void push(const GpuSample& s);
  void clear();
  std::size_t size() const { return count_; }
  std::size_t capacity() const { return ring_.size(); }

  // Copies the samples, oldest first, into `out` (replacing its contents).
  void copy_to(std::vector<GpuSample>& out) const;

 private:
  std::vector<GpuSample> ring_;
  std::size_t next_ = 0;
  std::size_t count_ = 0;
};

}  // namespace aegis
