#include "estimate/history.h"

#include <algorithm>
#include <cctype>

namespace aegis {

std::string normalise_numbers(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      // One '#' for "12", "0.01", "1e-4": hyper-parameters and seeds vary between runs.
      while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' ||
                              ((s[i] == 'e' || s[i] == 'E') && i + 1 < s.size() &&
                               (std::isdigit(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '-'))))
        i += (s[i] == 'e' || s[i] == 'E') && s[i + 1] == '-' ? 2 : 1;
      out += '#';
    } else {
      out += s[i++];
    }
  }
  return out;
}

std::string job_signature(const std::vector<std::string>& argv, const std::string& workdir, int gpus,
                          std::vector<std::string> tags) {
  std::sort(tags.begin(), tags.end());
  std::string sig = "gpus=" + std::to_string(gpus) + "\x1f" + "cwd=" + workdir + "\x1f";
  for (const auto& a : argv) sig += normalise_numbers(a) + "\x1e";
  sig += "\x1f";
  for (const auto& t : tags) sig += t + "\x1e";
  return sig;
}

}  // namespace aegis
