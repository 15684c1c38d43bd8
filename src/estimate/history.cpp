#include "estimate/history.h"

#include <algorithm>
#include <cctype>
#include <cmath>

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

namespace {

template <class T>
std::optional<T> recent_quantile(std::span<const T> values, int window, double quantile) {
  if (values.empty() || window < 1) return std::nullopt;
  const auto n = std::min(values.size(), static_cast<std::size_t>(window));
  std::vector<T> recent(values.end() - static_cast<std::ptrdiff_t>(n), values.end());
  std::sort(recent.begin(), recent.end());
  const double rank = std::ceil(std::clamp(quantile, 0.0, 1.0) * static_cast<double>(n));
  return recent[static_cast<std::size_t>(std::clamp(rank, 1.0, static_cast<double>(n))) - 1];
}

}  // namespace

std::optional<MiB> recent_peak_statistic(std::span<const MiB> peaks, int window, double quantile) {
  return recent_quantile(peaks, window, quantile);
}

std::optional<double> recent_share_statistic(std::span<const double> shares, int window, double quantile) {
  return recent_quantile(shares, window, quantile);
}

std::optional<double> history_utilisation(const std::map<std::string, std::vector<double>>& utils_by_model,
                                          const std::vector<std::string>& server_models, int window,
                                          double quantile, int min_runs) {
  std::optional<double> out;
  for (const auto& model : server_models) {
    const auto it = utils_by_model.find(model);
    if (it == utils_by_model.end() || it->second.size() < static_cast<std::size_t>(std::max(1, min_runs)))
      return std::nullopt;
    const auto here = recent_share_statistic(it->second, window, quantile);
    if (here && (!out || *here > *out)) out = here;
  }
  return out;
}

std::optional<MiB> history_estimate(
    const std::map<std::string, std::vector<MiB>>& peaks_by_model, const std::vector<std::string>& server_models,
    int window, double quantile, const std::function<MiB(MiB, const std::string&, const std::string&)>& translate) {
  const std::string* most = nullptr;
  for (const auto& [model, peaks] : peaks_by_model)
    if (!peaks.empty() && (!most || peaks.size() > peaks_by_model.at(*most).size())) most = &model;
  if (!most) return std::nullopt;
  if (server_models.empty()) return recent_peak_statistic(peaks_by_model.at(*most), window, quantile);
  std::optional<MiB> out;
  for (const auto& model : server_models) {
    std::optional<MiB> here;
    if (auto it = peaks_by_model.find(model); it != peaks_by_model.end() && !it->second.empty())
      here = recent_peak_statistic(it->second, window, quantile);
    else if (auto from = recent_peak_statistic(peaks_by_model.at(*most), window, quantile))
      here = translate(*from, *most, model);
    if (here && (!out || *here > *out)) out = here;
  }
  return out;
}

}  // namespace aegis
