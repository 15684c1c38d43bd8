// LearnedModel: a LearnedNet read from a file, answering only inside the training data's
// coverage (an out-of-distribution answer is a guess the scheduler cannot tell from an
// estimate; "no estimate" sends the job to the estimator-free floor instead).
#include "estimate/learned.h"

#include <cmath>

#include "estimate/learned_net.h"

namespace aegis {

struct LearnedModel::Impl {
  LearnedNet net;
};

LearnedModel::LearnedModel() = default;
LearnedModel::~LearnedModel() = default;
LearnedModel::LearnedModel(LearnedModel&&) noexcept = default;
LearnedModel& LearnedModel::operator=(LearnedModel&&) noexcept = default;

LearnedModel LearnedModel::load(const std::string& path) {
  LearnedModel m;
  m.impl_ = std::make_unique<Impl>();
  m.impl_->net = load_learned_net(path);
  return m;
}

namespace {
bool usable(const ModelFeatures& f) { return f.batch_size > 0 && f.depth > 0; }

std::optional<MiB> to_mib(double v) {
  if (!std::isfinite(v) || v <= 0 || v > 1e12) return std::nullopt;
  return static_cast<MiB>(std::ceil(v));  // rounding up: an estimate errs on the safe side
}
}  // namespace

std::optional<MiB> LearnedModel::regression(const ModelFeatures& f) const {
  if (!impl_ || !usable(f) || impl_->net.encoder.outside(f)) return std::nullopt;
  return to_mib(impl_->net.regression_mib(f));
}

std::optional<MiB> LearnedModel::classification(const ModelFeatures& f) const {
  if (!impl_ || !usable(f) || impl_->net.encoder.outside(f)) return std::nullopt;
  return to_mib(impl_->net.classification_mib(f));
}

}  // namespace aegis
