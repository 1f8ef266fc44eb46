// A .lzir graph as a workload: each step replays the graph through the
// tensor API, so a file is traced, hashed and cached exactly like C++ code.
#include <fmt/format.h>
#include <stdexcept>

#include <filesystem>

#include "core/source_file.h"
#include "core/text_format.h"
#include "core/verifier.h"
#include "onnx/npy_tensor.h"
#include "workload_inputs.h"

namespace lazylab {
namespace {

class FileWorkload : public Workload {
 public:
  FileWorkload(std::string path, Graph graph, std::map<size_t, HostTensor> bound = {})
      : path_(std::move(path)), graph_(std::move(graph)), bound_(std::move(bound)) {}
  std::string name() const override { return path_; }
  WorkloadParams params() const override { return {}; }
  std::vector<TensorType> input_types() const override {
    std::vector<TensorType> types;
    for (NodeId parameter : graph_.parameters()) types.push_back(graph_.node(parameter).type);
    return types;
  }
  std::vector<HostTensor> make_inputs(uint64_t seed) const override {
    std::vector<HostTensor> inputs;
    std::vector<TensorType> types = input_types();
    for (size_t i = 0; i < types.size(); ++i) {
      auto weight = bound_.find(i);
      inputs.push_back(weight != bound_.end() ? weight->second : make_random(types[i], seed, i));
    }
    return inputs;
  }
  std::vector<Tensor> step(Context& context, const std::vector<Tensor>& inputs) const override {
    auto outputs = context.call(graph_, inputs);
    // make_inputs gave each parameter its type: a mismatch is a bug here.
    if (!outputs) throw std::logic_error(outputs.error().message);
    return std::move(*outputs);
  }

 private:
  std::string path_;
  Graph graph_;
  std::map<size_t, HostTensor> bound_;  // parameters bound to weights, by ordinal
};

// WEIGHTS/N.npy for each parameter N that has one; its type must be the
// parameter's.
Expected<std::map<size_t, HostTensor>> bind_weights(const std::string& path, const Graph& graph,
                                                    const std::string& weights) {
  namespace fs = std::filesystem;
  std::map<size_t, HostTensor> bound;
  if (weights.empty()) return bound;
  if (!fs::is_directory(weights)) return make_error(fmt::format("{}: weights folder {} does not exist", path, weights));
  for (NodeId parameter : graph.parameters()) {
    const Node& node = graph.node(parameter);
    auto ordinal = static_cast<size_t>(node.attrs[0].i);
    fs::path file = fs::path(weights) / fmt::format("{}.npy", ordinal);
    if (!fs::exists(file)) continue;
    auto array = read_npy(file.string());
    if (!array) return array.error();
    if (!(array->type == node.type))
      return make_error(fmt::format("{}: parameter {} is {}, but {} holds {}", path, ordinal, to_string(node.type),
                                    file.string(), to_string(array->type)));
    bound[ordinal] = {array->type, array->data};
  }
  return bound;
}

}  // namespace

std::unique_ptr<Workload> make_graph_workload(std::string name, Graph graph) {
  return std::make_unique<FileWorkload>(std::move(name), std::move(graph));
}

Expected<std::unique_ptr<Workload>> make_file_workload(const std::string& path, const std::string& weights) {
  auto text = read_source_file(path, "a workload file");
  if (!text) return text.error();
  auto parsed = parse_graph(*text, path);
  if (!parsed) return parsed.error();
  Status status = verify(parsed->graph);
  if (!status) return make_error(fmt::format("{}: {}", path, status.error().message));
  auto bound = bind_weights(path, parsed->graph, weights);
  if (!bound) return bound.error();
  return std::unique_ptr<Workload>(std::make_unique<FileWorkload>(path, std::move(parsed->graph), std::move(*bound)));
}

Expected<std::unique_ptr<Workload>> make_workload(const std::string& name_or_file, const WorkloadParams& overrides,
                                                  const std::string& weights, const std::string& capture) {
  if (name_or_file.ends_with(".py")) return make_torch_workload(name_or_file, overrides, capture);
  if (!capture.empty()) return make_error(fmt::format("{}: 'capture' is a PyTorch program's (.py) only", name_or_file));
  if (name_or_file.ends_with(".onnx")) return make_onnx_workload(name_or_file, overrides);
  if (!name_or_file.ends_with(".lzir")) return make_builtin_workload(name_or_file, overrides);
  if (!overrides.empty()) return make_error(fmt::format("{}: a .lzir workload takes no parameters", name_or_file));
  return make_file_workload(name_or_file, weights);
}

}  // namespace lazylab
