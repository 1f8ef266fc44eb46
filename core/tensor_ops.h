// Ops on lazy tensors. Binary ops follow NumPy broadcasting (inserting
// explicit broadcast nodes); dtypes must match (no implicit promotion).
// Axes may be negative (counted from the end). Empty `axes` reduces all.
#pragma once

#include <initializer_list>
#include <span>
#include <vector>

#include "tensor.h"

namespace lazylab {

// Elementwise. These take their operands by value: a pending operand handed
// over (a temporary, or std::move'd) whose handle is its tensor's only one
// gives that tensor to the result instead of a new one being made, so
// `relu((x + 1) * 0.99)` makes one tensor where it would make three.
Tensor neg(Tensor x);
Tensor abs(Tensor x);
Tensor exp(Tensor x);
Tensor log(Tensor x);
Tensor sqrt(Tensor x);
Tensor rsqrt(Tensor x);
Tensor tanh(Tensor x);
Tensor erf(Tensor x);
Tensor sigmoid(Tensor x);
Tensor relu(Tensor x);
Tensor cast(const Tensor& x, DType dtype);
Tensor add(Tensor a, Tensor b);
Tensor sub(Tensor a, Tensor b);
Tensor mul(Tensor a, Tensor b);
Tensor div(Tensor a, Tensor b);
Tensor pow(Tensor a, Tensor b);
Tensor maximum(Tensor a, Tensor b);
Tensor minimum(Tensor a, Tensor b);
Tensor eq(Tensor a, Tensor b);
Tensor ne(Tensor a, Tensor b);
Tensor lt(Tensor a, Tensor b);
Tensor le(Tensor a, Tensor b);
Tensor gt(Tensor a, Tensor b);
Tensor ge(Tensor a, Tensor b);
Tensor where(const Tensor& predicate, const Tensor& a, const Tensor& b);

// Layout.
Tensor broadcast_to(const Tensor& x, const Dims& shape);
Tensor reshape(const Tensor& x, const Dims& shape);
Tensor permute(const Tensor& x, const std::vector<int64_t>& perm);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor slice(const Tensor& x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
             const std::vector<int64_t>& stride = {});
// Elements [start, limit) of one axis.
Tensor narrow(const Tensor& x, int64_t axis, int64_t start, int64_t limit);
Tensor concat(const std::vector<Tensor>& xs, int64_t axis);
// Slices of `data` along `axis` picked by integer `indices` (an embedding
// lookup along axis 0).
Tensor gather(const Tensor& data, const Tensor& indices, int64_t axis = 0);
// data with each slice of `updates` added to the slice of `data` along `axis`
// that `indices` names (gather's adjoint: an embedding's gradient).
Tensor scatter_add(const Tensor& data, const Tensor& indices, const Tensor& updates, int64_t axis = 0);
// `low[d]` and `high[d]` elements of `value` around each dim d.
Tensor pad(const Tensor& x, const std::vector<int64_t>& low, const std::vector<int64_t>& high, double value = 0);

// Windows over [N, C, H, W] (ops.def gives the exact semantics); pads are
// {top, left, bottom, right}.
struct Window2d {
  std::vector<int64_t> strides{1, 1};
  std::vector<int64_t> pads{0, 0, 0, 0};
  std::vector<int64_t> dilations{1, 1};
};
Tensor conv2d(const Tensor& x, const Tensor& weight, const Window2d& window = {}, int64_t groups = 1);
Tensor max_pool2d(const Tensor& x, const std::vector<int64_t>& kernel, const Window2d& window = {});
Tensor avg_pool2d(const Tensor& x, const std::vector<int64_t>& kernel, const Window2d& window = {},
                  bool count_include_pad = false);

// Reductions.
Tensor sum(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor min(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdim = false);

// Batched matmul over leading dims; a lower-rank operand is broadcast over
// the other's batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);

// Composites (the decompose pass turns them into primitives).
Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
Tensor gelu(Tensor x);

// A splat of `value` with x's dtype and shape.
Tensor full_like(const Tensor& x, double value);

// The gradient of `loss` (a float scalar pending on its context) with
// respect to each of `wrt`, pending on the same trace: the loss's graph
// decomposed and differentiated (core/autodiff.h, reverse mode), recorded
// again with the gradients as roots. `wrt` are inputs of the trace
// (from_vector, from_buffer, a result after sync); one the loss does not
// read gets zeros; a tensor computed in the trace is an error.
Expected<std::vector<Tensor>> grad(const Tensor& loss, std::span<const Tensor> wrt);

// grad(), with the loss as the joint graph computes it: keep that one and
// drop `loss`, and the step computes the forward once (JAX's
// value_and_grad), whatever the pipeline.
struct ValueAndGrad {
  Tensor value;
  std::vector<Tensor> gradients;
};
Expected<ValueAndGrad> value_and_grad(const Tensor& loss, std::span<const Tensor> wrt);

Tensor operator+(Tensor a, Tensor b);
Tensor operator-(Tensor a, Tensor b);
Tensor operator*(Tensor a, Tensor b);
Tensor operator/(Tensor a, Tensor b);
Tensor operator-(Tensor x);
Tensor operator+(Tensor a, double b);
Tensor operator-(Tensor a, double b);
Tensor operator*(Tensor a, double b);
Tensor operator/(Tensor a, double b);
Tensor operator+(double a, Tensor b);
Tensor operator-(double a, Tensor b);
Tensor operator*(double a, Tensor b);
Tensor operator/(double a, Tensor b);
// Rebinds: the IR stays functional.
inline Tensor& operator+=(Tensor& a, const Tensor& b) { return a = std::move(a) + b; }
inline Tensor& operator-=(Tensor& a, const Tensor& b) { return a = std::move(a) - b; }
inline Tensor& operator*=(Tensor& a, const Tensor& b) { return a = std::move(a) * b; }
inline Tensor& operator/=(Tensor& a, const Tensor& b) { return a = std::move(a) / b; }

// NumPy's broadcast of two shapes, or an error naming both.
Expected<Dims> broadcast_shapes(const Dims& a, const Dims& b);

}  // namespace lazylab
