#include "runtime/job/classify.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <csignal>
#include <cstring>
#include <sys/wait.h>

namespace aegis {

namespace {

// Lower-case patterns; a line matches if it contains any. From background.md (the
// published classifier) plus framework messages for failed device allocations.
constexpr std::array<std::string_view, 13> kOomPatterns = {
    "cuda out of memory",          // PyTorch: torch.OutOfMemoryError / RuntimeError
    "out of memory",               // generic, incl. "CUDA error: out of memory"
    "outofmemoryerror",            // torch.cuda.OutOfMemoryError
    "resource_exhausted",          // TensorFlow / JAX (XLA) status code
    "resourceexhaustederror",      // tf.errors.ResourceExhaustedError
    "cuda_error_out_of_memory",    // CUDA driver API
    "cudaerrormemoryallocation",   // CUDA runtime API
    "cublas_status_alloc_failed",  // cuBLAS workspace allocation
    "cudnn_status_alloc_failed",   // cuDNN
    "failed to allocate",          // TF/XLA BFC allocator: "failed to allocate 2.00GiB"
    "ran out of memory trying to allocate",  // XLA
    "oom when allocating",         // TensorFlow
    "allocator (gpu_0_bfc) ran out of memory",
};

bool has_word_oom(std::string_view lower) {
  // "oom" as a word: OOM-killer lines and framework summaries ("OOM"), not "room" or "zoom".
  for (std::size_t p = lower.find("oom"); p != std::string_view::npos; p = lower.find("oom", p + 1)) {
    const bool left = p == 0 || !std::isalnum(static_cast<unsigned char>(lower[p - 1]));
    const bool right = p + 3 >= lower.size() || !std::isalnum(static_cast<unsigned char>(lower[p + 3]));
    if (left && right) return true;
  }
  return false;
}

std::string trim_line(std::string_view line) {
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.remove_prefix(1);
  std::string s(line.substr(0, 300));
  for (auto& c : s)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return s;
}

}  // namespace

std::optional<std::string> find_oom_line(std::string_view text) {
  std::string lower;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    lower.assign(line);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (auto p : kOomPatterns)
      if (lower.find(p) != std::string::npos) return trim_line(line);
    if (has_word_oom(lower)) return trim_line(line);
    start = end + 1;
  }
  return std::nullopt;
}

std::optional<std::string> find_mps_connect_line(std::string_view text) {
  // CUDA's cudaErrorMpsConnectionFailed: "MPS client failed to connect to the MPS control
  // daemon or the MPS server".
  constexpr std::string_view kPattern = "mps client failed to connect";
  std::string lower;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    lower.assign(line);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower.find(kPattern) != std::string::npos) return trim_line(line);
    start = end + 1;
  }
  return std::nullopt;
}

ExitVerdict classify_exit(std::optional<int> wait_status, std::string_view log_tail, bool cancelled) {
  if (cancelled) return {ExitKind::Cancelled, "cancelled"};
  if (wait_status && WIFEXITED(*wait_status) && WEXITSTATUS(*wait_status) == 0) return {ExitKind::Success, "exit status 0"};
  // A failed job whose log says it ran out of memory is an OOM, whatever the status says.
  if (auto line = find_oom_line(log_tail)) return {ExitKind::Oom, *line};
  if (!wait_status) return {ExitKind::Failed, "ended while the daemon was down; exit status unknown"};
  if (WIFEXITED(*wait_status)) return {ExitKind::Failed, "exit status " + std::to_string(WEXITSTATUS(*wait_status))};
  if (WIFSIGNALED(*wait_status)) {
    const int sig = WTERMSIG(*wait_status);
    const char* name = sigdescr_np(sig);
    return {ExitKind::Failed, "killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "")};
  }
  return {ExitKind::Failed, "ended with wait status " + std::to_string(*wait_status)};
}

}  // namespace aegis
