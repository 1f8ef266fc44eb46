// Optimizer steps as graph code: each traces one update of every parameter
// and its state, returning them as pending tensors, so a training step is
// one graph (forward, grad(), update) and the update runs where the rest
// does. The learning rate and the step count are rank-0 tensors: given as
// inputs (from_vector, from_buffer) one compiled step serves every
// iteration and a schedule changes them without compiling again (a
// Context::scalar is a constant of the graph: a new value, a new graph). Written
// as PyTorch's torch.optim writes them (single-tensor form, state starting
// at zeros) so its steps can check these; each update is computed in its
// parameter's dtype.
#pragma once

#include <span>
#include <vector>

#include "expected.h"
#include "tensor.h"

namespace lazylab {

struct SgdOptions {
  double momentum = 0;
  double weight_decay = 0;  // L2, added to the gradient
  bool nesterov = false;
};

struct SgdStep {
  std::vector<Tensor> params;
  std::vector<Tensor> momentum;  // the momentum buffers (empty without momentum)
};

// p -= lr * d, d = g + wd * p, or with momentum: buf = momentum * buf + d,
// then d = buf (or d + momentum * buf, nesterov). `momentum` holds one
// buffer per parameter (zeros to start), or is empty without momentum.
Expected<SgdStep> sgd_step(std::span<const Tensor> params, std::span<const Tensor> grads,
                           std::span<const Tensor> momentum, const Tensor& lr, const SgdOptions& options = {});

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // decoupled: p *= 1 - lr * wd
};

struct AdamWStep {
  std::vector<Tensor> params, m, v;
};

// AdamW with bias correction: m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g²,
// p = p (1 - lr wd) - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps),
// t the step count (1 for the first step).
Expected<AdamWStep> adamw_step(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> m,
                               std::span<const Tensor> v, const Tensor& lr, const Tensor& step,
                               const AdamWOptions& options = {});

}  // namespace lazylab
