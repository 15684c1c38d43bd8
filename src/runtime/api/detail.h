// Private to aegis_api (request.cpp, mem_size.cpp, job_spec_yaml.cpp): the limits that
// request.h does not export, the error the parsers throw internally (every public entry
// point catches it: none of them throws), and the JobRequest rules shared by the JSON
// and YAML front ends. Every limit is listed in docs/api.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/api/request.h"

namespace aegis::api::detail {

inline constexpr MiB kMaxMemMiB = MiB{1} << 30;            // 1 PiB
inline constexpr std::size_t kMaxWorkdirBytes = 4096;      // Linux PATH_MAX
inline constexpr std::size_t kMaxEnvNameBytes = 256;
inline constexpr std::size_t kMaxEnvValueBytes = 128 << 10;
inline constexpr std::size_t kMaxTags = 64;
inline constexpr std::size_t kMaxTagLength = 64;
inline constexpr std::int64_t kMaxSharingScore = 2;
inline constexpr std::size_t kMaxDepth = 16;               // nesting of a request or spec

// A rejected input; `message` is the one line a ParseError carries.
struct Invalid {
  std::string message;
};

// Throws Invalid{"<path>: <what>"}.
[[noreturn]] void fail(std::string_view path, std::string_view what);

// "must be an integer between <lo> and <hi>", worded for 64-bit bounds.
std::string integer_range(std::int64_t lo, std::int64_t hi);

// User text made fit for an error message: control characters and bytes that are not
// valid UTF-8 become \xNN (the message stays one line of valid UTF-8, as a JSON reply
// needs), cut after about `max_bytes` with "...".
std::string printable(std::string_view text, std::size_t max_bytes = 64);

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool is_valid_utf8(std::string_view text);

// The JobRequest rules (validate() without the catch); paths are the field names.
void check_job(const JobRequest& job);

// Canonical form of a checked job: workdir normalised, name defaulted from command[0].
void complete(JobRequest& job);

}  // namespace aegis::api::detail
