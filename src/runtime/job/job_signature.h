// A daemon job's history signature: the one string its memory history, its utilisation
// history and backfill's predicted durations are kept under (the store keeps it in
// jobs.signature, store/schema.h). Built only from fields aegisd stores.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "estimate/history.h"
#include "runtime/job/job.h"

namespace aegis {

// A job's history is its user's alone: another user running the same command must not
// change the estimate this user's jobs are admitted with.
inline std::string signature_of(std::int64_t uid, const std::vector<std::string>& command, const std::string& workdir,
                                int gpus, const std::vector<std::string>& tags) {
  return "uid " + std::to_string(uid) + ": " + job_signature(command, workdir, gpus, tags);
}
inline std::string signature_of(const DaemonJob& j) {
  return signature_of(j.uid, j.request.command, j.request.workdir, j.request.gpus, j.request.tags);
}

}  // namespace aegis
