// An ONNX model as a workload: imported once (experiments/onnx), its inputs
// drawn from the seed like any workload's and its weights bound from the
// model; each step replays the imported graph through the tensor API.
// Parameters bind the model's symbolic dimensions ({batch: 32}).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/verifier.h"
#include "onnx/onnx_import.h"
#include "workload_inputs.h"

namespace lazylab {
namespace {

class OnnxWorkload : public Workload {
 public:
  OnnxWorkload(OnnxModel model, WorkloadParams params)
      : model_(std::move(model)), params_(std::move(params)), graph_(make_graph_workload(model_.path, model_.graph)) {}

  std::string name() const override { return model_.path; }
  WorkloadParams params() const override { return params_; }
  std::vector<TensorType> input_types() const override { return graph_->input_types(); }
  std::vector<HostTensor> make_inputs(uint64_t seed) const override {
    std::vector<HostTensor> inputs;
    for (size_t i = 0; i < model_.inputs.size(); ++i) inputs.push_back(make_random(model_.inputs[i].type, seed, i));
    for (const NamedTensor& weight : model_.weights) inputs.push_back({weight.type, weight.data});
    return inputs;
  }
  std::vector<Tensor> step(Context& context, const std::vector<Tensor>& inputs) const override {
    return graph_->step(context, inputs);
  }

 private:
  OnnxModel model_;
  WorkloadParams params_;
  std::unique_ptr<Workload> graph_;
};

}  // namespace

Expected<std::unique_ptr<Workload>> make_onnx_workload(const std::string& path, const WorkloadParams& params) {
  OnnxImportOptions options;
  options.dims = params;
  auto model = import_onnx_file(path, options);
  if (!model) return model.error();
  for (const auto& [name, value] : params)
    if (!model->symbolic_dims.count(name))
      return make_error(fmt::format(
          "{}: the model has no symbolic dimension '{}' (it has: {})", path, name,
          model->symbolic_dims.empty() ? "none" : fmt::format("{}", fmt::join(model->symbolic_dims, ", "))));
  if (Status verified = verify(model->graph); !verified)
    return make_error(fmt::format("{}: {}", path, verified.error().message));
  return std::unique_ptr<Workload>(std::make_unique<OnnxWorkload>(std::move(*model), params));
}

}  // namespace lazylab
