#include "runtime/daemon/gpu_sampler.h"

#include <cerrno>
#include <csignal>
#include <pthread.h>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <sys/eventfd.h>
#include <unistd.h>

namespace aegis {

GpuSampler::GpuSampler(Env& env) : env_(env) {
  ready_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ready_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  // The thread takes no signal: aegisd reads SIGTERM, SIGHUP and SIGCHLD from a signalfd,
  // which needs them blocked in every thread (a thread with them open would get SIGTERM's
  // default action, ending aegisd without its shutdown).
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  thread_ = std::thread([this] { run(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

GpuSampler::~GpuSampler() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  close(ready_fd_);
}

bool GpuSampler::request(SampleRequest what) {
  {
    std::lock_guard lock(mu_);
    if (busy_) return false;
    busy_ = true;
    wanted_ = std::move(what);
  }
  wake_.notify_all();
  return true;
}

std::optional<GpuReading> GpuSampler::take() {
  std::lock_guard lock(mu_);
  std::uint64_t n = 0;
  (void)!read(ready_fd_, &n, sizeof n);  // drained: poll waits for the next completion
  auto out = std::move(done_);
  done_.reset();
  return out;
}

bool GpuSampler::in_flight() const {
  std::lock_guard lock(mu_);
  return busy_;
}

void GpuSampler::run() {
  for (;;) {
    SampleRequest what;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || wanted_; });
      if (stop_) return;
      what = std::move(*wanted_);
      wanted_.reset();
    }
    GpuReading r;
    r.asked = what;
    try {
      r.gpus = env_.sample_gpus(what);
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    {
      std::lock_guard lock(mu_);
      done_ = std::move(r);  // an untaken older sample is superseded
      busy_ = false;
      const std::uint64_t one = 1;  // under the lock: take() drains it with the sample
      (void)!write(ready_fd_, &one, sizeof one);
    }
  }
}

}  // namespace aegis
