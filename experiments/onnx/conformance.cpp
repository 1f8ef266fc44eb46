#include "onnx/conformance.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>

#include "core/engine.h"
#include "onnx/onnx_import.h"
#include "runner/workload.h"

namespace lazylab {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> sorted_matching(const fs::path& folder, const std::string& prefix) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec))
    if (entry.path().filename().string().starts_with(prefix)) found.push_back(entry.path().string());
  // input_10.pb sorts after input_9.pb: by the number, not the text.
  auto number = [&](const std::string& path) {
    std::string name = fs::path(path).stem().string();
    return std::strtoll(name.c_str() + name.find_last_of('_') + 1, nullptr, 10);
  };
  std::sort(found.begin(), found.end(), [&](auto& a, auto& b) { return number(a) < number(b); });
  return found;
}

std::vector<double> as_doubles(DType dtype, const std::byte* data, size_t n) {
  std::vector<double> out(n);
  visit_dtype(dtype, [&]<class T>(T) {
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<double>(reinterpret_cast<const T*>(data)[i]);
  });
  if (dtype == DType::Bool)
    for (double& v : out) v = v != 0;
  return out;
}

// numpy.testing.assert_allclose: |got - want| <= atol + rtol * |want|, NaN
// where both are NaN. Returns the first difference, or "".
std::string difference(const Tensor& got, const NamedTensor& want, const ConformanceTolerance& tolerance) {
  if (!(got.type() == want.type))
    return fmt::format("output '{}' is {}, expected {}", want.name, to_string(got.type()), to_string(want.type));
  auto data = got.data();
  if (!data) return data.error().message;
  size_t n = static_cast<size_t>(want.type.num_elements());
  std::vector<double> a = as_doubles(want.type.dtype, (*data)->data(), n);
  std::vector<double> b = as_doubles(want.type.dtype, want.data->data(), n);
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] == b[i] || std::abs(a[i] - b[i]) <= tolerance.atol + tolerance.rtol * std::abs(b[i])) continue;
    return fmt::format("output '{}' element {}: {} where {} was expected", want.name, i, a[i], b[i]);
  }
  return "";
}

HostTensor host_tensor(const NamedTensor& tensor) { return {tensor.type, tensor.data}; }

// A data set's inputs by name: each input_N.pb names its input, or, in
// older test data without names, is the model's N-th input ("#N").
Expected<std::map<std::string, NamedTensor>> read_inputs(const std::string& folder) {
  std::map<std::string, NamedTensor> inputs;
  std::vector<std::string> files = sorted_matching(folder, "input_");
  for (size_t k = 0; k < files.size(); ++k) {
    auto tensor = read_onnx_tensor_file(files[k], /*uint16_is_bf16=*/true);
    if (!tensor) return tensor.error();
    std::string key = tensor->name.empty() ? fmt::format("#{}", k) : tensor->name;
    inputs[key] = std::move(*tensor);
  }
  return inputs;
}

// One data set: its inputs bound, the graph replayed, each output checked.

std::string run_data_set(const OnnxModel& model, const std::map<std::string, NamedTensor>& data,
                         const std::string& folder, Backend& backend, const Pipeline& pipeline,
                         const ConformanceTolerance& tolerance) {
  std::vector<std::string> output_files = sorted_matching(folder, "output_");
  if (output_files.size() != model.outputs.size())
    return fmt::format("{} has {} outputs, the model {}", folder, output_files.size(), model.outputs.size());
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    const NamedTensor& input = model.inputs[i];
    auto given = data.find(input.name);
    if (given == data.end()) given = data.find(fmt::format("#{}", i));
    if (given == data.end()) return fmt::format("{} gives no input '{}'", folder, input.name);
    if (!(given->second.type == input.type))
      return fmt::format("{} gives input '{}' as {}, the model declares {}", folder, input.name,
                         to_string(given->second.type), to_string(input.type));
    inputs.push_back(host_tensor(given->second));
  }
  for (const NamedTensor& weight : model.weights) inputs.push_back(host_tensor(weight));
  Engine engine(pipeline, backend);
  Context context(engine);
  std::unique_ptr<Workload> workload = make_graph_workload(model.path, model.graph);
  std::vector<Tensor> outputs = workload->step(context, bind_inputs(context, inputs));
  if (Status synced = context.sync(); !synced) return synced.error().message;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].ok()) return outputs[i].error()->message;
    auto want = read_onnx_tensor_file(output_files[i], /*uint16_is_bf16=*/true);
    if (!want) return want.error().message;
    want->name = model.outputs[i];
    if (std::string diff = difference(outputs[i], *want, tolerance); !diff.empty())
      return fmt::format("{}: {}", fs::path(folder).filename().string(), diff);
  }
  return "";
}

// The test's model, with each input that must be known at import (a shape,
// axes) fixed to this data set's value; on failure, `result` says why.
std::optional<OnnxModel> import_for(const std::string& folder, const std::string& data_set, ConformanceResult& result) {
  OnnxImportOptions options;
  std::optional<std::map<std::string, NamedTensor>> data;  // read only when an input must be static
  while (true) {
    OnnxUnsupported gap;
    auto model = import_onnx_file((fs::path(folder) / "model.onnx").string(), options, &gap);
    if (model) return std::move(*model);
    if (!gap.static_input_needed.empty() && !data) {
      auto read = read_inputs(data_set);
      if (!read) {
        result.outcome = ConformanceOutcome::Failed;
        result.detail = read.error().message;
        return std::nullopt;
      }
      data = std::move(*read);
    }
    auto given = data ? data->find(gap.static_input_needed) : std::map<std::string, NamedTensor>::iterator{};
    if (data && given != data->end() && !options.static_inputs.count(given->first)) {
      options.static_inputs[given->first] = given->second;
      continue;
    }
    result.outcome = gap.reason.empty() ? ConformanceOutcome::Failed : ConformanceOutcome::Unsupported;
    result.op = gap.op_type;
    result.detail = model.error().message;
    return std::nullopt;
  }
}

}  // namespace

// Tests whose data contradict what lazylab computes on purpose, and why.
// One that fails is disputed (with its difference), not failed; one that
// passes is passed.
const std::map<std::string_view, std::string_view> kDisputed = {
    {"test_cast_FLOAT_to_BFLOAT16",
     "its expected values truncate f32 to bf16 (ONNX 1.13's generator); lazylab rounds to nearest even, as ONNX "
     "Runtime does (onnx/onnx#3876)"},
    {"test_castlike_BFLOAT16_to_FLOAT", "its data give input 'like' as [1] where the model declares [3,4]"},
    {"test_castlike_BFLOAT16_to_FLOAT_expanded", "its data give input 'like' as [1] where the model declares [3,4]"},
    {"test_castlike_FLOAT_to_BFLOAT16", "its data give input 'like' as [1] where the model declares [3,4]"},
    {"test_castlike_FLOAT_to_BFLOAT16_expanded", "its data give input 'like' as [1] where the model declares [3,4]"},
};

const char* outcome_name(ConformanceOutcome outcome) {
  switch (outcome) {
    case ConformanceOutcome::Passed: return "passed";
    case ConformanceOutcome::Failed: return "failed";
    case ConformanceOutcome::Unsupported: return "unsupported";
    case ConformanceOutcome::Disputed: return "disputed";
  }
  return "?";
}

ConformanceResult run_node_test(const std::string& folder, Backend& backend, const Pipeline& pipeline,
                                const ConformanceTolerance& tolerance) {
  ConformanceResult result;
  result.test = fs::path(folder).filename().string();
  std::vector<std::string> data_sets = sorted_matching(folder, "test_data_set_");
  if (data_sets.empty()) {
    result.outcome = ConformanceOutcome::Failed;
    result.detail = "no test_data_set_* folder";
  }
  for (const std::string& data_set : data_sets) {
    auto model = import_for(folder, data_set, result);
    if (!model) break;
    auto data = read_inputs(data_set);
    if (!data) {
      result.outcome = ConformanceOutcome::Failed;
      result.detail = data.error().message;
      break;
    }
    if (std::string problem = run_data_set(*model, *data, data_set, backend, pipeline, tolerance); !problem.empty()) {
      result.outcome = ConformanceOutcome::Failed;
      result.detail = problem;
      break;
    }
  }
  if (auto disputed = kDisputed.find(result.test);
      disputed != kDisputed.end() && result.outcome == ConformanceOutcome::Failed) {
    result.outcome = ConformanceOutcome::Disputed;
    result.detail = fmt::format("{} ({})", disputed->second, result.detail);
  }
  return result;
}

}  // namespace lazylab
