// The commands a user of a shared GPU server types: aegis submit, queue, show, cancel,
// logs, gpus, history. Each talks to aegisd over its socket; every listing has --json.
#include <chrono>
#include <cmath>
#include <ctime>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <sstream>
#include <optional>
#include <thread>
#include <tuple>
#include <unistd.h>

#include "apps/aegis/client.h"
#include "apps/aegis/model_helpers.h"
#include "apps/aegis/printable.h"
#include "apps/aegis/commands.h"
#include "apps/aegis/job_runner.h"
#include "estimate/features.h"
#include "lifecycle/time_limits.h"
#include "runtime/api/container.h"
#include "runtime/api/request.h"
#include "runtime/slurm/gres.h"
#include "sim/csv.h"

extern char** environ;

namespace aegis::cli {

namespace {

using nlohmann::json;

std::string g_socket;                 // --socket, shared by every job command
double g_timeout = 0;                 // --timeout; 0: not given (AEGIS_TIMEOUT, else 30 s)
std::vector<std::string> g_command;  // what followed `--`

// One request to aegisd, with the global --socket and --timeout.
json ask(const json& request) { return call(socket_path(g_socket), request, request_timeout(g_timeout)); }

// --- reading replies ---------------------------------------------------------------
// The daemon leaves empty fields out of its jobs (a job submitted through the API without
// a workdir has none) and another version may lack some: printing shows "-" for what is
// absent or null instead of failing on it.

const json& field(const json& obj, const char* key) {
  static const json absent;
  if (!obj.is_object()) return absent;
  const auto it = obj.find(key);
  return it == obj.end() ? absent : *it;
}

// The elements of an array field; none when it is absent or not an array.
const json& items(const json& obj, const char* key) {
  static const json none = json::array();
  const json& v = field(obj, key);
  return v.is_array() ? v : none;
}

// A value as text: strings as they are (control characters escaped: they may be another
// user's), numbers and booleans as JSON, "-" for nothing.
std::string text(const json& v) {
  if (v.is_string()) return v.get_ref<const std::string&>().empty() ? "-" : printable(v.get_ref<const std::string&>());
  if (v.is_null()) return "-";
  return v.dump();
}
std::string text(const json& obj, const char* key) { return text(field(obj, key)); }

// A string field, "" when absent or not a string (for optional lines and flags), control
// characters escaped.
std::string str(const json& obj, const char* key) {
  const json& v = field(obj, key);
  return v.is_string() ? printable(v.get_ref<const std::string&>()) : std::string();
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string ago(const json& t) {
  if (!t.is_number()) return "-";
  const double s = std::max(0.0, now_s() - t.get<double>());
  if (s < 120) return fmt::format("{:.0f}s", s);
  if (s < 7200) return fmt::format("{:.0f}m", s / 60);
  if (s < 172800) return fmt::format("{:.1f}h", s / 3600);
  return fmt::format("{:.1f}d", s / 86400);
}

std::string when(const json& t) {
  if (!t.is_number()) return "-";
  const auto secs = static_cast<std::time_t>(t.get<double>());
  std::tm tm{};
  localtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// "GPU-5d2a1c3e..9f01": the start tells vendors' UUIDs apart, the end emulated ones.
std::string short_uuid(const std::string& u) { return u.size() > 18 ? u.substr(0, 12) + ".." + u.substr(u.size() - 4) : u; }

// The GPUs of a list of UUIDs, short, comma-separated.
std::string uuid_list(const json& uuids) {
  std::string out;
  for (const auto& u : uuids) out += (out.empty() ? "" : ",") + short_uuid(text(u));
  return out;
}

// `queue --eta` (issue 32 item 5): a waiting job's expected start, from now.
std::string eta_of(const json& j, double now) {
  const json& at = field(j, "eta");
  if (!at.is_number()) return text(j, "state") == "queued" ? "unknown" : "-";
  const double in = at.get<double>() - now;
  return in <= 0 ? "now" : "in " + format_time_limit(std::ceil(in));
}

// Issue 33 item 1: the job fields print_jobs prints, all a listing needs to carry for it.
json printed_fields(bool eta = false) {
  json f = json::array({"id", "name", "user", "state", "gpus", "attempts", "gpu_uuids", "reason", "never_starts",
                        "fair_share", "started_at", "submitted_at", "ended_at"});
  if (eta) f.push_back("eta");
  return f;
}

void print_jobs(const json& jobs, bool eta = false) {
  const double now = static_cast<double>(std::time(nullptr));
  if (eta) fmt::print("{:<12} ", "ETA");
  fmt::print("{:>6}  {:<20} {:<10} {:<9} {:>4} {:>3}  {:<8} {}\n", "ID", "NAME", "USER", "STATE", "GPUS", "TRY", "TIME",
             "WHERE / WHY");
  if (!jobs.is_array()) return;
  for (const auto& j : jobs) {
    const std::string state = text(j, "state");
    std::string where = state == "running" ? uuid_list(items(j, "gpu_uuids")) : str(j, "reason");
    if (const auto never = str(j, "never_starts"); !never.empty()) where = "can never start: " + never;
    if (const json& f = field(j, "fair_share"); state == "queued" && f.is_number())  // fair share orders the queue
      where = fmt::format("fair share {:.3f}{}{}", f.get<double>(), where.empty() ? "" : "; ", where);
    const char* since = state == "running" ? "started_at" : state == "queued" ? "submitted_at" : "ended_at";
    if (eta) fmt::print("{:<12} ", eta_of(j, now));
    fmt::print("{:>6}  {:<20} {:<10} {:<9} {:>4} {:>3}  {:<8} {}\n", text(j, "id"), text(j, "name").substr(0, 20),
               text(j, "user").substr(0, 10), state, text(j, "gpus"), text(j, "attempts"), ago(field(j, since)), where);
  }
}

// `aegis gpus`: one line per GPU.
void print_gpus(const json& r) {
  fmt::print("{}\n", text(r, "source"));
  if (const auto tracking = str(r, "tracking"); !tracking.empty()) fmt::print("job processes: {}\n", tracking);
  if (const auto error = str(r, "error"); !error.empty()) fmt::print("telemetry error: {}\n", error);
  fmt::print("{:>3}  {:<18} {:>17}  {:>5} {:>5} {:>5}  {:<11} {:<10} {}\n", "GPU", "UUID", "MEMORY (MiB)", "SMACT",
             "SMOCC", "DRAMA", "TELEMETRY", "STATE", "JOBS");
  auto pct = [](const json& v) {
    return v.is_number() ? fmt::format("{:.0f}%", 100 * v.get<double>()) : std::string("-");
  };
  for (const auto& g : items(r, "gpus")) {
    std::string jobs;
    for (const auto& id : items(g, "jobs")) jobs += (jobs.empty() ? "" : ",") + text(id);
    const json& observing = field(g, "observing");
    fmt::print("{:>3}  {:<18} {:>8}/{:<8}  {:>5} {:>5} {:>5}  {:<11} {:<10} {}\n", text(g, "index"),
               short_uuid(text(g, "uuid")), text(g, "memory_used_mib"), text(g, "memory_total_mib"), pct(field(g, "smact")), pct(field(g, "smocc")),
               pct(field(g, "drama")), str(g, "telemetry_source").empty() ? "-" : str(g, "telemetry_source"), observing.is_boolean() ? (observing.get<bool>() ? "observing" : "open") : "-",
               jobs.empty() ? "-" : jobs);
    // Processes of no job: their memory is never handed out (docs/daemon.md).
    for (const auto& p : items(g, "foreign"))
      fmt::print("     foreign process {} ({} MiB): not an aegis job\n", text(p, "pid"),
                 field(p, "used_mib").is_null() ? std::string("?") : text(p, "used_mib"));
  }
}

// `aegis show`: one job, its attempts and its events.
void print_job(const json& j) {
  const json& req = field(j, "request");
  const json& mem = field(req, "mem_mib");
  fmt::print("job {} ({}) of {}: {}\n", text(j, "id"), text(j, "name"), text(j, "user"), text(j, "state"));
  fmt::print("  command    {}\n", field(req, "command").is_null() ? "-" : printable(field(req, "command").dump()));
  fmt::print("  workdir    {}\n", text(req, "workdir"));
  fmt::print("  gpus       {}   memory {}\n", text(j, "gpus"),
             mem.is_null() ? std::string("not declared") : fmt::format("{} MiB", text(mem)));
  fmt::print("  submitted  {}   started {}   ended {}\n", when(field(j, "submitted_at")), when(field(j, "started_at")),
             when(field(j, "ended_at")));
  if (const auto reason = str(j, "reason"); !reason.empty()) fmt::print("  reason     {}\n", reason);
  // The utilisation and sharing score the policies read, the utilisation predicted at
  // submission (the lpa order's), and where each came from.
  const json& u = field(j, "utilisation");
  if (!field(u, "gpu_util").is_null() || !field(u, "sharing_score").is_null() ||
      !field(u, "predicted_util").is_null()) {
    auto from = [&](const char* value, const char* source) {
      const json& v = field(u, value);
      if (v.is_null()) return std::string("-");
      return fmt::format("{} ({})", v.is_number_float() ? fmt::format("{:.2f}", v.get<double>()) : text(v),
                         str(u, source));
    };
    fmt::print("  gpu util   {}   sharing score {}   predicted util {}\n", from("gpu_util", "gpu_util_source"),
               from("sharing_score", "sharing_score_source"), from("predicted_util", "predicted_util_source"));
  }
  for (const auto& a : items(j, "attempt_log")) {
    const auto outcome = str(a, "outcome"), detail = str(a, "detail");
    fmt::print("  attempt {}  {} on {}  {}{}\n", text(a, "number"), when(field(a, "launched_at")),
               uuid_list(items(a, "gpus")), outcome.empty() ? "running" : outcome, detail.empty() ? "" : ": " + detail);
    // When its observation window started, and from what (docs/daemon.md, "Anchor").
    const json& context = field(a, "context_at");
    const json& active = field(a, "first_activity");
    if (!context.is_null() || !active.is_null())
      fmt::print("             context {}   first activity {}{}\n", when(context), when(active),
                 str(a, "anchor").empty() ? "" : " (anchor: " + str(a, "anchor") + ")");
  }
  for (const auto& e : items(j, "events"))
    fmt::print("  {}  {:<9} {}\n", when(field(e, "t")), text(e, "kind"), str(e, "detail"));
}

// What Slurm must know of this node: the memory of the GPUs aegisd schedules, in bytes
// (MiB with Slurm's M suffix), as a count-only GRES, so that no device is bound.
void print_slurm_conf(const json& gpus, const std::string& gres) {
  MiB total = 0;
  for (const auto& g : gpus) {
    // A wrong figure here would mislead Slurm for good: refuse rather than guess.
    const json& mib = field(g, "memory_total_mib");
    if (!mib.is_number_integer()) throw ClientError("aegisd's gpus reply has a GPU without memory_total_mib");
    total += mib.get<MiB>();
  }
  const std::string node = short_hostname();
  fmt::print("# slurm.conf (once): GresTypes={0}\n"
             "#   and, to account GPU memory in sacct: AccountingStorageTRES=gres/{0}\n"
             "# slurm.conf, this node's NodeName line ({1} GPU device(s), {2} MiB in all): add\n"
             "Gres={0}:{3}\n"
             "# gres.conf (no File=: count-only, so Slurm binds no device and sets no CUDA_VISIBLE_DEVICES):\n"
             "NodeName={4} Name={0} Count={3}\n",
             gres, gpus.size(), total, slurm::mib_count(total), node);
}

std::int64_t parse_id(const std::string& s) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || v <= 0) throw ClientError("job id: '" + s + "' is not a job id (a positive number)");
  return v;
}

// --- submit ------------------------------------------------------------------------

struct SubmitArgs {
  int gpus = 0;
  std::string mem, name, spec, workdir, model_spec, profiled_mem, faketensor_mem, container;
  std::string time;  // issue 32 item 5: --time
  ModelHelperArgs model;  // --model FILE.py:NAME and its input: the helpers run here
  std::optional<double> hint_gpu_util;
  std::optional<int> hint_sharing_score;
  bool exclusive = false;
  bool restartable = false;
  std::vector<std::string> env, tags, command;
  std::string array;               // issue 32 item 3: --array (submit only)
  std::vector<std::string> after;  // issue 32 item 4: --after (submit only)
  std::optional<int> priority;      // issue 32 item 1
  std::string checkpoint_signal;    // issue 32 item 1: SIG@SECONDS
  std::optional<std::string> notify;  // issue 32 item 6
};

api::JobRequest build_request(const SubmitArgs& a) {
  api::JobRequest r;
  if (!a.spec.empty()) {
    std::ifstream f(a.spec);
    if (!f) throw ClientError(a.spec + ": cannot read the job spec");
    std::stringstream ss;
    ss << f.rdbuf();
    auto parsed = api::parse_job_spec_yaml(ss.str());
    if (auto* e = std::get_if<api::ParseError>(&parsed)) throw ClientError(a.spec + ": " + e->message);
    r = std::get<api::JobRequest>(parsed);
  } else {
    // The job sees the environment it was submitted from, as with sbatch, less what the
    // API refuses (the daemon's own variables, exported shell functions, oversized or
    // non-UTF-8 values): each variable is checked alone with the API's own rules.
    for (char** e = environ; *e && r.env.size() < api::kMaxEnvEntries; ++e) {
      const std::string kv = *e;
      const auto eq = kv.find('=');
      if (eq == std::string::npos) continue;
      api::JobRequest probe;
      probe.command = {"true"};
      probe.env[kv.substr(0, eq)] = kv.substr(eq + 1);
      if (!api::validate(probe)) r.env.insert(*probe.env.begin());
    }
  }
  if (!g_command.empty()) r.command = g_command;
  if (!a.command.empty()) r.command = a.command;
  // A usage error (exit 2, with the pointer to --help), like a bad flag.
  if (r.command.empty()) throw CLI::ValidationError("no command: put it after `--`, as in `-- python3 train.py`");
  if (a.gpus > 0) r.gpus = a.gpus;
  if (!a.mem.empty()) {
    auto m = api::parse_mem_size(a.mem);
    if (!m) throw ClientError("--mem: '" + a.mem + "' is not a memory size (e.g. 12000, 12G, 1.5GiB)");
    r.mem_mib = *m;
  }
  // The other memory figures a policy may admit a job by (docs/estimators.md).
  for (auto [text, flag, field] : {std::tuple{&a.profiled_mem, "--profiled-mem", &r.profiled_mib},
                                   std::tuple{&a.faketensor_mem, "--faketensor-mem", &r.faketensor_mib}}) {
    if (text->empty()) continue;
    auto m = api::parse_mem_size(*text);
    if (!m) throw ClientError(std::string(flag) + ": '" + *text + "' is not a memory size (e.g. 12000, 12G, 1.5GiB)");
    *field = *m;
  }
  if (!a.time.empty()) {  // issue 32 item 5
    auto t = api::parse_time_limit(a.time);
    if (!t) throw ClientError("--time: '" + a.time + "' is not a time limit (e.g. 5400, 90m, 2h, 1-00:00:00)");
    r.time_limit_s = *t;
  }
  if (a.hint_gpu_util) r.hint_gpu_util = a.hint_gpu_util;
  if (a.hint_sharing_score) r.hint_sharing_score = a.hint_sharing_score;
  if (!a.name.empty()) r.name = a.name;  // else the daemon names it after the command
  if (a.exclusive) r.exclusive = true;
  if (a.restartable) r.restartable = true;
  // Issue 32 item 1: the level (the daemon checks it against what the admin allows you)
  // and the warning before a preemption.
  if (a.priority) r.priority = *a.priority;
  if (!a.checkpoint_signal.empty()) {
    auto c = api::parse_checkpoint_signal(a.checkpoint_signal);
    if (auto* e = std::get_if<std::string>(&c)) throw ClientError("--checkpoint-signal: " + *e);
    r.checkpoint_signal = std::get<api::CheckpointSignal>(c).signal;
    r.checkpoint_lead_s = std::get<api::CheckpointSignal>(c).lead_s;
  }
  if (a.notify) {  // issue 32 item 6
    auto parsed = api::parse_notify(*a.notify);
    if (auto* e = std::get_if<std::string>(&parsed)) throw ClientError("--notify: " + *e);
    r.notify = std::get<api::NotifySet>(parsed);
  }
  if (!a.model_spec.empty()) {
    std::ifstream f(a.model_spec);
    if (!f) throw ClientError(a.model_spec + ": cannot read the model spec");
    json j;
    try {
      j = json::parse(f);
    } catch (const json::exception& e) {
      throw ClientError(a.model_spec + ": not valid JSON: " + e.what());
    }
    auto parsed = features_from_json(j);
    if (auto* e = std::get_if<std::string>(&parsed)) throw ClientError(a.model_spec + ": " + *e);
    r.model = std::get<ModelFeatures>(parsed);
  }
  if (!a.model.model.empty()) {
    if (!a.model_spec.empty()) throw ClientError("--model: give --model or --model-spec, not both");
    if (a.model.batch_size < 1 || a.model.input_shape.empty())
      throw ClientError("--model: needs --batch-size and --input-shape (one sample's shape, e.g. 3,224,224)");
    const auto h = run_model_helpers(a.model);
    r.model = h.features;
    if (!r.faketensor_mib) r.faketensor_mib = static_cast<MiB>(std::ceil(h.faketensor_mib));
  }
  for (const auto& kv : a.env) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw ClientError("--env: expected NAME=VALUE, got '" + kv + "'");
    r.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& t : a.tags) r.tags.push_back(t);
  if (!a.workdir.empty()) r.workdir = a.workdir;
  if (!a.array.empty()) r.array = a.array;
  for (const auto& d : a.after) r.after.push_back(d);
  if (r.workdir.empty()) {
    char buf[4096];
    if (!getcwd(buf, sizeof buf)) throw ClientError("cannot tell the current directory; give --workdir");
    r.workdir = buf;
  }
  if (!a.container.empty()) {
    if (auto e = api::check_container_image(a.container)) throw ClientError(*e);
    std::string error;
    if (r.name.empty()) r.name = api::default_job_name(r.command.front());  // the job's, not podman's
    r.command = api::container_command(a.container, r.command, r.workdir, api::host_has_cdi_gpus(), &error);
    if (!error.empty()) throw ClientError(error);
  }
  if (auto e = api::validate(r)) throw ClientError(e->message);
  return r;
}

}  // namespace

void set_job_command(std::vector<std::string> command) { g_command = std::move(command); }

namespace {

// An option given with an empty value (`--mem "$MEM"` with MEM unset) is a mistake to
// report, not the option left out. CLI11 validates only values that were given, and
// names the option: "--name: must not be empty (...)".
CLI::Validator non_empty(std::string what) {
  return CLI::Validator(
      [what](std::string& v) { return v.empty() ? "must not be empty (" + what + ")" : std::string(); }, "");
}

// --mem, checked while parsing so that a bad size, empty included, is a usage error.
CLI::Validator mem_size() {
  return CLI::Validator(
      [](std::string& v) {
        return api::parse_mem_size(v) ? std::string() : "'" + v + "' is not a memory size (e.g. 12000, 12G, 1.5GiB)";
      },
      "");
}

void add_request_options(CLI::App* cmd, SubmitArgs& sa) {
  cmd->add_option("--gpus", sa.gpus, "GPUs the job needs (default 1)")->check(CLI::Range(1, api::kMaxGpus));
  cmd->add_option("--mem", sa.mem, "GPU memory it needs per GPU, e.g. 12G or 12000 (MiB); omitted: the server decides")
      ->check(mem_size());
  cmd->add_option("--profiled-mem", sa.profiled_mem,
                  "Its measured solo peak per GPU (a profiling run's), for policies that admit by it (aegis-peak, lucid)")
      ->check(mem_size());
  cmd->add_option("--faketensor-mem", sa.faketensor_mem,
                  "PyTorch FakeTensor's estimate per GPU (scripts/faketensor_estimate.py), for estimator = faketensor")
      ->check(mem_size());
  cmd->add_option("--hint-gpu-util", sa.hint_gpu_util, "Its expected GPU utilisation alone, 0 to 1 (Horus' cap, lpu)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--hint-sharing-score", sa.hint_sharing_score, "Lucid's sharing score: 0, 1 or 2")
      ->check(CLI::Range(0, 2));
  cmd->add_option("--name", sa.name, "Name shown in listings (default: the command's name)")
      ->check(non_empty("leave --name out to name the job after its command"));
  cmd->add_flag("--exclusive", sa.exclusive, "Run alone on its GPUs");
  // Issue 32 item 5.
  cmd->add_option("--time", sa.time,
                  "Wall-clock limit of each attempt: seconds, or 90m, 2h, 1d, H:MM:SS, D-HH:MM:SS; past it the job is "
                  "stopped and fails (timeout). Omitted: the server's default_time_limit_s")
      ->check(CLI::Validator(
          [](std::string& v) {
            return api::parse_time_limit(v) ? std::string()
                                            : "'" + v + "' is not a time limit (e.g. 5400, 90m, 2h, 1-00:00:00)";
          },
          ""));
  cmd->add_flag("--restartable", sa.restartable,
                "Safe to run again: if an attempt's outcome is lost (its shim killed, a failed disk), run it again "
                "instead of failing it (docs/security.md)");
  // Issue 32 item 1 (docs/lab-policies.md, "Priorities and preemption").
  cmd->add_option("--priority", sa.priority,
                  "Its priority level (higher is served first; the levels you may use are the admin's "
                  "priority_levels, 0 by default)")
      ->check(CLI::Range(api::kMinPriority, api::kMaxPriority));
  cmd->add_option("--checkpoint-signal", sa.checkpoint_signal,
                  "Before a preemption, send this signal and wait up to this many seconds (or until the job touches "
                  "$AEGIS_CHECKPOINT_DIR/checkpointed) before stopping it, e.g. USR1@120")
      ->check(CLI::Validator(
          [](std::string& v) {
            auto c = api::parse_checkpoint_signal(v);
            auto* e = std::get_if<std::string>(&c);
            return e ? *e : std::string();
          },
          "SIG@SECONDS"));
  cmd->add_option("--notify", sa.notify,
                  "Events to be told of, a comma list of start, oom (with its requeue), end, fail, cancel, eta (its "
                  "expected start slipping), or all; delivered by the admin's notify_command or notify_url "
                  "(docs/lab-policies.md, \"Notifications\"); default none");
  cmd->add_option("--spec", sa.spec, "YAML job spec (docs/api.md); flags override its fields")
      ->check(non_empty("the path of a YAML job spec"));
  cmd->add_option("--model-spec", sa.model_spec,
                  "Model features for the learned memory estimator (JSON from scripts/model_spec.py)")
      ->check(non_empty("the path of a JSON model spec"));
  cmd->add_option("--model", sa.model.model,
                  "PyTorch model FILE.py:NAME: runs scripts/model_spec.py and faketensor_estimate.py here (as you, "
                  "with /usr/bin/python3 or AEGIS_PYTHON) so that the job carries its model spec and FakeTensor "
                  "estimate")
      ->check(non_empty("FILE.py:NAME"));
  cmd->add_option("--batch-size", sa.model.batch_size, "With --model: the batch size")->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--input-shape", sa.model.input_shape, "With --model: one sample's shape, e.g. 3,224,224")
      ->check(non_empty("one sample's shape"));
  cmd->add_option("--input-dtype", sa.model.input_dtype, "With --model: float32, float16 or int64 (token ids)")
      ->check(CLI::IsMember({"float32", "float16", "int64"}));
  cmd->add_option("--env", sa.env, "Set NAME=VALUE in the job's environment (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--tag", sa.tags, "Label the job (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--workdir", sa.workdir, "Working directory (default: the current one)")
      ->check(non_empty("leave --workdir out for the current directory"));
  cmd->add_option("--container", sa.container,
                  "Run the command in this podman image (as you, in the job's cgroup, with its GPUs; docs/daemon.md)")
      ->check(non_empty("an image such as docker.io/pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"));
  cmd->add_option("command", sa.command, "The command (put it after --)")->expected(-1);
}

void add_job_listings(CLI::App& app) {

  static bool q_all = false, q_json = false, q_mine = false, q_eta = false;
  auto* queue = app.add_subcommand("queue", "Everyone's jobs, waiting and running (like squeue)");
  queue->add_flag("--all", q_all, "Include finished jobs");
  queue->add_flag("--mine", q_mine, "Only your own jobs");
  queue->add_flag("--json", q_json, "Print JSON");
  queue->add_flag("--eta", q_eta,
                  "Each waiting job's expected start: the queue served forward, running jobs ending at their time "
                  "limits (unknown behind a job without one)");
  queue->callback([] {
    json q{{"op", "queue"}, {"all", q_all}, {"mine", q_mine}};
    if (q_eta) q["eta"] = true;  // item 5
    if (!q_json) q["fields"] = printed_fields(q_eta);  // issue 33 item 1: --json prints every field
    const auto reply = ask(q);
    if (q_json) {
      // ASCII only (ensure_ascii): another user's strings reach this terminal as \u escapes.
      fmt::print("{}\n", field(reply, "jobs").dump(2, ' ', true));
      return;
    }
    print_jobs(field(reply, "jobs"), q_eta);
    const json& never = field(reply, "waiting_never_starts");
    if (const auto why = str(reply, "waiting_because"); !why.empty())
      fmt::print("\nhead of the queue {}: {}\n",
                 never.is_boolean() && never.get<bool>() ? "can never start (it fails at the next pass)" : "waits", why);
  });

  static std::string show_id;
  static bool show_json = false;
  auto* show = app.add_subcommand("show", "One job in detail, with its attempts and events");
  show->add_option("id", show_id, "Job id")->required();
  show->add_flag("--json", show_json, "Print JSON");
  show->callback([] {
    const auto reply = ask({{"op", "show"}, {"id", parse_id(show_id)}});
    const json& j = field(reply, "job");
    if (show_json) {
      fmt::print("{}\n", j.dump(2, ' ', true));
      return;
    }
    print_job(j);
  });

  static std::vector<std::string> cancel_ids;
  auto* cancel = app.add_subcommand("cancel", "Cancel jobs (yours; admins: any)");
  cancel->add_option("ids", cancel_ids, "Job ids")->required();
  cancel->callback([] {
    json ids = json::array();
    for (const auto& s : cancel_ids) ids.push_back(parse_id(s));
    const auto reply = ask({{"op", "cancel"}, {"ids", ids}});
    for (const auto& id : items(reply, "cancelled")) fmt::print("cancelled {}\n", text(id));
    for (const auto& e : items(reply, "already_ended")) fmt::print("job {}: already {}\n", text(e, "id"), text(e, "state"));
  });

  // Issue 32 item 4: blocks until every job named (an array's id: each element) is final;
  // exit 0 when all completed, 1 otherwise. Asks aegisd once a second (counting nothing).
  static std::vector<std::string> wait_ids;
  auto* wait = app.add_subcommand("wait", "Wait until jobs have ended (an array's id: all its elements); "
                                          "exit 0 if all completed, 1 otherwise");
  wait->add_option("ids", wait_ids, "Job or array ids")->required();
  wait->callback([] {
    json ids = json::array();
    for (const auto& s : wait_ids) ids.push_back(parse_id(s));
    while (true) {
      const auto reply = ask({{"op", "wait"}, {"ids", ids}});
      if (const auto& m = field(reply, "missing"); m.is_array() && !m.empty())
        throw ClientError("wait: job " + text(m.front()) + " does not exist");
      if (field(reply, "all_final").get<bool>()) {
        for (const auto& j : items(reply, "jobs")) fmt::print("{} {}\n", text(j, "id"), text(j, "state"));
        std::exit(field(reply, "all_completed").get<bool>() ? 0 : 1);
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  });

  static std::string logs_id;
  static bool follow = false, err_stream = false;
  auto* logs = app.add_subcommand("logs", "A job's output (its latest attempt)");
  logs->add_option("id", logs_id, "Job id")->required();
  logs->add_flag("-f,--follow", follow, "Keep printing until the job ends");
  logs->add_flag("--stderr", err_stream, "Standard error instead of standard output");
  logs->callback([] {
    const auto id = parse_id(logs_id);
    std::uint64_t offset = 0;
    // One reply carries at most 1 MiB: read on until the log is drained (or, following,
    // until the job has ended and all of it was read). Each request has its own timeout.
    while (true) {
      const auto r =
          ask({{"op", "logs"}, {"id", id}, {"stream", err_stream ? "stderr" : "stdout"}, {"offset", offset}});
      const std::string data = r.at("data");
      std::fwrite(data.data(), 1, data.size(), stdout);
      std::fflush(stdout);
      offset = r.at("offset").get<std::uint64_t>();
      if (r.at("eof").get<bool>()) break;
      if (data.empty()) {
        if (!follow) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
    }
  });

  static bool gpus_json = false, gpus_slurm = false;
  static std::string slurm_gres = "aegis_mem";
  auto* gpus = app.add_subcommand("gpus", "The server's GPUs: memory, activity, jobs, open or observing");
  gpus->add_flag("--json", gpus_json, "Print JSON");
  gpus->add_flag("--slurm-conf", gpus_slurm,
                 "Print this node's lines for slurm.conf and gres.conf: its GPU memory as a count-only GRES "
                 "(docs/slurm.md)");
  gpus->add_option("--slurm-gres", slurm_gres, "The GRES name for --slurm-conf")
      ->capture_default_str()
      ->check(non_empty("a GRES name"));
  gpus->callback([] {
    const auto r = ask({{"op", "gpus"}});
    if (gpus_json) {
      fmt::print("{}\n", field(r, "gpus").dump(2, ' ', true));
      return;
    }
    if (gpus_slurm) {
      print_slurm_conf(items(r, "gpus"), slurm_gres);
      return;
    }
    print_gpus(r);
  });

  static std::int64_t limit = 50;
  static bool hist_json = false;
  auto* history = app.add_subcommand("history", "Recent jobs, finished ones included, newest first");
  history->add_option("--limit", limit, "How many")->check(CLI::Range(1, 100000));
  history->add_flag("--json", hist_json, "Print JSON");
  history->callback([] {
    json q{{"op", "history"}, {"limit", limit}};
    if (!hist_json) q["fields"] = printed_fields();
    const auto r = ask(q);
    if (hist_json) fmt::print("{}\n", field(r, "jobs").dump(2, ' ', true));
    else print_jobs(field(r, "jobs"));
  });
}

}  // namespace

void add_job_commands(CLI::App& app) {
  app.add_option("--socket", g_socket, "aegisd's socket (default: $AEGIS_SOCKET, else /run/aegis/aegisd.sock)")
      ->check(non_empty("the path of aegisd's socket"));
  app.add_option("--timeout", g_timeout,
                 fmt::format("Seconds to wait for aegisd to answer each request (default: $AEGIS_TIMEOUT, else {:g})",
                             kDefaultTimeoutS))
      ->check(CLI::Validator([](std::string& v) { return parse_timeout(v) ? std::string() : bad_timeout(v); }, ""));

  static SubmitArgs sa;
  auto* submit = app.add_subcommand("submit", "Queue a job on this server's GPUs; prints its id");
  add_request_options(submit, sa);
  // Issue 32 items 3-4: checked while parsing, so that bad syntax is one line naming the flag.
  submit->add_option("--array", sa.array,
                     "Submit an array: one job per index, e.g. 0-49, 1,3,5-9, 0-49%8 (%N: at most N run at once); "
                     "{i} in the command becomes the index, and AEGIS_ARRAY_INDEX holds it. The first element runs "
                     "first and the others get its measured memory peak (docs/lab-policies.md)")
      ->check(CLI::Validator(
          [](std::string& v) {
            auto r = api::parse_array(v, "");
            auto* e = std::get_if<api::ParseError>(&r);
            return e ? e->message.substr(2) : std::string();
          },
          ""));
  submit->add_option("--after", sa.after,
                     "Start only after job ID ended: ID[:ok|any|failed] (default ok: completed); an array's id means "
                     "all its elements; repeatable. A dependency that can no longer be met cancels the job")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::Validator(
          [](std::string& v) {
            auto r = api::parse_after(v, "");
            auto* e = std::get_if<api::ParseError>(&r);
            return e ? e->message.substr(2) : std::string();
          },
          ""));
  static SlurmArgs slurm;
  submit->add_flag("--slurm", slurm.enabled,
                   "Submit through Slurm instead (from a login node): writes an sbatch script that runs the job "
                   "with `aegis run` on the node Slurm picks, and prints Slurm's job id (docs/slurm.md)");
  submit->add_option("--slurm-gres", slurm.gres,
                     "Slurm's count-only GRES for GPU memory, counted in bytes (booked: --mem x --gpus)")
      ->capture_default_str()
      ->check(non_empty("a GRES name"));
  submit->add_option("--slurm-arg", slurm.args, "Extra sbatch option, e.g. --slurm-arg=--time=02:00:00 (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  submit->add_option("--slurm-aegis", slurm.aegis_binary,
                     "The aegis binary the batch script runs on the node (default: this one's path)")
      ->check(non_empty("leave --slurm-aegis out for this binary's path"));
  submit->callback([] {
    // The batch script passes files to `aegis run` on the node, not the features computed here.
    if (slurm.enabled && !sa.model.model.empty())
      throw ClientError("--model: not with --slurm; write the spec with scripts/model_spec.py and give --model-spec");
    const auto r = build_request(sa);
    if (slurm.enabled) {
      auto absolute = [](const std::string& path) {
        if (path.empty() || path[0] == '/') return path;
        char buf[4096];
        return getcwd(buf, sizeof buf) ? std::string(buf) + "/" + path : path;
      };
      slurm.spec = absolute(sa.spec);
      slurm.model_spec = absolute(sa.model_spec);
      fmt::print("{}\n", submit_to_slurm(r, slurm));
      return;
    }
    json reply;
    try {
      reply = ask({{"op", "submit"}, {"job", json::parse(api::to_json(r))}});
    } catch (const ConnectionError& e) {
      // The daemon may have queued it and not answered in time: say so, lest a retry queue
      // it twice (issue 33).
      if (!e.maybe_received) throw;
      throw ConnectionError(std::string(e.what()) + "; the request was sent, so the job may have been queued: "
                                                    "check `aegis queue --mine` before submitting again",
                            true);
    }
    fmt::print("{}\n", reply.at("id").get<std::int64_t>());  // an array: its id (its first element's)
  });

  static SubmitArgs ra;
  static RunArgs run;
  static bool no_slurm_mem = false;
  auto* run_cmd = app.add_subcommand(
      "run", "Run a job on this server's GPUs and wait for it: its output on ours, its exit status as ours; "
             "cancelled if we are signalled or killed (for batch scripts and Slurm, docs/slurm.md)");
  add_request_options(run_cmd, ra);
  run_cmd->add_option("--requeue-after", run.requeue_after_s,
                      "Under Slurm: if the job waits this long (s) to run alone after OOMs, give it back to Slurm "
                      "(requeued with a whole GPU's memory booked, away from this node; 0 = never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  run_cmd->add_flag("--no-slurm-mem", no_slurm_mem,
                    "Under Slurm: do not take the job's GPU-memory booking as its declared memory when --mem is absent");
  run_cmd->add_option("--slurm-gres", run.gres, "Slurm's GRES for GPU memory (counted in bytes)")
      ->capture_default_str()
      ->check(non_empty("a GRES name"));
  run_cmd->add_option("--daemon-wait", run.daemon_wait_s,
                      "Keep trying this long (s) when aegisd cannot be reached or does not answer, e.g. while it "
                      "restarts")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  run_cmd->callback([] {
    run.mem_from_slurm = !no_slurm_mem;
    std::exit(run_and_wait(build_request(ra), run, socket_path(g_socket), request_timeout(g_timeout)));
  });

  add_job_listings(app);
}

}  // namespace aegis::cli
