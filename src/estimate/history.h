// The history estimator: a job's signature (its command with numbers normalised, working
// directory, GPU count and tags), and the peak GPU memory recorded for earlier runs with
// the same signature. Repeated jobs are the common case on a shared server.
#pragma once
#include <string>
#include <vector>

namespace aegis {

// "python train.py --lr 0.01 --seed 3" and "... --lr 0.02 --seed 4" share a signature.
std::string job_signature(const std::vector<std::string>& argv, const std::string& workdir, int gpus,
                          std::vector<std::string> tags);

// The command with every run of digits (and decimal numbers) replaced by '#'.
std::string normalise_numbers(const std::string& s);

}  // namespace aegis
