// A self-contained HTML report of simulated runs: inline SVG charts, no scripts from the
// network, readable offline in any browser.
// Charts: makespan, mean JCT and energy per policy normalised to exclusive (bars); JCT
// distribution per policy (CDF); jobs waiting over time; per-GPU timeline (which jobs
// ran where, collocation visible, OOM attempts marked); GPU memory in use against
// capacity over time.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "sim/json_report.h"
#include "sim/metrics.h"
#include "sim/simulator.h"

namespace aegis {

struct ReportRun {
  const SimResult* result = nullptr;  // run with record_timeline = true
  RunMetrics metrics;
};

// Writes the report; `config` is the JSON record of the configuration (shown folded);
// `spread_section`, when not empty, is HTML put before the traces (report_spread.h).
// Throws InputError if the file cannot be written.
void write_html_report(const std::string& path, const std::string& title, const std::vector<ReportRun>& runs,
                       const Json& config, const std::string& spread_section = {});

// `s` with &, <, >, " and ' as HTML entities (text and attribute values).
std::string html_escape(std::string_view s);

}  // namespace aegis
