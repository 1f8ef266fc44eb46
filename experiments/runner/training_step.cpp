#include "training_step.h"

#include <fmt/format.h>

#include <random>

#include "core/optimizers.h"
#include "core/tensor_ops.h"
#include "workload_inputs.h"

namespace lazylab {
namespace {

constexpr double kSgdLearningRate = 1e-2, kSgdMomentum = 0.9, kAdamWLearningRate = 1e-3, kAdamWStep = 10;

Tensor cross_entropy(const Tensor& logits, const Tensor& target) {
  const int64_t axis = logits.type().rank() - 1;
  Tensor shifted = logits - max(logits, {axis}, true);
  Tensor log_probabilities = shifted - log(sum(exp(shifted), {axis}, true));
  Dims column = target.type().shape;
  column.push_back(1);
  // Classes compared as f32 (exact below 2^24): the backends' fast row
  // loops compare floats, where an i64 comparison took the cpu's reference
  // kernels (GPT-2's 50,257 logits a row: 167 of its 472 ms).
  Tensor classes = logits.context().iota(TensorType{DType::F32, logits.type().shape}, axis);
  Tensor chosen = eq(classes, broadcast_to(reshape(cast(target, DType::F32), column), logits.type().shape));
  return -mean(sum(where(chosen, log_probabilities, full_like(log_probabilities, 0)), {axis}));
}

Tensor loss_of(const std::string& loss, const Tensor& out, const Tensor& target) {
  if (loss == "cross-entropy") return cross_entropy(out, target);
  Tensor diff = out - target;
  return mean(diff * diff);
}

// Class indices drawn uniformly from [0, classes), from (seed, index) like
// every input.
HostTensor class_indices(const TensorType& type, int64_t classes, uint64_t seed, uint64_t index) {
  std::seed_seq sequence{seed, index, uint64_t{0x636c6173}};
  std::mt19937_64 rng(sequence);
  std::uniform_int_distribution<int64_t> pick(0, classes - 1);
  auto buffer = std::make_shared<Buffer>(type.bytes());
  auto* out = reinterpret_cast<int64_t*>(buffer->data());
  for (int64_t i = 0; i < type.num_elements(); ++i) out[i] = pick(rng);
  return HostTensor{type, std::move(buffer)};
}

class TrainingStep : public Workload {
 public:
  TrainingStep(std::unique_ptr<Workload> forward, TrainingSpec spec)
      : forward_(std::move(forward)), spec_(std::move(spec)), forward_types_(forward_->input_types()) {
    for (size_t i = forward_->data_inputs(); i < forward_types_.size(); ++i)
      if (is_float(forward_types_[i].dtype)) weights_.push_back(i);
    if (!forward_->failure()) find_output();
  }

  std::string name() const override { return forward_->name(); }
  WorkloadParams params() const override { return forward_->params(); }
  size_t data_inputs() const override { return forward_->data_inputs(); }
  const std::string* failure() const override { return forward_->failure() ? forward_->failure() : failure_.get(); }

  std::vector<TensorType> input_types() const override {
    std::vector<TensorType> types = forward_types_;
    types.push_back(target_type());
    for (size_t copy = 0; copy < state_copies(); ++copy)
      for (size_t w : weights_) types.push_back(forward_types_[w]);
    types.push_back(TensorType{DType::F32, {}});                                  // lr
    if (spec_.optimizer == "adamw") types.push_back(TensorType{DType::F32, {}});  // step
    return types;
  }

  std::vector<HostTensor> make_inputs(uint64_t seed) const override {
    std::vector<HostTensor> inputs = forward_->make_inputs(seed);
    uint64_t index = inputs.size();
    TensorType target = target_type();
    inputs.push_back(spec_.loss == "cross-entropy" ? class_indices(target, output_.shape.back(), seed, index++)
                                                   : make_random(target, seed, index++, Fill::Normal, 1.0));
    bool adamw = spec_.optimizer == "adamw";
    for (size_t copy = 0; copy < state_copies(); ++copy)
      for (size_t w : weights_)
        inputs.push_back(copy == 1 ? make_random(forward_types_[w], seed, index++, Fill::Positive, 1e-8)
                                   : make_random(forward_types_[w], seed, index++, Fill::Normal, 1e-4));
    inputs.push_back(
        make_random({DType::F32, {}}, seed, index++, Fill::Constant, adamw ? kAdamWLearningRate : kSgdLearningRate));
    if (adamw) inputs.push_back(make_random({DType::F32, {}}, seed, index++, Fill::Constant, kAdamWStep));
    return inputs;
  }

  std::vector<Tensor> step(Context& context, const std::vector<Tensor>& inputs) const override {
    const size_t n = forward_types_.size(), state = state_copies() * weights_.size();
    std::vector<Tensor> forward_inputs(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(n));
    std::vector<Tensor> outputs = forward_->step(context, forward_inputs);
    if (outputs.empty()) return {context.error_tensor(make_error("the forward has no outputs to train"))};
    std::vector<Tensor> weights;
    for (size_t w : weights_) weights.push_back(inputs[w]);
    const Tensor& lr = inputs[n + 1 + state];
    return training_step(spec_, outputs[0], inputs[n], weights, std::span(inputs.data() + n + 1, state), lr,
                         spec_.optimizer == "adamw" ? inputs[n + 2 + state] : lr);
  }

 private:
  size_t state_copies() const { return spec_.optimizer == "adamw" ? 2 : 1; }

  TensorType target_type() const {
    if (spec_.loss != "cross-entropy") return output_;
    Dims rows(output_.shape.begin(), output_.shape.end() - (output_.shape.empty() ? 0 : 1));
    return TensorType{DType::I64, rows};
  }

  // The forward's first output, from a trace of one step (nothing runs).
  void find_output() {
    Context context;
    std::vector<Tensor> inputs;
    for (const TensorType& type : forward_types_) inputs.push_back(context.placeholder(type));
    std::vector<Tensor> outputs = forward_->step(context, inputs);
    std::string why;
    if (outputs.empty())
      why = "the forward has no outputs";
    else if (!outputs[0].ok())
      why = outputs[0].error()->message;
    else if (!is_float(outputs[0].type().dtype))
      why = fmt::format("its first output is {}: a loss needs float values", to_string(outputs[0].type()));
    else if (spec_.loss == "cross-entropy" && outputs[0].type().rank() == 0)
      why = "cross-entropy needs classes along the first output's last axis; it is a scalar";
    else if (weights_.empty())
      why = "it has no float weights (inputs after its data) to train";
    if (!why.empty()) {
      failure_ = std::make_shared<std::string>("as a training step: " + why);
      return;
    }
    output_ = outputs[0].type();
  }

  std::unique_ptr<Workload> forward_;
  TrainingSpec spec_;
  std::vector<TensorType> forward_types_;
  std::vector<size_t> weights_;  // indices of the inputs trained
  TensorType output_{DType::F32, {}};
  std::shared_ptr<std::string> failure_;
};

}  // namespace

std::vector<Tensor> training_step(const TrainingSpec& spec, const Tensor& out, const Tensor& target,
                                  std::span<const Tensor> weights, std::span<const Tensor> state, const Tensor& lr,
                                  const Tensor& step) {
  auto loss = value_and_grad(loss_of(spec.loss, out, target), weights);
  if (!loss) return {out.context().error_tensor(loss.error())};
  std::vector<Tensor> outputs{loss->value};
  auto append = [&](const std::vector<Tensor>& list) { outputs.insert(outputs.end(), list.begin(), list.end()); };
  const size_t n = weights.size();
  if (spec.optimizer == "sgd") {
    auto next = sgd_step(weights, loss->gradients, state.first(n), lr, SgdOptions{kSgdMomentum, 0, false});
    if (!next) return {out.context().error_tensor(next.error())};
    append(next->params);
    append(next->momentum);
    return outputs;
  }
  auto next = adamw_step(weights, loss->gradients, state.first(n), state.subspan(n, n), lr, step);
  if (!next) return {out.context().error_tensor(next.error())};
  for (const auto* list : {&next->params, &next->m, &next->v}) append(*list);
  return outputs;
}

std::unique_ptr<Workload> as_training_step(std::unique_ptr<Workload> forward, TrainingSpec spec) {
  return std::make_unique<TrainingStep>(std::move(forward), std::move(spec));
}

}  // namespace lazylab
