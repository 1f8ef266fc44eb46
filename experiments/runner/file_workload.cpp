// A .lzir graph as a workload: each step replays the graph through the
// tensor API, so a file is traced, hashed and cached exactly like C++ code.
#include <fmt/format.h>

#include <filesystem>

#include "core/source_file.h"
#include "core/text_format.h"
#include "core/verifier.h"
#include "workload_inputs.h"

namespace lazylab {
namespace {

class FileWorkload : public Workload {
 public:
  FileWorkload(std::string path, Graph graph) : path_(std::move(path)), graph_(std::move(graph)) {}
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
    for (size_t i = 0; i < types.size(); ++i) inputs.push_back(make_random(types[i], seed, i));
    return inputs;
  }
  std::vector<Tensor> step(Context& context, const std::vector<Tensor>& inputs) const override {
    std::vector<Tensor> values(graph_.size());
    for (NodeId id = 0; id < graph_.size(); ++id) {
      const Node& node = graph_.node(id);
      if (node.op == OpId::Parameter) {
        values[id] = inputs[node.attrs[0].i];
        continue;
      }
      std::vector<Tensor> operands;
      for (NodeId operand : node.operands) operands.push_back(values[operand]);
      values[id] = context.record(node.op, operands, node.attrs, &node.type);
    }
    std::vector<Tensor> outputs;
    for (NodeId root : graph_.roots()) outputs.push_back(values[root]);
    return outputs;
  }

 private:
  std::string path_;
  Graph graph_;
};

}  // namespace

std::unique_ptr<Workload> make_graph_workload(std::string name, Graph graph) {
  return std::make_unique<FileWorkload>(std::move(name), std::move(graph));
}

Expected<std::unique_ptr<Workload>> make_file_workload(const std::string& path) {
  auto text = read_source_file(path, "a workload file");
  if (!text) return text.error();
  auto parsed = parse_graph(*text, path);
  if (!parsed) return parsed.error();
  Status status = verify(parsed->graph);
  if (!status) return make_error(fmt::format("{}: {}", path, status.error().message));
  return std::unique_ptr<Workload>(std::make_unique<FileWorkload>(path, std::move(parsed->graph)));
}

Expected<std::unique_ptr<Workload>> make_workload(const std::string& name_or_file, const WorkloadParams& overrides) {
  if (name_or_file.ends_with(".onnx")) return make_onnx_workload(name_or_file, overrides);
  if (!name_or_file.ends_with(".lzir")) return make_builtin_workload(name_or_file, overrides);
  if (!overrides.empty()) return make_error(fmt::format("{}: a .lzir workload takes no parameters", name_or_file));
  return make_file_workload(name_or_file);
}

}  // namespace lazylab
