#include "kernels.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "lazylab/reference_semantics.hpp"

namespace lazylab::reference {
namespace {

size_t element_size(uint32_t dtype) {
  switch (dtype) {
    case LAZYLAB_F32:
    case LAZYLAB_I32: return 4;
    case LAZYLAB_F64:
    case LAZYLAB_I64: return 8;
    default: return 1;
  }
}

bool is_float(uint32_t dtype) { return dtype == LAZYLAB_F32 || dtype == LAZYLAB_F64; }

double load(const Array& a, int64_t i) {
  switch (a.dtype) {
    case LAZYLAB_F32: return static_cast<const float*>(a.data)[i];
    case LAZYLAB_F64: return static_cast<const double*>(a.data)[i];
    case LAZYLAB_I32: return static_cast<const int32_t*>(a.data)[i];
    case LAZYLAB_I64: return static_cast<double>(static_cast<const int64_t*>(a.data)[i]);
    default: return static_cast<const uint8_t*>(a.data)[i];
  }
}

long long load_int(const Array& a, int64_t i) {
  switch (a.dtype) {
    case LAZYLAB_I32: return static_cast<const int32_t*>(a.data)[i];
    case LAZYLAB_I64: return static_cast<const int64_t*>(a.data)[i];
    case LAZYLAB_BOOL: return static_cast<const uint8_t*>(a.data)[i];
    default: return static_cast<long long>(load(a, i));
  }
}

void store(Array& a, int64_t i, double v) {
  switch (a.dtype) {
    case LAZYLAB_F32: static_cast<float*>(a.data)[i] = static_cast<float>(v); break;
    case LAZYLAB_F64: static_cast<double*>(a.data)[i] = v; break;
    case LAZYLAB_I32: static_cast<int32_t*>(a.data)[i] = static_cast<int32_t>(reference::to_integer(v)); break;
    case LAZYLAB_I64: static_cast<int64_t*>(a.data)[i] = reference::to_integer(v); break;
    default: static_cast<uint8_t*>(a.data)[i] = v != 0; break;
  }
}

void store_int(Array& a, int64_t i, long long v) {
  switch (a.dtype) {
    case LAZYLAB_I32: static_cast<int32_t*>(a.data)[i] = static_cast<int32_t>(v); break;
    case LAZYLAB_I64: static_cast<int64_t*>(a.data)[i] = v; break;
    case LAZYLAB_BOOL: static_cast<uint8_t*>(a.data)[i] = v != 0; break;
    default: store(a, i, static_cast<double>(v)); break;
  }
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// Calls fn(flat, index) for every index of `shape` in row-major order.
template <class Fn>
void for_each_index(const std::vector<int64_t>& shape, Fn&& fn) {
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    fn(flat, index);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

void copy_element(const Array& from, int64_t i, Array& to, int64_t j) {
  size_t n = element_size(from.dtype);
  std::memcpy(static_cast<char*>(to.data) + j * n, static_cast<const char*>(from.data) + i * n, n);
}

bool compare_int(uint32_t op, long long a, long long b) {
  switch (op) {
    case LAZYLAB_OP_Eq: return a == b;
    case LAZYLAB_OP_Ne: return a != b;
    case LAZYLAB_OP_Lt: return a < b;
    case LAZYLAB_OP_Le: return a <= b;
    case LAZYLAB_OP_Gt: return a > b;
    default: return a >= b;
  }
}

void unary(uint32_t op, const Array& x, Array& out) {
  for (int64_t i = 0, n = out.size(); i < n; ++i) {
    long long exact = 0;
    if (!is_float(x.dtype) && reference::apply_unary_int(op, load_int(x, i), exact)) {
      store_int(out, i, exact);
      continue;
    }
    double result = 0;
    if (!reference::apply_unary(op, load(x, i), result))
      throw std::runtime_error("interp: op id " + std::to_string(op) + " has no kernel");
    store(out, i, result);
  }
}

void binary(uint32_t op, const Array& a, const Array& b, Array& out) {
  bool integer = !is_float(a.dtype) && op != LAZYLAB_OP_Pow;
  for (int64_t i = 0, n = out.size(); i < n; ++i) {
    if (integer && ops::is_comparison(op)) {
      store_int(out, i, compare_int(op, load_int(a, i), load_int(b, i)));
    } else if (integer) {
      long long result = 0;
      if (!reference::apply_binary_int(op, load_int(a, i), load_int(b, i), result))
        throw std::runtime_error("integer division by zero");
      store_int(out, i, result);
    } else {
      double result = 0;
      if (!reference::apply_binary(op, load(a, i), load(b, i), result))
        throw std::runtime_error("interp: op id " + std::to_string(op) + " has no kernel");
      store(out, i, result);
    }
  }
}

void cast(const Array& x, Array& out) {
  bool exact_int = !is_float(x.dtype) && !is_float(out.dtype);
  for (int64_t i = 0, n = out.size(); i < n; ++i) {
    if (exact_int)
      store_int(out, i, load_int(x, i));
    else
      store(out, i, load(x, i));
  }
}

void select(const Array& predicate, const Array& a, const Array& b, Array& out) {
  for (int64_t i = 0, n = out.size(); i < n; ++i) copy_element(load_int(predicate, i) ? a : b, i, out, i);
}

void broadcast(const Array& x, const std::vector<int64_t>& dims, Array& out) {
  std::vector<int64_t> in_strides = strides_of(x.shape);
  for_each_index(out.shape, [&](int64_t flat, const std::vector<int64_t>& index) {
    int64_t source = 0;
    for (size_t d = 0; d < dims.size(); ++d)
      if (x.shape[d] != 1) source += index[dims[d]] * in_strides[d];
    copy_element(x, source, out, flat);
  });
}

void transpose(const Array& x, const std::vector<int64_t>& perm, Array& out) {
  std::vector<int64_t> in_strides = strides_of(x.shape);
  for_each_index(out.shape, [&](int64_t flat, const std::vector<int64_t>& index) {
    int64_t source = 0;
    for (size_t d = 0; d < perm.size(); ++d) source += index[d] * in_strides[perm[d]];
    copy_element(x, source, out, flat);
  });
}

void slice(const Array& x, const std::vector<Attr>& attrs, Array& out) {
  std::vector<int64_t> in_strides = strides_of(x.shape);
  for_each_index(out.shape, [&](int64_t flat, const std::vector<int64_t>& index) {
    int64_t source = 0;
    for (size_t d = 0; d < index.size(); ++d)
      source += (attrs[0].ints[d] + index[d] * attrs[2].ints[d]) * in_strides[d];
    copy_element(x, source, out, flat);
  });
}

void concat(const std::vector<const Array*>& xs, int64_t axis, Array& out) {
  std::vector<int64_t> out_strides = strides_of(out.shape);
  int64_t offset = 0;
  for (const Array* x : xs) {
    for_each_index(x->shape, [&](int64_t flat, const std::vector<int64_t>& index) {
      int64_t target = 0;
      for (size_t d = 0; d < index.size(); ++d)
        target += (index[d] + (static_cast<int64_t>(d) == axis ? offset : 0)) * out_strides[d];
      copy_element(*x, flat, out, target);
    });
    offset += x->shape[axis];
  }
}

void iota(int64_t axis, Array& out) {
  for_each_index(out.shape,
                 [&](int64_t flat, const std::vector<int64_t>& index) { store_int(out, flat, index[axis]); });
}

// Reductions accumulate in double (floats) or int64 (integers).
void reduce(uint32_t op, const Array& x, const std::vector<int64_t>& axes, Array& out) {
  std::vector<bool> reduced(x.shape.size());
  for (int64_t axis : axes) reduced[axis] = true;
  std::vector<int64_t> kept_strides(x.shape.size(), 0);
  int64_t stride = 1;
  for (size_t d = x.shape.size(); d-- > 0;)
    if (!reduced[d]) {
      kept_strides[d] = stride;
      stride *= x.shape[d];
    }
  int64_t outputs = out.size();
  double init = op == LAZYLAB_OP_ReduceMax ? -INFINITY : op == LAZYLAB_OP_ReduceMin ? INFINITY : 0.0;
  std::vector<double> acc(outputs, init);
  std::vector<long long> acc_int(outputs, op == LAZYLAB_OP_ReduceMax   ? std::numeric_limits<long long>::min()
                                          : op == LAZYLAB_OP_ReduceMin ? std::numeric_limits<long long>::max()
                                                                       : 0);
  bool integer = !is_float(x.dtype);
  for_each_index(x.shape, [&](int64_t flat, const std::vector<int64_t>& index) {
    int64_t target = 0;
    for (size_t d = 0; d < index.size(); ++d) target += index[d] * kept_strides[d];
    if (integer) {
      long long v = load_int(x, flat);
      long long& a = acc_int[target];
      if (op == LAZYLAB_OP_ReduceMax || op == LAZYLAB_OP_ReduceMin)
        a = op == LAZYLAB_OP_ReduceMax ? std::max(a, v) : std::min(a, v);
      else
        reference::apply_binary_int(LAZYLAB_OP_Add, a, v, a);  // wraps
      return;
    }
    double v = load(x, flat);
    double& a = acc[target];
    if (op == LAZYLAB_OP_ReduceMax)
      a = (std::isnan(a) || std::isnan(v)) ? NAN : std::max(a, v);
    else if (op == LAZYLAB_OP_ReduceMin)
      a = (std::isnan(a) || std::isnan(v)) ? NAN : std::min(a, v);
    else
      a += v;
  });
  double count = static_cast<double>(x.size()) / static_cast<double>(outputs ? outputs : 1);
  for (int64_t i = 0; i < outputs; ++i) {
    if (integer)
      store_int(out, i, op == LAZYLAB_OP_ReduceMean ? acc_int[i] / static_cast<long long>(count) : acc_int[i]);
    else
      store(out, i, op == LAZYLAB_OP_ReduceMean ? acc[i] / count : acc[i]);
  }
}

void matmul(const Array& a, const Array& b, Array& out) {
  size_t r = a.shape.size();
  int64_t m = a.shape[r - 2], k = a.shape[r - 1], n = b.shape[r - 1];
  int64_t batches = out.size() / (m * n);
  bool integer = !is_float(a.dtype);
  for (int64_t batch = 0; batch < batches; ++batch)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        long long acc_int = 0;
        for (int64_t p = 0; p < k; ++p) {
          int64_t ia = (batch * m + i) * k + p, ib = (batch * k + p) * n + j;
          if (integer)  // wraps, as integer add and mul do
            acc_int = static_cast<long long>(static_cast<unsigned long long>(acc_int) +
                                             static_cast<unsigned long long>(load_int(a, ia)) *
                                                 static_cast<unsigned long long>(load_int(b, ib)));
          else
            acc += load(a, ia) * load(b, ib);
        }
        int64_t io = (batch * m + i) * n + j;
        if (integer)
          store_int(out, io, acc_int);
        else
          store(out, io, acc);
      }
}

void softmax(const Array& x, int64_t axis, Array& out) {
  int64_t outer = 1, inner = 1, len = x.shape[axis];
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (size_t d = axis + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t j) { return (o * len + j) * inner + in; };
      double peak = -INFINITY, total = 0;
      for (int64_t j = 0; j < len; ++j) peak = std::max(peak, load(x, at(j)));
      for (int64_t j = 0; j < len; ++j) total += std::exp(load(x, at(j)) - peak);
      for (int64_t j = 0; j < len; ++j) store(out, at(j), std::exp(load(x, at(j)) - peak) / total);
    }
}

void layernorm(const Array& x, const Array& w, const Array& b, double eps, Array& out) {
  int64_t len = x.shape.back(), rows = x.size() / (len ? len : 1);
  for (int64_t row = 0; row < rows; ++row) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < len; ++j) mean += load(x, row * len + j);
    mean /= static_cast<double>(len);
    for (int64_t j = 0; j < len; ++j) {
      double d = load(x, row * len + j) - mean;
      var += d * d;
    }
    double inv_std = 1.0 / std::sqrt(var / static_cast<double>(len) + eps);
    for (int64_t j = 0; j < len; ++j)
      store(out, row * len + j, (load(x, row * len + j) - mean) * inv_std * load(w, j) + load(b, j));
  }
}

}  // namespace

void evaluate(uint32_t op, const std::vector<const Array*>& in, const std::vector<Attr>& attrs, Array& out) {
  switch (op) {
    case LAZYLAB_OP_Constant:
      for (int64_t i = 0, n = out.size(); i < n; ++i) store(out, i, attrs[0].f);
      return;
    case LAZYLAB_OP_Iota: return iota(attrs[0].i, out);
    case LAZYLAB_OP_Cast: return cast(*in[0], out);
    case LAZYLAB_OP_Select: return select(*in[0], *in[1], *in[2], out);
    case LAZYLAB_OP_Broadcast: return broadcast(*in[0], attrs[0].ints, out);
    case LAZYLAB_OP_Reshape: std::memcpy(out.data, in[0]->data, out.size() * element_size(out.dtype)); return;
    case LAZYLAB_OP_Transpose: return transpose(*in[0], attrs[0].ints, out);
    case LAZYLAB_OP_Slice: return slice(*in[0], attrs, out);
    case LAZYLAB_OP_Concat: return concat(in, attrs[0].i, out);
    case LAZYLAB_OP_ReduceSum:
    case LAZYLAB_OP_ReduceMax:
    case LAZYLAB_OP_ReduceMin:
    case LAZYLAB_OP_ReduceMean: return reduce(op, *in[0], attrs[0].ints, out);
    case LAZYLAB_OP_Matmul: return matmul(*in[0], *in[1], out);
    case LAZYLAB_OP_Softmax: return softmax(*in[0], attrs[0].i, out);
    case LAZYLAB_OP_Layernorm: return layernorm(*in[0], *in[1], *in[2], attrs[0].f, out);
    default: break;
  }
  if (in.size() == 1) return unary(op, *in[0], out);
  if (in.size() == 2) return binary(op, *in[0], *in[1], out);
  throw std::runtime_error("interp: op id " + std::to_string(op) + " has no kernel");
}

}  // namespace lazylab::reference
