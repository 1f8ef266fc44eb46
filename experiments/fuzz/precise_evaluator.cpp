#include "precise_evaluator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "lazylab/op_formulas.hpp"
#include "lazylab/op_table.hpp"
#include "lazylab/reference_semantics.hpp"

namespace lazylab {
namespace {

using Real = long double;

using LongDoubleMath = reference::RealMath<Real>;

bool is_integral(DType dtype) { return !is_float(dtype); }

// A computed real stored into `dtype`: rounded to the float type, or
// truncated into the integer one as the reference semantics say.
Real store_real(DType dtype, Real v) {
  return visit_dtype(dtype, [&]<class T>(T) -> Real {
    switch (dtypes::kind(dtype_id(dtype))) {
      case dtypes::Kind::Float: return static_cast<Real>(static_cast<T>(v));
      case dtypes::Kind::Int: return static_cast<Real>(static_cast<T>(reference::to_integer(static_cast<double>(v))));
      case dtypes::Kind::Bool: break;
    }
    return v != 0;
  });
}

// An exact integer stored into `dtype`: i32 keeps the low 32 bits.
Real store_integer(DType dtype, long long v) {
  if (dtype == DType::Bool) return v != 0;
  return visit_dtype(dtype, [&]<class T>(T) -> Real { return static_cast<Real>(static_cast<T>(v)); });
}

long long as_integer(Real v) { return static_cast<long long>(v); }

// A scalar attribute's value: an integer's exactly (a long double holds every
// int64).
Real scalar_value(DType dtype, const AttrValue& value) {
  return is_integral(dtype) ? store_integer(dtype, value.i) : store_real(dtype, value.f);
}

struct Value {
  TensorType type;
  std::vector<Real> elements;
};

using Index = std::vector<int64_t>;

Index unravel(int64_t flat, const Dims& shape) {
  Index index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return index;
}

int64_t ravel(const Index& index, const Index& strides) {
  int64_t flat = 0;
  for (size_t d = 0; d < index.size(); ++d) flat += index[d] * strides[d];
  return flat;
}

class Evaluator {
 public:
  Evaluator(const Graph& graph, const std::vector<HostTensor>& inputs) : graph_(graph), inputs_(inputs) {}

  Expected<ReferenceOutputs> run() {
    values_.resize(graph_.size());
    std::vector<bool> live = live_nodes(graph_);
    for (NodeId id = 0; id < graph_.size(); ++id) {
      if (!live[id]) continue;
      const Node& node = graph_.node(id);
      Value& out = values_[id];
      out.type = node.type;
      out.elements.assign(static_cast<size_t>(node.type.num_elements()), 0);
      LAZYLAB_TRY(evaluate(node, out));
    }
    ReferenceOutputs outputs;
    for (NodeId root : graph_.roots()) {
      outputs.types.push_back(values_[root].type);
      outputs.values.emplace_back(values_[root].elements.begin(), values_[root].elements.end());
    }
    return outputs;
  }

 private:
  const Value& operand(const Node& node, int i) const { return values_[node.operands[i]]; }

  Status evaluate(const Node& node, Value& out) {
    const OpInfo& info = op_info(node.op);
    switch (node.op) {
      case OpId::Parameter: return parameter(node, out);
      case OpId::Constant:
        for (Real& e : out.elements) e = scalar_value(out.type.dtype, node.attrs[0]);
        return {};
      case OpId::Iota:
        return gather(out, [&](const Index& o) { return store_integer(out.type.dtype, o[node.attrs[0].i]); });
      case OpId::Cast: return cast(node, out);
      case OpId::Select: return select(node, out);
      case OpId::Broadcast: return broadcast(node, out);
      case OpId::Reshape: out.elements = operand(node, 0).elements; return {};
      case OpId::Transpose: return transpose(node, out);
      case OpId::Slice: return slice(node, out);
      case OpId::Concat: return concat(node, out);
      case OpId::Matmul: return matmul(node, out);
      case OpId::Softmax: return softmax(node, out);
      case OpId::Layernorm: return layernorm(node, out);
      case OpId::Gather: return take(node, out);
      case OpId::ScatterAdd: return scatter_add(node, out);
      case OpId::Pad: return pad(node, out);
      case OpId::Conv2d: return conv2d(node, out);
      case OpId::MaxPool2d:
      case OpId::AvgPool2d: return pool(node, out);
      default: break;
    }
    if (info.category == OpCategory::Reduction) return reduce(node, out);
    if (node.operands.size() == 1) return unary(node, out);
    return binary(node, out);
  }

  template <class Element>
  Status gather(Value& out, Element&& element) {
    for (size_t flat = 0; flat < out.elements.size(); ++flat)
      out.elements[flat] = element(unravel(static_cast<int64_t>(flat), out.type.shape));
    return {};
  }

  Status parameter(const Node& node, Value& out) {
    int64_t ordinal = node.attrs[0].i;
    if (ordinal < 0 || ordinal >= static_cast<int64_t>(inputs_.size()) || !(inputs_[ordinal].type == node.type))
      return make_error(
          fmt::format("precise evaluator: no input of type {} for parameter {}", to_string(node.type), ordinal));
    const std::byte* data = inputs_[ordinal].data->data();
    for (size_t i = 0; i < out.elements.size(); ++i) out.elements[i] = load(node.type.dtype, data, i);
    return {};
  }

  static Real load(DType dtype, const std::byte* data, size_t i) {
    auto read = [&]<class T>(T) {
      T v;
      std::memcpy(&v, data + i * sizeof(T), sizeof(T));
      return static_cast<Real>(v);
    };
    Real v = visit_dtype(dtype, read);
    return dtype == DType::Bool ? v != 0 : v;
  }

  Status cast(const Node& node, Value& out) {
    const Value& x = operand(node, 0);
    bool exact = is_integral(x.type.dtype) && is_integral(out.type.dtype);
    for (size_t i = 0; i < out.elements.size(); ++i)
      out.elements[i] =
          exact ? store_integer(out.type.dtype, as_integer(x.elements[i])) : store_real(out.type.dtype, x.elements[i]);
    return {};
  }

  Status select(const Node& node, Value& out) {
    const Value &p = operand(node, 0), &a = operand(node, 1), &b = operand(node, 2);
    for (size_t i = 0; i < out.elements.size(); ++i)
      out.elements[i] = p.elements[i] != 0 ? a.elements[i] : b.elements[i];
    return {};
  }

  Status broadcast(const Node& node, Value& out) {
    const Value& x = operand(node, 0);
    const Ints& dims = node.attrs[0].ints;
    Index strides = ops::row_major_strides(x.type.shape);
    return gather(out, [&](const Index& o) {
      int64_t flat = 0;
      for (size_t d = 0; d < dims.size(); ++d)
        if (x.type.shape[d] != 1) flat += o[dims[d]] * strides[d];
      return x.elements[flat];
    });
  }

  Status transpose(const Node& node, Value& out) {
    const Value& x = operand(node, 0);
    const Ints& perm = node.attrs[0].ints;
    Index strides = ops::row_major_strides(x.type.shape);
    return gather(out, [&](const Index& o) {
      int64_t flat = 0;
      for (size_t d = 0; d < perm.size(); ++d) flat += o[d] * strides[perm[d]];
      return x.elements[flat];
    });
  }

  Status slice(const Node& node, Value& out) {
    const Value& x = operand(node, 0);
    const Ints &start = node.attrs[0].ints, &stride = node.attrs[2].ints;
    Index strides = ops::row_major_strides(x.type.shape);
    return gather(out, [&](const Index& o) {
      int64_t flat = 0;
      for (size_t d = 0; d < o.size(); ++d) flat += (start[d] + o[d] * stride[d]) * strides[d];
      return x.elements[flat];
    });
  }

  Status concat(const Node& node, Value& out) {
    int64_t axis = node.attrs[0].i;
    return gather(out, [&](const Index& o) {
      Index in = o;
      for (size_t i = 0; i < node.operands.size(); ++i) {
        const Value& x = operand(node, static_cast<int>(i));
        if (in[axis] < x.type.shape[axis]) return x.elements[ravel(in, ops::row_major_strides(x.type.shape))];
        in[axis] -= x.type.shape[axis];
      }
      return Real(NAN);  // unreachable for a verified graph
    });
  }

  // gather: the generator draws in-range indices.
  Status take(const Node& node, Value& out) {
    const Value &x = operand(node, 0), &indices = operand(node, 1);
    int64_t axis = node.attrs[0].i, count = static_cast<int64_t>(indices.type.shape.size());
    Index strides = ops::row_major_strides(x.type.shape), index_strides = ops::row_major_strides(indices.type.shape);
    return gather(out, [&](const Index& o) {
      Index in(o.begin(), o.begin() + axis), picked(o.begin() + axis, o.begin() + axis + count);
      int64_t row = as_integer(indices.elements[ravel(picked, index_strides)]);
      in.push_back(row < 0 ? row + x.type.shape[axis] : row);
      in.insert(in.end(), o.begin() + axis + count, o.end());
      return x.elements[ravel(in, strides)];
    });
  }

  // Each update added to the element its index picks, in long double, the
  // result rounded once to the dtype.
  Status scatter_add(const Node& node, Value& out) {
    const Value &x = operand(node, 0), &indices = operand(node, 1), &updates = operand(node, 2);
    int64_t axis = node.attrs[0].i, count = static_cast<int64_t>(indices.type.shape.size());
    Index strides = ops::row_major_strides(x.type.shape), index_strides = ops::row_major_strides(indices.type.shape);
    out.elements = x.elements;
    for (size_t flat = 0; flat < updates.elements.size(); ++flat) {
      Index u = unravel(static_cast<int64_t>(flat), updates.type.shape);
      Index at(u.begin(), u.begin() + axis), picked(u.begin() + axis, u.begin() + axis + count);
      int64_t row = as_integer(indices.elements[ravel(picked, index_strides)]);
      at.push_back(row < 0 ? row + x.type.shape[axis] : row);
      at.insert(at.end(), u.begin() + axis + count, u.end());
      out.elements[ravel(at, strides)] += updates.elements[flat];
    }
    for (Real& e : out.elements) e = store_real(out.type.dtype, e);
    return {};
  }

  Status pad(const Node& node, Value& out) {
    const Value& x = operand(node, 0);
    const Ints& low = node.attrs[0].ints;
    Index strides = ops::row_major_strides(x.type.shape);
    Real fill = scalar_value(out.type.dtype, node.attrs[2]);
    return gather(out, [&](const Index& o) {
      Index in = o;
      for (size_t d = 0; d < o.size(); ++d) {
        in[d] -= low[d];
        if (in[d] < 0 || in[d] >= x.type.shape[d]) return fill;
      }
      return x.elements[ravel(in, strides)];
    });
  }

  // The window of output (n, c, i, j): each in-bounds position (y, x) with
  // its tap (p, q); returns the window's size clipped to the padded input.
  template <class Fn>
  static int64_t visit_window(const Node& node, const Dims& in, const Dims& kernel, const Index& o, Fn&& fn) {
    bool conv = node.op == OpId::Conv2d;
    const Ints& strides = node.attrs[conv ? 0 : 1].ints;
    const Ints& pads = node.attrs[conv ? 1 : 2].ints;
    Ints dilations = conv ? node.attrs[2].ints : node.op == OpId::MaxPool2d ? node.attrs[3].ints : Ints{1, 1};
    int64_t top = o[2] * strides[0] - pads[0], left = o[3] * strides[1] - pads[1];
    for (int64_t p = 0; p < kernel[0]; ++p)
      for (int64_t q = 0; q < kernel[1]; ++q) {
        int64_t y = top + p * dilations[0], x = left + q * dilations[1];
        if (y >= 0 && y < in[2] && x >= 0 && x < in[3]) fn(p, q, y, x);
      }
    return (std::min(top + kernel[0], in[2] + pads[2]) - top) * (std::min(left + kernel[1], in[3] + pads[3]) - left);
  }

  Status conv2d(const Node& node, Value& out) {
    const Value &x = operand(node, 0), &w = operand(node, 1);
    const Dims &in = x.type.shape, &taps = w.type.shape;
    int64_t group_in = taps[1], group_out = out.type.shape[1] / node.attrs[3].i;
    Index x_strides = ops::row_major_strides(in), w_strides = ops::row_major_strides(taps);
    return gather(out, [&](const Index& o) {
      Real acc = 0;
      for (int64_t c = 0; c < group_in; ++c) {
        int64_t channel = (o[1] / group_out) * group_in + c;
        visit_window(node, in, {taps[2], taps[3]}, o, [&](int64_t p, int64_t q, int64_t y, int64_t xx) {
          acc += x.elements[ravel({o[0], channel, y, xx}, x_strides)] * w.elements[ravel({o[1], c, p, q}, w_strides)];
        });
      }
      return store_real(out.type.dtype, acc);
    });
  }

  Status pool(const Node& node, Value& out) {
    const Value& x = operand(node, 0);
    const Dims& in = x.type.shape;
    Index strides = ops::row_major_strides(in);
    bool max = node.op == OpId::MaxPool2d;
    Dims kernel{node.attrs[0].ints[0], node.attrs[0].ints[1]};
    return gather(out, [&](const Index& o) {
      Real acc = max ? -INFINITY : 0;
      int64_t inside = 0;
      int64_t padded = visit_window(node, in, kernel, o, [&](int64_t, int64_t, int64_t y, int64_t xx) {
        Real v = x.elements[ravel({o[0], o[1], y, xx}, strides)];
        acc = max ? LongDoubleMath::max(acc, v) : acc + v;
        ++inside;
      });
      if (!max) acc /= static_cast<Real>(node.attrs[3].i ? padded : inside);
      return store_real(out.type.dtype, acc);
    });
  }

  Status unary(const Node& node, Value& out) {
    const Value& x = operand(node, 0);
    LongDoubleMath m;
    for (size_t i = 0; i < out.elements.size(); ++i) {
      long long exact = 0;
      if (is_integral(x.type.dtype) &&
          reference::apply_unary_int(static_cast<uint32_t>(node.op), as_integer(x.elements[i]), exact)) {
        out.elements[i] = store_integer(out.type.dtype, exact);
        continue;
      }
      Real result = 0;
      if (!formulas::unary(m, static_cast<uint32_t>(node.op), x.elements[i], result))
        return make_error(fmt::format("precise evaluator: no formula for '{}'", op_name(node.op)));
      out.elements[i] = store_real(out.type.dtype, result);
    }
    return {};
  }

  Status binary(const Node& node, Value& out) {
    const Value &a = operand(node, 0), &b = operand(node, 1);
    uint32_t op = static_cast<uint32_t>(node.op);
    bool integer = is_integral(a.type.dtype) && node.op != OpId::Pow && !ops::is_comparison(op);
    LongDoubleMath m;
    for (size_t i = 0; i < out.elements.size(); ++i) {
      if (integer) {
        long long exact = 0;
        if (!reference::apply_binary_int(op, as_integer(a.elements[i]), as_integer(b.elements[i]), exact))
          return make_error("integer division by zero");
        out.elements[i] = store_integer(out.type.dtype, exact);
        continue;
      }
      Real result = 0;
      if (!formulas::binary(m, op, a.elements[i], b.elements[i], result))
        return make_error(fmt::format("precise evaluator: no formula for '{}'", op_name(node.op)));
      out.elements[i] = store_real(out.type.dtype, result);
    }
    return {};
  }

  // Each output element gathers its reduced positions.
  Status reduce(const Node& node, Value& out) {
    const Value& x = operand(node, 0);
    const Dims& in_shape = x.type.shape;
    std::vector<bool> reduced(in_shape.size(), false);
    for (int64_t axis : node.attrs[0].ints) reduced[axis] = true;
    bool keepdim = node.attrs[1].i != 0;
    Dims reduced_shape;
    for (size_t d = 0; d < in_shape.size(); ++d)
      if (reduced[d]) reduced_shape.push_back(in_shape[d]);
    int64_t count = 1;
    for (int64_t d : reduced_shape) count *= d;
    Index strides = ops::row_major_strides(in_shape);
    bool integer = is_integral(x.type.dtype);
    if (integer && node.op == OpId::ReduceMean && count == 0 && !out.elements.empty())
      return make_error("integer mean over no elements");
    return gather(out, [&](const Index& o) {
      Index in(in_shape.size(), 0);
      for (size_t d = 0, kept = 0; d < in_shape.size(); ++d) {
        if (!reduced[d]) in[d] = o[kept];
        if (!reduced[d] || keepdim) ++kept;
      }
      uint32_t combine = ops::combiner(static_cast<uint32_t>(node.op));
      Real acc = ops::identity_value(ops::identity(combine));
      long long acc_int = ops::identity_integer(ops::identity(combine));
      LongDoubleMath math;
      for (int64_t r = 0; r < count; ++r) {
        Index position = unravel(r, reduced_shape);
        for (size_t d = 0, k = 0; d < in_shape.size(); ++d)
          if (reduced[d]) in[d] = position[k++];
        Real v = x.elements[ravel(in, strides)];
        if (integer)
          reference::apply_binary_int(combine, acc_int, as_integer(v), acc_int);
        else
          formulas::binary(math, combine, acc, v, acc);
      }
      if (integer) return store_integer(out.type.dtype, node.op == OpId::ReduceMean ? acc_int / count : acc_int);
      return store_real(out.type.dtype, node.op == OpId::ReduceMean ? acc / static_cast<Real>(count) : acc);
    });
  }

  Status matmul(const Node& node, Value& out) {
    const Value &a = operand(node, 0), &b = operand(node, 1);
    size_t rank = a.type.shape.size();
    int64_t k = a.type.shape[rank - 1];
    Index a_strides = ops::row_major_strides(a.type.shape), b_strides = ops::row_major_strides(b.type.shape);
    bool integer = is_integral(a.type.dtype);
    return gather(out, [&](const Index& o) {
      Index ia = o, ib = o;
      Real acc = 0;
      long long acc_int = 0;
      for (int64_t p = 0; p < k; ++p) {
        ia[rank - 1] = p;
        ib[rank - 2] = p;
        Real x = a.elements[ravel(ia, a_strides)], y = b.elements[ravel(ib, b_strides)];
        if (integer)  // wraps, as integer add and mul do
          acc_int = static_cast<long long>(static_cast<unsigned long long>(acc_int) +
                                           static_cast<unsigned long long>(as_integer(x)) *
                                               static_cast<unsigned long long>(as_integer(y)));
        else
          acc += x * y;
      }
      return integer ? store_integer(out.type.dtype, acc_int) : store_real(out.type.dtype, acc);
    });
  }

  Status softmax(const Node& node, Value& out) {
    const Value& x = operand(node, 0);
    int64_t axis = node.attrs[0].i, len = x.type.shape[axis];
    Index strides = ops::row_major_strides(x.type.shape);
    return gather(out, [&](const Index& o) {
      Index at = o;
      auto element = [&](int64_t j) {
        at[axis] = j;
        return x.elements[ravel(at, strides)];
      };
      Real peak = -INFINITY, total = 0, self = x.elements[ravel(o, strides)];
      for (int64_t j = 0; j < len; ++j) peak = LongDoubleMath::max(peak, element(j));
      for (int64_t j = 0; j < len; ++j) total += std::exp(element(j) - peak);
      return store_real(out.type.dtype, std::exp(self - peak) / total);
    });
  }

  Status layernorm(const Node& node, Value& out) {
    const Value &x = operand(node, 0), &w = operand(node, 1), &b = operand(node, 2);
    int64_t len = x.type.shape.empty() ? 1 : x.type.shape.back();
    Real eps = node.attrs[0].f;
    return gather(out, [&](const Index& o) {
      int64_t j = o.empty() ? 0 : o.back();
      int64_t flat = ravel(o, ops::row_major_strides(x.type.shape)), row = flat - j;
      Real mean = 0, var = 0;
      for (int64_t t = 0; t < len; ++t) mean += x.elements[row + t];
      mean /= static_cast<Real>(len);
      for (int64_t t = 0; t < len; ++t) var += (x.elements[row + t] - mean) * (x.elements[row + t] - mean);
      Real normalized = (x.elements[flat] - mean) / std::sqrt(var / static_cast<Real>(len) + eps);
      return store_real(out.type.dtype, normalized * w.elements[j] + b.elements[j]);
    });
  }

  const Graph& graph_;
  const std::vector<HostTensor>& inputs_;
  std::vector<Value> values_;
};

}  // namespace

Expected<ReferenceOutputs> evaluate_precisely(const Graph& graph, const std::vector<HostTensor>& inputs) {
  return Evaluator(graph, inputs).run();
}

}  // namespace lazylab
