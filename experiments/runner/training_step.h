// A forward workload as a training step, the whole of it lazylab's: the
// forward's first output under a loss, its gradients with respect to the
// workload's weights by lazylab's reverse mode (core/autodiff.h), and one
// optimizer step as graph code (core/optimizers.h). What the experiment
// file's `train: {loss: ..., optimizer: ...}` makes of any workload but a
// PyTorch program (an ONNX model, a .lzir file, a built-in forward), and
// what the built-in mlp-train and gpt2-block-train are made of.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/tensor.h"
#include "workload.h"

namespace lazylab {

// cross-entropy: the mean over rows of -log softmax(out)[target] along the
// last axis, the target class indices (i64) of out's shape but the last
// dim; mse: mean((out - target)^2), the target of out's type.
inline constexpr std::array<std::string_view, 2> kTrainingLosses = {"cross-entropy", "mse"};
// sgd: momentum 0.9, lr 1e-2; adamw: torch.optim.AdamW's defaults, lr 1e-3.
inline constexpr std::array<std::string_view, 2> kTrainingOptimizers = {"sgd", "adamw"};

struct TrainingSpec {
  std::string loss = "mse";
  std::string optimizer = "adamw";
};

// loss(out, target), its gradients with respect to `weights`, and one
// optimizer step: [loss, weights'..., state'...]. `state` is adamw's first
// moments then its second ones, or sgd's momentum buffers; `step` is
// adamw's step count (rank 0), not read by sgd.
std::vector<Tensor> training_step(const TrainingSpec& spec, const Tensor& out, const Tensor& target,
                                  std::span<const Tensor> weights, std::span<const Tensor> state, const Tensor& lr,
                                  const Tensor& step);

// `forward` as a training step: its inputs, then the target, the optimizer
// state of each weight (its float inputs after the data ones, see
// Workload::data_inputs) as of mid-training (moments and buffers drawn
// small, not zeros: a first step from zeros moves every weight by lr times
// the sign of its gradient, so a gradient that is zero but for rounding
// would move by lr on one backend and -lr on another), the learning rate
// and (adamw) the step count 10, rank-0 inputs, not constants; its
// outputs are the loss, the new weights and the new state. A forward whose
// first output cannot take the loss is a failed workload saying why.
std::unique_ptr<Workload> as_training_step(std::unique_ptr<Workload> forward, TrainingSpec spec);

}  // namespace lazylab
