#include "apps/aegis/sim_spread_output.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>

namespace aegis::cli {

namespace {

enum class Row { Mean, Min, Max };

double pick(const Spread& s, Row r) { return r == Row::Mean ? s.mean : r == Row::Min ? s.min : s.max; }

// A count's mean may fall between whole numbers; shown with one decimal then.
std::string count(double v) {
  return v == std::floor(v) ? fmt::format("{:.0f}", v) : fmt::format("{:.1f}", v);
}

std::string range(const Spread& s) { return fmt::format("{:.3f} ({:.3f}-{:.3f})", s.mean, s.min, s.max); }

// The policy column fits the longest name (aegis-horus-published is 21 characters).
std::size_t name_width(const std::vector<std::string>& names) {
  std::size_t w = 12;
  for (const auto& n : names) w = std::max(w, n.size());
  return w;
}

std::string seeds_label(const SeedSpread& s) {
  return fmt::format("seeds {}..{}", s.seeds.front(), s.seeds.back());
}

Json metrics_object(const Json& per_seed_first, const std::vector<Json>& all, Row r) {
  Json j = Json::object();
  for (const auto& [key, v] : per_seed_first.items()) {
    if (!v.is_number()) continue;
    std::vector<double> xs;
    for (const auto& m : all) xs.push_back(m[key].get<double>());
    j[key] = pick(spread_of(xs), r);
  }
  return j;
}

}  // namespace

std::vector<std::string> within_lines(const std::vector<std::pair<std::string, Spread>>& by_policy, std::size_t seeds) {
  std::vector<std::string> out;
  for (const auto& [a, b] : pairs_within(by_policy))
    out.push_back(fmt::format("{} and {}: within the spread over {} seeds (not a result)", a, b, seeds));
  return out;
}

void print_table_spread(const Trace& trace, const std::string& cluster, const SeedSpread& s) {
  std::vector<const RunSpread*> rows;
  const RunSpread* excl = nullptr;
  for (const auto& r : s.runs)
    if (r.trace == trace.name) {
      rows.push_back(&r);
      if (r.policy == "exclusive") excl = &r;
    }
  fmt::print("\n{} ({} jobs, {}, {}: each policy's mean, then the least and greatest over the {} seeds)\n",
             trace.name, trace.jobs.size(), cluster, seeds_label(s), s.seeds.size());
  std::vector<std::string> names;
  for (const RunSpread* r : rows) names.push_back(r->policy);
  const std::size_t w = name_width(names);
  fmt::print("{:<{}} {:>13} {:>11} {:>7} {:>10} {:>10} {:>10} {:>11} {:>5} {:>5} {:>6} {:>7} {:>9} {:>7}\n", "policy", w,
             "done", "makespan_s", "/excl", "jct_mean_s", "jct_p95_s", "queue_mean", "exec_total", "oom", "nbr", "failed",
             "slow_mx", "energy_MJ", "/excl");
  for (const RunSpread* r : rows) {
    const Spread mk_x = excl ? spread_of(r->ratios(*excl, &RunMetrics::makespan_s)) : Spread{};
    const Spread en_x = excl ? spread_of(r->ratios(*excl, &RunMetrics::energy_j)) : Spread{};
    for (Row row : {Row::Mean, Row::Min, Row::Max}) {
      const auto v = [&](auto field) { return pick(r->of(field), row); };
      const std::string label = row == Row::Mean ? r->policy : row == Row::Min ? "  min" : "  max";
      fmt::print("{:<{}} {:>13} {:>11.0f} {:>7} {:>10.0f} {:>10.0f} {:>10.0f} {:>11.0f} {:>5} {:>5} {:>6} {:>7.3f} "
                 "{:>9.1f} {:>7}\n",
                 label, w, fmt::format("{}/{}", count(v(&RunMetrics::completed)), r->per_seed.front().jobs),
                 v(&RunMetrics::makespan_s), excl ? fmt::format("{:.3f}", pick(mk_x, row)) : "-",
                 v(&RunMetrics::jct_mean_s), v(&RunMetrics::jct_p95_s), v(&RunMetrics::queue_mean_s),
                 v(&RunMetrics::exec_total_s), count(v(&RunMetrics::oom_attempts)),
                 count(v(&RunMetrics::neighbour_oom_attempts)), count(v(&RunMetrics::failed_attempts)),
                 v(&RunMetrics::slowdown_max), v(&RunMetrics::energy_j) / 1e6,
                 excl ? fmt::format("{:.3f}", pick(en_x, row)) : "-");
    }
  }
  std::vector<std::pair<std::string, Spread>> makespans;
  for (const RunSpread* r : rows) makespans.push_back({r->policy, r->of(&RunMetrics::makespan_s)});
  const auto lines = within_lines(makespans, s.seeds.size());
  for (const auto& line : lines) fmt::print("makespan: {}\n", line);
  if (lines.empty()) fmt::print("makespan: no two policies within the spread over {} seeds\n", s.seeds.size());
  for (const RunSpread* r : rows) {
    const Spread mk = r->of(&RunMetrics::makespan_s);
    if (r->seed_invariant() || mk.min == mk.max)
      fmt::print("{}: {} the same under all {} seeds (the seed does not reach it here; its zero spread is no "
                 "evidence)\n",
                 r->policy, r->seed_invariant() ? "every figure" : "makespan", s.seeds.size());
  }
}

std::vector<NormalisedSpread> print_normalised_spread(const std::vector<const Trace*>& traces,
                                                      const std::vector<std::string>& policies,
                                                      const SeedSpread& s) {
  std::vector<std::string> names;
  for (const auto* t : traces) names.push_back(t->name);
  const auto norm = normalised(s, names, policies);
  if (norm.empty()) return norm;
  const std::size_t w = name_width(policies);
  fmt::print("\nmakespan normalised to exclusive: mean (min-max) over {}\n{:<{}}", seeds_label(s), "policy", w);
  for (const auto* t : traces) fmt::print(" {:>20}", t->name);
  fmt::print(" {:>20}\n", traces.size() > 1 ? "geomean" : "");
  std::vector<std::pair<std::string, Spread>> geomeans;
  for (const auto& row : norm) {
    fmt::print("{:<{}}", row.policy, w);
    for (const auto& per_seed : row.per_trace) fmt::print(" {:>20}", range(spread_of(per_seed)));
    const Spread g = spread_of(row.geomean);
    geomeans.push_back({row.policy, g});
    fmt::print(" {:>20}\n", traces.size() > 1 ? range(g) : "");
  }
  const auto lines = within_lines(geomeans, s.seeds.size());
  const std::string what = traces.size() > 1 ? "geomean" : names.front();
  for (const auto& line : lines) fmt::print("{}: {}\n", what, line);
  if (lines.empty()) fmt::print("{}: no two policies within the spread over {} seeds\n", what, s.seeds.size());
  return norm;
}

void spread_json(Json& out, const SeedSpread& s, const std::vector<NormalisedSpread>& norm) {
  out["results"] = Json::array();
  for (const auto& r : s.runs) {
    std::vector<Json> all;
    for (const auto& m : r.per_seed) all.push_back(to_json(m));
    Json j = all.front();  // names first, then every number as its mean
    const Json means = metrics_object(all.front(), all, Row::Mean);
    for (const auto& [key, v] : means.items()) j[key] = v;
    j["min"] = metrics_object(all.front(), all, Row::Min);
    j["max"] = metrics_object(all.front(), all, Row::Max);
    out["results"].push_back(j);
  }
  out["summary"] = Json::object();
  std::vector<std::pair<std::string, Spread>> geomeans;
  for (const auto& row : norm) {
    const Spread g = spread_of(row.geomean);
    geomeans.push_back({row.policy, g});
    out["summary"]["makespan_vs_exclusive_geomean"][row.policy] = g.mean;
    out["summary"]["makespan_vs_exclusive_geomean_spread"][row.policy] = {{"mean", g.mean}, {"min", g.min}, {"max", g.max}};
  }
  if (!norm.empty()) {
    out["summary"]["within_spread"] = Json::array();
    for (const auto& [a, b] : pairs_within(geomeans)) out["summary"]["within_spread"].push_back({a, b});
  }
  out["seeds"] = Json::array();
  for (std::size_t i = 0; i < s.seeds.size(); ++i) {
    Json one;
    one["seed"] = s.seeds[i];
    one["results"] = Json::array();
    for (const auto& r : s.runs) one["results"].push_back(to_json(r.per_seed[i]));
    one["summary"] = Json::object();
    for (const auto& row : norm) one["summary"]["makespan_vs_exclusive_geomean"][row.policy] = row.geomean[i];
    out["seeds"].push_back(one);
  }
}

void print_sweep_spread(const std::vector<SweepPoint>& points, const std::vector<std::string>& names,
                        std::size_t ntraces, std::size_t nseeds, const std::vector<RunMetrics>& metrics) {
  fmt::print("\n");
  for (const auto& [param, v] : points.front()) fmt::print("{:>18} ", param);
  const std::size_t w = name_width(names);
  fmt::print("{:<{}} {:>22} {:>13} {:>12}   (over {} seeds: mean (min-max); worst; mean)\n", "policy", w,
             "makespan/excl", "slowdown_max", "oom_attempts", nseeds);
  const std::size_t per_point = names.size() * ntraces, per_seed = points.size() * per_point;
  for (std::size_t p = 0; p < points.size(); ++p) {
    std::string where;
    for (const auto& [param, v] : points[p]) where += fmt::format("{:>18} ", v);
    std::vector<std::pair<std::string, Spread>> geomeans;
    for (const auto& name : names) {
      if (name == "exclusive") continue;
      std::vector<double> g, ooms;
      double worst = 0;
      for (std::size_t si = 0; si < nseeds; ++si) {
        const std::size_t first = si * per_seed + p * per_point;
        std::map<std::string, double> excl;
        for (std::size_t k = first; k < first + per_point; ++k)
          if (metrics[k].policy == "exclusive") excl[metrics[k].trace] = metrics[k].makespan_s;
        double logsum = 0, oom = 0;
        std::size_t n = 0;
        for (std::size_t k = first; k < first + per_point; ++k) {
          const auto& m = metrics[k];
          if (m.policy != name) continue;
          if (excl.count(m.trace)) logsum += std::log(m.makespan_s / excl[m.trace]);
          worst = std::max(worst, m.slowdown_max);
          oom += static_cast<double>(m.oom_attempts);
          ++n;
        }
        if (!excl.empty()) g.push_back(std::exp(logsum / static_cast<double>(n)));
        ooms.push_back(oom);
      }
      if (!g.empty()) geomeans.push_back({name, spread_of(g)});
      fmt::print("{}{:<{}} {:>22} {:>13.3f} {:>12}\n", where, name, w, g.empty() ? std::string("-") : range(spread_of(g)),
                 worst, count(spread_of(ooms).mean));
    }
    for (const auto& line : within_lines(geomeans, nseeds)) fmt::print("{}{}\n", where, line);
  }
}

}  // namespace aegis::cli
