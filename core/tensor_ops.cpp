#include "core/tensor_ops.h"

#include <fmt/format.h>

#include <algorithm>

namespace lazylab {
namespace {

Tensor with_scalar(OpId op, Tensor& x, double value, bool scalar_first) {
  if (!x.ok()) return x;
  Tensor* spares[] = {&x};
  return x.context().record_with_scalar(op, x, value, scalar_first, spares);
}

Tensor first_error(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    if (!t->ok()) return *t;
  return {};
}

Tensor unary(OpId op, Tensor& x) {
  if (!x.ok()) return x;
  const Tensor* operands[] = {&x};
  Tensor* spares[] = {&x};
  return x.context().record(op, operands, no_attrs(), nullptr, spares);
}

Tensor binary(OpId op, Tensor& a, Tensor& b) {
  if (!a.ok() || !b.ok()) return first_error({&a, &b});
  if (a.shape() == b.shape()) {  // the common case: no broadcast nodes, no copies
    const Tensor* operands[] = {&a, &b};
    Tensor* spares[] = {&a, &b};
    return a.context().record(op, operands, no_attrs(), nullptr, spares);
  }
  auto shape = broadcast_shapes(a.shape(), b.shape());
  if (!shape) return a.context().error_tensor(make_error(fmt::format("{}: {}", op_name(op), shape.error().message)));
  Tensor operands[] = {broadcast_to(a, *shape), broadcast_to(b, *shape)};
  return a.context().record(op, operands);
}

Expected<int64_t> normalize_axis(int64_t axis, int64_t rank) {
  int64_t normalized = axis < 0 ? axis + rank : axis;
  if (normalized < 0 || normalized >= rank)
    return make_error(fmt::format("axis {} out of range for rank {}", axis, rank));
  return normalized;
}

Tensor reduce(OpId op, const Tensor& x, std::vector<int64_t> axes, bool keepdim) {
  if (!x.ok()) return x;
  Attrs attrs;
  if (axes.empty())
    for (int64_t d = 0; d < x.rank(); ++d) attrs[0].ints.push_back(d);
  for (int64_t axis : axes) {
    auto normalized = normalize_axis(axis, x.rank());
    if (!normalized)
      return x.context().error_tensor(make_error(fmt::format("{}: {}", op_name(op), normalized.error().message)));
    attrs[0].ints.push_back(*normalized);
  }
  std::sort(attrs[0].ints.begin(), attrs[0].ints.end());
  attrs[1].i = keepdim;
  return x.context().record(op, std::span(&x, 1), attrs);
}

Ints to_ints(const std::vector<int64_t>& values) { return Ints(values.begin(), values.end()); }

// Broadcasts the lower-rank matmul operand over the other's batch dims.
Tensor match_batch(const Tensor& x, const Tensor& other) {
  if (x.rank() >= other.rank() || x.rank() < 2) return x;
  Dims shape(other.shape().begin(), other.shape().end() - 2);
  shape.insert(shape.end(), x.shape().end() - 2, x.shape().end());
  return broadcast_to(x, shape);
}

}  // namespace

Expected<Dims> broadcast_shapes(const Dims& a, const Dims& b) {
  size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return make_error(fmt::format("shapes {} and {} do not broadcast", to_string(a), to_string(b)));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor neg(Tensor x) { return unary(OpId::Neg, x); }
Tensor abs(Tensor x) { return unary(OpId::Abs, x); }
Tensor exp(Tensor x) { return unary(OpId::Exp, x); }
Tensor log(Tensor x) { return unary(OpId::Log, x); }
Tensor sqrt(Tensor x) { return unary(OpId::Sqrt, x); }
Tensor rsqrt(Tensor x) { return unary(OpId::Rsqrt, x); }
Tensor tanh(Tensor x) { return unary(OpId::Tanh, x); }
Tensor erf(Tensor x) { return unary(OpId::Erf, x); }
Tensor sigmoid(Tensor x) { return unary(OpId::Sigmoid, x); }
Tensor relu(Tensor x) { return unary(OpId::Relu, x); }
Tensor gelu(Tensor x) { return unary(OpId::Gelu, x); }

Tensor cast(const Tensor& x, DType dtype) {
  if (!x.ok()) return x;
  TensorType type{dtype, x.shape()};
  return x.context().record(OpId::Cast, std::span(&x, 1), no_attrs(), &type);
}

Tensor add(Tensor a, Tensor b) { return binary(OpId::Add, a, b); }
Tensor sub(Tensor a, Tensor b) { return binary(OpId::Sub, a, b); }
Tensor mul(Tensor a, Tensor b) { return binary(OpId::Mul, a, b); }
Tensor div(Tensor a, Tensor b) { return binary(OpId::Div, a, b); }
Tensor pow(Tensor a, Tensor b) { return binary(OpId::Pow, a, b); }
Tensor maximum(Tensor a, Tensor b) { return binary(OpId::Max, a, b); }
Tensor minimum(Tensor a, Tensor b) { return binary(OpId::Min, a, b); }
Tensor eq(Tensor a, Tensor b) { return binary(OpId::Eq, a, b); }
Tensor ne(Tensor a, Tensor b) { return binary(OpId::Ne, a, b); }
Tensor lt(Tensor a, Tensor b) { return binary(OpId::Lt, a, b); }
Tensor le(Tensor a, Tensor b) { return binary(OpId::Le, a, b); }
Tensor gt(Tensor a, Tensor b) { return binary(OpId::Gt, a, b); }
Tensor ge(Tensor a, Tensor b) { return binary(OpId::Ge, a, b); }

Tensor where(const Tensor& predicate, const Tensor& a, const Tensor& b) {
  if (!predicate.ok() || !a.ok() || !b.ok()) return first_error({&predicate, &a, &b});
  auto shape = broadcast_shapes(a.shape(), b.shape());
  if (shape) shape = broadcast_shapes(predicate.shape(), *shape);
  if (!shape) return a.context().error_tensor(make_error("select: " + shape.error().message));
  Tensor operands[] = {broadcast_to(predicate, *shape), broadcast_to(a, *shape), broadcast_to(b, *shape)};
  return a.context().record(OpId::Select, operands);
}

Tensor broadcast_to(const Tensor& x, const Dims& shape) {
  if (!x.ok() || x.shape() == shape) return x;
  if (x.shape().size() > shape.size())
    return x.context().error_tensor(
        make_error(fmt::format("broadcast: cannot broadcast {} to {}", to_string(x.type()), to_string(shape))));
  Attrs attrs;
  int64_t offset = static_cast<int64_t>(shape.size() - x.shape().size());
  for (int64_t d = 0; d < x.rank(); ++d) attrs[0].ints.push_back(d + offset);
  TensorType type{x.dtype(), shape};
  return x.context().record(OpId::Broadcast, std::span(&x, 1), attrs, &type);
}

Tensor reshape(const Tensor& x, const Dims& shape) {
  if (!x.ok() || x.shape() == shape) return x;
  TensorType type{x.dtype(), shape};
  return x.context().record(OpId::Reshape, std::span(&x, 1), no_attrs(), &type);
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& perm) {
  if (!x.ok()) return x;
  Attrs attrs;
  for (int64_t p : perm) {
    auto axis = normalize_axis(p, x.rank());
    if (!axis) return x.context().error_tensor(make_error("transpose: " + axis.error().message));
    attrs[0].ints.push_back(*axis);
  }
  return x.context().record(OpId::Transpose, std::span(&x, 1), attrs);
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  if (!x.ok()) return x;
  auto a = normalize_axis(dim0, x.rank()), b = normalize_axis(dim1, x.rank());
  if (!a || !b) return x.context().error_tensor(make_error("transpose: " + (a ? b : a).error().message));
  std::vector<int64_t> perm(x.rank());
  for (int64_t d = 0; d < x.rank(); ++d) perm[d] = d;
  std::swap(perm[*a], perm[*b]);
  return permute(x, perm);
}

Tensor slice(const Tensor& x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
             const std::vector<int64_t>& stride) {
  if (!x.ok()) return x;
  Attrs attrs;
  attrs[0].ints = to_ints(start);
  attrs[1].ints = to_ints(limit);
  attrs[2].ints = stride.empty() ? Ints(start.size(), 1) : to_ints(stride);
  return x.context().record(OpId::Slice, std::span(&x, 1), attrs);
}

Tensor narrow(const Tensor& x, int64_t axis, int64_t start, int64_t limit) {
  if (!x.ok()) return x;
  auto normalized = normalize_axis(axis, x.rank());
  if (!normalized) return x.context().error_tensor(make_error("slice: " + normalized.error().message));
  std::vector<int64_t> starts(x.rank(), 0), limits(x.shape().begin(), x.shape().end());
  starts[*normalized] = start;
  limits[*normalized] = limit;
  return slice(x, starts, limits);
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty() || !xs[0].impl()) return {};
  for (const Tensor& x : xs)
    if (!x.ok()) return x;
  auto normalized = normalize_axis(axis, xs[0].rank());
  if (!normalized) return xs[0].context().error_tensor(make_error("concat: " + normalized.error().message));
  Attrs attrs;
  attrs[0].i = *normalized;
  return xs[0].context().record(OpId::Concat, xs, attrs);
}

Tensor gather(const Tensor& data, const Tensor& indices, int64_t axis) {
  if (!data.ok() || !indices.ok()) return first_error({&data, &indices});
  auto normalized = normalize_axis(axis, data.rank());
  if (!normalized) return data.context().error_tensor(make_error("gather: " + normalized.error().message));
  Attrs attrs;
  attrs[0].i = *normalized;
  Tensor operands[] = {data, indices};
  return data.context().record(OpId::Gather, operands, attrs);
}

Tensor scatter_add(const Tensor& data, const Tensor& indices, const Tensor& updates, int64_t axis) {
  if (!data.ok() || !indices.ok() || !updates.ok()) return first_error({&data, &indices, &updates});
  auto normalized = normalize_axis(axis, data.rank());
  if (!normalized) return data.context().error_tensor(make_error("scatter_add: " + normalized.error().message));
  Attrs attrs;
  attrs[0].i = *normalized;
  Tensor operands[] = {data, indices, updates};
  return data.context().record(OpId::ScatterAdd, operands, attrs);
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& low, const std::vector<int64_t>& high, double value) {
  if (!x.ok()) return x;
  Attrs attrs;
  attrs[0].ints = low;
  attrs[1].ints = high;
  attrs[2] = scalar_attr(x.dtype(), value);
  return x.context().record(OpId::Pad, std::span(&x, 1), attrs);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Window2d& window, int64_t groups) {
  if (!x.ok() || !weight.ok()) return first_error({&x, &weight});
  Attrs attrs;
  attrs[0].ints = window.strides;
  attrs[1].ints = window.pads;
  attrs[2].ints = window.dilations;
  attrs[3].i = groups;
  Tensor operands[] = {x, weight};
  return x.context().record(OpId::Conv2d, operands, attrs);
}

Tensor max_pool2d(const Tensor& x, const std::vector<int64_t>& kernel, const Window2d& window) {
  if (!x.ok()) return x;
  Attrs attrs;
  attrs[0].ints = kernel;
  attrs[1].ints = window.strides;
  attrs[2].ints = window.pads;
  attrs[3].ints = window.dilations;
  return x.context().record(OpId::MaxPool2d, std::span(&x, 1), attrs);
}

Tensor avg_pool2d(const Tensor& x, const std::vector<int64_t>& kernel, const Window2d& window, bool count_include_pad) {
  if (!x.ok()) return x;
  Attrs attrs;
  attrs[0].ints = kernel;
  attrs[1].ints = window.strides;
  attrs[2].ints = window.pads;
  attrs[3].i = count_include_pad;
  return x.context().record(OpId::AvgPool2d, std::span(&x, 1), attrs);
}

Tensor sum(const Tensor& x, std::vector<int64_t> axes, bool keepdim) {
  return reduce(OpId::ReduceSum, x, std::move(axes), keepdim);
}
Tensor max(const Tensor& x, std::vector<int64_t> axes, bool keepdim) {
  return reduce(OpId::ReduceMax, x, std::move(axes), keepdim);
}
Tensor min(const Tensor& x, std::vector<int64_t> axes, bool keepdim) {
  return reduce(OpId::ReduceMin, x, std::move(axes), keepdim);
}
Tensor mean(const Tensor& x, std::vector<int64_t> axes, bool keepdim) {
  return reduce(OpId::ReduceMean, x, std::move(axes), keepdim);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (!a.ok() || !b.ok()) return first_error({&a, &b});
  Tensor operands[] = {match_batch(a, b), match_batch(b, a)};
  return a.context().record(OpId::Matmul, operands);
}

Tensor softmax(const Tensor& x, int64_t axis) {
  if (!x.ok()) return x;
  auto normalized = normalize_axis(axis, x.rank());
  if (!normalized) return x.context().error_tensor(make_error("softmax: " + normalized.error().message));
  Attrs attrs;
  attrs[0].i = *normalized;
  return x.context().record(OpId::Softmax, std::span(&x, 1), attrs);
}

Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  if (!x.ok() || !weight.ok() || !bias.ok()) return first_error({&x, &weight, &bias});
  Attrs attrs;
  attrs[0].f = eps;
  Tensor operands[] = {x, weight, bias};
  return x.context().record(OpId::Layernorm, operands, attrs);
}

Tensor full_like(const Tensor& x, double value) {
  if (!x.ok()) return x;
  return x.context().full(value, x.type());
}

Tensor operator+(Tensor a, Tensor b) { return add(std::move(a), std::move(b)); }
Tensor operator-(Tensor a, Tensor b) { return sub(std::move(a), std::move(b)); }
Tensor operator*(Tensor a, Tensor b) { return mul(std::move(a), std::move(b)); }
Tensor operator/(Tensor a, Tensor b) { return div(std::move(a), std::move(b)); }
Tensor operator-(Tensor x) { return neg(std::move(x)); }
Tensor operator+(Tensor a, double b) { return with_scalar(OpId::Add, a, b, false); }
Tensor operator-(Tensor a, double b) { return with_scalar(OpId::Sub, a, b, false); }
Tensor operator*(Tensor a, double b) { return with_scalar(OpId::Mul, a, b, false); }
Tensor operator/(Tensor a, double b) { return with_scalar(OpId::Div, a, b, false); }
Tensor operator+(double a, Tensor b) { return with_scalar(OpId::Add, b, a, true); }
Tensor operator-(double a, Tensor b) { return with_scalar(OpId::Sub, b, a, true); }
Tensor operator*(double a, Tensor b) { return with_scalar(OpId::Mul, b, a, true); }
Tensor operator/(double a, Tensor b) { return with_scalar(OpId::Div, b, a, true); }

}  // namespace lazylab
