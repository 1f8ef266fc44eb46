#include "core/kernel_description.h"

#include "core/attention_pattern.h"
#include "lazylab/backend_abi.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace lazylab {
bool is_row_shape(const Dims& shape, const Dims& space) {
  if (space.empty()) return false;
  Dims rows(space.begin(), space.end() - 1);
  if (shape == rows) return true;
  rows.push_back(1);
  return shape == rows;
}

bool swaps_last_two(const Node& node) {
  if (node.op != OpId::Transpose) return false;
  const Ints& perm = node.attrs[0].ints;
  size_t rank = perm.size();
  if (rank < 2 || perm[rank - 1] != static_cast<int64_t>(rank) - 2 || perm[rank - 2] != static_cast<int64_t>(rank) - 1)
    return false;
  for (size_t d = 0; d + 2 < rank; ++d)
    if (perm[d] != static_cast<int64_t>(d)) return false;
  return true;
}

bool is_chain_layout(OpId op) { return ops::is_injective_view(static_cast<uint32_t>(op)); }

bool keeps_rows(const Dims& in, const Dims& out) {
  return !in.empty() && !out.empty() && in.back() == out.back() &&
         TensorType{DType::F32, in}.num_elements() == TensorType{DType::F32, out}.num_elements();
}

namespace {

bool is_last_axis_reduction(const Graph& graph, const Node& node) {
  return op_info(node.op).category == OpCategory::Reduction && node.attrs[0].ints.size() == 1 &&
         node.attrs[0].ints[0] == graph.node(node.operands[0]).type.rank() - 1;
}

// The space a kernel iterates: the largest value its ops make or reduce
// (the first of equal size).
Dims row_space_of(const Graph& graph, std::span<const NodeId> ops) {
  Dims space;
  int64_t largest = -1;
  for (NodeId id : ops) {
    const Node& node = graph.node(id);
    const TensorType& candidate =
        op_info(node.op).category == OpCategory::Reduction ? graph.node(node.operands[0]).type : node.type;
    if (candidate.num_elements() > largest) largest = candidate.num_elements(), space = candidate.shape;
  }
  return space;
}

// Whether a broadcast puts every dim of its operand that is not 1 on a
// leading dim of the result, of the same size: then it gives each row one
// value. A [1, C] or [C] operand also has C elements, which may equal the
// row count, but it repeats a row instead.
bool spreads_over_rows(const Dims& in, const Ints& dims, const Dims& out) {
  for (size_t d = 0; d < dims.size(); ++d)
    if (in[d] != 1 && (dims[d] >= static_cast<int64_t>(out.size()) - 1 || in[d] != out[dims[d]])) return false;
  return true;
}

// A broadcast whose operand is exactly the result's trailing dims: element
// i of the result is operand element i % (operand size).
bool is_suffix(const Dims& in, const Ints& dims, const Dims& out) {
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] != static_cast<int64_t>(out.size() - dims.size() + d) || in[d] != out[dims[d]]) return false;
  return true;
}

// A broadcast that gives each row one value, shared by consecutive rows:
// its operand's dims that are not 1 land, in order and with their sizes, on
// one run of the result's dims before the last. The rows each source
// element spans (the product of the result's dims between the run and the
// last); nullopt for any other broadcast.
std::optional<int64_t> row_group_period(const Dims& in, const Ints& dims, const Dims& out) {
  std::vector<int64_t> landed;
  for (size_t d = 0; d < dims.size(); ++d)
    if (in[d] != 1) landed.push_back(dims[d]);
  if (landed.empty() || landed.back() >= static_cast<int64_t>(out.size()) - 1) return std::nullopt;
  for (size_t i = 1; i < landed.size(); ++i)
    if (landed[i] != landed[i - 1] + 1) return std::nullopt;
  int64_t period = 1;
  for (size_t d = static_cast<size_t>(landed.back()) + 1; d + 1 < out.size(); ++d) period *= out[d];
  return period;
}

class RowSpaceAnalysis {
 public:
  RowSpaceAnalysis(const Graph& graph, std::span<const NodeId> ops, DescribeOptions options)
      : graph_(graph), ops_(ops), options_(options) {}

  Expected<KernelDescription> run() {
    space_ = row_space_of(graph_, ops_);
    TensorType space_type{DType::F32, space_};
    if (ops_.empty() || space_type.num_elements() == 0) return make_error("no elements");
    description_.cols = space_.empty() ? 1 : space_.back();
    description_.rows = space_type.num_elements() / description_.cols;
    description_.kind = KernelKind::Elementwise;
    for (NodeId id : ops_) in_kernel_.insert(id);
    for (NodeId id : ops_) LAZYLAB_TRY(describe(id));
    return std::move(description_);
  }

 private:
  Status describe(NodeId id) {
    const Node& node = graph_.node(id);
    OpCategory category = op_info(node.op).category;
    if (node.op == OpId::Constant) {
      record({id, Access::Splat, id, 0, node.attrs[0].f});
      return {};
    }
    if (node.op == OpId::Broadcast) return describe_broadcast(id, node);
    if (node.op == OpId::Reshape) return describe_reshape(id, node);
    if (category == OpCategory::Reduction) return describe_reduction(id, node);
    if (category != OpCategory::Elementwise)
      return make_error(fmt::format("{} is not elementwise, broadcast or reduction", op_name(node.op)));
    auto layout = layout_of(node.type.shape);
    if (!layout) return layout.error();
    for (NodeId operand : node.operands) LAZYLAB_TRY(read_directly(operand));
    record({id, *layout, id, 0, 0});
    return {};
  }

  Status describe_reduction(NodeId id, const Node& node) {
    if (!is_last_axis_reduction(graph_, node)) return make_error("reduction over a non-last axis");
    const Node& input = graph_.node(node.operands[0]);
    if (!is_full(input.type.shape))
      return make_error(fmt::format("reductions over different row spaces ({} vs {})", to_string(input.type.shape),
                                    to_string(space_)));
    LAZYLAB_TRY(read_directly(node.operands[0]));
    const ValueAccess* read = find(node.operands[0]);
    if (read->kind != Access::Full) return make_error("a reduction reads a broadcast view");
    description_.kind = KernelKind::RowReduction;
    record({id, Access::PerRow, id, 0, 0});
    return {};
  }

  // A value an op reads as it is: from the kernel, or from memory by its shape.
  Status read_directly(NodeId value) {
    if (find(value)) return {};
    if (in_kernel_.count(value)) return make_error("an op reads a value of the kernel made after it");
    auto layout = layout_of(graph_.node(value).type.shape);
    if (!layout) return layout.error();
    record({value, *layout, value, 0, 0});
    return {};
  }

  // A reshape that keeps the rows reads its operand's elements in order: the
  // operand's full access under its own name.
  Status describe_reshape(NodeId id, const Node& node) {
    NodeId source = node.operands[0];
    const Dims& in = graph_.node(source).type.shape;
    if (!keeps_rows(in, node.type.shape) || !is_full(node.type.shape))
      return make_error(fmt::format("reshape {} to {} does not keep the row space {}", to_string(in),
                                    to_string(node.type.shape), to_string(space_)));
    LAZYLAB_TRY(read_directly(source));
    const ValueAccess* read = find(source);
    if (read->kind != Access::Full) return make_error("a reshape of a broadcast view");
    record({id, Access::Full, source, 0, 0});
    return {};
  }

  Status describe_broadcast(NodeId id, const Node& node) {
    auto layout = layout_of(node.type.shape);
    if (!layout) return layout.error();
    auto view = broadcast_view(node, *layout);
    if (!view) return view.error();
    view->value = id;
    record(*view);
    return {};
  }

  Expected<ValueAccess> broadcast_view(const Node& node, Access result_layout) {
    NodeId source = node.operands[0];
    const Dims& in = graph_.node(source).type.shape;
    const Ints& dims = node.attrs[0].ints;
    bool stretches = graph_.node(source).type.num_elements() != node.type.num_elements();
    auto refuse = [&] {
      return make_error(fmt::format("broadcast from a shape that is not one per row ({} to {})", to_string(in),
                                    to_string(node.type.shape)));
    };
    if (in_kernel_.count(source)) {
      const ValueAccess* read = find(source);
      if (read->kind == Access::Splat || read->kind == Access::Scalar || !stretches) return *read;
      if (read->kind == Access::PerRow && result_layout == Access::Full && spreads_over_rows(in, dims, node.type.shape))
        return *read;
      return refuse();
    }
    int64_t size = graph_.node(source).type.num_elements();
    if (size == 1) return ValueAccess{0, Access::Scalar, source, 0, 0};
    if (result_layout == Access::PerRow) {
      if (stretches) return refuse();
      return ValueAccess{0, Access::PerRow, source, 0, 0};
    }
    if (is_suffix(in, dims, node.type.shape)) return ValueAccess{0, Access::Repeat, source, size, 0};
    if (size == description_.rows && spreads_over_rows(in, dims, node.type.shape))
      return ValueAccess{0, Access::PerRow, source, 0, 0};
    if (node.type.shape == space_)
      if (auto period = row_group_period(in, dims, node.type.shape)) {
        if (options_.row_groups) return ValueAccess{0, Access::RowGroup, source, *period, 0};
        return make_error(
            fmt::format("broadcast {} to {} reads a group of rows, which the backend does not (ABI "
                        "3.10's reads_row_groups)",
                        to_string(in), to_string(node.type.shape)));
      }
    return refuse();
  }

  // The row space's elements, in its own shape or in another with the same
  // rows (a reshape that keeps the last dimension).
  bool is_full(const Dims& shape) const {
    return shape == space_ || (!shape.empty() && shape.back() == description_.cols &&
                               TensorType{DType::F32, shape}.num_elements() == description_.rows * description_.cols);
  }

  Expected<Access> layout_of(const Dims& shape) const {
    if (is_full(shape)) return Access::Full;
    if (is_row_shape(shape, space_)) return Access::PerRow;
    return make_error(
        fmt::format("{} is neither the row space {} nor one per row", to_string(shape), to_string(space_)));
  }

  void record(const ValueAccess& access) {
    index_.emplace(access.value, description_.accesses.size());
    description_.accesses.push_back(access);
  }
  const ValueAccess* find(NodeId value) const {
    auto it = index_.find(value);
    return it == index_.end() ? nullptr : &description_.accesses[it->second];
  }

  const Graph& graph_;
  std::span<const NodeId> ops_;
  DescribeOptions options_;
  Dims space_;
  std::set<NodeId> in_kernel_;
  std::unordered_map<NodeId, size_t> index_;  // value -> its entry in description_.accesses
  KernelDescription description_;
};

// One matmul; transposes of its operands' last two dims used by nothing else
// in the kernel fold into it; the other ops form a row-space epilogue over
// the product.
std::optional<KernelDescription> describe_contraction(const Graph& graph, std::span<const NodeId> ops,
                                                      DescribeOptions options) {
  std::vector<NodeId> matmuls;
  for (NodeId id : ops)
    if (graph.node(id).op == OpId::Matmul) matmuls.push_back(id);
  if (matmuls.size() != 1) return std::nullopt;
  const Node& matmul = graph.node(matmuls[0]);
  KernelDescription description;
  description.kind = KernelKind::Contraction;
  Contraction& c = description.contraction;
  c.matmul = matmuls[0];
  std::set<NodeId> folded;
  auto operand = [&](NodeId value, bool& transposed) {
    const Node& producer = graph.node(value);
    bool in_kernel = std::find(ops.begin(), ops.end(), value) != ops.end();
    transposed = in_kernel && producer.op == OpId::Transpose && swaps_last_two(producer);
    if (!transposed) return value;
    folded.insert(value);
    return producer.operands[0];
  };
  c.lhs = operand(matmul.operands[0], c.lhs_transposed);
  c.rhs = operand(matmul.operands[1], c.rhs_transposed);
  // The product's operands come from memory: an op of the kernel computing
  // one would be a prologue, which the epilogue form cannot express.
  for (NodeId input : {c.lhs, c.rhs})
    if (std::find(ops.begin(), ops.end(), input) != ops.end()) return std::nullopt;
  const Dims& out = matmul.type.shape;
  c.m = out[out.size() - 2];
  c.n = out.back();
  c.k = graph.node(matmul.operands[0]).type.shape.back();
  c.batch = matmul.type.num_elements() / std::max<int64_t>(c.m * c.n, 1);
  std::vector<NodeId> epilogue;
  for (NodeId id : ops) {
    if (id == c.matmul || folded.count(id)) continue;
    for (NodeId operand : graph.node(id).operands)
      if (folded.count(operand)) return std::nullopt;  // a folded transpose read by another op
    epilogue.push_back(id);
  }
  description.rows = c.batch * c.m;
  description.cols = c.n;
  if (epilogue.empty()) return description;
  auto rows = describe_row_space(graph, epilogue, options);
  if (!rows || rows->kind != KernelKind::Elementwise || rows->rows != description.rows || rows->cols != c.n)
    return std::nullopt;
  description.accesses = std::move(rows->accesses);
  return description;
}

}  // namespace

// The strides that read a strided view `in` in the order of `shape` (same
// element count), or nullopt where dims it merges are not one run of memory
// in `in` (numpy's rule for a reshape without a copy).
std::optional<std::vector<int64_t>> reshaped_strides(const StridedLayout& in, const std::vector<int64_t>& shape) {
  std::vector<int64_t> old_shape, old_strides;  // dims of size 1 constrain nothing
  for (size_t d = 0; d < in.shape.size(); ++d)
    if (in.shape[d] != 1) old_shape.push_back(in.shape[d]), old_strides.push_back(in.strides[d]);
  std::vector<int64_t> strides(shape.size(), 0);
  for (size_t o = 0, n = 0; n < shape.size();) {
    if (shape[n] == 1) {
      ++n;
      continue;
    }
    if (o >= old_shape.size()) return std::nullopt;
    // A group: old dims [o, o_end) hold the same elements as new dims [n, n_end).
    int64_t old_size = old_shape[o], new_size = shape[n];
    size_t o_end = o + 1, n_end = n + 1;
    while (old_size != new_size) {
      if (old_size < new_size && o_end < old_shape.size())
        old_size *= old_shape[o_end++];
      else if (new_size < old_size && n_end < shape.size())
        new_size *= shape[n_end++];
      else
        return std::nullopt;
    }
    for (size_t k = o; k + 1 < o_end; ++k)
      if (old_strides[k] != old_strides[k + 1] * old_shape[k + 1]) return std::nullopt;
    int64_t stride = old_strides[o_end - 1];
    for (size_t k = n_end; k-- > n;) {
      strides[k] = shape[k] == 1 ? 0 : stride;
      stride *= shape[k];
    }
    o = o_end;
    n = n_end;
  }
  return strides;
}

// The layout op `node` applied to a strided view `in` of memory (the view of
// its operand): the view of the same memory that is its result.
std::optional<StridedLayout> view_after(const Node& node, const StridedLayout& in) {
  StridedLayout out;
  out.offset = in.offset;
  out.shape.assign(node.type.shape.begin(), node.type.shape.end());
  switch (node.op) {
    case OpId::Reshape: {
      auto strides = reshaped_strides(in, out.shape);
      if (!strides) return std::nullopt;
      out.strides = std::move(*strides);
      return out;
    }
    case OpId::Transpose:
      for (int64_t axis : node.attrs[0].ints) out.strides.push_back(in.strides[axis]);
      return out;
    case OpId::Slice:
      for (size_t d = 0; d < in.shape.size(); ++d) {
        out.offset += node.attrs[0].ints[d] * in.strides[d];
        out.strides.push_back(node.attrs[2].ints[d] * in.strides[d]);
      }
      return out;
    case OpId::Broadcast:
      out.strides.assign(out.shape.size(), 0);
      for (size_t d = 0; d < in.shape.size(); ++d)
        if (in.shape[d] != 1) out.strides[node.attrs[0].ints[d]] = in.strides[d];
      return out;
    default: return std::nullopt;
  }
}

StridedLayout contiguous(const Dims& shape) { return {{shape.begin(), shape.end()}, ops::row_major_strides(shape), 0}; }

// A dim of one element has stride 0, as reshaped_strides gives it.
AttentionView row_major_view(const Dims& shape) {
  AttentionView view;
  if (shape.size() < 2) return view;
  std::vector<int64_t> strides = ops::row_major_strides(shape);
  view.row_stride = strides[shape.size() - 2];
  for (size_t d = 0; d + 2 < shape.size(); ++d) view.batch_strides.push_back(shape[d] == 1 ? 0 : strides[d]);
  return view;
}

namespace {

std::optional<StridedLayout> strided_layout(const Graph& graph, const Node& node) {
  if (node.op == OpId::Reshape)  // the same elements in order: one flat copy
    return StridedLayout{{node.type.num_elements()}, {1}, 0};
  return view_after(node, contiguous(graph.node(node.operands[0]).type.shape));
}

// Adjacent dims that are one run of memory as one dim, dims of size 1 gone:
// the fewest loops that copy the view.
StridedLayout coalesced(const StridedLayout& view) {
  StridedLayout out;
  out.offset = view.offset;
  for (size_t d = 0; d < view.shape.size(); ++d) {
    if (view.shape[d] == 1) continue;
    if (!out.shape.empty() && out.strides.back() == view.strides[d] * view.shape[d]) {
      out.shape.back() *= view.shape[d];
      out.strides.back() = view.strides[d];
      continue;
    }
    out.shape.push_back(view.shape[d]);
    out.strides.push_back(view.strides[d]);
  }
  if (out.shape.empty()) out.shape = {1}, out.strides = {0};
  return out;
}

// A chain of layout ops, each reading the one before (ABI 3.3): one strided
// view of the first op's operand. The copy writes the view's elements in
// order, so a reshape at the end changes nothing (it may merge dims that are
// apart in memory: heads transposed back, then merged).
std::optional<StridedLayout> chain_layout(const Graph& graph, std::span<const NodeId> ops) {
  const Node& first = graph.node(ops[0]);
  if (first.operands.size() != 1 || first.type.num_elements() == 0) return std::nullopt;
  StridedLayout view = contiguous(graph.node(first.operands[0]).type.shape);
  for (size_t i = 0; i < ops.size(); ++i) {
    const Node& node = graph.node(ops[i]);
    if (!is_chain_layout(node.op) || node.operands.size() != 1 || (i > 0 && node.operands[0] != ops[i - 1]))
      return std::nullopt;
    if (node.op == OpId::Reshape && i + 1 == ops.size()) break;
    auto next = view_after(node, view);
    if (!next) return std::nullopt;
    view = std::move(*next);
  }
  return coalesced(view);
}

}  // namespace

const ValueAccess* KernelDescription::access_of(NodeId value) const {
  for (const ValueAccess& access : accesses)
    if (access.value == value) return &access;
  return nullptr;
}

DescribeOptions describe_options(const lazylab_capabilities* caps) {
  return {caps == nullptr || caps->reads_row_groups != 0};
}

Expected<KernelDescription> describe_row_space(const Graph& graph, std::span<const NodeId> ops,
                                               DescribeOptions options) {
  return RowSpaceAnalysis(graph, ops, options).run();
}

namespace {

// How an epilogue op's result of a window kernel is read: a broadcast of
// a scalar or of one value per channel, or the result's own elements.
Expected<ValueAccess> window_broadcast(const Graph& graph, NodeId id, const Dims& out,
                                       const std::set<NodeId>& in_kernel, DescribeOptions options) {
  const Node& node = graph.node(id);
  NodeId source = node.operands[0];
  const TensorType& in = graph.node(source).type;
  if (in_kernel.count(source)) return make_error("a broadcast of a value the kernel makes");
  if (in.num_elements() == 1) return ValueAccess{id, Access::Scalar, source, 0, 0};
  // One value per channel: every dim of the source but one is 1, and that one
  // lands on dim 1 (the channels), in an image of its own (N = 1).
  int64_t channel_dims = 0;
  for (size_t d = 0; d < in.shape.size(); ++d)
    if (in.shape[d] != 1) channel_dims += node.attrs[0].ints[d] == 1 && in.shape[d] == out[1] ? 1 : 2;
  if (channel_dims == 1 && out[0] == 1) return ValueAccess{id, Access::PerRow, source, 0, 0};
  if (channel_dims == 1 && options.row_groups) return ValueAccess{id, Access::RowGroup, source, 1, 0};
  return make_error(fmt::format("broadcast {} to {} is not one value per channel{}", to_string(in.shape),
                                to_string(out), options.row_groups ? "" : " of one image"));
}

}  // namespace

Expected<KernelDescription> describe_window(const Graph& graph, std::span<const NodeId> ops, DescribeOptions options) {
  std::vector<NodeId> convs;
  for (NodeId id : ops)
    if (graph.node(id).op == OpId::Conv2d) convs.push_back(id);
  if (convs.size() != 1) return make_error("a window kernel holds one conv2d");
  const Dims& out = graph.node(convs[0]).type.shape;
  std::set<NodeId> in_kernel(ops.begin(), ops.end());
  for (NodeId operand : graph.node(convs[0]).operands)
    if (in_kernel.count(operand)) return make_error("a conv2d takes no prologue");
  KernelDescription description;
  description.kind = KernelKind::Window;
  description.rows = out[0] * out[1];
  description.cols = out[2] * out[3];
  std::map<NodeId, ValueAccess> seen;
  auto read = [&](NodeId value) -> Status {  // an operand of an epilogue op
    if (seen.count(value)) return {};
    if (in_kernel.count(value)) return make_error("an op reads a value of the kernel made after it");
    if (graph.node(value).type.shape != out)
      return make_error(
          fmt::format("{} is not the convolution's shape {}", to_string(graph.node(value).type), to_string(out)));
    seen[value] = {value, Access::Full, value, 0, 0};
    return {};
  };
  for (NodeId id : ops) {
    const Node& node = graph.node(id);
    if (node.type.shape != out)
      return make_error(fmt::format("{} differs from the convolution's shape", op_name(node.op)));
    if (id == convs[0]) {
      seen[id] = {id, Access::Full, id, 0, 0};
    } else if (node.op == OpId::Constant) {
      seen[id] = {id, Access::Splat, id, 0, node.attrs[0].f};
    } else if (node.op == OpId::Broadcast) {
      auto access = window_broadcast(graph, id, out, in_kernel, options);
      if (!access) return access.error();
      seen[id] = *access;
    } else if (op_info(node.op).category == OpCategory::Elementwise) {
      for (NodeId operand : node.operands) LAZYLAB_TRY(read(operand));
      seen[id] = {id, Access::Full, id, 0, 0};
    } else {
      return make_error(fmt::format("{} cannot be a convolution's epilogue", op_name(node.op)));
    }
  }
  for (auto& [value, access] : seen) description.accesses.push_back(access);
  return description;
}

KernelDescription describe_kernel(const Graph& graph, std::span<const NodeId> ops, DescribeOptions options) {
  // Attention holds two products (and may end in layout ops after the
  // second): only then is it worth matching (strategies describe every
  // candidate group).
  size_t products = std::count_if(ops.begin(), ops.end(), [&](NodeId id) { return graph.node(id).op == OpId::Matmul; });
  if (products >= 2 && ops.size() > 2)
    if (auto attention = describe_attention(graph, ops)) return std::move(*attention);
  if (auto contraction = describe_contraction(graph, ops, options)) return *contraction;
  if (auto window = describe_window(graph, ops, options)) return std::move(*window);
  if (ops.size() == 1 && graph.node(ops[0]).operands.size() == 1) {
    if (auto layout = strided_layout(graph, graph.node(ops[0]))) {
      KernelDescription description;
      description.kind = KernelKind::Layout;
      description.layout = std::move(*layout);
      return description;
    }
  } else if (auto chain = ops.empty() ? std::nullopt : chain_layout(graph, ops)) {
    KernelDescription description;
    description.kind = KernelKind::Layout;
    description.layout = std::move(*chain);
    return description;
  }
  if (auto rows = describe_row_space(graph, ops, options)) return std::move(*rows);
  return {};
}

std::string_view kind_name(KernelKind kind) { return lazylab_kernel_kind_name(static_cast<uint32_t>(kind)); }

}  // namespace lazylab
