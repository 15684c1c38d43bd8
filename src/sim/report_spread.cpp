#include "sim/report_spread.h"

#include <fmt/format.h>

#include "sim/report_html.h"

namespace aegis {

namespace {

std::string cell(const Spread& s, int decimals, double scale = 1) {
  return fmt::format("<td>{:.{}f} <small>({:.{}f}&ndash;{:.{}f})</small></td>", s.mean * scale, decimals,
                     s.min * scale, decimals, s.max * scale, decimals);
}

void pairs_list(std::string& o, const std::string& what, const std::vector<std::pair<std::string, Spread>>& by_policy,
                std::size_t seeds) {
  const auto pairs = pairs_within(by_policy);
  if (pairs.empty()) {
    o += fmt::format("<p>{}: no two policies within the spread over {} seeds.</p>", html_escape(what), seeds);
    return;
  }
  o += fmt::format("<p>{}: within the spread over {} seeds (not a result):</p><ul>", html_escape(what), seeds);
  for (const auto& [a, b] : pairs) o += fmt::format("<li>{} and {}</li>", html_escape(a), html_escape(b));
  o += "</ul>";
}

}  // namespace

std::string spread_html(const SeedSpread& s, const std::vector<std::string>& traces,
                        const std::vector<std::string>& policies) {
  const std::size_t n = s.seeds.size();
  std::string o = fmt::format(
      R"(<section id="seeds"><h2>Spread over {} seeds</h2><p>Seeds {} to {}; each cell is the mean, then the )"
      "least and greatest over the seeds. Two policies whose ranges overlap are within the spread: their "
      "difference is not a result. The charts and figures of each trace below are seed {}'s runs.</p>",
      n, s.seeds.front(), s.seeds.back(), s.seeds.front());
  const auto norm = normalised(s, traces, policies);
  if (!norm.empty()) {
    o += "<h3>Makespan normalised to exclusive</h3><div class=\"scroll\"><table><tr><th>policy</th>";
    for (const auto& t : traces) o += "<th>" + html_escape(t) + "</th>";
    o += "<th>geomean</th></tr>";
    std::vector<std::pair<std::string, Spread>> geomeans;
    for (const auto& row : norm) {
      o += "<tr><td>" + html_escape(row.policy) + "</td>";
      for (const auto& per_seed : row.per_trace) o += cell(spread_of(per_seed), 3);
      geomeans.push_back({row.policy, spread_of(row.geomean)});
      o += cell(geomeans.back().second, 3) + "</tr>";
    }
    o += "</table></div>";
    pairs_list(o, "Geometric mean", geomeans, n);
  }
  for (const auto& t : traces) {
    o += "<h3>" + html_escape(t) + "</h3><div class=\"scroll\"><table><tr><th>policy</th><th>makespan s</th>"
         "<th>mean JCT s</th><th>p95 JCT s</th><th>OOM</th><th>max slowdown</th><th>energy MJ</th></tr>";
    std::vector<std::pair<std::string, Spread>> makespans;
    for (const auto& r : s.runs) {
      if (r.trace != t) continue;
      makespans.push_back({r.policy, r.of(&RunMetrics::makespan_s)});
      o += "<tr><td>" + html_escape(r.policy) + "</td>" + cell(makespans.back().second, 0) +
           cell(r.of(&RunMetrics::jct_mean_s), 0) + cell(r.of(&RunMetrics::jct_p95_s), 0) +
           cell(r.of(&RunMetrics::oom_attempts), 1) + cell(r.of(&RunMetrics::slowdown_max), 3) +
           cell(r.of(&RunMetrics::energy_j), 1, 1e-6) + "</tr>";
    }
    o += "</table></div>";
    pairs_list(o, "Makespan on " + t, makespans, n);
    for (const auto& r : s.runs) {
      const Spread mk = r.of(&RunMetrics::makespan_s);
      if (r.trace == t && (r.seed_invariant() || mk.min == mk.max))
        o += fmt::format("<p>{}: {} the same under all {} seeds (the seed does not reach it here; its zero spread "
                         "is no evidence).</p>",
                         html_escape(r.policy), r.seed_invariant() ? "every figure" : "makespan", n);
    }
  }
  o += "</section>\n";
  return o;
}

}  // namespace aegis
