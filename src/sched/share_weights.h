// The fair-share weights of the config (fair_share_users, fair_share_groups), parsed:
// "NAME:WEIGHT,NAME:WEIGHT,*:WEIGHT" (`*`: everyone not named). Here, below the lifecycle
// that uses them, so that the config's validation rejects a bad entry when it is set.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace aegis {

// Throws ConfigError naming `field` and the bad entry. Empty text: no entry.
std::vector<std::pair<std::string, double>> parse_share_weights(std::string_view text, std::string_view field);

}  // namespace aegis
