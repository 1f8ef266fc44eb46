// An ONNX model as a workload: imported once (experiments/onnx), its weights
// bound from the model; each step replays the imported graph through the
// tensor API. Its inputs are those of the model folder's first test data set
// (test_data_set_0/input_N.pb, ONNX's layout) when it has one, so that token
// ids are in range and the outputs can be set beside the exporter's; else
// they are drawn from the seed like any workload's. Parameters bind the
// model's symbolic dimensions ({batch: 32}).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "core/verifier.h"
#include "onnx/onnx_import.h"
#include "workload_inputs.h"

namespace lazylab {
namespace {

class OnnxWorkload : public Workload {
 public:
  OnnxWorkload(OnnxModel model, WorkloadParams params, std::vector<HostTensor> data_set)
      : model_(std::move(model)),
        params_(std::move(params)),
        graph_(make_graph_workload(model_.path, model_.graph)),
        data_set_(std::move(data_set)) {}

  std::string name() const override { return model_.path; }
  WorkloadParams params() const override { return params_; }
  std::vector<TensorType> input_types() const override { return graph_->input_types(); }
  std::vector<HostTensor> make_inputs(uint64_t seed) const override {
    std::vector<HostTensor> inputs;
    for (size_t i = 0; i < model_.inputs.size(); ++i)
      inputs.push_back(i < data_set_.size() ? data_set_[i] : make_random(model_.inputs[i].type, seed, i));
    for (const NamedTensor& weight : model_.weights) inputs.push_back({weight.type, weight.data});
    return inputs;
  }
  std::vector<Tensor> step(Context& context, const std::vector<Tensor>& inputs) const override {
    return graph_->step(context, inputs);
  }
  size_t data_inputs() const override { return model_.inputs.size(); }  // then the initializers

 private:
  OnnxModel model_;
  WorkloadParams params_;
  std::unique_ptr<Workload> graph_;
  std::vector<HostTensor> data_set_;
};

// The inputs of the model folder's first data set, if it has one and they
// fit the model's inputs (an error if they do not: a stale export).
Expected<std::vector<HostTensor>> data_set_inputs(const OnnxModel& model) {
  namespace fs = std::filesystem;
  fs::path folder = fs::path(model.path).parent_path() / "test_data_set_0";
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    fs::path file = folder / fmt::format("input_{}.pb", i);
    if (!fs::exists(file)) return std::vector<HostTensor>{};
    auto tensor = read_onnx_tensor_file(file.string());
    if (!tensor) return tensor.error();
    if (!(tensor->type == model.inputs[i].type))
      return make_error(fmt::format("{}: {} is {}, the model's input '{}' is {}", model.path, file.string(),
                                    to_string(tensor->type), model.inputs[i].name, to_string(model.inputs[i].type)));
    inputs.push_back({tensor->type, tensor->data});
  }
  return inputs;
}

}  // namespace

Expected<std::unique_ptr<Workload>> make_onnx_workload(const std::string& path, const WorkloadParams& params) {
  OnnxImportOptions options;
  options.dims = params;
  OnnxUnsupported unsupported;
  auto model = import_onnx_file(path, options, &unsupported);
  if (!model && !unsupported.reason.empty()) return make_failed_workload(path, params, model.error().message);
  if (!model) return model.error();
  for (const auto& [name, value] : params)
    if (!model->symbolic_dims.count(name))
      return make_error(fmt::format(
          "{}: the model has no symbolic dimension '{}' (it has: {})", path, name,
          model->symbolic_dims.empty() ? "none" : fmt::format("{}", fmt::join(model->symbolic_dims, ", "))));
  if (Status verified = verify(model->graph); !verified)
    return make_error(fmt::format("{}: {}", path, verified.error().message));
  auto data_set = data_set_inputs(*model);
  if (!data_set) return data_set.error();
  return std::unique_ptr<Workload>(std::make_unique<OnnxWorkload>(std::move(*model), params, std::move(*data_set)));
}

}  // namespace lazylab
