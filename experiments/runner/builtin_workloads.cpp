// The reference suite of shared/WORKLOADS.md, by exact definition, at the
// CPU sizes as defaults.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <functional>
#include <limits>

#include "core/suggest.h"
#include "core/tensor_ops.h"
#include "training_step.h"
#include "workload_inputs.h"

namespace lazylab {
namespace {

struct InputSpec {
  Dims shape;
  Fill fill = Fill::Uniform;
  double scale = 1.0;
};

struct Definition {
  WorkloadInfo info;
  std::function<std::vector<InputSpec>(const WorkloadParams&)> inputs;
  std::function<std::vector<Tensor>(const std::vector<Tensor>&, const WorkloadParams&)> step;
  std::function<int64_t(const WorkloadParams&)> ops_per_step;
};

std::vector<Tensor> chain_step(const std::vector<Tensor>& in, const WorkloadParams& p) {
  Tensor x = in[0];
  for (int64_t i = 0; i < p.at("iters"); ++i) {
    x = x + 1.0;
    x = x * 0.99;
    x = relu(x);
  }
  return {x};
}

Definition chain(std::string name, int64_t n, std::string summary) {
  return {{std::move(name), std::move(summary), {{"n", n}, {"iters", 100}}},
          [](const WorkloadParams& p) { return std::vector<InputSpec>{{{p.at("n")}}}; },
          chain_step,
          [](const WorkloadParams& p) { return 3 * p.at("iters"); }};
}

Definition softmax_workload() {
  return {{"softmax", "row-wise stable softmax: e = exp(x - max(x)); e / sum(e)", {{"rows", 1024}, {"cols", 4096}}},
          [](const WorkloadParams& p) {
            return std::vector<InputSpec>{{{p.at("rows"), p.at("cols")}}};
          },
          [](const std::vector<Tensor>& in, const WorkloadParams&) { return std::vector<Tensor>{softmax(in[0], -1)}; },
          nullptr};
}

Definition layernorm_workload() {
  return {{"layernorm", "(x - mean) * rsqrt(var + 1e-5) * w + b over the last axis", {{"rows", 8192}, {"cols", 768}}},
          [](const WorkloadParams& p) {
            return std::vector<InputSpec>{{{p.at("rows"), p.at("cols")}}, {{p.at("cols")}}, {{p.at("cols")}}};
          },
          [](const std::vector<Tensor>& in, const WorkloadParams&) {
            return std::vector<Tensor>{layernorm(in[0], in[1], in[2], 1e-5)};
          },
          nullptr};
}

Tensor gelu_tanh(const Tensor& x) { return gelu(x); }

Definition mlp_workload() {
  return {{"mlp", "gelu_tanh(x @ W1 + b1) @ W2 + b2", {{"batch", 256}, {"d", 768}, {"hidden", 3072}}},
          [](const WorkloadParams& p) {
            int64_t b = p.at("batch"), d = p.at("d"), h = p.at("hidden");
            return std::vector<InputSpec>{{{b, d}},
                                          {{d, h}, Fill::Normal, 0.02},
                                          {{h}, Fill::Normal, 0.02},
                                          {{h, d}, Fill::Normal, 0.02},
                                          {{d}, Fill::Normal, 0.02}};
          },
          [](const std::vector<Tensor>& in, const WorkloadParams&) {
            return std::vector<Tensor>{matmul(gelu_tanh(matmul(in[0], in[1]) + in[2]), in[3]) + in[4]};
          },
          nullptr};
}

Definition attention_workload() {
  return {{"attention",
           "softmax(Q @ K^T * 0.125) @ V, no mask",
           {{"batch", 4}, {"heads", 12}, {"seq", 256}, {"head_dim", 64}}},
          [](const WorkloadParams& p) {
            Dims shape{p.at("batch"), p.at("heads"), p.at("seq"), p.at("head_dim")};
            return std::vector<InputSpec>{{shape}, {shape}, {shape}};
          },
          [](const std::vector<Tensor>& in, const WorkloadParams&) {
            Tensor scores = matmul(in[0], transpose(in[1], -1, -2)) * 0.125;
            return std::vector<Tensor>{matmul(softmax(scores, -1), in[2])};
          },
          nullptr};
}

// Pre-LN GPT-2 block with biases and a causal mask.
std::vector<Tensor> gpt2_step(const std::vector<Tensor>& in, const WorkloadParams& p) {
  int64_t B = p.at("batch"), T = p.at("seq"), C = p.at("channels"), H = p.at("heads"), D = C / H;
  const Tensor &x0 = in[0], &ln1_w = in[1], &ln1_b = in[2], &w_qkv = in[3], &b_qkv = in[4], &w_proj = in[5],
               &b_proj = in[6], &ln2_w = in[7], &ln2_b = in[8], &w_fc = in[9], &b_fc = in[10], &w_out = in[11],
               &b_out = in[12];
  Tensor qkv = matmul(layernorm(x0, ln1_w, ln1_b, 1e-5), w_qkv) + b_qkv;
  auto heads = [&](int64_t part) {
    return permute(reshape(narrow(qkv, -1, part * C, (part + 1) * C), {B, T, H, D}), {0, 2, 1, 3});
  };
  Tensor q = heads(0), k = heads(1), v = heads(2);
  Tensor scores = matmul(q, transpose(k, -1, -2)) * (1.0 / std::sqrt(static_cast<double>(D)));
  Context& ctx = x0.context();
  Tensor causal = ge(ctx.iota(TensorType{DType::I32, {T, T}}, 0), ctx.iota(TensorType{DType::I32, {T, T}}, 1));
  scores = where(causal, scores, full_like(scores, -std::numeric_limits<double>::infinity()));
  Tensor attended = reshape(permute(matmul(softmax(scores, -1), v), {0, 2, 1, 3}), {B, T, C});
  Tensor x = x0 + (matmul(attended, w_proj) + b_proj);
  Tensor hidden = gelu_tanh(matmul(layernorm(x, ln2_w, ln2_b, 1e-5), w_fc) + b_fc);
  return {x + (matmul(hidden, w_out) + b_out)};
}

Definition gpt2_workload() {
  return {{"gpt2-block",
           "pre-LN GPT-2 block: causal attention + gelu MLP, with biases",
           {{"batch", 4}, {"seq", 256}, {"channels", 768}, {"heads", 12}}},
          [](const WorkloadParams& p) {
            int64_t B = p.at("batch"), T = p.at("seq"), C = p.at("channels");
            auto weight = [](Dims shape) { return InputSpec{std::move(shape), Fill::Normal, 0.02}; };
            auto ln = [](int64_t c) { return InputSpec{{c}, Fill::Normal, 1.0}; };
            return std::vector<InputSpec>{{{B, T, C}, Fill::Normal, 1.0},
                                          ln(C),
                                          ln(C),
                                          weight({C, 3 * C}),
                                          weight({3 * C}),
                                          weight({C, C}),
                                          weight({C}),
                                          ln(C),
                                          ln(C),
                                          weight({C, 4 * C}),
                                          weight({4 * C}),
                                          weight({4 * C, C}),
                                          weight({C})};
          },
          gpt2_step,
          nullptr};
}

// WORKLOADS.md's training steps: `forward`'s step, the loss mean((out -
// t)^2) against a target t ~ N(0, 1) of the output's (and input 0's) shape,
// the gradients of every input but input 0 (lazylab's own reverse mode),
// and one AdamW step (lr 1e-3, beta 0.9 / 0.999, eps 1e-8, weight decay
// 0.01). Inputs: the forward's, the target, each weight's first and second
// moments, the learning rate and the step count (rank 0: inputs, not
// constants). The moments are a state of mid-training (m ~ N(0, 1e-4), v
// in [0.5e-8, 1.5e-8), step 10) rather than zeros: a first step from zeros
// moves every weight by about lr times the sign of its gradient, so a
// gradient that is zero but for rounding (attention's key bias) would move
// by lr on one backend and -lr on another. Outputs: the loss, the new
// weights, m and v, each step from the same state (the runner keeps its
// inputs), as the runner checks every step against one reference.
Definition training(Definition forward, std::string name, std::string summary) {
  Definition d = std::move(forward);
  d.info.name = std::move(name);
  d.info.summary = std::move(summary);
  d.inputs = [inputs = d.inputs](const WorkloadParams& p) {
    std::vector<InputSpec> specs = inputs(p);
    const size_t weights = specs.size() - 1;
    specs.push_back({specs[0].shape, Fill::Normal, 1.0});
    for (size_t i = 1; i <= weights; ++i) specs.push_back({specs[i].shape, Fill::Normal, 1e-4});
    for (size_t i = 1; i <= weights; ++i) specs.push_back({specs[i].shape, Fill::Positive, 1e-8});
    specs.push_back({{}, Fill::Constant, 1e-3});
    specs.push_back({{}, Fill::Constant, 10});
    return specs;
  };
  d.step = [step = d.step](const std::vector<Tensor>& in, const WorkloadParams& p) {
    const size_t weights = (in.size() - 4) / 3;
    std::vector<Tensor> forward_inputs(in.begin(), in.begin() + 1 + weights);
    return training_step(TrainingSpec{"mse", "adamw"}, step(forward_inputs, p)[0], in[1 + weights],
                         std::span(in.data() + 1, weights), std::span(in.data() + 2 + weights, 2 * weights),
                         in[2 + 3 * weights], in[3 + 3 * weights]);
  };
  d.ops_per_step = nullptr;
  return d;
}

const std::vector<Definition>& definitions() {
  static const std::vector<Definition> kDefinitions = {
      chain("chain", 1048576, "x = relu((x + 1) * 0.99), iters times (3 ops an iteration)"),
      chain("chain-small", 4096, "chain at 4096 elements"),
      chain("chain-tiny", 64, "chain at 64 elements: overhead-bound, report time per op"),
      softmax_workload(),
      layernorm_workload(),
      mlp_workload(),
      attention_workload(),
      gpt2_workload(),
      training(mlp_workload(), "mlp-train", "mlp's forward, loss mean((out - t)^2), gradients, AdamW"),
      training(gpt2_workload(), "gpt2-block-train", "gpt2-block's forward, loss mean((out - t)^2), gradients, AdamW"),
  };
  return kDefinitions;
}

class BuiltinWorkload : public Workload {
 public:
  BuiltinWorkload(const Definition& definition, WorkloadParams params)
      : definition_(definition), params_(std::move(params)) {}
  std::string name() const override { return definition_.info.name; }
  WorkloadParams params() const override { return params_; }
  std::vector<TensorType> input_types() const override {
    std::vector<TensorType> types;
    for (const InputSpec& spec : definition_.inputs(params_)) types.push_back(TensorType{DType::F32, spec.shape});
    return types;
  }
  std::vector<HostTensor> make_inputs(uint64_t seed) const override {
    std::vector<HostTensor> inputs;
    auto specs = definition_.inputs(params_);
    for (size_t i = 0; i < specs.size(); ++i)
      inputs.push_back(make_random(TensorType{DType::F32, specs[i].shape}, seed, i, specs[i].fill, specs[i].scale));
    return inputs;
  }
  std::vector<Tensor> step(Context&, const std::vector<Tensor>& inputs) const override {
    return definition_.step(inputs, params_);
  }
  int64_t ops_per_step() const override { return definition_.ops_per_step ? definition_.ops_per_step(params_) : 0; }

 private:
  const Definition& definition_;
  WorkloadParams params_;
};

// Parameters are sizes; the bound keeps shape arithmetic (3 * channels, ...)
// inside int64, and the size check below names what is too large.
constexpr int64_t kMaxParam = int64_t{1} << 40;

Status check_params(const Definition& definition, const WorkloadParams& params) {
  for (auto& [key, value] : params)
    if (value <= 0 || value > kMaxParam)
      return make_error(fmt::format("workload '{}': parameter '{}' must be between 1 and 2^40, got {}",
                                    definition.info.name, key, value));
  if (params.count("heads") && params.count("channels") && params.at("channels") % params.at("heads") != 0)
    return make_error(fmt::format("workload '{}': channels must be divisible by heads", definition.info.name));
  std::vector<InputSpec> inputs = definition.inputs(params);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (std::string problem = size_problem(TensorType{DType::F32, inputs[i].shape}); !problem.empty())
      return make_error(fmt::format("workload '{}' with {}: input {}: {}", definition.info.name,
                                    describe_params(params), i, problem));
  return {};
}

}  // namespace

std::string describe_params(const WorkloadParams& params) {
  std::vector<std::string> items;
  for (auto& [key, value] : params) items.push_back(fmt::format("{}={}", key, value));
  return fmt::format("{}", fmt::join(items, ","));
}

std::vector<WorkloadInfo> builtin_workloads() {
  std::vector<WorkloadInfo> infos;
  for (const Definition& definition : definitions()) infos.push_back(definition.info);
  return infos;
}

Expected<std::unique_ptr<Workload>> make_builtin_workload(const std::string& name, const WorkloadParams& overrides) {
  for (const Definition& definition : definitions()) {
    if (definition.info.name != name) continue;
    WorkloadParams params = definition.info.defaults;
    for (auto& [key, value] : overrides) {
      if (!params.count(key)) {
        std::vector<std::string> known;
        for (auto& [k, v] : params) known.push_back(k);
        return make_error(fmt::format("workload '{}' has no parameter '{}'{} (parameters: {})", name, key,
                                      did_you_mean(key, known), fmt::join(known, ", ")));
      }
      params[key] = value;
    }
    LAZYLAB_TRY(check_params(definition, params));
    return std::unique_ptr<Workload>(std::make_unique<BuiltinWorkload>(definition, std::move(params)));
  }
  std::vector<std::string> known;
  for (const Definition& definition : definitions()) known.push_back(definition.info.name);
  return make_error(fmt::format("unknown workload '{}'{} (built-in: {}; or give a .lzir file)", name,
                                did_you_mean(name, known), fmt::join(known, ", ")));
}

std::vector<Tensor> bind_inputs(Context& context, const std::vector<HostTensor>& inputs) {
  std::vector<Tensor> tensors;
  for (const HostTensor& input : inputs) tensors.push_back(context.from_buffer(input.type, input.data));
  return tensors;
}

}  // namespace lazylab
