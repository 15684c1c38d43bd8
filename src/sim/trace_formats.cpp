#include "sim/trace_formats.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <fmt/format.h>
#include <span>
#include <string_view>

#include "sim/csv.h"
#include "sim/workload_mapping.h"

namespace aegis {

namespace {

using Columns = std::span<const std::string_view>;

constexpr std::string_view kAegisColumns[] = {"job_index", "submit_time_s", "workload_name", "num_gpus"};
constexpr std::string_view kPhillyColumns[] = {"timestamp", "duration", "num_gpus"};
constexpr std::string_view kAlibabaColumns[] = {"name",          "num_gpu",        "gpu_milli",
                                                "creation_time", "scheduled_time", "deletion_time"};

struct FormatColumns {
  TraceFormat format;
  Columns columns;
};
constexpr FormatColumns kFormats[] = {{TraceFormat::Aegis, kAegisColumns},
                                      {TraceFormat::Philly, kPhillyColumns},
                                      {TraceFormat::Alibaba, kAlibabaColumns}};

bool has_all(const std::vector<std::string>& header, Columns columns) {
  return std::all_of(columns.begin(), columns.end(), [&](std::string_view c) {
    return std::find(header.begin(), header.end(), c) != header.end();
  });
}

// A forced --trace-format skips detection, so the columns still need checking.
void require_columns(const CsvReader& r, Columns columns) {
  for (std::string_view c : columns)
    if (!r.has_column(c)) throw InputError(fmt::format("{}:1: missing column '{}'", r.file(), c));
}

// The number written by the (already checked) digits s[pos, pos + n).
int digits(std::string_view s, std::size_t pos, std::size_t n) {
  int v = 0;
  for (char c : s.substr(pos, n)) v = v * 10 + (c - '0');
  return v;
}

// "YYYY-MM-DD HH:MM:SS" taken as UTC, in seconds since the Unix epoch. The calendar
// arithmetic of <chrono> needs no locale and no time-zone database.
std::optional<Seconds> parse_utc(std::string_view s) {
  // The shape "0000-00-00 00:00:00", checked position by position (every row of a trace
  // passes here, 82,247 of them for Philly's first 10,000 jobs).
  if (s.size() != 19 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':')
    return std::nullopt;
  const auto d = [&](std::size_t i) { return static_cast<unsigned>(static_cast<unsigned char>(s[i]) - '0'); };
  const auto bad = [&](std::size_t i) { return d(i) > 9 ? 1u : 0u; };
  // Written out (not a loop): one compare per digit, one branch at the end.
  if (bad(0) | bad(1) | bad(2) | bad(3) | bad(5) | bad(6) | bad(8) | bad(9) | bad(11) | bad(12) | bad(14) | bad(15) |
      bad(17) | bad(18))
    return std::nullopt;
  // Traces list many jobs a day: the date's day number is remembered.
  thread_local char last_date[10] = {};
  thread_local long long last_days = 0;
  thread_local bool last_ok = false;
  long long days = 0;
  if (last_ok && std::equal(s.begin(), s.begin() + 10, last_date)) {
    days = last_days;
  } else {
    using namespace std::chrono;
    const year_month_day date{year{digits(s, 0, 4)}, month{static_cast<unsigned>(digits(s, 5, 2))},
                              day{static_cast<unsigned>(digits(s, 8, 2))}};
    if (!date.ok()) return std::nullopt;
    days = sys_days{date}.time_since_epoch().count();
    std::copy(s.begin(), s.begin() + 10, last_date);
    last_days = days;
    last_ok = true;
  }
  const auto h = d(11) * 10 + d(12), m = d(14) * 10 + d(15), sec = d(17) * 10 + d(18);
  if (h > 23 || m > 59 || sec > 59) return std::nullopt;
  return static_cast<Seconds>(days * 86400 + static_cast<long long>(h * 3600 + m * 60 + sec));
}

int gpu_count(const CsvReader& r, std::string_view column, std::int64_t min) {
  const auto g = r.get_int(column);
  if (g < min || g > 1024) r.fail(column, fmt::format("{} is not in [{}, 1024]", g, min));
  return static_cast<int>(g);
}

Trace start_trace(const std::string& path, TraceFormat format) {
  Trace t;
  t.path = path;
  t.name = std::filesystem::path(path).stem().string();
  t.format = format;
  return t;
}

std::string skipped_summary(const Trace& t) {
  std::string s;
  for (const auto& [reason, n] : t.skipped) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", n, reason);
  return s.empty() ? "" : fmt::format(" (skipped: {})", s);
}

// What every production format shares once its rows are read: order, shape, then borrow
// profiles, so that the mapping ranks exactly the jobs that will run.
void finish(Trace& t, const WorkloadCatalog& catalog, const TraceOptions& options) {
  if (t.jobs.empty()) throw InputError(fmt::format("{}: no jobs{}", t.path, skipped_summary(t)));
  const auto earlier = [](const TraceJob& a, const TraceJob& b) {
    return a.submit_time != b.submit_time ? a.submit_time < b.submit_time : a.index < b.index;
  };
  // The --max-jobs fast path hands them over in order already. Otherwise the keys are
  // sorted, not the jobs (a job is about 100 bytes with a string: moving it in every swap
  // cost 60 % of loading Philly), and each job then moves once. Indices are row numbers, so
  // no two keys are equal and the order is the one a sort of the jobs gives.
  if (!std::is_sorted(t.jobs.begin(), t.jobs.end(), earlier)) {
    struct Key {
      Seconds submit;
      std::int64_t index;
      std::uint32_t at;
    };
    std::vector<Key> keys(t.jobs.size());
    for (std::uint32_t i = 0; i < keys.size(); ++i) keys[i] = {t.jobs[i].submit_time, t.jobs[i].index, i};
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      if (a.submit != b.submit) return a.submit < b.submit;
      return a.index != b.index ? a.index < b.index : a.at < b.at;
    });
    std::vector<TraceJob> sorted;
    sorted.reserve(t.jobs.size());
    for (const Key& k : keys) sorted.push_back(std::move(t.jobs[k.at]));
    t.jobs = std::move(sorted);
  }
  shape_trace(t, options);
  t.mapping_method = map_workloads(t.jobs, catalog, options.seed, options.workload_runtime);
}

// An option that reads an optional column needs it.
void require_option_column(const CsvReader& r, std::string_view column, std::string_view option) {
  if (!r.has_column(column))
    throw InputError(fmt::format("{}:1: missing column '{}' (read by {})", r.file(), column, option));
}

void require_cluster(const CsvReader& r, const TraceOptions& o) {
  if (o.philly_cluster_as != TraceColumnRole::None) require_option_column(r, "cluster", "--philly-cluster-as");
}

TraceJob job_at(const CsvReader& r, std::int64_t index) {
  TraceJob j;
  j.index = index;
  j.line = static_cast<std::uint32_t>(r.line());
  return j;
}

}  // namespace

std::optional<TraceFormat> detect_trace_format(const std::vector<std::string>& header) {
  std::optional<TraceFormat> found;
  for (const auto& [format, columns] : kFormats) {
    if (!has_all(header, columns)) continue;
    if (found) return std::nullopt;  // ambiguous: the caller must name the format
    found = format;
  }
  return found;
}

std::int16_t read_priority(const CsvReader& r) {
  const auto p = r.opt_int("priority");
  if (!p) return 0;
  if (*p < -1000 || *p > 1000) r.fail("priority", "must be an integer level from -1000 to 1000");
  return static_cast<std::int16_t>(*p);
}

namespace {

using NameIds = std::map<std::string, std::uint32_t, std::less<>>;

// The number of `name` in `names` (added if new), as the aegis format numbers its users.
std::int32_t number_of(std::string_view name, std::vector<std::string>& names, NameIds& ids) {
  auto it = ids.find(name);
  if (it == ids.end()) {
    it = ids.emplace(std::string(name), static_cast<std::uint32_t>(names.size())).first;
    names.emplace_back(name);
  }
  return static_cast<std::int32_t>(it->second);
}

// What a Philly reader keeps across rows: the source ids and, with --philly-cluster-as,
// the clusters numbered as users or groups.
struct PhillyIds {
  TraceColumnRole cluster_as = TraceColumnRole::None;
  NameIds sources, teams;
};

// One Philly row, validated (the same checks on every path). An optional `priority`
// column gives its level, as in the aegis format (a study's derived levels).
TraceJob philly_job(const CsvReader& r, std::int64_t row, bool has_cluster, bool has_priority, Trace& t,
                    PhillyIds& ids) {
  TraceJob j = job_at(r, row);
  if (has_priority) j.priority = read_priority(r);
  const auto submit = parse_utc(r.field("timestamp"));
  if (!submit)
    r.fail("timestamp", fmt::format("expected a UTC time 'YYYY-MM-DD HH:MM:SS', got '{}'", r.field("timestamp")));
  j.submit_time = *submit;
  const double d = r.get_double("duration");
  if (d <= 0) r.fail("duration", fmt::format("{} is not positive", d));
  j.duration_s = d;
  j.num_gpus = static_cast<std::int16_t>(gpu_count(r, "num_gpus", 1));
  if (has_cluster) j.source = t.keep_source_id(r.field("cluster"), ids.sources);
  // Issue 32: the virtual cluster (a team's share of Philly) as the job's user or group.
  if (ids.cluster_as == TraceColumnRole::User) j.owner = number_of(r.get_text("cluster"), t.user_names, ids.teams);
  if (ids.cluster_as == TraceColumnRole::Group) j.group = number_of(r.get_text("cluster"), t.group_names, ids.teams);
  return j;
}

// A file without quotes, read at once: every row's timestamp is read (the first N of
// --max-jobs N by submit time can be anywhere), but only the rows kept are split into
// fields and validated. Gives what the full read gives, except that errors in rows left
// out go unreported; with every row kept (no --max-jobs, or N at least the rows), rows are
// validated in file order, so the first bad one is the one the full reader names. Empty
// when the file has quotes or a timestamp does not parse (then the full reader handles it).
std::optional<Trace> load_philly_unquoted(const std::string& path, const TraceOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open file", path));
  std::string text;
  {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return std::nullopt;  // not a regular file: the full reader streams it
    text.resize(static_cast<std::size_t>(size));
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(in.gcount()));
  }
  if (text.find('"') != std::string::npos) return std::nullopt;
  const std::size_t header_end = std::min(text.find('\n'), text.size());
  std::istringstream header_in(text.substr(0, header_end));
  CsvReader r(header_in, path);
  require_columns(r, kPhillyColumns);
  require_cluster(r, options);
  const auto& header = r.header();
  const auto column = [&](std::string_view name) {
    return static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const std::size_t ts_col = column("timestamp");
  const bool has_cluster = r.has_column("cluster");
  const bool has_priority = r.has_column("priority");

  struct Row {
    Seconds submit;
    std::int64_t index;
    std::size_t line, begin, end;
  };
  std::vector<Row> rows;
  std::size_t line = 1, pos = header_end + 1;
  for (std::int64_t index = 0; pos < text.size(); ++line) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::size_t stop = end;
    if (stop > pos && text[stop - 1] == '\r') --stop;
    const std::size_t begin = pos;
    pos = end + 1;
    if (stop == begin) continue;  // blank lines are skipped, as the full reader does
    // The timestamp field of this line.
    std::size_t field = 0, f_begin = begin;
    while (field < ts_col) {
      const std::size_t comma = text.find(',', f_begin);
      if (comma == std::string::npos || comma >= stop) break;
      f_begin = comma + 1;
      ++field;
    }
    std::size_t f_end = text.find(',', f_begin);
    if (f_end == std::string::npos || f_end > stop) f_end = stop;
    const auto submit = field == ts_col ? parse_utc(std::string_view(text).substr(f_begin, f_end - f_begin))
                                        : std::nullopt;
    if (!submit) return std::nullopt;  // let the full reader name the problem
    rows.push_back({*submit, index++, line + 1, begin, stop});
  }
  const std::size_t all = rows.size();
  const std::size_t keep = options.max_jobs > 0 ? std::min(options.max_jobs, all) : all;
  if (keep < all) {
    auto earlier = [](const Row& a, const Row& b) { return a.submit != b.submit ? a.submit < b.submit : a.index < b.index; };
    std::nth_element(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(keep), rows.end(), earlier);
    rows.resize(keep);
    std::sort(rows.begin(), rows.end(), earlier);
  }

  Trace t = start_trace(path, TraceFormat::Philly);
  t.jobs.reserve(keep);
  std::vector<std::string> fields;
  PhillyIds ids{options.philly_cluster_as, {}, {}};
  for (const Row& row : rows) {
    fields = std::move(r.record_storage());
    fields.clear();
    std::size_t b = row.begin;
    while (true) {
      std::size_t e = text.find(',', b);
      if (e == std::string::npos || e > row.end) e = row.end;
      fields.emplace_back(text, b, e - b);
      if (e == row.end) break;
      b = e + 1;
    }
    r.set_record(std::move(fields), row.line);
    t.jobs.push_back(philly_job(r, row.index, has_cluster, has_priority, t, ids));
  }
  if (all > keep) t.skipped["beyond --max-jobs"] += static_cast<std::int64_t>(all - keep);
  return t;
}

}  // namespace

Trace load_philly_trace(const std::string& path, const WorkloadCatalog& catalog, const TraceOptions& options) {
  if (auto t = load_philly_unquoted(path, options)) {
    finish(*t, catalog, options);
    return std::move(*t);
  }
  Trace t = start_trace(path, TraceFormat::Philly);
  CsvReader r = CsvReader::open(path);
  require_columns(r, kPhillyColumns);
  require_cluster(r, options);
  const bool has_cluster = r.has_column("cluster");
  const bool has_priority = r.has_column("priority");
  PhillyIds ids{options.philly_cluster_as, {}, {}};
  for (std::int64_t row = 0; r.next(); ++row) t.jobs.push_back(philly_job(r, row, has_cluster, has_priority, t, ids));
  finish(t, catalog, options);
  return t;
}

std::optional<std::int16_t> alibaba_qos_level(std::string_view qos) {
  // Kubernetes evicts BestEffort pods first and Guaranteed ones last; Alibaba's LS pods
  // serve requests (latency sensitive) and BE pods are its batch. So LS and Guaranteed are
  // the most urgent, Burstable between, BE the least; BE stays at 0, the level of a job
  // with no priority, so the option only raises the classes that asked for more.
  if (qos == "LS" || qos == "Guaranteed") return 2;
  if (qos == "Burstable") return 1;
  if (qos == "BE") return 0;
  return std::nullopt;
}

Trace load_alibaba_trace(const std::string& path, const WorkloadCatalog& catalog, const TraceOptions& options) {
  Trace t = start_trace(path, TraceFormat::Alibaba);
  CsvReader r = CsvReader::open(path);
  require_columns(r, kAlibabaColumns);
  if (options.alibaba_qos_priority) require_option_column(r, "qos", "--alibaba-qos-priority");
  std::map<std::string, std::uint32_t, std::less<>> sources;
  for (std::int64_t row = 0; r.next(); ++row) {
    const int gpus = gpu_count(r, "num_gpu", 0);
    if (gpus == 0) {
      ++t.skipped["CPU-only pod"];
      continue;
    }
    const auto milli = r.get_int("gpu_milli");
    if (milli < 1 || milli > 1000) r.fail("gpu_milli", fmt::format("{} is not in [1, 1000] for a GPU pod", milli));
    const double created = r.get_double("creation_time");
    const auto scheduled = r.opt_double("scheduled_time");
    const auto deleted = r.opt_double("deletion_time");
    if (!scheduled || !deleted) {
      ++t.skipped["never scheduled"];
      continue;
    }
    if (*deleted - *scheduled <= 0) {
      ++t.skipped["no runtime"];
      continue;
    }
    TraceJob j = job_at(r, row);
    j.submit_time = created;
    j.duration_s = *deleted - *scheduled;
    j.num_gpus = static_cast<std::int16_t>(gpus);
    // Only a single-GPU pod can ask for part of a GPU (the trace's own definition).
    if (gpus == 1 && milli < 1000) j.gpu_fraction = static_cast<double>(milli) / 1000.0;
    j.source = t.keep_source_id(r.field("name"), sources);
    if (options.alibaba_qos_priority) {
      const auto level = alibaba_qos_level(r.field("qos"));
      if (!level) r.fail("qos", fmt::format("'{}' is not one of LS, Guaranteed, Burstable, BE", r.field("qos")));
      j.priority = *level;
    }
    t.jobs.push_back(std::move(j));
  }
  finish(t, catalog, options);
  return t;
}

}  // namespace aegis
