// Why a job's process ended: success, out of memory (goes to the recovery ladder), or
// another failure (stops the job with the reason shown to the user). Decided from the
// wait status and the tail of the job's logs, as the published system did, with the
// allocation-failure messages of PyTorch, TensorFlow, JAX, CUDA and cuBLAS.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace aegis {

enum class ExitKind { Success, Oom, Failed, Cancelled };

struct ExitVerdict {
  ExitKind kind = ExitKind::Failed;
  std::string reason;  // one line for users: "exit status 2", "killed by signal 9", the OOM line
};

// `wait_status` as waitpid gives it (empty when unknown, e.g. the process was lost while
// the daemon was down); `log_tail` the last part of stderr (and stdout) text.
ExitVerdict classify_exit(std::optional<int> wait_status, std::string_view log_tail, bool cancelled);

// The first line of `text` matching an out-of-memory pattern, if any.
std::optional<std::string> find_oom_line(std::string_view text);

// The first line of `text` where CUDA says its MPS client could not reach the control
// daemon or server, if any. A user can print it: the daemon believes it only when it also
// saw that GPU's control daemon down during the attempt (mps_supervisor.h).
std::optional<std::string> find_mps_connect_line(std::string_view text);

}  // namespace aegis
