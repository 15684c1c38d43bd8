// The HTML report's section on the spread over seeds (`aegis sim --seeds N`, N > 1): per
// trace and policy the mean and min-max of the headline figures, the normalised geometric
// mean likewise, and each pair of policies within the spread (ranges overlap: not a result).
#pragma once
#include <string>
#include <vector>

#include "sim/seed_spread.h"

namespace aegis {

// An HTML fragment (a <section>) for write_html_report's `spread_section`.
std::string spread_html(const SeedSpread& s, const std::vector<std::string>& traces,
                        const std::vector<std::string>& policies);

}  // namespace aegis
