#include "estimate/learned_training.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "estimate/ratio_metrics.h"
#include "estimate/rng.h"
#include "estimate/training.h"

namespace aegis {
namespace {

nlohmann::json to_json(const TrainReport& r) {
  return {{"epochs_run", r.epochs_run},     {"best_epoch", r.best_epoch},
          {"train_loss", r.train_loss},     {"validation_loss", r.validation_loss},
          {"train_rows", r.train_rows},     {"validation_rows", r.validation_rows}};
}

TrainOptions head_options(const LearnedTrainOptions& o, LossKind loss, std::uint64_t salt) {
  TrainOptions t;
  t.loss = loss;
  t.quantile = o.quantile;
  t.max_epochs = o.max_epochs;
  t.patience = o.patience;
  t.batch_size = o.batch_size;
  t.learning_rate = o.learning_rate;
  t.final_learning_rate = o.learning_rate / 100;
  t.validation_share = o.validation_share;
  t.seed = derive_seed(o.seed, salt);
  return t;
}

}  // namespace

nlohmann::json to_json(const LearnedTrainOptions& o) {
  return {{"seed", o.seed},
          {"quantile", o.quantile},
          {"bin_mib", o.bin_mib},
          {"hidden", o.hidden},
          {"hidden_activation", to_string(o.activation)},
          {"optimizer", "adam (beta1 0.9, beta2 0.999), cosine learning-rate decay to 1/100"},
          {"max_epochs", o.max_epochs},
          {"patience", o.patience},
          {"batch_size", o.batch_size},
          {"learning_rate", o.learning_rate},
          {"validation_share", o.validation_share}};
}

LearnedNet train_learned(std::span<const MemorySample> samples, const LearnedTrainOptions& o) {
  if (samples.empty()) throw std::invalid_argument("train_learned: no samples");
  if (!(o.quantile > 0 && o.quantile < 1)) throw std::invalid_argument("quantile must lie in (0, 1)");
  if (!(o.bin_mib > 0)) throw std::invalid_argument("bin_mib must be positive");
  if (o.hidden.empty()) throw std::invalid_argument("need at least one hidden layer");

  LearnedNet net;
  net.quantile = o.quantile;
  net.bin_mib = o.bin_mib;
  std::vector<ModelFeatures> feats;
  for (const auto& s : samples) feats.push_back(s.features);
  net.encoder = FeatureEncoder::fit(feats);

  TrainingSet set;
  set.features = static_cast<int>(net.encoder.size());
  set.x.resize(samples.size() * net.encoder.size());
  for (std::size_t i = 0; i < samples.size(); ++i)
    net.encoder.encode(samples[i].features, std::span<double>(set.x).subspan(i * net.encoder.size(), net.encoder.size()));

  // Regression on standardised log memory: memory spans a factor of several, errors that
  // matter are relative, and the quantile of the log is the log of the quantile.
  std::vector<double> logs;
  for (const auto& s : samples) logs.push_back(std::log(s.memory_mib));
  double mean = 0, var = 0;
  for (double v : logs) mean += v / static_cast<double>(logs.size());
  for (double v : logs) var += (v - mean) * (v - mean) / static_cast<double>(logs.size());
  net.target_mean = mean;
  net.target_scale = var > 1e-12 ? std::sqrt(var) : 1.0;
  set.y.clear();
  for (double v : logs) set.y.push_back((v - mean) / net.target_scale);

  std::vector<int> sizes = {set.features};
  sizes.insert(sizes.end(), o.hidden.begin(), o.hidden.end());
  sizes.push_back(1);
  net.regression = make_mlp(sizes, o.activation, derive_seed(o.seed, 1));
  const auto reg = train_mlp(net.regression, set, head_options(o, LossKind::Pinball, 2));

  // Classifier: one class per bin up to the largest run seen.
  int bins = 1;
  set.y.clear();
  for (const auto& s : samples) {
    const int b = static_cast<int>(std::floor(s.memory_mib / o.bin_mib));
    bins = std::max(bins, b + 1);
    set.y.push_back(b);
  }
  sizes.back() = bins;
  net.classifier = make_mlp(sizes, o.activation, derive_seed(o.seed, 3));
  const auto cls = train_mlp(net.classifier, set, head_options(o, LossKind::CrossEntropy, 4));

  // In-sample figures, recorded so that a model file says how well it fits its own data.
  std::vector<double> actual, by_reg, by_cls;
  int hits = 0;
  for (const auto& s : samples) {
    actual.push_back(s.memory_mib);
    by_reg.push_back(net.regression_mib(s.features));
    const int b = net.classification_bin(s.features);
    by_cls.push_back((b + 1) * o.bin_mib);
    hits += b == static_cast<int>(std::floor(s.memory_mib / o.bin_mib)) ? 1 : 0;
  }
  auto cm = ratio_metrics(by_cls, actual);
  cm.bin_accuracy = static_cast<double>(hits) / static_cast<double>(samples.size());
  net.training = {{"rows", samples.size()},
                  {"options", to_json(o)},
                  {"regression_report", to_json(reg)},
                  {"classification_report", to_json(cls)},
                  {"in_sample_metrics",
                   {{"regression", to_json(ratio_metrics(by_reg, actual))}, {"classification", to_json(cm)}}}};
  return net;
}

}  // namespace aegis
