#include "sim/trace.h"

#include <charconv>
#include <sstream>

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <set>

#include "sim/csv.h"
#include "sim/trace_formats.h"

namespace aegis {

std::optional<TraceFormat> parse_trace_format(const std::string& name) {
  if (name == "aegis") return TraceFormat::Aegis;
  if (name == "philly") return TraceFormat::Philly;
  if (name == "alibaba") return TraceFormat::Alibaba;
  return std::nullopt;
}

std::string to_string(TraceFormat f) {
  switch (f) {
    case TraceFormat::Aegis: return "aegis";
    case TraceFormat::Philly: return "philly";
    case TraceFormat::Alibaba: return "alibaba";
  }
  return "aegis";
}

std::optional<TraceColumnRole> parse_column_role(const std::string& name) {
  if (name == "none") return TraceColumnRole::None;
  if (name == "user") return TraceColumnRole::User;
  if (name == "group") return TraceColumnRole::Group;
  return std::nullopt;
}

std::string to_string(TraceColumnRole r) {
  switch (r) {
    case TraceColumnRole::None: return "none";
    case TraceColumnRole::User: return "user";
    case TraceColumnRole::Group: return "group";
  }
  return "none";
}

void shape_trace(Trace& t, const TraceOptions& o) {
  if (o.max_jobs > 0 && t.jobs.size() > o.max_jobs) {
    t.skipped["beyond --max-jobs"] += static_cast<std::int64_t>(t.jobs.size() - o.max_jobs);
    t.jobs.resize(o.max_jobs);
  }
  if (t.jobs.empty()) return;
  // Rebase to the first arrival, then compress inter-arrival times by the load factor.
  const Seconds first = t.jobs.front().submit_time;
  for (auto& j : t.jobs) j.submit_time = (j.submit_time - first) / o.load;
}

std::string Trace::where(const TraceJob& j) const {
  return j.line > 0 ? fmt::format("{}:{}", path.empty() ? name : path, j.line) : fmt::format("trace job {}", j.index);
}

std::uint32_t Trace::keep_source_id(std::string_view id, std::map<std::string, std::uint32_t, std::less<>>& seen) {
  if (id.empty()) return 0;
  auto it = seen.find(id);
  if (it == seen.end()) {
    it = seen.emplace(std::string(id), static_cast<std::uint32_t>(source_ids.size())).first;
    source_ids.emplace_back(id);
  }
  return it->second;
}

void repeat_trace(Trace& t, std::size_t copies) {
  if (copies <= 1 || t.jobs.empty()) return;
  const std::size_t n = t.jobs.size();
  const Seconds span = t.jobs.back().submit_time + 1;
  std::int64_t stride = 0;
  for (const auto& j : t.jobs) stride = std::max(stride, j.index + 1);
  t.jobs.reserve(n * copies);
  for (std::size_t k = 1; k < copies; ++k)
    for (std::size_t i = 0; i < n; ++i) {
      TraceJob c = t.jobs[i];
      c.index += static_cast<std::int64_t>(k) * stride;
      c.submit_time += static_cast<double>(k) * span;
      t.jobs.push_back(std::move(c));
    }
}

Trace load_trace(const std::string& path, const WorkloadCatalog& catalog, const TraceOptions& o) {
  if (!(o.load > 0)) throw InputError("--load: must be positive");
  if (o.repeat < 1) throw InputError("--repeat: must be at least 1");
  TraceFormat f;
  if (o.format) {
    f = *o.format;
  } else {
    CsvReader r = CsvReader::open(path);
    auto d = detect_trace_format(r.header());
    if (!d)
      throw InputError(fmt::format("{}:1: cannot tell the trace format from the header; use --trace-format "
                                   "aegis|philly|alibaba", path));
    f = *d;
  }
  // A format's own option on another format's trace would be silently void: refused.
  if (o.alibaba_qos_priority && f != TraceFormat::Alibaba)
    throw InputError(fmt::format("{}: --alibaba-qos-priority: applies to alibaba traces only, this one is {}", path,
                                 to_string(f)));
  if (o.philly_cluster_as != TraceColumnRole::None && f != TraceFormat::Philly)
    throw InputError(fmt::format("{}: --philly-cluster-as: applies to philly traces only, this one is {}", path,
                                 to_string(f)));
  Trace t;
  switch (f) {
    case TraceFormat::Aegis:
      t = load_aegis_trace(path, catalog);
      shape_trace(t, o);
      break;
    case TraceFormat::Philly: t = load_philly_trace(path, catalog, o); break;
    case TraceFormat::Alibaba: t = load_alibaba_trace(path, catalog, o); break;
  }
  t.format = f;
  repeat_trace(t, o.repeat);
  return t;
}

Trace load_aegis_trace(const std::string& path, const WorkloadCatalog& catalog) {
  Trace t;
  t.mapping_method = "workloads named in the trace";
  t.path = path;
  t.name = std::filesystem::path(path).stem().string();
  CsvReader r = CsvReader::open(path);
  for (const char* col : {"job_index", "submit_time_s", "workload_name", "num_gpus"})
    if (!r.has_column(col)) throw InputError(fmt::format("{}:1: missing column '{}'", path, col));
  std::set<std::int64_t> seen;
  // An optional `user` column: jobs of different users never share a GPU under MPS.
  const bool users = r.has_column("user");
  // Issue 32 item 5: an optional `time_limit_s` column, each job's time limit (empty: none).
  const bool time_limits = r.has_column("time_limit_s");
  std::map<std::string, std::int64_t> user_ids;
  // Issue 32: optional array and dependency columns (TraceLinks).
  const bool arrays = r.has_column("array_id"), limits = r.has_column("array_limit"), afters = r.has_column("after");
  std::map<std::int64_t, int> array_sizes;
  // An optional `group` column: the users' groups, for fair-share group weights.
  const bool groups = r.has_column("group");
  std::map<std::string, std::int64_t> group_ids;
  // Issue 32 item 1: an optional `priority` column, each job's level (empty: 0), in the
  // range aegis submit --priority allows.
  const bool priorities = r.has_column("priority");
  auto number = [](std::map<std::string, std::int64_t>& ids, std::vector<std::string>& names, const std::string& name) {
    auto [it, fresh] = ids.emplace(name, static_cast<std::int64_t>(ids.size()));
    if (fresh) names.push_back(name);
    return static_cast<std::int32_t>(it->second);
  };
  while (r.next()) {
    TraceJob j;
    if (const auto v = time_limits ? r.opt_double("time_limit_s") : std::nullopt) {
      if (!(*v >= 1 && *v <= 365.0 * 86400)) r.fail("time_limit_s", "must be a number of seconds from 1 to 365 days");
      j.time_limit_s = static_cast<float>(*v);
    }
    if (priorities) j.priority = read_priority(r);
    if (users) j.owner = number(user_ids, t.user_names, r.get_text("user"));
    if (groups) j.group = number(group_ids, t.group_names, r.get_text("group"));
    j.line = static_cast<std::uint32_t>(r.line());
    j.index = r.get_int("job_index");
    if (!seen.insert(j.index).second) r.fail("job_index", fmt::format("duplicate job index {}", j.index));
    j.submit_time = r.get_double("submit_time_s");
    if (j.submit_time < 0) r.fail("submit_time_s", "must not be negative");
    j.workload = r.get_text("workload_name");
    const auto g = r.get_int("num_gpus");
    if (g < 1 || g > 1024) r.fail("num_gpus", fmt::format("{} is not in [1, 1024]", g));
    j.num_gpus = static_cast<std::int16_t>(g);
    const WorkloadProfile* w = catalog.find(j.workload);
    if (!w) r.fail("workload_name", fmt::format("unknown workload '{}' (not in {})", j.workload, catalog.path()));
    if (!w->problem.empty())
      r.fail("workload_name", fmt::format("workload '{}' cannot be simulated: {} ({})", j.workload, w->problem, w->where));
    if (w->num_gpus != j.num_gpus)
      r.fail("num_gpus", fmt::format("{} but workload '{}' is profiled on {} GPUs", j.num_gpus, j.workload, w->num_gpus));
    if (arrays)
      if (auto a = r.opt_int("array_id")) {
        TraceLinks& l = t.links[j.index];
        l.array = *a;
        l.array_index = array_sizes[*a]++;
        if (l.array_index == 0 && *a != j.index)
          r.fail("array_id", fmt::format("{}: an array's id is the job_index of its first element", *a));
        if (limits)
          if (auto n = r.opt_int("array_limit")) {
            if (*n < 0 || *n > 1000000) r.fail("array_limit", "must be between 0 and 1000000");
            l.array_limit = static_cast<int>(*n);
          }
      }
    if (afters && !r.field("after").empty()) {
      std::istringstream words(r.field("after"));
      for (std::string word; words >> word;) {
        const auto colon = word.find(':');
        std::string kind = colon == std::string::npos ? "ok" : word.substr(colon + 1);
        if (kind != "ok" && kind != "any" && kind != "failed")
          r.fail("after", fmt::format("'{}': the condition after ':' must be ok, any or failed", word));
        std::int64_t id = 0;
        const std::string num = word.substr(0, colon);
        auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), id);
        if (ec != std::errc() || end != num.data() + num.size()) r.fail("after", fmt::format("'{}' is not a job index", word));
        t.links[j.index].after.emplace_back(id, std::move(kind));
      }
    }
    t.jobs.push_back(std::move(j));
  }
  if (t.jobs.empty()) throw InputError(fmt::format("{}: no jobs", path));
  std::stable_sort(t.jobs.begin(), t.jobs.end(), [](const TraceJob& a, const TraceJob& b) {
    return a.submit_time != b.submit_time ? a.submit_time < b.submit_time : a.index < b.index;
  });
  return t;
}

}  // namespace aegis
