#include "estimate/training.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>

#include "estimate/rng.h"

namespace aegis {
namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// The network as Eigen matrices while it trains (copied back to plain vectors at the end).
struct Params {
  std::vector<RowMatrix> w;        // outputs x inputs
  std::vector<Eigen::RowVectorXd> b;
};

Params from_mlp(const Mlp& m) {
  Params p;
  for (const auto& L : m.layers) {
    p.w.push_back(Eigen::Map<const RowMatrix>(L.weight.data(), L.outputs, L.inputs));
    p.b.push_back(Eigen::Map<const Eigen::RowVectorXd>(L.bias.data(), L.outputs));
  }
  return p;
}

void to_mlp(const Params& p, Mlp& m) {
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    std::copy(p.w[l].data(), p.w[l].data() + p.w[l].size(), m.layers[l].weight.begin());
    std::copy(p.b[l].data(), p.b[l].data() + p.b[l].size(), m.layers[l].bias.begin());
  }
}

Params zeros_like(const Params& p) {
  Params z = p;
  for (auto& w : z.w) w.setZero();
  for (auto& b : z.b) b.setZero();
  return z;
}

RowMatrix gather(const TrainingSet& s, const std::vector<std::size_t>& idx, std::size_t from, std::size_t to) {
  RowMatrix x(static_cast<Eigen::Index>(to - from), s.features);
  for (std::size_t r = from; r < to; ++r)
    x.row(static_cast<Eigen::Index>(r - from)) =
        Eigen::Map<const Eigen::RowVectorXd>(s.x.data() + idx[r] * static_cast<std::size_t>(s.features), s.features);
  return x;
}

void activate(RowMatrix& z, HiddenActivation a) {
  if (a == HiddenActivation::Relu) z = z.cwiseMax(0.0);
  else z = z.array().tanh().matrix();
}

// Forward pass keeping every layer's output (acts[0] = input) for the backward pass.
void forward_all(const Params& p, HiddenActivation a, const RowMatrix& x, std::vector<RowMatrix>& acts) {
  acts.resize(p.w.size() + 1);
  acts[0] = x;
  for (std::size_t l = 0; l < p.w.size(); ++l) {
    acts[l + 1] = (acts[l] * p.w[l].transpose()).rowwise() + p.b[l];
    if (l + 1 < p.w.size()) activate(acts[l + 1], a);
  }
}

// Loss summed over the rows of `out`, and (if grad) its gradient with respect to `out`
// divided by `scale` (the batch size, so that the step follows the mean loss).
double loss_and_grad(const RowMatrix& out, const TrainingSet& s, const std::vector<std::size_t>& idx,
                     std::size_t from, LossKind kind, double q, RowMatrix* grad, double scale) {
  double total = 0;
  if (grad) grad->resize(out.rows(), out.cols());
  for (Eigen::Index r = 0; r < out.rows(); ++r) {
    const double y = s.y[idx[from + static_cast<std::size_t>(r)]];
    if (kind == LossKind::Pinball) {
      const double e = y - out(r, 0);
      total += e >= 0 ? q * e : (q - 1) * e;
      if (grad) (*grad)(r, 0) = (e >= 0 ? -q : 1 - q) / scale;
    } else {
      const auto cls = static_cast<Eigen::Index>(y);
      const double m = out.row(r).maxCoeff();
      const Eigen::RowVectorXd e = (out.row(r).array() - m).exp().matrix();
      const double z = e.sum();
      total += -(out(r, cls) - m - std::log(z));
      if (grad) {
        grad->row(r) = e / z / scale;
        (*grad)(r, cls) -= 1.0 / scale;
      }
    }
  }
  return total;
}

double set_loss(const Params& p, HiddenActivation a, const TrainingSet& s, const std::vector<std::size_t>& idx,
                LossKind kind, double q) {
  if (idx.empty()) return 0;
  std::vector<RowMatrix> acts;
  double total = 0;
  constexpr std::size_t kChunk = 1024;
  for (std::size_t from = 0; from < idx.size(); from += kChunk) {
    const std::size_t to = std::min(idx.size(), from + kChunk);
    forward_all(p, a, gather(s, idx, from, to), acts);
    total += loss_and_grad(acts.back(), s, idx, from, kind, q, nullptr, 1);
  }
  return total / static_cast<double>(idx.size());
}

}  // namespace

double mean_loss(const Mlp& net, const TrainingSet& set, LossKind loss, double quantile) {
  std::vector<std::size_t> idx(set.rows());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  return set_loss(from_mlp(net), net.hidden, set, idx, loss, quantile);
}

TrainReport train_mlp(Mlp& net, const TrainingSet& set, const TrainOptions& o) {
  if (net.inputs() != set.features) throw std::invalid_argument("train_mlp: network inputs != features");
  if (set.x.size() != set.rows() * static_cast<std::size_t>(set.features))
    throw std::invalid_argument("train_mlp: x has the wrong size");
  if (set.rows() == 0) throw std::invalid_argument("train_mlp: no training rows");

  Rng rng(o.seed);
  std::vector<std::size_t> all(set.rows());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  rng.shuffle(all);
  const auto n_val = std::min(all.size() - 1, static_cast<std::size_t>(std::floor(o.validation_share * static_cast<double>(all.size()))));
  std::vector<std::size_t> val(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n_val));
  std::vector<std::size_t> train(all.begin() + static_cast<std::ptrdiff_t>(n_val), all.end());
  std::sort(train.begin(), train.end());  // the batch order below is the only shuffle that matters

  Params p = from_mlp(net), m = zeros_like(p), v = zeros_like(p), g = zeros_like(p);
  Params best = p;
  double best_val = std::numeric_limits<double>::infinity();
  TrainReport rep;
  rep.train_rows = train.size();
  rep.validation_rows = val.size();
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  long long step = 0;
  std::vector<RowMatrix> acts;
  RowMatrix delta;
  const auto L = p.w.size();
  const std::size_t batch = static_cast<std::size_t>(std::max(1, o.batch_size));

  for (int epoch = 0; epoch < o.max_epochs; ++epoch) {
    const double progress = o.max_epochs > 1 ? static_cast<double>(epoch) / (o.max_epochs - 1) : 1.0;
    const double lr = o.final_learning_rate +
                      0.5 * (o.learning_rate - o.final_learning_rate) * (1 + std::cos(std::numbers::pi * progress));
    rng.shuffle(train);
    for (std::size_t from = 0; from < train.size(); from += batch) {
      const std::size_t to = std::min(train.size(), from + batch);
      forward_all(p, net.hidden, gather(set, train, from, to), acts);
      loss_and_grad(acts.back(), set, train, from, o.loss, o.quantile, &delta, static_cast<double>(to - from));
      // Backward: delta is d(loss)/d(pre-activation) of layer l.
      for (std::size_t l = L; l-- > 0;) {
        g.w[l].noalias() = delta.transpose() * acts[l];
        g.b[l] = delta.colwise().sum();
        if (l > 0) {
          RowMatrix up = delta * p.w[l];
          if (net.hidden == HiddenActivation::Relu) up = up.cwiseProduct((acts[l].array() > 0).cast<double>().matrix());
          else up = up.cwiseProduct((1 - acts[l].array().square()).matrix());
          delta = std::move(up);
        }
      }
      ++step;
      const double c1 = 1 - std::pow(b1, static_cast<double>(step)), c2 = 1 - std::pow(b2, static_cast<double>(step));
      auto adam = [&](auto& param, auto& mom, auto& var, const auto& grad) {
        mom = b1 * mom + (1 - b1) * grad;
        var = b2 * var + (1 - b2) * grad.cwiseProduct(grad);
        param.array() -= lr * (mom.array() / c1) / ((var.array() / c2).sqrt() + eps);
      };
      for (std::size_t l = 0; l < L; ++l) {
        adam(p.w[l], m.w[l], v.w[l], g.w[l]);
        adam(p.b[l], m.b[l], v.b[l], g.b[l]);
      }
    }
    rep.epochs_run = epoch + 1;
    if (val.empty()) continue;
    const double vl = set_loss(p, net.hidden, set, val, o.loss, o.quantile);
    if (vl < best_val) {
      best_val = vl;
      best = p;
      rep.best_epoch = epoch + 1;
    } else if (epoch + 1 - rep.best_epoch >= o.patience) {
      break;
    }
  }
  if (val.empty()) {
    best = p;
    rep.best_epoch = rep.epochs_run;
  }
  to_mlp(best, net);
  std::sort(train.begin(), train.end());
  rep.train_loss = set_loss(best, net.hidden, set, train, o.loss, o.quantile);
  rep.validation_loss = val.empty() ? 0 : best_val;
  return rep;
}

}  // namespace aegis
