// The history estimator: a job's signature (its command with numbers normalised, working
// directory, GPU count and tags), and the peak GPU memory recorded for earlier runs with
// the same signature, per GPU model. Repeated jobs are the common case on a shared server.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/units.h"

namespace aegis {

// "python train.py --lr 0.01 --seed 3" and "... --lr 0.02 --seed 4" share a signature.
std::string job_signature(const std::vector<std::string>& argv, const std::string& workdir, int gpus,
                          std::vector<std::string> tags);

// The command with every run of digits (and decimal numbers) replaced by '#'.
std::string normalise_numbers(const std::string& s);

// A high quantile of the last `window` peaks (oldest first), by nearest rank rounding up:
// with few runs it is their largest, and one stray run among many stops counting once
// the window has moved past it. Empty when there are none.
std::optional<MiB> recent_peak_statistic(std::span<const MiB> peaks, int window, double quantile);

// The history estimate of a job that may land on any of `server_models` (GPU model names),
// from its signature's peaks per GPU model: the largest, over those models, of that
// model's statistic, or, for a model without runs of its own, the statistic of the model
// with the most runs moved across by `translate(mib, from, to)`. Empty without any peak.
std::optional<MiB> history_estimate(
    const std::map<std::string, std::vector<MiB>>& peaks_by_model, const std::vector<std::string>& server_models,
    int window, double quantile, const std::function<MiB(MiB, const std::string&, const std::string&)>& translate);

}  // namespace aegis
