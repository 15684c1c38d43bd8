// Private to aegis_api: reads the JobRequest fields from a JSON object (request.cpp) or a
// YAML mapping (job_spec_yaml.cpp) through an access adapter, so both formats accept the
// same fields under the same names and word their errors alike. An adapter A provides:
//   Node; kMap, kSeq (how errors name a mapping and a sequence); kCommandMayBeString;
//   is_map, is_seq; string, integer, number, boolean (empty when the node is not one);
//   for_each_field(map, f(key, value)); for_each_element(seq, f(index, value)).
// Types are checked here; values by check_job() afterwards.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/api/detail.h"

namespace aegis::api::detail {

template <class A>
std::string read_string(const typename A::Node& node, const std::string& path) {
  auto s = A::string(node);
  if (!s) fail(path, "must be a string");
  return std::move(*s);
}

template <class A>
std::int64_t read_integer(const typename A::Node& node, const std::string& path, std::int64_t lo,
                          std::int64_t hi) {
  auto v = A::integer(node);
  if (!v || *v < lo || *v > hi) fail(path, integer_range(lo, hi));
  return *v;
}

template <class A>
bool read_bool(const typename A::Node& node, const std::string& path) {
  auto v = A::boolean(node);
  if (!v) fail(path, "must be true or false");
  return *v;
}

template <class A>
std::vector<std::string> read_strings(const typename A::Node& node, const std::string& path) {
  if (!A::is_seq(node)) fail(path, std::string("must be ") + A::kSeq + " of strings");
  std::vector<std::string> out;
  A::for_each_element(node, [&](std::size_t i, const typename A::Node& e) {
    out.push_back(read_string<A>(e, path + "[" + std::to_string(i) + "]"));
  });
  return out;
}

// YAML allows `command: "make -j8 && ./train"`; it is never split here (no shell rules
// to get wrong), it runs under /bin/sh -c.
template <class A>
std::vector<std::string> read_command(const typename A::Node& node) {
  if constexpr (A::kCommandMayBeString) {
    if (auto s = A::string(node)) return {"/bin/sh", "-c", std::move(*s)};
    if (!A::is_seq(node)) fail("command", std::string("must be ") + A::kSeq + " of strings or a string");
  }
  return read_strings<A>(node, "command");
}

template <class A>
std::map<std::string, std::string> read_env(const typename A::Node& node) {
  if (!A::is_map(node)) fail("env", std::string("must be ") + A::kMap + " of strings");
  std::map<std::string, std::string> env;
  A::for_each_field(node, [&](const std::string& key, const typename A::Node& value) {
    env[key] = read_string<A>(value, "env." + printable(key));
  });
  return env;
}

template <class A>
void read_hints(JobRequest& job, const typename A::Node& node) {
  if (!A::is_map(node)) fail("hints", std::string("must be ") + A::kMap);
  A::for_each_field(node, [&](const std::string& key, const typename A::Node& value) {
    if (key == "gpu_util") {
      auto v = A::number(value);
      if (!v) fail("hints.gpu_util", "must be a number between 0 and 1");
      job.hint_gpu_util = *v;  // range checked by check_job
    } else if (key == "sharing_score") {
      const auto score = read_integer<A>(value, "hints.sharing_score", 0, kMaxSharingScore);
      job.hint_sharing_score = static_cast<int>(score);
    } else {
      fail("hints." + printable(key), "unknown field");
    }
  });
}

// `mem` and `mem_mib` say the same thing two ways; a job giving both is ambiguous.
inline void set_mem(JobRequest& job, std::string_view key, MiB mib) {
  if (job.mem_mib) fail(key, "give either mem or mem_mib, not both");
  job.mem_mib = mib;
}

template <class A>
MiB read_mem(const typename A::Node& node) {
  auto mib = parse_mem_size(read_string<A>(node, "mem"));
  if (!mib) fail("mem", "not a memory size from 1M to 1P (such as 12000, 512M, 12G, 1.5GiB)");
  return *mib;
}

// Issue 32 item 5: `time`, seconds as a number or a string ("90m", "2h", "1-00:00:00").
template <class A>
std::int64_t read_time_limit(const typename A::Node& node) {
  static const char* kWhat = "must be a time limit from 1 s to 365 days (seconds, or such as 90m, 2h, 1-00:00:00)";
  if (auto v = A::integer(node)) {
    if (*v < 1 || *v > kMaxTimeLimitS) fail("time", kWhat);
    return *v;
  }
  auto s = A::string(node);
  auto t = s ? parse_time_limit(*s) : std::nullopt;
  if (!t) fail("time", kWhat);
  return *t;
}

// The learned estimator's features (estimate/features.h), checked by their own reader.
template <class A>
void read_model(JobRequest& job, const typename A::Node& node) {
  if (!A::is_map(node)) fail("model", std::string("must be ") + A::kMap);
  auto parsed = features_from_json(A::as_json(node));
  if (auto* error = std::get_if<std::string>(&parsed)) {
    const auto colon = error->find(": ");
    // The field name is the user's own key (any bytes, from YAML): shown printable, as every
    // key in an error is (an error is one line of valid UTF-8).
    fail("model." + printable(error->substr(0, colon)),
         colon == std::string::npos ? "invalid" : printable(error->substr(colon + 2), 300));
  }
  job.model = std::get<ModelFeatures>(std::move(parsed));
}

// `checkpoint_signal: USR1@120` (issue 32 item 1).
template <class A>
void read_checkpoint_signal(JobRequest& job, const typename A::Node& node) {
  auto parsed = parse_checkpoint_signal(read_string<A>(node, "checkpoint_signal"));
  if (auto* e = std::get_if<std::string>(&parsed)) fail("checkpoint_signal", *e);
  job.checkpoint_signal = std::get<CheckpointSignal>(parsed).signal;
  job.checkpoint_lead_s = std::get<CheckpointSignal>(parsed).lead_s;
}

// Issue 32 item 6: `notify`, a list of event names or one comma-separated string.
template <class A>
NotifySet read_notify(const typename A::Node& node) {
  std::string text;
  if (auto s = A::string(node)) {
    text = std::move(*s);
  } else {
    if (!A::is_seq(node)) fail("notify", std::string("must be ") + A::kSeq + " of event names or a string");
    for (const auto& e : read_strings<A>(node, "notify")) text += (text.empty() ? "" : ",") + e;
  }
  auto parsed = parse_notify(text);
  if (auto* error = std::get_if<std::string>(&parsed)) fail("notify", *error);
  return std::get<NotifySet>(parsed);
}

template <class A>
void read_job_field(JobRequest& job, const std::string& key, const typename A::Node& value) {
  using Node = typename A::Node;
  using Reader = void (*)(JobRequest&, const Node&);
  static const std::map<std::string_view, Reader> readers = {
      {"name", [](JobRequest& j, const Node& n) { j.name = read_string<A>(n, "name"); }},
      {"command", [](JobRequest& j, const Node& n) { j.command = read_command<A>(n); }},
      {"workdir", [](JobRequest& j, const Node& n) { j.workdir = read_string<A>(n, "workdir"); }},
      {"env", [](JobRequest& j, const Node& n) { j.env = read_env<A>(n); }},
      {"gpus",
       [](JobRequest& j, const Node& n) { j.gpus = static_cast<int>(read_integer<A>(n, "gpus", 1, kMaxGpus)); }},
      {"mem_mib",
       [](JobRequest& j, const Node& n) { set_mem(j, "mem_mib", read_integer<A>(n, "mem_mib", 1, kMaxMemMiB)); }},
      {"mem", [](JobRequest& j, const Node& n) { set_mem(j, "mem", read_mem<A>(n)); }},
      {"profiled_mib",
       [](JobRequest& j, const Node& n) { j.profiled_mib = read_integer<A>(n, "profiled_mib", 1, kMaxMemMiB); }},
      {"faketensor_mib",
       [](JobRequest& j, const Node& n) { j.faketensor_mib = read_integer<A>(n, "faketensor_mib", 1, kMaxMemMiB); }},
      {"exclusive", [](JobRequest& j, const Node& n) { j.exclusive = read_bool<A>(n, "exclusive"); }},
      {"restartable", [](JobRequest& j, const Node& n) { j.restartable = read_bool<A>(n, "restartable"); }},
      {"tags", [](JobRequest& j, const Node& n) { j.tags = read_strings<A>(n, "tags"); }},
      {"hints", [](JobRequest& j, const Node& n) { read_hints<A>(j, n); }},
      {"model", [](JobRequest& j, const Node& n) { read_model<A>(j, n); }},
      // Issue 32 items 3-4: an array and dependencies, checked by check_job.
      {"array", [](JobRequest& j, const Node& n) { j.array = read_string<A>(n, "array"); }},
      {"after", [](JobRequest& j, const Node& n) { j.after = read_strings<A>(n, "after"); }},
      {"time", [](JobRequest& j, const Node& n) { j.time_limit_s = read_time_limit<A>(n); }},  // item 5
      // Issue 32 item 1: priorities and preemption.
      {"priority",
       [](JobRequest& j, const Node& n) {
         j.priority = static_cast<int>(read_integer<A>(n, "priority", kMinPriority, kMaxPriority));
       }},
      {"checkpoint_signal", [](JobRequest& j, const Node& n) { read_checkpoint_signal<A>(j, n); }},
      {"notify", [](JobRequest& j, const Node& n) { j.notify = read_notify<A>(n); }},  // issue 32 item 6
  };
  auto it = readers.find(key);
  if (it == readers.end()) fail(printable(key), "unknown field");
  it->second(job, value);
}

// Reads, checks and completes a job; errors name the field as it is spelled in `map`.
template <class A>
JobRequest read_job(const typename A::Node& map) {
  JobRequest job;
  A::for_each_field(map, [&](const std::string& key, const typename A::Node& value) {
    read_job_field<A>(job, key, value);
  });
  check_job(job);
  complete(job);
  return job;
}

}  // namespace aegis::api::detail
