#include "autodiff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "graph_builder.h"
#include "lazylab/op_formulas.hpp"
#include "node_math.h"

namespace lazylab {
namespace {

// The backward sweep: each node's cotangent (the loss's gradient with
// respect to it), from the loss down, each op's rule adding its operands'
// shares. Built into the same builder as the forward copy, so the rules
// read the forward's nodes by id.
class Backward {
 public:
  Backward(const Graph& forward, GraphBuilder& builder, std::vector<bool> needed)
      : forward_(forward), b_(builder), needed_(std::move(needed)), cotangent_(forward.size(), kNoNode) {}

  Status run(NodeId loss) {
    cotangent_[loss] = b_.constant(1, type(loss));
    for (NodeId id = loss + 1; id-- > 0;) {
      if (cotangent_[id] == kNoNode || !needed_[id]) continue;
      LAZYLAB_TRY(rule(id, cotangent_[id]));
      if (error_) return *error_;
    }
    return {};
  }

  NodeId cotangent(NodeId id) const { return cotangent_[id]; }

  // What core/node_math.h's NodeMath appends nodes through.
  NodeId op(OpId op, Operands operands) { return emit(op, std::move(operands)); }
  NodeId scalar(double value, NodeId like) { return b_.constant(value, type(like)); }

 private:
  // A node's type; a reference that emit() may invalidate (keep copies).
  const TensorType& type(NodeId id) const { return b_.type(id); }

  NodeId emit(OpId op, Operands operands, const Attrs& attrs = {}, const TensorType* declared = nullptr) {
    if (error_) return 0;
    auto id = b_.add(op, std::move(operands), attrs, declared);
    if (!id) {
      error_ = id.error();
      return 0;
    }
    return *id;
  }

  void accumulate(NodeId operand, NodeId share) {
    if (error_ || !needed_[operand]) return;
    NodeId& total = cotangent_[operand];
    if (total == kNoNode) {
      total = share;
    } else if (auto joined = side_by_side(total, share)) {
      total = *joined;
    } else {
      total = emit(OpId::Add, {total, share});
    }
  }

  // Two pads of zeros placing blocks side by side along one axis (the
  // cotangents of slices cut next to each other: attention's q, k and v
  // from one product) as one pad of the blocks concatenated, or the
  // concatenation alone where it fills the shape: one kernel writing the
  // whole instead of a pad each and adds. Nothing where they are not.
  std::optional<NodeId> side_by_side(NodeId total, NodeId share) {
    const Node a = b_.node(total), b = b_.node(share);  // copies: emit() may move the builder's nodes
    auto zeros = [](const Node& n) { return n.op == OpId::Pad && n.attrs[2].f == 0 && !std::signbit(n.attrs[2].f); };
    if (!zeros(a) || !zeros(b)) return std::nullopt;
    const Ints &low_a = a.attrs[0].ints, &high_a = a.attrs[1].ints, &low_b = b.attrs[0].ints, &high_b = b.attrs[1].ints;
    std::optional<size_t> axis;
    for (size_t d = 0; d < low_a.size(); ++d) {
      if (low_a[d] == low_b[d] && high_a[d] == high_b[d]) continue;
      if (axis) return std::nullopt;
      axis = d;
    }
    if (!axis) return std::nullopt;
    const size_t d = *axis;
    const int64_t extent = type(total).shape[d];
    const bool a_first = extent - high_a[d] == low_b[d];
    if (!a_first && extent - high_b[d] != low_a[d]) return std::nullopt;
    const Node &first = a_first ? a : b, &second = a_first ? b : a;
    Operands blocks;
    for (const Node* n : {&first, &second}) {  // a concatenation along the axis joins flat
      const Node& block = b_.node(n->operands[0]);
      if (block.op == OpId::Concat && block.attrs[0].i == static_cast<int64_t>(d))
        blocks.insert(blocks.end(), block.operands.begin(), block.operands.end());
      else
        blocks.push_back(n->operands[0]);
    }
    Attrs along;
    along[0].i = static_cast<int64_t>(d);
    NodeId joined = emit(OpId::Concat, std::move(blocks), along);
    Attrs placement = first.attrs;
    placement[1].ints[d] = second.attrs[1].ints[d];
    const bool fills = std::ranges::all_of(placement[0].ints, [](int64_t v) { return v == 0; }) &&
                       std::ranges::all_of(placement[1].ints, [](int64_t v) { return v == 0; });
    return fills ? joined : emit(OpId::Pad, {joined}, placement);
  }

  // g times a partial derivative, skipping a factor of 1 or -1; a partial
  // that is 1 where a predicate holds and 0 elsewhere (relu's, max's)
  // selects g or 0, as PyTorch's, so an infinite g past a kink (sqrt(relu(x))
  // at x < 0) gives 0, not 0 x inf.
  NodeId times(NodeId g, NodeId partial) {
    const Node& p = b_.node(partial);
    if (is_constant(partial, 1)) return g;
    if (is_constant(partial, -1)) return emit(OpId::Neg, {g});
    if (p.op == OpId::Select && is_constant(p.operands[1], 1) && is_constant(p.operands[2], 0)) {
      NodeId predicate = p.operands[0];
      return emit(OpId::Select, {predicate, g, zeros_like(g)});
    }
    return emit(OpId::Mul, {g, partial});
  }

  bool is_constant(NodeId id, double value) const {
    const Node& node = b_.node(id);
    return node.op == OpId::Constant && is_float(node.type.dtype) && node.attrs[0].f == value;
  }

  NodeId zeros_like(NodeId id) { return b_.constant(0, type(id)); }

  NodeId reshaped(NodeId x, const Dims& shape) {
    TensorType to{type(x).dtype, shape};
    return type(x).shape == shape ? x : emit(OpId::Reshape, {x}, {}, &to);
  }

  // `x` (of the same rank as `shape`, its dims 1 or shape's) broadcast to shape.
  NodeId expanded(NodeId x, const Dims& shape) {
    if (type(x).shape == shape) return x;
    Attrs attrs;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) attrs[0].ints.push_back(d);
    TensorType to{type(x).dtype, shape};
    return emit(OpId::Broadcast, {x}, attrs, &to);
  }

  // A reduction's result as kept dims: the operand's shape with its axes 1.
  Dims kept_shape(const Node& reduction) const {
    Dims kept = type(reduction.operands[0]).shape;
    for (int64_t axis : reduction.attrs[0].ints) kept[axis] = 1;
    return kept;
  }

  Status rule(NodeId id, NodeId g) {
    const Node& node = forward_.node(id);
    const OpInfo& info = op_info(node.op);
    switch (info.category) {
      case OpCategory::Leaf: return {};
      case OpCategory::Elementwise: return elementwise(id, node, g);
      case OpCategory::Reduction: return reduction(id, node, g);
      case OpCategory::Contraction: return product(node, g);
      case OpCategory::Layout: return layout(node, g);
      case OpCategory::Composite:
        if (node.op == OpId::Softmax) return softmax(id, node, g);
        if (node.op == OpId::Gelu) return gelu(node, g);
        return make_error(fmt::format(
            "grad: '{}' is differentiated through its decomposition: run decompose (decompose{{keep=fused-gradient}} "
            "keeps softmax and gelu, whose rules are fused) before grad",
            info.name));
      case OpCategory::Window:
        if (node.op == OpId::Conv2d) return convolution(node, g);
        if (node.op == OpId::AvgPool2d) return average_pool(node, g);
        if (node.op == OpId::MaxPool2d) return max_pool(id, node, g);
        break;
      default: break;
    }
    return make_error(fmt::format("grad: no vector-Jacobian rule for '{}' yet", info.name));
  }

  Status elementwise(NodeId id, const Node& node, NodeId g) {
    const uint32_t op = static_cast<uint32_t>(node.op);
    NodeMath<Backward> math{*this, id};
    switch (node.op) {
      case OpId::Cast: {
        NodeId x = node.operands[0];
        if (is_float(type(x).dtype)) {
          TensorType to = type(x);
          accumulate(x, emit(OpId::Cast, {g}, {}, &to));
        }
        return {};
      }
      case OpId::Select: {
        NodeId c = node.operands[0];
        accumulate(node.operands[1], emit(OpId::Select, {c, g, zeros_like(g)}));
        accumulate(node.operands[2], emit(OpId::Select, {c, zeros_like(g), g}));
        return {};
      }
      default: break;
    }
    if (info_compares(node.op)) return {};  // a bool: no gradient flows back
    if (node.operands.size() == 1) {
      NodeId partial = 0;
      if (!formulas::unary_derivative(math, op, node.operands[0], id, partial))
        return make_error(fmt::format("grad: '{}' has no derivative", op_info(node.op).name));
      accumulate(node.operands[0], times(g, partial));
      return {};
    }
    NodeId da = 0, db = 0;
    if (!formulas::binary_derivatives(math, op, node.operands[0], node.operands[1], id, da, db))
      return make_error(fmt::format("grad: '{}' has no derivative", op_info(node.op).name));
    if (needed_[node.operands[0]]) accumulate(node.operands[0], times(g, da));
    if (needed_[node.operands[1]]) accumulate(node.operands[1], times(g, db));
    return {};
  }

  static bool info_compares(OpId op) { return op_info(op).type_rule == TypeRule::Compare; }

  Status reduction(NodeId id, const Node& node, NodeId g) {
    NodeId x = node.operands[0];
    Dims shape = type(x).shape;  // copies: emitting nodes may move the builder's nodes
    Dims kept = kept_shape(node);
    NodeId spread = expanded(reshaped(g, kept), shape);
    switch (node.op) {
      case OpId::ReduceSum: accumulate(x, spread); return {};
      case OpId::ReduceMean: {
        int64_t count = 1;
        for (int64_t axis : node.attrs[0].ints) count *= shape[axis];
        accumulate(x, emit(OpId::Mul, {spread, b_.constant(1.0 / static_cast<double>(count), type(x))}));
        return {};
      }
      case OpId::ReduceMax:
      case OpId::ReduceMin: {
        // The elements equal to the extremum share its gradient evenly (as
        // JAX's and PyTorch's amax): a tie that is no accident, the copies
        // of a broadcast, then adds back up to the gradient of one value.
        NodeId extremum = expanded(reshaped(id, kept), shape);
        NodeId chosen = emit(OpId::Eq, {x, extremum});
        Attrs sum;
        sum[0].ints = node.attrs[0].ints;
        sum[1].i = 1;  // keepdim
        NodeId ones = emit(OpId::Select, {chosen, b_.constant(1, type(x)), zeros_like(x)});
        NodeId count = emit(OpId::ReduceSum, {ones}, sum);
        NodeId share = expanded(emit(OpId::Div, {reshaped(g, kept), count}), shape);
        accumulate(x, emit(OpId::Select, {chosen, share, zeros_like(x)}));
        return {};
      }
      default: return make_error(fmt::format("grad: no vector-Jacobian rule for '{}' yet", op_info(node.op).name));
    }
  }

  // Softmax's rule, fused (PyTorch's softmax backward, JAX's custom JVP):
  // dx = p (g - sum(g p)) along the axis, p the softmax's own result, in
  // f32 for a 16-bit softmax as its decomposition computes. Through the
  // decomposition the max it subtracts is differentiated too: a gradient
  // that cancels to rounding, for which the backward keeps the input and the
  // max and compares them, in attention the [b, h, t, t] scores kept and
  // read again beside the probabilities.
  Status softmax(NodeId id, const Node& node, NodeId g) {
    NodeId x = node.operands[0];
    const TensorType out = type(id);
    const DType wide = composite_dtype(out.dtype);
    NodeId p = cast_to(id, wide), gw = cast_to(g, wide);
    Attrs along;
    along[0].ints = {node.attrs[0].i};
    along[1].i = 1;  // keepdim
    NodeId dot = expanded(emit(OpId::ReduceSum, {emit(OpId::Mul, {gw, p})}, along), out.shape);
    accumulate(x, cast_to(emit(OpId::Mul, {p, emit(OpId::Sub, {gw, dot})}), out.dtype));
    return {};
  }

  // Gelu's rule, fused: g times its derivative from x (op_formulas.hpp),
  // in f32 for a 16-bit gelu as its decomposition computes. Through the
  // decomposition the backward reads the forward's intermediates (its
  // cube, exp, denominator), which the forward then keeps.
  Status gelu(const Node& node, NodeId g) {
    NodeId x = node.operands[0];
    const DType dtype = type(x).dtype, wide = composite_dtype(dtype);
    NodeId xw = cast_to(x, wide);
    NodeMath<Backward> math{*this, xw};
    NodeId partial = 0;
    formulas::unary_derivative(math, LAZYLAB_OP_Gelu, xw, kNoNode, partial);
    accumulate(x, cast_to(emit(OpId::Mul, {cast_to(g, wide), partial}), dtype));
    return {};
  }

  // `v` as `dtype` (itself where it is already).
  NodeId cast_to(NodeId v, DType dtype) {
    TensorType to{dtype, type(v).shape};
    return type(v).dtype == dtype ? v : emit(OpId::Cast, {v}, {}, &to);
  }

  // d(a b) = g b^T for a, a^T g for b, over the batch dims.
  Status product(const Node& node, NodeId g) {
    NodeId a = node.operands[0], b = node.operands[1];
    int64_t rank = type(a).rank();
    Attrs swap;
    for (int64_t d = 0; d < rank - 2; ++d) swap[0].ints.push_back(d);
    swap[0].ints.push_back(rank - 1);
    swap[0].ints.push_back(rank - 2);
    if (needed_[a]) accumulate(a, emit(OpId::Matmul, {g, emit(OpId::Transpose, {b}, swap)}));
    if (needed_[b]) accumulate(b, emit(OpId::Matmul, {emit(OpId::Transpose, {a}, swap), g}));
    return {};
  }

  Status layout(const Node& node, NodeId g) {
    NodeId x = node.operands.empty() ? kNoNode : node.operands[0];
    switch (node.op) {
      case OpId::Reshape: accumulate(x, reshaped(g, type(x).shape)); return {};
      case OpId::Broadcast: accumulate(x, summed_to(g, node)); return {};
      case OpId::Transpose: {
        Attrs inverse;
        const Ints& perm = node.attrs[0].ints;
        inverse[0].ints.resize(perm.size());
        for (size_t i = 0; i < perm.size(); ++i) inverse[0].ints[perm[i]] = static_cast<int64_t>(i);
        accumulate(x, emit(OpId::Transpose, {g}, inverse));
        return {};
      }
      case OpId::Gather: {  // scatter_add is gather's adjoint (ops.def)
        Attrs axis;
        axis[0].i = node.attrs[0].i;
        accumulate(x, emit(OpId::ScatterAdd, {zeros_like(x), node.operands[1], g}, axis));
        return {};
      }
      case OpId::ScatterAdd: {  // data's share passes through; the updates' is gathered back (ops.def)
        accumulate(x, g);
        Attrs axis;
        axis[0].i = node.attrs[0].i;
        if (needed_[node.operands[2]]) accumulate(node.operands[2], emit(OpId::Gather, {g, node.operands[1]}, axis));
        return {};
      }
      case OpId::Slice: return slice(node, g);
      case OpId::Pad: return pad(node, g);
      case OpId::Concat: return concat(node, g);
      default: return make_error(fmt::format("grad: no vector-Jacobian rule for '{}' yet", op_info(node.op).name));
    }
  }

  // conv2d's attributes: strides, pads [top, left, bottom, right], dilations, groups.
  static Attrs convolution_attrs(const Ints& strides, const Ints& pads, const Ints& dilations, int64_t groups) {
    Attrs attrs;
    attrs[0].ints = strides;
    attrs[1].ints = pads;
    attrs[2].ints = dilations;
    attrs[3].i = groups;
    return attrs;
  }

  // `x` split to `split`, its axes permuted, joined to `joined`: a grouped
  // convolution's operands with their groups moved.
  NodeId regrouped(NodeId x, const Dims& split, const Ints& perm, const Dims& joined) {
    return reshaped(transposed(reshaped(x, split), perm), joined);
  }

  NodeId transposed(NodeId x, const Ints& perm) {
    Attrs attrs;
    attrs[0].ints = perm;
    return emit(OpId::Transpose, {x}, attrs);
  }

  // `x` with `every - 1` zeros after each element along `axis` but the last
  // (a strided convolution's cotangent spread back over its input's grid).
  NodeId spread(NodeId x, int64_t axis, int64_t every) {
    if (every == 1) return x;
    Dims shape = type(x).shape, split = shape;
    split.insert(split.begin() + axis + 1, 1);
    Attrs pad;
    pad[0].ints.assign(split.size(), 0);
    pad[1].ints.assign(split.size(), 0);
    pad[1].ints[axis + 1] = every - 1;
    pad[2] = scalar_attr(type(x).dtype, 0);
    NodeId padded = emit(OpId::Pad, {reshaped(x, split)}, pad);
    Dims joined = shape;
    joined[axis] *= every;
    Attrs window;
    for (size_t d = 0; d < shape.size(); ++d) {
      window[0].ints.push_back(0);
      window[1].ints.push_back(static_cast<int64_t>(d) == axis ? (shape[d] - 1) * every + 1 : shape[d]);
      window[2].ints.push_back(1);
    }
    return emit(OpId::Slice, {reshaped(padded, joined)}, window);
  }

  // `x` reversed along `axis`: a gather of indices n - 1 down to 0.
  NodeId reversed(NodeId x, int64_t axis) {
    int64_t n = type(x).shape[axis];
    TensorType indices{DType::I64, {n}};
    Attrs along;
    along[0].i = 0;
    NodeId iota = emit(OpId::Iota, {}, along, &indices);
    NodeId down = emit(OpId::Sub, {b_.constant(static_cast<double>(n - 1), indices), iota});
    Attrs gather_axis;
    gather_axis[0].i = axis;
    return emit(OpId::Gather, {x, down}, gather_axis);
  }

  // y = conv2d(x, w) in G groups: the weight's gradient is a convolution of
  // x by the cotangent (batch and channels swapped within each group; the
  // forward's dilation its stride and its stride its dilation); the input's,
  // of the cotangent spread over the input's grid by the weights turned over
  // (channels swapped within each group, reversed along both window axes).
  Status convolution(const Node& node, NodeId g) {
    NodeId x = node.operands[0], w = node.operands[1];
    const Ints strides = node.attrs[0].ints, pads = node.attrs[1].ints, dilations = node.attrs[2].ints;
    const int64_t groups = node.attrs[3].i;
    const Dims xs = type(x).shape, ws = type(w).shape, gs = type(g).shape;
    const int64_t n = xs[0], c = xs[1], o = ws[0];
    const Ints swap = {1, 0, 2, 3};
    if (needed_[w]) {
      // x as [C/G, G N, H, W] and the cotangent as [O, N, OH, OW]: G groups of N channels.
      NodeId input =
          regrouped(x, {n, groups, c / groups, xs[2], xs[3]}, {2, 1, 0, 3, 4}, {c / groups, groups * n, xs[2], xs[3]});
      NodeId weight = regrouped(g, {n, groups, o / groups, gs[2], gs[3]}, {1, 2, 0, 3, 4}, {o, n, gs[2], gs[3]});
      // With the forward's pads it may make rows past the window (floor division): cut to KH x KW.
      Attrs attrs = convolution_attrs(dilations, pads, strides, groups);
      NodeId full = emit(OpId::Conv2d, {input, weight}, attrs);  // [C/G, O, >= KH, >= KW]
      Attrs window;
      for (int64_t d = 0; d < 4; ++d) {
        window[0].ints.push_back(0);
        window[1].ints.push_back(d < 2 ? type(full).shape[d] : ws[d]);
        window[2].ints.push_back(1);
      }
      NodeId cut = type(full).shape == Dims{ws[1], ws[0], ws[2], ws[3]} ? full : emit(OpId::Slice, {full}, window);
      accumulate(w, transposed(cut, swap));
    }
    if (needed_[x]) {
      Ints around = spread_pads(xs, gs, {ws[2], ws[3]}, strides, pads, dilations);
      NodeId grid = cropped(spread(spread(g, 2, strides[0]), 3, strides[1]), around);
      NodeId swapped =
          regrouped(w, {groups, o / groups, ws[1], ws[2], ws[3]}, {0, 2, 1, 3, 4}, {c, o / groups, ws[2], ws[3]});
      // Turned over along both window axes at once: row-major, that is the
      // reversal of the window's KH x KW taps as one axis (one gather, not
      // two: ResNet-18's larger weights cost 1.2 ms a pass on the cpu).
      const Dims taps = {c, o / groups, ws[2] * ws[3]}, window = {c, o / groups, ws[2], ws[3]};
      NodeId turned = reshaped(reversed(reshaped(swapped, taps), 2), window);
      accumulate(x, emit(OpId::Conv2d, {grid, turned}, convolution_attrs({1, 1}, around, dilations, groups)));
    }
    return {};
  }

  // The pads a convolution of `g` spread over its input's grid takes to
  // make the input's extent again (conv2d's input rule): [top, left,
  // bottom, right]; negative where a forward pad passed its window (the
  // spread cotangent's rows there reach no input: cropped() cuts them).
  static Ints spread_pads(const Dims& xs, const Dims& gs, const Ints& kernel, const Ints& strides, const Ints& pads,
                          const Ints& dilations) {
    Ints around(4);
    for (int64_t a = 0; a < 2; ++a) {
      int64_t extent = dilations[a] * (kernel[a] - 1), spread_size = (gs[2 + a] - 1) * strides[a] + 1;
      around[a] = extent - pads[a];
      around[2 + a] = xs[2 + a] - spread_size + pads[a];
    }
    return around;
  }

  // `grid` [N, C, H, W] without the rows and columns a negative pad of
  // `around` cuts, those pads then 0.
  NodeId cropped(NodeId grid, Ints& around) {
    if (std::all_of(around.begin(), around.end(), [](int64_t p) { return p >= 0; })) return grid;
    Dims shape = type(grid).shape;
    Attrs window;
    for (int64_t d = 0; d < 4; ++d) {
      int64_t a = d - 2;
      window[0].ints.push_back(d < 2 ? 0 : std::max<int64_t>(0, -around[a]));
      window[1].ints.push_back(d < 2 ? shape[d] : shape[d] - std::max<int64_t>(0, -around[2 + a]));
      window[2].ints.push_back(1);
    }
    for (int64_t& p : around) p = std::max<int64_t>(0, p);
    return emit(OpId::Slice, {grid}, window);
  }

  // y = avg_pool2d(x): each window's cotangent divided by its count (KH x
  // KW, or without count_include_pad the input elements it covers: a
  // convolution of ones) and summed back over the window: the spread
  // cotangent convolved by ones, each channel its own group.
  Status average_pool(const Node& node, NodeId g) {
    NodeId x = node.operands[0];
    const Ints kernel = node.attrs[0].ints, strides = node.attrs[1].ints, pads = node.attrs[2].ints;
    const Dims xs = type(x).shape, gs = type(g).shape;
    const DType dtype = type(x).dtype;
    Ints around = spread_pads(xs, gs, kernel, strides, pads, {1, 1});
    NodeId share;
    if (node.attrs[3].i) {
      share = emit(OpId::Mul, {g, b_.constant(1.0 / static_cast<double>(kernel[0] * kernel[1]), type(g))});
    } else {
      NodeId ones = b_.constant(1, TensorType{dtype, {1, 1, xs[2], xs[3]}});
      NodeId window = b_.constant(1, TensorType{dtype, {1, 1, kernel[0], kernel[1]}});
      NodeId count = emit(OpId::Conv2d, {ones, window}, convolution_attrs(strides, pads, {1, 1}, 1));
      share = emit(OpId::Div, {g, expanded(count, gs)});
    }
    NodeId grid = cropped(spread(spread(share, 2, strides[0]), 3, strides[1]), around);
    NodeId ones = b_.constant(1, TensorType{dtype, {xs[1], 1, kernel[0], kernel[1]}});
    accumulate(x, emit(OpId::Conv2d, {grid, ones}, convolution_attrs({1, 1}, around, {1, 1}, xs[1])));
    return {};
  }

  // y = max_pool2d(x): each window's cotangent goes to the first of its
  // elements (row-major, as PyTorch's) equal to its maximum. For each offset
  // (p, q) of the window, the element there in every window is a strided
  // slice of x padded with -inf; where it is the maximum and no earlier
  // offset was, the cotangent goes back to its place (spread over the grid,
  // padded to the offset), the sum of the offsets' shares cut to x.
  Status max_pool(NodeId y, const Node& node, NodeId g) {
    NodeId x = node.operands[0];
    const Ints kernel = node.attrs[0].ints, strides = node.attrs[1].ints, pads = node.attrs[2].ints,
               dilations = node.attrs[3].ints;
    const Dims xs = type(x).shape, gs = type(g).shape;
    const DType dtype = type(x).dtype;
    const Dims padded_shape = {xs[0], xs[1], xs[2] + pads[0] + pads[2], xs[3] + pads[1] + pads[3]};
    Attrs widen;
    widen[0].ints = {0, 0, pads[0], pads[1]};
    widen[1].ints = {0, 0, pads[2], pads[3]};
    widen[2] = scalar_attr(dtype, -std::numeric_limits<double>::infinity());
    NodeId padded = emit(OpId::Pad, {x}, widen);
    const TensorType flags{DType::Bool, gs};
    NodeId taken = b_.constant(0, flags), none = b_.constant(0, flags), zero = zeros_like(g);
    NodeId total = kNoNode;
    for (int64_t p = 0; p < kernel[0]; ++p)
      for (int64_t q = 0; q < kernel[1]; ++q) {
        const Ints at = {p * dilations[0], q * dilations[1]};
        Attrs window;
        window[0].ints = {0, 0, at[0], at[1]};
        window[1].ints = {gs[0], gs[1], at[0] + (gs[2] - 1) * strides[0] + 1, at[1] + (gs[3] - 1) * strides[1] + 1};
        window[2].ints = {1, 1, strides[0], strides[1]};
        NodeId hit = emit(OpId::Eq, {emit(OpId::Slice, {padded}, window), y});
        NodeId first = emit(OpId::Select, {taken, none, hit});
        taken = emit(OpId::Select, {taken, taken, hit});
        NodeId grid = spread(spread(emit(OpId::Select, {first, g, zero}), 2, strides[0]), 3, strides[1]);
        Attrs place;
        place[0].ints = {0, 0, at[0], at[1]};
        place[1].ints = {0, 0, padded_shape[2] - at[0] - type(grid).shape[2],
                         padded_shape[3] - at[1] - type(grid).shape[3]};
        place[2] = scalar_attr(dtype, 0);
        NodeId placed = emit(OpId::Pad, {grid}, place);
        total = total == kNoNode ? placed : emit(OpId::Add, {total, placed});
      }
    Attrs crop;
    crop[0].ints = {0, 0, pads[0], pads[1]};
    crop[1].ints = {xs[0], xs[1], pads[0] + xs[2], pads[1] + xs[3]};
    crop[2].ints = {1, 1, 1, 1};
    accumulate(x, emit(OpId::Slice, {total}, crop));
    return {};
  }

  // A broadcast's cotangent summed over the axes it repeated along.
  NodeId summed_to(NodeId g, const Node& broadcast) {
    NodeId x = broadcast.operands[0];
    Dims from = type(x).shape;
    const Dims& to = broadcast.type.shape;
    const Ints& dims = broadcast.attrs[0].ints;
    std::vector<bool> mapped(to.size(), false);
    Attrs sum;
    for (size_t i = 0; i < dims.size(); ++i) {
      mapped[dims[i]] = true;
      if (from[i] == 1 && to[dims[i]] != 1) sum[0].ints.push_back(dims[i]);
    }
    for (size_t d = 0; d < to.size(); ++d)
      if (!mapped[d]) sum[0].ints.push_back(static_cast<int64_t>(d));
    std::sort(sum[0].ints.begin(), sum[0].ints.end());
    NodeId total = g;
    if (!sum[0].ints.empty()) {
      sum[1].i = 1;  // keepdim: the dims left are x's, in order, with 1s between
      total = emit(OpId::ReduceSum, {g}, sum);
    }
    return reshaped(total, from);
  }

  // A slice's adjoint puts g's elements back where they were read, zeros
  // elsewhere: spread along each strided dim, then padded to x's shape.
  Status slice(const Node& node, NodeId g) {
    NodeId x = node.operands[0];
    const Ints start = node.attrs[0].ints, stride = node.attrs[2].ints;
    const Dims shape = type(x).shape;
    for (size_t d = 0; d < start.size(); ++d) g = spread(g, static_cast<int64_t>(d), stride[d]);
    Attrs pad;
    for (size_t d = 0; d < start.size(); ++d) {
      pad[0].ints.push_back(start[d]);
      pad[1].ints.push_back(shape[d] - start[d] - type(g).shape[d]);
    }
    pad[2] = scalar_attr(type(x).dtype, 0);
    accumulate(x, emit(OpId::Pad, {g}, pad));
    return {};
  }

  // A pad's adjoint: g where x was, its padding dropped.
  Status pad(const Node& node, NodeId g) {
    NodeId x = node.operands[0];
    const Ints& low = node.attrs[0].ints;
    Attrs window;
    for (size_t d = 0; d < low.size(); ++d) {
      window[0].ints.push_back(low[d]);
      window[1].ints.push_back(low[d] + type(x).shape[d]);
      window[2].ints.push_back(1);
    }
    accumulate(x, emit(OpId::Slice, {g}, window));
    return {};
  }

  Status concat(const Node& node, NodeId g) {
    int64_t axis = node.attrs[0].i, offset = 0;
    for (NodeId x : node.operands) {
      Attrs window;
      Dims shape = type(x).shape;
      for (size_t d = 0; d < shape.size(); ++d) {
        bool along = static_cast<int64_t>(d) == axis;
        window[0].ints.push_back(along ? offset : 0);
        window[1].ints.push_back(along ? offset + shape[d] : shape[d]);
        window[2].ints.push_back(1);
      }
      offset += shape[axis];
      if (needed_[x]) accumulate(x, emit(OpId::Slice, {g}, window));
    }
    return {};
  }

  const Graph& forward_;
  GraphBuilder& b_;
  std::vector<bool> needed_;  // on a path from a parameter asked for to the loss, and a float
  std::vector<NodeId> cotangent_;
  std::optional<Error> error_;
};

// Nodes on a path from one of `sources` to `loss`, of a float dtype.
std::vector<bool> on_paths(const Graph& graph, const std::vector<NodeId>& sources, NodeId loss) {
  std::vector<bool> reached(graph.size(), false);
  for (NodeId s : sources) reached[s] = true;
  for (NodeId id = 0; id < graph.size(); ++id)
    for (NodeId operand : graph.node(id).operands) reached[id] = reached[id] || reached[operand];
  std::vector<NodeId> roots{loss};
  std::vector<bool> live = live_nodes(graph, roots);
  std::vector<bool> needed(graph.size());
  for (NodeId id = 0; id < graph.size(); ++id)
    needed[id] = reached[id] && live[id] && is_float(graph.node(id).type.dtype);
  return needed;
}

}  // namespace

bool has_fused_gradient(OpId op) { return op == OpId::Softmax || op == OpId::Gelu; }

Expected<Graph> differentiate(const Graph& graph, const GradRequest& request) {
  if (request.of >= graph.roots().size())
    return make_error(fmt::format("grad: no root {} (the graph returns {})", request.of, graph.roots().size()));
  NodeId loss = graph.roots()[request.of];
  const TensorType& loss_type = graph.node(loss).type;
  if (!is_float(loss_type.dtype) || loss_type.num_elements() != 1)
    return make_error(
        fmt::format("grad: root {} is {}, not a float scalar to differentiate", request.of, to_string(loss_type)));
  std::vector<NodeId> parameters = graph.parameters();
  std::vector<int64_t> wrt = request.wrt;
  if (wrt.empty())
    for (size_t ordinal = 0; ordinal < parameters.size(); ++ordinal)
      if (parameters[ordinal] != kNoNode && is_float(graph.node(parameters[ordinal]).type.dtype))
        wrt.push_back(static_cast<int64_t>(ordinal));
  std::vector<NodeId> sources;
  for (int64_t ordinal : wrt) {
    if (ordinal < 0 || ordinal >= static_cast<int64_t>(parameters.size()) || parameters[ordinal] == kNoNode)
      return make_error(fmt::format("grad: no parameter {} (the graph has {})", ordinal, parameters.size()));
    if (!is_float(graph.node(parameters[ordinal]).type.dtype))
      return make_error(fmt::format("grad: parameter {} is {}: only float values have gradients", ordinal,
                                    to_string(graph.node(parameters[ordinal]).type)));
    sources.push_back(parameters[ordinal]);
  }
  GraphBuilder builder;
  for (const Node& node : graph.nodes()) builder.add_typed(node.op, node.type, node.operands, node.attrs);
  Backward backward(graph, builder, on_paths(graph, sources, loss));
  LAZYLAB_TRY(backward.run(loss));
  std::vector<NodeId> roots = graph.roots();
  for (NodeId parameter : sources) {
    NodeId g = backward.cotangent(parameter);
    roots.push_back(g != kNoNode ? g : builder.constant(0, graph.node(parameter).type));
  }
  Graph joint = std::move(builder.graph());
  joint.set_roots(std::move(roots));
  return joint;
}

}  // namespace lazylab
