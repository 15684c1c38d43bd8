// The daemon's wire format (docs/api.md): one JSON object per line. Everything is checked
// before anything is built from it; the first problem found is the answer.
#include "runtime/api/request.h"

#include <algorithm>
#include <array>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "runtime/api/detail.h"
#include "runtime/api/job_reader.h"

namespace aegis::api {
namespace detail {

void fail(std::string_view path, std::string_view what) {
  std::string message(path);
  message += ": ";
  message += what;
  throw Invalid{std::move(message)};
}

std::string integer_range(std::int64_t lo, std::int64_t hi) {
  if (hi == std::numeric_limits<std::int64_t>::max())
    return lo > 0 ? "must be a positive 64-bit integer" : "must be a non-negative 64-bit integer";
  return "must be an integer between " + std::to_string(lo) + " and " + std::to_string(hi);
}

namespace {

// Length of the well-formed UTF-8 sequence that starts `s` (non-empty), 0 if there is
// none. The second byte's range is what rules out overlong forms (E0, F0), surrogates
// (ED) and code points above U+10FFFF (F4); C0, C1 and F5..FF never start one.
std::size_t utf8_sequence_length(std::string_view s) {
  auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < lo || byte(1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i)
    if ((byte(i) & 0xC0) != 0x80) return 0;
  return n;
}

void append_hex(std::string& out, unsigned char c) {
  static constexpr char kDigits[] = "0123456789abcdef";
  out += "\\x";
  out += kDigits[c >> 4];
  out += kDigits[c & 15];
}

}  // namespace

std::string printable(std::string_view text, std::size_t max_bytes) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size() && out.size() < max_bytes) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = utf8_sequence_length(text.substr(i));
    if (n == 0 || c < 0x20 || c == 0x7f) {
      append_hex(out, c);
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  if (i < text.size()) out += "...";
  return out;
}

bool is_valid_utf8(std::string_view text) {
  while (!text.empty()) {
    const std::size_t n = utf8_sequence_length(text);
    if (n == 0) return false;
    text.remove_prefix(n);
  }
  return true;
}

namespace {

bool is_name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

bool is_tag_char(char c) { return is_name_char(c) || c == ':' || c == '='; }

bool is_env_name(std::string_view name) {
  auto word = [](char c) { return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  return !name.empty() && name.size() <= kMaxEnvNameBytes && word(name[0]) &&
         std::all_of(name.begin(), name.end(), [&](char c) { return word(c) || digit(c); });
}

// Collapses "//" and "/./" and resolves ".." without touching the file system (symlinks
// are the daemon's business when it starts the job); empty when ".." climbs above "/".
std::optional<std::string> normalise_path(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    const std::size_t slash = path.find('/');
    const std::string_view part = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part != "..") {
      parts.push_back(part);
    } else if (parts.empty()) {
      return std::nullopt;
    } else {
      parts.pop_back();
    }
  }
  std::string out;
  for (auto part : parts) (out += '/') += part;
  return out.empty() ? "/" : out;
}

// Names become parts of log file names: the basename of argv[0], one '_' for each
// character outside the name alphabet, "job" when nothing usable is left.
std::string default_name(std::string_view argv0) {
  const std::string_view base = argv0.substr(argv0.rfind('/') + 1);
  std::string name;
  for (char c : base) {
    if (name.size() == kMaxNameLength) break;
    if (is_name_char(c)) {
      name += c;
    } else if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) {  // not a continuation byte
      name += '_';
    }
  }
  return name.empty() || name == "." || name == ".." ? "job" : name;
}

// The environment names the daemon sets itself: a job that set them could escape its GPUs.
constexpr std::array<std::string_view, 3> kReservedEnv = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "AEGIS_JOB_ID"};

void check_text(std::string_view s, std::string_view path) {
  if (s.find('\0') != std::string_view::npos) fail(path, "contains a NUL byte");
  if (!is_valid_utf8(s)) fail(path, "not valid UTF-8");
}

void check_name(const std::string& name) {
  if (name.empty()) return;  // defaulted by complete()
  if (name.size() > kMaxNameLength || !std::all_of(name.begin(), name.end(), is_name_char))
    fail("name", "must match [A-Za-z0-9._-]{1,128}");
  if (name == "." || name == "..") fail("name", "must not be '.' or '..'");
}

void check_command(const std::vector<std::string>& command) {
  if (command.empty() || command.size() > kMaxArgs)
    fail("command", "must have 1 to " + std::to_string(kMaxArgs) + " entries");
  std::size_t total = 0;
  for (std::size_t i = 0; i < command.size(); ++i) {
    check_text(command[i], "command[" + std::to_string(i) + "]");
    total += command[i].size();
  }
  if (total > kMaxCommandBytes)
    fail("command", "longer than " + std::to_string(kMaxCommandBytes) + " bytes in total");
  if (command[0].empty()) fail("command[0]", "must not be empty");
}

void check_workdir(const std::string& workdir) {
  if (workdir.empty()) return;  // the daemon's choice; the CLI always sends one
  check_text(workdir, "workdir");
  if (workdir.size() > kMaxWorkdirBytes)
    fail("workdir", "longer than " + std::to_string(kMaxWorkdirBytes) + " bytes");
  if (workdir[0] != '/') fail("workdir", "must be an absolute path");
  if (!normalise_path(workdir)) fail("workdir", "'..' goes above /");
}

void check_env(const std::map<std::string, std::string>& env) {
  if (env.size() > kMaxEnvEntries) fail("env", "more than " + std::to_string(kMaxEnvEntries) + " entries");
  for (const auto& [name, value] : env) {
    if (!is_env_name(name))
      fail("env", "'" + printable(name) + "' is not a variable name ([A-Za-z_][A-Za-z0-9_]*, at most " +
                      std::to_string(kMaxEnvNameBytes) + " bytes)");
    if (std::find(kReservedEnv.begin(), kReservedEnv.end(), name) != kReservedEnv.end())
      fail("env." + name, "reserved: the daemon sets it");
    check_text(value, "env." + name);
    if (value.size() > kMaxEnvValueBytes)
      fail("env." + name, "longer than " + std::to_string(kMaxEnvValueBytes) + " bytes");
  }
}

void check_tags(const std::vector<std::string>& tags) {
  if (tags.size() > kMaxTags) fail("tags", "more than " + std::to_string(kMaxTags) + " entries");
  for (std::size_t i = 0; i < tags.size(); ++i) {
    const std::string& tag = tags[i];
    if (tag.empty() || tag.size() > kMaxTagLength || !std::all_of(tag.begin(), tag.end(), is_tag_char))
      fail("tags[" + std::to_string(i) + "]", "must match [A-Za-z0-9._:=-]{1,64}");
  }
}

void check_numbers(const JobRequest& job) {
  if (job.gpus < 1 || job.gpus > kMaxGpus) fail("gpus", integer_range(1, kMaxGpus));
  if (job.mem_mib && (*job.mem_mib < 1 || *job.mem_mib > kMaxMemMiB)) fail("mem_mib", integer_range(1, kMaxMemMiB));
  if (job.profiled_mib && (*job.profiled_mib < 1 || *job.profiled_mib > kMaxMemMiB))
    fail("profiled_mib", integer_range(1, kMaxMemMiB));
  if (job.faketensor_mib && (*job.faketensor_mib < 1 || *job.faketensor_mib > kMaxMemMiB))
    fail("faketensor_mib", integer_range(1, kMaxMemMiB));
  // Written so that NaN fails too.
  if (job.hint_gpu_util && !(*job.hint_gpu_util >= 0.0 && *job.hint_gpu_util <= 1.0))
    fail("hints.gpu_util", "must be a number between 0 and 1");
  if (job.hint_sharing_score && (*job.hint_sharing_score < 0 || *job.hint_sharing_score > kMaxSharingScore))
    fail("hints.sharing_score", integer_range(0, kMaxSharingScore));
  if (job.time_limit_s && (*job.time_limit_s < 1 || *job.time_limit_s > kMaxTimeLimitS))  // item 5
    fail("time", integer_range(1, kMaxTimeLimitS));
  // Issue 32 item 1.
  if (job.priority < kMinPriority || job.priority > kMaxPriority) fail("priority", integer_range(kMinPriority, kMaxPriority));
  if (job.checkpoint_signal != 0 || job.checkpoint_lead_s != 0) {
    auto again = parse_checkpoint_signal(checkpoint_signal_text(job.checkpoint_signal, job.checkpoint_lead_s));
    if (auto* e = std::get_if<std::string>(&again)) fail("checkpoint_signal", *e);
  }
}

}  // namespace

void check_job(const JobRequest& job) {
  check_name(job.name);
  check_command(job.command);
  check_workdir(job.workdir);
  check_env(job.env);
  check_numbers(job);
  check_tags(job.tags);
  // Issue 32 items 3-4.
  if (!job.array.empty())
    if (auto r = parse_array(job.array); std::holds_alternative<ParseError>(r)) throw Invalid{std::get<ParseError>(r).message};
  if (job.after.size() > kMaxAfter) fail("after", "more than " + std::to_string(kMaxAfter) + " entries");
  for (std::size_t i = 0; i < job.after.size(); ++i)
    if (auto r = parse_after(job.after[i], "after[" + std::to_string(i) + "]"); std::holds_alternative<ParseError>(r))
      throw Invalid{std::get<ParseError>(r).message};
}

void complete(JobRequest& job) {
  if (!job.workdir.empty()) job.workdir = *normalise_path(job.workdir);
  if (job.name.empty()) job.name = default_name(job.command.front());
}

}  // namespace detail

namespace {

using detail::fail;
using detail::printable;
using nlohmann::json;

constexpr std::int64_t kMaxId = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMaxLogChunk = 16 << 20;
constexpr std::int64_t kMaxHistory = 100000;

// JSON through the job reader's adapter interface (job_reader.h): no type coercion.
struct JsonAccess {
  using Node = json;
  static constexpr const char* kMap = "an object";
  static constexpr const char* kSeq = "an array";
  static constexpr bool kCommandMayBeString = false;

  static bool is_map(const json& n) { return n.is_object(); }
  static bool is_seq(const json& n) { return n.is_array(); }
  static const json& as_json(const json& n) { return n; }
  static std::optional<std::string> string(const json& n) {
    if (!n.is_string()) return std::nullopt;
    return n.get<std::string>();
  }
  // Floats are not integers, even 2.0; unsigned values above int64 are out of range.
  static std::optional<std::int64_t> integer(const json& n) {
    if (n.is_number_unsigned()) {
      const auto u = n.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(kMaxId)) return std::nullopt;
      return static_cast<std::int64_t>(u);
    }
    if (!n.is_number_integer()) return std::nullopt;
    return n.get<std::int64_t>();
  }
  static std::optional<double> number(const json& n) {
    if (!n.is_number()) return std::nullopt;
    return n.get<double>();
  }
  static std::optional<bool> boolean(const json& n) {
    if (!n.is_boolean()) return std::nullopt;
    return n.get<bool>();
  }
  template <class F>
  static void for_each_field(const json& n, F&& f) {
    for (auto it = n.begin(); it != n.end(); ++it) f(it.key(), it.value());
  }
  template <class F>
  static void for_each_element(const json& n, F&& f) {
    for (std::size_t i = 0; i < n.size(); ++i) f(i, n[i]);
  }
};

// A legitimate request is at most 3 levels deep. Refusing deep documents before parsing
// bounds the parser's work and memory, whatever its own limits are.
bool nested_deeper_than(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

// nlohmann's message without its "[json.exception...] parse error at " prefix and
// without the text it last read, which can echo the whole request.
std::string json_error_text(const json::exception& e) {
  std::string_view text = e.what();
  if (const auto end = text.find("] "); text.starts_with("[json.exception") && end != std::string_view::npos)
    text.remove_prefix(end + 2);
  if (text.starts_with("parse error at ")) text.remove_prefix(15);
  text = text.substr(0, text.find("; last read:"));
  return printable(text, 200);
}

// Parses JSON, rejecting repeated keys: nlohmann would keep the last silently, so two
// readers of one request could disagree on what it asks.
json parse_json(std::string_view line) {
  std::vector<std::set<std::string>> open_objects;  // the keys seen in each
  auto no_duplicates = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      open_objects.pop_back();
    } else if (event == json::parse_event_t::key) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second) fail("request", "duplicate key '" + printable(key) + "'");
    }
    return true;
  };
  try {
    return json::parse(line.begin(), line.end(), no_duplicates);
  } catch (const json::exception& e) {
    fail("request", "not valid JSON: " + json_error_text(e));
  }
}

const json* find(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const json& required(const json& obj, const char* key) {
  const json* v = find(obj, key);
  if (!v) fail(key, "required");
  return *v;
}

void allow_only(const json& obj, std::initializer_list<std::string_view> fields) {
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (std::find(fields.begin(), fields.end(), it.key()) == fields.end()) fail(printable(it.key()), "unknown field");
}

std::int64_t read_id(const json& n, const std::string& path) {
  return detail::read_integer<JsonAccess>(n, path, 1, kMaxId);
}

Request parse_submit(const json& req) {
  allow_only(req, {"op", "job", "attach"});
  const json& job = required(req, "job");
  if (!job.is_object()) fail("job", "must be an object");
  SubmitRequest r;
  try {
    r.job = detail::read_job<JsonAccess>(job);
  } catch (detail::Invalid& e) {
    e.message.insert(0, "job.");
    throw;
  }
  if (const json* attach = find(req, "attach")) r.attach = detail::read_bool<JsonAccess>(*attach, "attach");
  return r;
}

// Issue 33 item 1: the job fields a listing should carry; unknown ones are named.
std::vector<std::string> read_fields(const json& f) {
  constexpr std::size_t kKnown = std::size(kListingFields);
  if (!f.is_array() || f.empty() || f.size() > kKnown)
    fail("fields", "must be an array of 1 to " + std::to_string(kKnown) + " field names");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const std::string path = "fields[" + std::to_string(i) + "]";
    if (!f[i].is_string()) fail(path, "must be a string");
    const auto& name = f[i].get_ref<const std::string&>();
    if (std::find(std::begin(kListingFields), std::end(kListingFields), name) == std::end(kListingFields))
      fail("fields", "unknown field '" + detail::printable(name) + "' (known: id, name, user, state, ...; docs/api.md)");
    out.push_back(name);
  }
  return out;
}

Request parse_queue(const json& req) {
  allow_only(req, {"op", "all", "mine", "eta", "fields"});
  ListRequest r;
  if (const json* f = find(req, "fields")) r.fields = read_fields(*f);
  if (const json* all = find(req, "all")) r.all = detail::read_bool<JsonAccess>(*all, "all");
  if (const json* mine = find(req, "mine")) r.mine = detail::read_bool<JsonAccess>(*mine, "mine");
  if (const json* eta = find(req, "eta")) r.eta = detail::read_bool<JsonAccess>(*eta, "eta");  // item 5
  return r;
}

Request parse_show(const json& req) {
  allow_only(req, {"op", "id"});
  return ShowRequest{read_id(required(req, "id"), "id")};
}

Request parse_cancel(const json& req) {
  allow_only(req, {"op", "id", "ids"});
  const json* id = find(req, "id");
  const json* ids = find(req, "ids");
  if (id && ids) fail("ids", "give either id or ids, not both");
  if (id) return CancelRequest{{read_id(*id, "id")}};
  if (!ids) fail("ids", "required");
  if (!ids->is_array() || ids->empty() || ids->size() > kMaxIdsPerRequest)
    fail("ids", "must be an array of 1 to " + std::to_string(kMaxIdsPerRequest) + " ids");
  CancelRequest r;
  for (std::size_t i = 0; i < ids->size(); ++i) r.ids.push_back(read_id((*ids)[i], "ids[" + std::to_string(i) + "]"));
  return r;
}

// Issue 32 item 4: `aegis wait`'s question, asked again until every job is final.
Request parse_wait(const json& req) {
  allow_only(req, {"op", "ids"});
  const json& ids = required(req, "ids");
  if (!ids.is_array() || ids.empty() || ids.size() > kMaxIdsPerRequest)
    fail("ids", "must be an array of 1 to " + std::to_string(kMaxIdsPerRequest) + " ids");
  WaitRequest r;
  for (std::size_t i = 0; i < ids.size(); ++i) r.ids.push_back(read_id(ids[i], "ids[" + std::to_string(i) + "]"));
  return r;
}

bool read_stream_is_stderr(const json& n) {
  if (n == "stderr") return true;
  if (n != "stdout") fail("stream", "must be 'stdout' or 'stderr'");
  return false;
}

Request parse_logs(const json& req) {
  allow_only(req, {"op", "id", "stream", "offset", "max_bytes"});
  LogsRequest r;
  r.id = read_id(required(req, "id"), "id");
  if (const json* s = find(req, "stream")) r.stderr_stream = read_stream_is_stderr(*s);
  if (const json* o = find(req, "offset"))
    r.offset = static_cast<std::uint64_t>(detail::read_integer<JsonAccess>(*o, "offset", 0, kMaxId));
  if (const json* m = find(req, "max_bytes"))
    r.max_bytes = static_cast<std::uint64_t>(detail::read_integer<JsonAccess>(*m, "max_bytes", 1, kMaxLogChunk));
  return r;
}

Request parse_history(const json& req) {
  allow_only(req, {"op", "limit", "fields"});
  HistoryRequest r;
  if (const json* f = find(req, "fields")) r.fields = read_fields(*f);
  if (const json* l = find(req, "limit")) r.limit = detail::read_integer<JsonAccess>(*l, "limit", 1, kMaxHistory);
  return r;
}

Request parse_gpus(const json& req) {
  allow_only(req, {"op"});
  return GpusRequest{};
}

Request parse_ping(const json& req) {
  allow_only(req, {"op"});
  return PingRequest{};
}

Request parse_checked(std::string_view line) {
  if (line.size() > kMaxRequestBytes) fail("request", "longer than " + std::to_string(kMaxRequestBytes) + " bytes");
  // nlohmann's lexer takes a NUL byte for the end of the input (a C string habit), which
  // would let `{"op":"ping"}\0<anything>` through; a raw NUL is never valid JSON.
  if (line.find('\0') != std::string_view::npos) fail("request", "not valid JSON: contains a NUL byte");
  if (nested_deeper_than(line, detail::kMaxDepth))
    fail("request", "nested deeper than " + std::to_string(detail::kMaxDepth) + " levels");
  const json req = parse_json(line);
  if (!req.is_object()) fail("request", "must be a JSON object");
  const json& op = required(req, "op");
  if (!op.is_string()) fail("op", "must be a string");
  static const std::map<std::string, Request (*)(const json&), std::less<>> ops = {
      {"submit", parse_submit}, {"queue", parse_queue}, {"show", parse_show}, {"cancel", parse_cancel},
      {"logs", parse_logs},     {"gpus", parse_gpus},   {"history", parse_history}, {"ping", parse_ping},
      {"wait", parse_wait}};
  const auto& name = op.get_ref<const std::string&>();
  const auto it = ops.find(name);
  if (it == ops.end()) fail("op", "unknown operation '" + printable(name) + "'");
  return it->second(req);
}

}  // namespace

std::variant<Request, ParseError> parse_request(std::string_view line) {
  try {
    return parse_checked(line);
  } catch (const detail::Invalid& e) {
    return ParseError{e.message};
  }
}

std::optional<ParseError> validate(const JobRequest& job) {
  try {
    detail::check_job(job);
    return std::nullopt;
  } catch (const detail::Invalid& e) {
    return ParseError{e.message};
  }
}

std::string to_json(const JobRequest& job) {
  json j = {{"command", job.command}, {"gpus", job.gpus}, {"exclusive", job.exclusive}};
  if (job.restartable) j["restartable"] = true;
  if (!job.name.empty()) j["name"] = job.name;
  if (!job.workdir.empty()) j["workdir"] = job.workdir;
  if (!job.env.empty()) j["env"] = job.env;
  if (job.mem_mib) j["mem_mib"] = *job.mem_mib;
  if (job.profiled_mib) j["profiled_mib"] = *job.profiled_mib;
  if (job.faketensor_mib) j["faketensor_mib"] = *job.faketensor_mib;
  if (!job.tags.empty()) j["tags"] = job.tags;
  json hints = json::object();
  if (job.hint_gpu_util) hints["gpu_util"] = *job.hint_gpu_util;
  if (job.hint_sharing_score) hints["sharing_score"] = *job.hint_sharing_score;
  if (!hints.empty()) j["hints"] = std::move(hints);
  if (job.model) j["model"] = aegis::to_json(*job.model);
  if (!job.array.empty()) j["array"] = job.array;
  if (!job.after.empty()) j["after"] = job.after;
  if (job.time_limit_s) j["time"] = *job.time_limit_s;  // item 5
  if (job.priority != 0) j["priority"] = job.priority;
  if (job.checkpoint_signal != 0) j["checkpoint_signal"] = checkpoint_signal_text(job.checkpoint_signal, job.checkpoint_lead_s);
  if (!job.notify.empty()) j["notify"] = to_string(job.notify);  // issue 32 item 6
  // Replaces rather than throws on invalid UTF-8: only a job that validate() rejects has
  // any, and the daemon will reject it by name.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string cut_string(const std::string& s, std::size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  std::size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // not inside a character
  return s.substr(0, n) + kCutMarker;
}

std::string to_listing_json(const JobRequest& job, std::size_t max_bytes, std::vector<std::string>& cut) {
  // Everything but the (possibly megabytes of) argv and environment, then the argv's first
  // max_bytes: the copy costs the small fields only.
  JobRequest small;
  small.name = job.name;
  small.workdir = job.workdir.size() > max_bytes ? cut_string(job.workdir, max_bytes) : job.workdir;
  if (small.workdir.size() != job.workdir.size()) cut.push_back("request.workdir");
  std::size_t left = max_bytes;
  for (const auto& a : job.command) {
    if (a.size() > left) {
      small.command.push_back(cut_string(a, left));
      cut.push_back("request.command");
      break;
    }
    small.command.push_back(a);
    left -= a.size();
  }
  small.gpus = job.gpus;
  small.mem_mib = job.mem_mib;
  small.profiled_mib = job.profiled_mib;
  small.faketensor_mib = job.faketensor_mib;
  small.exclusive = job.exclusive;
  small.restartable = job.restartable;
  small.tags = job.tags;
  small.hint_gpu_util = job.hint_gpu_util;
  small.hint_sharing_score = job.hint_sharing_score;
  // The model's features go whole or not at all (a user may send megabytes of them).
  if (job.model && job.model->activation.size() + 64 * job.model->layer_counts.size() > max_bytes)
    cut.push_back("request.model");
  else
    small.model = job.model;
  small.array = job.array;
  small.after = job.after;
  small.time_limit_s = job.time_limit_s;
  small.priority = job.priority;
  small.checkpoint_signal = job.checkpoint_signal;
  small.checkpoint_lead_s = job.checkpoint_lead_s;
  small.notify = job.notify;
  return to_json(small);
}

std::string default_job_name(std::string_view argv0) { return detail::default_name(argv0); }

}  // namespace aegis::api
