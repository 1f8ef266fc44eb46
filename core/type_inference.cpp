// Shape and dtype inference, one rule per TypeRule of the op table.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/op_info.h"

namespace lazylab {
namespace {

using Operands = std::span<const TensorType* const>;

Error type_error(OpId op, const std::string& what) { return make_error(fmt::format("{}: {}", op_name(op), what)); }

Status check_operands_equal(OpId op, Operands operands) {
  for (size_t i = 1; i < operands.size(); ++i)
    if (!(*operands[i] == *operands[0]))
      return type_error(
          op, fmt::format("operand types differ: {} vs {}", to_string(*operands[0]), to_string(*operands[i])));
  return {};
}

Status check_axis(OpId op, int64_t axis, int64_t rank) {
  if (axis < 0 || axis >= rank) return type_error(op, fmt::format("axis {} out of range for rank {}", axis, rank));
  return {};
}

Status check_broadcast(OpId op, const TensorType& in, const TensorType& out, const Ints& dims) {
  if (static_cast<int64_t>(dims.size()) != in.rank())
    return type_error(op, fmt::format("dims has {} entries, operand rank is {}", dims.size(), in.rank()));
  for (size_t i = 0; i < dims.size(); ++i) {
    LAZYLAB_TRY(check_axis(op, dims[i], out.rank()));
    if (i > 0 && dims[i] <= dims[i - 1]) return type_error(op, "dims must be increasing");
    if (in.shape[i] != 1 && in.shape[i] != out.shape[dims[i]])
      return type_error(op, fmt::format("cannot broadcast {} to {}", to_string(in), to_string(out)));
  }
  if (in.dtype != out.dtype) return type_error(op, "dtype must not change");
  return {};
}

Status check_declared(OpId op, Operands operands, const Attrs& attrs, const TensorType& out) {
  switch (op) {
    case OpId::Iota: return check_axis(op, attrs[0].i, out.rank());
    case OpId::Cast:
      if (operands[0]->shape != out.shape) return type_error(op, "cast must keep the shape");
      return {};
    case OpId::Broadcast: return check_broadcast(op, *operands[0], out, attrs[0].ints);
    case OpId::Reshape:
      if (operands[0]->num_elements() != out.num_elements() || operands[0]->dtype != out.dtype)
        return type_error(op, fmt::format("cannot reshape {} to {}", to_string(*operands[0]), to_string(out)));
      return {};
    default: return {};
  }
}

Expected<TensorType> infer_transpose(OpId op, const TensorType& in, const Ints& perm) {
  if (static_cast<int64_t>(perm.size()) != in.rank()) return type_error(op, "perm length must equal the rank");
  TensorType out{in.dtype, {}};
  std::vector<bool> seen(perm.size());
  for (int64_t p : perm) {
    LAZYLAB_TRY(check_axis(op, p, in.rank()));
    if (seen[p]) return type_error(op, "perm is not a permutation");
    seen[p] = true;
    out.shape.push_back(in.shape[p]);
  }
  return out;
}

Expected<TensorType> infer_slice(OpId op, const TensorType& in, const Attrs& attrs) {
  const Ints &start = attrs[0].ints, &limit = attrs[1].ints, &stride = attrs[2].ints;
  auto rank = static_cast<size_t>(in.rank());
  if (start.size() != rank || limit.size() != rank || stride.size() != rank)
    return type_error(op, "start, limit and stride need one entry per dimension");
  TensorType out{in.dtype, {}};
  for (size_t i = 0; i < rank; ++i) {
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > in.shape[i] || stride[i] < 1)
      return type_error(op, fmt::format("bad bounds in dimension {}", i));
    int64_t extent = limit[i] - start[i];
    out.shape.push_back(extent / stride[i] + (extent % stride[i] != 0));
  }
  return out;
}

Expected<TensorType> infer_concat(OpId op, Operands operands, int64_t axis) {
  TensorType out = *operands[0];
  LAZYLAB_TRY(check_axis(op, axis, out.rank()));
  for (size_t i = 1; i < operands.size(); ++i) {
    const TensorType& t = *operands[i];
    bool compatible = t.dtype == out.dtype && t.rank() == out.rank();
    for (int64_t d = 0; compatible && d < out.rank(); ++d) compatible = d == axis || t.shape[d] == out.shape[d];
    if (!compatible)
      return type_error(op, fmt::format("operand {} ({}) does not match {}", i, to_string(t), to_string(*operands[0])));
    if (__builtin_add_overflow(out.shape[axis], t.shape[axis], &out.shape[axis]))
      return type_error(op, fmt::format("dimension {} overflows", axis));
  }
  return out;
}

Expected<TensorType> infer_reduce(OpId op, const TensorType& in, const Attrs& attrs) {
  const Ints& axes = attrs[0].ints;
  bool keepdim = attrs[1].i != 0;
  std::vector<bool> reduced(in.rank());
  for (int64_t axis : axes) {
    LAZYLAB_TRY(check_axis(op, axis, in.rank()));
    if (reduced[axis]) return type_error(op, fmt::format("axis {} repeated", axis));
    reduced[axis] = true;
  }
  TensorType out{in.dtype, {}};
  for (int64_t d = 0; d < in.rank(); ++d) {
    if (!reduced[d])
      out.shape.push_back(in.shape[d]);
    else if (keepdim)
      out.shape.push_back(1);
  }
  return out;
}

Expected<TensorType> infer_matmul(OpId op, const TensorType& a, const TensorType& b) {
  if (a.rank() < 2 || a.rank() != b.rank() || a.dtype != b.dtype)
    return type_error(op,
                      fmt::format("operands {} and {} need equal ranks >= 2 and dtypes", to_string(a), to_string(b)));
  int64_t r = a.rank();
  for (int64_t d = 0; d < r - 2; ++d)
    if (a.shape[d] != b.shape[d]) return type_error(op, "batch dimensions differ");
  if (a.shape[r - 1] != b.shape[r - 2])
    return type_error(op, fmt::format("contracting dimensions differ: {} vs {}", to_string(a), to_string(b)));
  TensorType out = a;
  out.shape[r - 1] = b.shape[r - 1];
  return out;
}

Expected<TensorType> infer_gather(OpId op, const TensorType& data, const TensorType& indices, int64_t axis) {
  LAZYLAB_TRY(check_axis(op, axis, data.rank()));
  if (indices.dtype != DType::I32 && indices.dtype != DType::I64)
    return type_error(op, fmt::format("indices must be i32 or i64, got {}", to_string(indices)));
  TensorType out{data.dtype, {}};
  out.shape.assign(data.shape.begin(), data.shape.begin() + axis);
  out.shape.insert(out.shape.end(), indices.shape.begin(), indices.shape.end());
  out.shape.insert(out.shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  return out;
}

// scatter_add: updates have the shape gather(data, indices, axis) would.
Expected<TensorType> infer_scatter(OpId op, const TensorType& data, const TensorType& indices,
                                   const TensorType& updates, int64_t axis) {
  if (!is_float(data.dtype)) return type_error(op, fmt::format("needs floating-point data, got {}", to_string(data)));
  auto gathered = infer_gather(op, data, indices, axis);
  if (!gathered) return gathered.error();
  if (!(updates == *gathered))
    return type_error(op, fmt::format("updates must be {} (data {}, indices {}, axis {}), got {}", to_string(*gathered),
                                      to_string(data), to_string(indices), axis, to_string(updates)));
  return data;
}

Expected<TensorType> infer_pad(OpId op, const TensorType& in, const Attrs& attrs) {
  const Ints &low = attrs[0].ints, &high = attrs[1].ints;
  if (static_cast<int64_t>(low.size()) != in.rank() || static_cast<int64_t>(high.size()) != in.rank())
    return type_error(op, "low and high need one entry per dimension");
  TensorType out = in;
  for (int64_t d = 0; d < in.rank(); ++d) {
    if (low[d] < 0 || high[d] < 0) return type_error(op, fmt::format("negative padding in dimension {}", d));
    if (__builtin_add_overflow(out.shape[d], low[d], &out.shape[d]) ||
        __builtin_add_overflow(out.shape[d], high[d], &out.shape[d]))
      return type_error(op, fmt::format("dimension {} overflows", d));
  }
  return out;
}

// Bounding each window attribute keeps the size arithmetic below in int64.
constexpr int64_t kMaxWindowAttr = int64_t{1} << 31;

// The attributes every window op shares, wherever its schema puts them.
struct WindowShape {
  int64_t kernel[2], strides[2], pads[4], dilations[2];
};

// An attribute of a window op where ops.def's schema places it, or null
// where the op has none of that name.
const AttrValue* window_attr(OpId op, const Attrs& attrs, std::string_view name) {
  int index = ops::attribute_index(static_cast<uint32_t>(op), name);
  return index < 0 ? nullptr : &attrs[index];
}

Expected<WindowShape> window_of(OpId op, Operands operands, const Attrs& attrs) {
  WindowShape w{};
  // A convolution's kernel is its weight's shape; avg_pool2d dilates not.
  auto ints = [&](std::string_view name) {
    const AttrValue* attr = window_attr(op, attrs, name);
    return attr ? &attr->ints : nullptr;
  };
  static const Ints kOnes{1, 1};
  const Ints *kernel = ints("kernel"), *strides = ints("strides"), *pads = ints("pads");
  const Ints* dilations = ints("dilations") ? ints("dilations") : &kOnes;
  if ((kernel && kernel->size() != 2) || strides->size() != 2 || pads->size() != 4 || dilations->size() != 2)
    return type_error(op, "kernel, strides and dilations need 2 entries, pads 4 (top, left, bottom, right)");
  for (int d = 0; d < 2; ++d) {
    w.kernel[d] = kernel ? (*kernel)[d] : operands[1]->shape[2 + d];
    w.strides[d] = (*strides)[d];
    w.dilations[d] = (*dilations)[d];
    for (int64_t v : {w.kernel[d], w.strides[d], w.dilations[d]})
      if (v < 1 || v > kMaxWindowAttr)
        return type_error(op, "kernel sizes, strides and dilations must be in [1, 2^31]");
  }
  for (int d = 0; d < 4; ++d) {
    w.pads[d] = (*pads)[d];
    if (w.pads[d] < 0 || w.pads[d] > kMaxWindowAttr) return type_error(op, "pads must be in [0, 2^31]");
  }
  return w;
}

Expected<TensorType> infer_window(OpId op, Operands operands, const Attrs& attrs) {
  const TensorType& x = *operands[0];
  if (x.rank() != 4) return type_error(op, fmt::format("input must be [N, C, H, W], got {}", to_string(x)));
  TensorType out = x;
  if (op == OpId::Conv2d) {
    const TensorType& w = *operands[1];
    int64_t groups = window_attr(op, attrs, "groups")->i;
    if (w.rank() != 4 || w.dtype != x.dtype)
      return type_error(
          op, fmt::format("weight must be [O, C / groups, KH, KW] of {}, got {}", dtype_name(x.dtype), to_string(w)));
    if (groups < 1 || x.shape[1] % groups != 0 || w.shape[0] % groups != 0 || w.shape[1] * groups != x.shape[1])
      return type_error(
          op, fmt::format("{} groups do not split input {} and weight {}", groups, to_string(x), to_string(w)));
    out.shape[1] = w.shape[0];
  }
  auto window = window_of(op, operands, attrs);
  if (!window) return window.error();
  for (int d = 0; d < 2; ++d) {
    int64_t span = window->dilations[d] * (window->kernel[d] - 1) + 1;
    int64_t padded = x.shape[2 + d] + window->pads[d] + window->pads[d + 2];
    if (span > padded)
      return type_error(op, fmt::format("window of {} does not fit the padded input {}", span, padded));
    out.shape[2 + d] = (padded - span) / window->strides[d] + 1;
  }
  return out;
}

Expected<TensorType> infer_same(OpId op, Operands operands, const Attrs& attrs) {
  if (op == OpId::Layernorm) {
    const TensorType& x = *operands[0];
    TensorType param{x.dtype, {x.rank() > 0 ? x.shape.back() : 1}};
    if (x.rank() < 1 || !(*operands[1] == param) || !(*operands[2] == param))
      return type_error(op, fmt::format("weight and bias must be {}", to_string(param)));
    return x;
  }
  LAZYLAB_TRY(check_operands_equal(op, operands));
  if (op == OpId::Softmax) LAZYLAB_TRY(check_axis(op, attrs[0].i, operands[0]->rank()));
  return *operands[0];
}

Expected<TensorType> infer_by_rule(OpId op, Operands operands, const Attrs& attrs, const TensorType* declared) {
  switch (op_info(op).type_rule) {
    case TypeRule::Declared:
      if (!declared) return type_error(op, "needs a declared result type");
      LAZYLAB_TRY(check_declared(op, operands, attrs, *declared));
      return *declared;
    case TypeRule::Same: return infer_same(op, operands, attrs);
    case TypeRule::Compare:
      LAZYLAB_TRY(check_operands_equal(op, operands));
      return TensorType{DType::Bool, operands[0]->shape};
    case TypeRule::Select:
      if (operands[0]->dtype != DType::Bool || operands[0]->shape != operands[1]->shape)
        return type_error(op, "predicate must be bool with the shape of the values");
      LAZYLAB_TRY(check_operands_equal(op, operands.subspan(1)));
      return *operands[1];
    case TypeRule::Transpose: return infer_transpose(op, *operands[0], attrs[0].ints);
    case TypeRule::Slice: return infer_slice(op, *operands[0], attrs);
    case TypeRule::Concat: return infer_concat(op, operands, attrs[0].i);
    case TypeRule::Reduce: return infer_reduce(op, *operands[0], attrs);
    case TypeRule::Matmul: return infer_matmul(op, *operands[0], *operands[1]);
    case TypeRule::Gather: return infer_gather(op, *operands[0], *operands[1], attrs[0].i);
    case TypeRule::Pad: return infer_pad(op, *operands[0], attrs);
    case TypeRule::Scatter: return infer_scatter(op, *operands[0], *operands[1], *operands[2], attrs[0].i);
    case TypeRule::Window: return infer_window(op, operands, attrs);
  }
  return type_error(op, "unknown type rule");
}

}  // namespace

Expected<TensorType> infer_type(OpId op, Operands operands, const Attrs& attrs, const TensorType* declared) {
  const OpInfo& info = op_info(op);
  bool arity_ok = info.arity < 0 ? !operands.empty() : static_cast<int>(operands.size()) == info.arity;
  if (!arity_ok)
    return type_error(
        op, fmt::format("expects {} operands, got {}",
                        info.arity < 0 ? std::string("at least 1") : std::to_string(info.arity), operands.size()));
  if (ops::is_float_only(static_cast<uint32_t>(op)) && !is_float(operands[0]->dtype))
    return type_error(op, fmt::format("needs a floating-point operand, got {}", to_string(*operands[0])));
  // Every type is checked once, here: declared ones before the rules read
  // their sizes, inferred ones (a concat can outgrow its operands) after.
  if (declared)
    if (std::string problem = size_problem(*declared); !problem.empty()) return type_error(op, problem);
  auto result = infer_by_rule(op, operands, attrs, declared);
  // These rules give an operand's shape, which was checked when it was made.
  TypeRule rule = info.type_rule;
  bool keeps_operand_shape = rule == TypeRule::Same || rule == TypeRule::Compare || rule == TypeRule::Select;
  if (result && !declared && !keeps_operand_shape)
    if (std::string problem = size_problem(*result); !problem.empty()) return type_error(op, problem);
  if (result && declared && !(*result == *declared))
    return type_error(op,
                      fmt::format("declared type {} but operands give {}", to_string(*declared), to_string(*result)));
  return result;
}

}  // namespace lazylab
