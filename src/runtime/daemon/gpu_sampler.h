// Samples the GPUs on a thread of its own, so that aegisd's event loop never waits on the
// driver (one H200 sample: mean 6.4 ms, p99 17 ms per GPU; docs/daemon.md, "What a sample
// costs"). The loop asks for a sample at each telemetry tick and ticks when it completes
// (ready_fd), or without it when the last one is still being taken. The thread calls
// Env::sample_gpus and nothing else: every other contact with the OS stays on the loop.
#pragma once
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "runtime/daemon/gpu_reading.h"
#include "runtime/env/env.h"

namespace aegis {

class GpuSampler {
 public:
  explicit GpuSampler(Env& env);
  ~GpuSampler();  // waits for a sample in flight, then ends the thread
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // Starts a sample reading what `what` asks, unless one is in flight (false: the caller
  // goes on with the last sample it has).
  bool request(SampleRequest what);
  // The sample completed since the last call, if any (once each).
  std::optional<GpuReading> take();
  // Readable while a completed sample waits to be taken (an eventfd, for poll).
  int ready_fd() const { return ready_fd_; }
  bool in_flight() const;

 private:
  void run();

  Env& env_;
  int ready_fd_ = -1;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::optional<SampleRequest> wanted_;  // the next sample's request, until the thread takes it
  bool busy_ = false;                    // a request is pending or being sampled
  std::optional<GpuReading> done_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the fields above exist
};

}  // namespace aegis
