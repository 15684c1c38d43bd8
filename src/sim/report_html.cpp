#include "sim/report_html.h"

#include "sim/csv.h"

namespace aegis {

// Placeholder until the report lands.
void write_html_report(const std::string& path, const std::string&, const std::vector<ReportRun>&, const Json&) {
  throw InputError(path + ": HTML reports are not implemented yet");
}

}  // namespace aegis
