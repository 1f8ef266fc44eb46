// ONNX models in. libonnx reads the file, checks it, converts it to an opset
// the importer implements and infers its shapes; the importer then builds a
// lazylab Graph node by node. Shapes are static: symbolic dimensions are bound
// by name, and shape-only computation (Shape, Constant, the shape operands of
// Reshape, Unsqueeze, Slice ...) is folded at import. The model's inputs
// become parameters 0..n-1 and its initializers the parameters after them
// (bound by ordinal, hashed by type, never by data), so an imported model is
// traced, hashed and cached like any other graph.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/expected.h"
#include "core/graph.h"

namespace lazylab {

struct NamedTensor {
  std::string name;
  TensorType type;
  BufferPtr data;  // row-major bytes of `type`; null for a model input
};

struct OnnxModel {
  std::string path;
  Graph graph;
  std::vector<NamedTensor> inputs;      // parameter i: a model input (no data)
  std::vector<NamedTensor> weights;     // parameter inputs.size() + i: an initializer or constant tensor
  std::vector<std::string> outputs;     // the roots' names, in order
  std::set<std::string> symbolic_dims;  // of the model's inputs, each bound from OnnxImportOptions::dims
  int64_t opset = 0;                    // of the default domain, after conversion
};

struct OnnxImportOptions {
  std::map<std::string, int64_t> dims;  // symbolic dimension name -> size
  // Model inputs whose values are fixed at import, by name: an input that
  // gives a shape, axes or slice bounds must be known (shapes are static).
  // Such an input is not a parameter.
  std::map<std::string, NamedTensor> static_inputs;
};

// Why an import failed where the model is valid but uses what lazylab does
// not implement (an op, an attribute value, a dtype): conformance reports
// such tests as unsupported rather than failed.
struct OnnxUnsupported {
  std::string op_type;  // the node's op, or "" for a model-level feature (a dtype of an input)
  std::string reason;
  // A model input whose value a node needs at import: importing again with
  // it in static_inputs goes further.
  std::string static_input_needed;
};

// The oldest and newest opsets of the default domain the importer implements;
// a model outside them is converted by libonnx's version converter first.
inline constexpr int64_t kOnnxMinOpset = 13;
inline constexpr int64_t kOnnxMaxOpset = 17;

// Errors name the file and, for a node, its name, op type and the opset.
// `unsupported` (optional) is filled in when the failure is one of lazylab's
// gaps rather than a fault of the model.
Expected<OnnxModel> import_onnx_file(const std::string& path, const OnnxImportOptions& options = {},
                                     OnnxUnsupported* unsupported = nullptr);
Expected<OnnxModel> import_onnx_bytes(const std::string& bytes, const std::string& path,
                                      const OnnxImportOptions& options = {}, OnnxUnsupported* unsupported = nullptr);

// A serialized TensorProto (ONNX's test data: input_0.pb, output_0.pb).
// With `uint16_is_bf16`, a UINT16 tensor reads as bf16's bits: ONNX's own
// test data keep bf16 tensors so (NumPy has no bfloat16).
Expected<NamedTensor> read_onnx_tensor_file(const std::string& path, bool uint16_is_bf16 = false);

}  // namespace lazylab
