// The importer's working state and one ONNX node as the op converters see it
// (onnx_ops.cpp): its inputs as graph nodes or as data known at import, its
// attributes, and where its outputs go. Internal to experiments/onnx.
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/graph_builder.h"
#include "onnx_import.h"

namespace lazylab::onnx_import_detail {

// Data known at import (initializers, Constant outputs, folded shapes) and
// the graph built so far.
struct ImportState {
  GraphBuilder builder;
  std::map<std::string, NodeId> values;  // ONNX value name -> graph node
  std::map<std::string, NamedTensor> known;
  std::set<std::string> initializers;  // become parameters when used as values
  std::vector<NamedTensor> weights;
  size_t num_inputs = 0;
  std::set<std::string> model_inputs;  // the parameters that are model inputs
  bool unsupported = false;            // the last error is one of lazylab's gaps
  std::string static_input_needed;     // ... because this model input must be known at import

  // The graph node of `name`, making one from known data the first time.
  Expected<NodeId> node_of(const std::string& name);
};

// lazylab's dtype for an ONNX element type, if it has one.
std::optional<DType> onnx_dtype(int64_t elem_type);

// A TensorProto's data (raw or typed fields); errors start with `where`.
Expected<NamedTensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& where);

// Element values of a known tensor, as doubles or int64s.
std::vector<double> tensor_doubles(const NamedTensor& tensor);
std::vector<int64_t> tensor_ints(const NamedTensor& tensor);
// Each element as a scalar attribute of `dtype`: integers exactly.
std::vector<AttrValue> tensor_scalars(const NamedTensor& tensor, DType dtype);
NamedTensor make_int_tensor(std::string name, const std::vector<int64_t>& values, Dims shape);

class OnnxNode {
 public:
  OnnxNode(const onnx::NodeProto& proto, ImportState& state, int64_t opset)
      : proto_(proto), state_(state), opset_(opset) {}

  const onnx::NodeProto& proto() const { return proto_; }
  int64_t opset() const { return opset_; }
  GraphBuilder& builder() { return state_.builder; }
  const TensorType& type(NodeId id) const { return state_.builder.type(id); }

  // Inputs: an optional input may be absent (past the end, or named "").
  size_t num_inputs() const { return static_cast<size_t>(proto_.input_size()); }
  bool has_input(size_t i) const { return i < num_inputs() && !proto_.input(static_cast<int>(i)).empty(); }
  Expected<NodeId> input(size_t i);
  // The input's data when it is known at import; an error naming the input
  // (unsupported: lazylab needs it static) when it is not.
  Expected<NamedTensor> known_input(size_t i);
  const NamedTensor* find_known(size_t i) const;

  const onnx::AttributeProto* attr(const std::string& name) const;
  int64_t attr_int(const std::string& name, int64_t fallback) const;
  double attr_float(const std::string& name, double fallback) const;
  std::optional<std::vector<int64_t>> attr_ints(const std::string& name) const;

  Status set_output(size_t i, NodeId id);
  Status set_known_output(size_t i, NamedTensor tensor);

  // Builds a node; a type error names this ONNX node.
  Expected<NodeId> add(OpId op, Operands operands, const Attrs& attrs = {}, const TensorType* declared = nullptr);
  Expected<NodeId> reshape(NodeId id, const Dims& shape);
  Expected<NodeId> broadcast(NodeId id, const Dims& shape);
  // Operands broadcast to their common (NumPy) shape.
  Expected<std::vector<NodeId>> broadcast_together(std::vector<NodeId> ids);
  NodeId splat(double value, TensorType type) { return state_.builder.constant(value, std::move(type)); }
  NodeId splat(const AttrValue& value, TensorType type) { return state_.builder.constant(value, std::move(type)); }

  // `axis` in [-rank, rank) made non-negative, or an error naming it.
  Expected<int64_t> normalize_axis(int64_t axis, int64_t rank) const;

  Error unsupported(const std::string& reason);
  Error invalid(const std::string& reason) const;

 private:
  const onnx::NodeProto& proto_;
  ImportState& state_;
  int64_t opset_;
};

using Converter = std::function<Status(OnnxNode&)>;
// The ONNX ops the importer implements, by op type.
const std::map<std::string, Converter>& converters();
// Adds those of onnx_network_ops.cpp: convolution, pooling, normalization,
// gather, pad, split and the shape ops around them.
void add_network_converters(std::map<std::string, Converter>& table);

}  // namespace lazylab::onnx_import_detail
