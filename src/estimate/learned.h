// The learned memory estimator: a small MLP (Eigen) trained on GPUMemNet's MLP data.
// Two heads: the published classification into 1 GiB bins (the estimate is the bin's
// upper edge) and a regression of a high quantile of memory (rarely too low, without the
// bins' waste). Weights ship as JSON (data/models/); training is `aegis estimate train`.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "core/units.h"
#include "estimate/features.h"

namespace aegis {

class LearnedModel {
 public:
  // Throws std::runtime_error naming the file and the problem.
  static LearnedModel load(const std::string& path);

  std::optional<MiB> regression(const ModelFeatures& f) const;  // the quantile head (default)
  std::optional<MiB> classification(const ModelFeatures& f) const;  // bin upper edge

  LearnedModel();
  ~LearnedModel();
  LearnedModel(LearnedModel&&) noexcept;
  LearnedModel& operator=(LearnedModel&&) noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aegis
