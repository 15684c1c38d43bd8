// What every fuzz target checks beyond "no crash": an error is one short line that a JSON
// reply can carry, and an accepted job is canonical (valid, named, and read back
// unchanged from to_json). A failed check aborts, which libFuzzer reports as a crash.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/api/request.h"

namespace aegis::fuzz {

[[noreturn]] inline void violated(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz check failed: %s: %s\n", what, detail.c_str());
  std::abort();
}

inline void check_error(const api::ParseError& e) {
  if (e.message.empty() || e.message.size() > 512) violated("error length", e.message);
  for (char c : e.message)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) violated("control character in error", e.message);
  // The daemon sends the message in a JSON reply; dump() throws on invalid UTF-8.
  try {
    (void)nlohmann::json(e.message).dump();
  } catch (const nlohmann::json::exception&) {
    violated("error is not valid UTF-8", e.message);
  }
}

inline bool same(const api::JobRequest& a, const api::JobRequest& b) {
  return a.name == b.name && a.command == b.command && a.workdir == b.workdir && a.env == b.env &&
         a.gpus == b.gpus && a.mem_mib == b.mem_mib && a.exclusive == b.exclusive && a.tags == b.tags &&
         a.hint_gpu_util == b.hint_gpu_util && a.hint_sharing_score == b.hint_sharing_score;
}

inline void check_job(const api::JobRequest& job) {
  const std::string json = api::to_json(job);
  if (auto e = api::validate(job)) violated("accepted job fails validate()", e->message + " in " + json);
  if (job.name.empty()) violated("accepted job has no name", json);
  const auto again = api::parse_request(R"({"op":"submit","job":)" + json + "}");
  const auto* request = std::get_if<api::Request>(&again);
  if (!request) violated("to_json is not read back", std::get<api::ParseError>(again).message + " in " + json);
  if (!same(std::get<api::SubmitRequest>(*request).job, job)) violated("round trip changed the job", json);
}

}  // namespace aegis::fuzz
