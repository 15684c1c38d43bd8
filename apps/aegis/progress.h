// A progress bar on stderr for long runs: drawn only when stderr is a terminal and the
// work has taken more than a second; silent otherwise (logs and pipes stay clean).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace aegis::cli {

class ProgressBar {
 public:
  // `slots` independent tasks, each reporting its own fraction done.
  explicit ProgressBar(std::size_t slots);
  ~ProgressBar();  // stops the drawing thread and clears the line
  void set(std::size_t slot, double fraction);

 private:
  void draw(bool final);
  std::vector<std::atomic<double>> done_;
  std::chrono::steady_clock::time_point start_;
  bool tty_;
  bool drawn_ = false;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace aegis::cli
