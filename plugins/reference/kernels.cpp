#include "lazylab/reference/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "lazylab/dtype_table.hpp"
#include "lazylab/op_table.hpp"
#include "lazylab/reference_semantics.hpp"

namespace lazylab::reference {
namespace {

size_t element_size(uint32_t dtype) { return dtypes::size(dtype); }

bool is_float(uint32_t dtype) { return dtypes::is_float(dtype); }

// An element as a double (an i64's nearest) and as an exact integer; stored
// from either as the reference semantics convert into the dtype's kind.
double load(const Array& a, int64_t i) {
  return dtypes::visit(a.dtype, [&]<class T>(T) { return static_cast<double>(static_cast<const T*>(a.data)[i]); });
}

long long load_int(const Array& a, int64_t i) {
  if (is_float(a.dtype)) return static_cast<long long>(load(a, i));
  return dtypes::visit(a.dtype, [&]<class T>(T) { return static_cast<long long>(static_cast<const T*>(a.data)[i]); });
}

void store(Array& a, int64_t i, double v) {
  dtypes::visit(a.dtype, [&]<class T>(T) {
    T& element = static_cast<T*>(a.data)[i];
    switch (dtypes::kind(a.dtype)) {
      case dtypes::Kind::Float: element = static_cast<T>(v); break;
      case dtypes::Kind::Int: element = static_cast<T>(reference::to_integer(v)); break;
      case dtypes::Kind::Bool: element = T(v != 0); break;
    }
  });
}

void store_int(Array& a, int64_t i, long long v) {
  if (is_float(a.dtype)) return store(a, i, static_cast<double>(v));
  dtypes::visit(a.dtype, [&]<class T>(T) {
    static_cast<T*>(a.data)[i] = dtypes::kind(a.dtype) == dtypes::Kind::Bool ? T(v != 0) : static_cast<T>(v);
  });
}

// Every element of `out` set to a `scalar` attribute's value: exact in `i`
// for integer and bool dtypes, in `f` for floats (ops.def).
void fill_scalar(Array& out, const Attr& value) {
  for (int64_t i = 0, n = out.size(); i < n; ++i) {
    if (is_float(out.dtype))
      store(out, i, value.f);
    else
      store_int(out, i, value.i);
  }
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
      store_int(out, i, reference::compare_int(op, load_int(a, i), load_int(b, i)));
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
  std::vector<int64_t> in_strides = ops::row_major_strides(x.shape);
  for_each_index(out.shape, [&](int64_t flat, const std::vector<int64_t>& index) {
    int64_t source = 0;
    for (size_t d = 0; d < dims.size(); ++d)
      if (x.shape[d] != 1) source += index[dims[d]] * in_strides[d];
    copy_element(x, source, out, flat);
  });
}

void transpose(const Array& x, const std::vector<int64_t>& perm, Array& out) {
  std::vector<int64_t> in_strides = ops::row_major_strides(x.shape);
  for_each_index(out.shape, [&](int64_t flat, const std::vector<int64_t>& index) {
    int64_t source = 0;
    for (size_t d = 0; d < perm.size(); ++d) source += index[d] * in_strides[perm[d]];
    copy_element(x, source, out, flat);
  });
}

void slice(const Array& x, const std::vector<Attr>& attrs, Array& out) {
  std::vector<int64_t> in_strides = ops::row_major_strides(x.shape);
  for_each_index(out.shape, [&](int64_t flat, const std::vector<int64_t>& index) {
    int64_t source = 0;
    for (size_t d = 0; d < index.size(); ++d)
      source += (attrs[0].ints[d] + index[d] * attrs[2].ints[d]) * in_strides[d];
    copy_element(x, source, out, flat);
  });
}

void concat(const std::vector<const Array*>& xs, int64_t axis, Array& out) {
  std::vector<int64_t> out_strides = ops::row_major_strides(out.shape);
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
  // The op table's combiner and its identity (sums wrap for integers; max
  // and min propagate NaN).
  uint32_t combine = ops::combiner(op);
  std::vector<double> acc(outputs, ops::identity_value(ops::identity(op)));
  std::vector<long long> acc_int(outputs, ops::identity_integer(ops::identity(op)));
  bool integer = !is_float(x.dtype);
  for_each_index(x.shape, [&](int64_t flat, const std::vector<int64_t>& index) {
    int64_t target = 0;
    for (size_t d = 0; d < index.size(); ++d) target += index[d] * kept_strides[d];
    if (integer)
      reference::apply_binary_int(combine, acc_int[target], load_int(x, flat), acc_int[target]);
    else
      reference::apply_binary(combine, acc[target], load(x, flat), acc[target]);
  });
  double count = static_cast<double>(x.size()) / static_cast<double>(outputs ? outputs : 1);
  if (integer && op == LAZYLAB_OP_ReduceMean && count == 0 && outputs > 0)
    throw std::runtime_error("integer mean over no elements");
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
  if (out.size() == 0) return;  // (batches below would divide by zero)
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

// An index along a gathered (or scattered) axis of size n, counting from
// the end when negative.
int64_t gathered_index(long long index, int64_t n, const char* op = "gather") {
  if (index < -n || index >= n)
    throw std::runtime_error(std::string(op) + ": index " + std::to_string(index) +
                             " is out of range for a dimension of " + std::to_string(n));
  return index < 0 ? index + n : index;
}

void gather(const Array& data, const Array& indices, int64_t axis, Array& out) {
  int64_t outer = 1, inner = 1, n = data.shape[axis], count = indices.size();
  for (int64_t d = 0; d < axis; ++d) outer *= data.shape[d];
  for (size_t d = axis + 1; d < data.shape.size(); ++d) inner *= data.shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < count; ++i) {
      int64_t row = gathered_index(load_int(indices, i), n);
      for (int64_t in = 0; in < inner; ++in)
        copy_element(data, (o * n + row) * inner + in, out, (o * count + i) * inner + in);
    }
}

// Every index is checked before anything is written; the sums are taken in
// f64, in index order, and rounded once.
void scatter_add(const Array& data, const Array& indices, const Array& updates, int64_t axis, Array& out) {
  int64_t outer = 1, inner = 1, n = data.shape[axis], count = indices.size();
  for (int64_t d = 0; d < axis; ++d) outer *= data.shape[d];
  for (size_t d = axis + 1; d < data.shape.size(); ++d) inner *= data.shape[d];
  std::vector<int64_t> rows(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) rows[i] = gathered_index(load_int(indices, i), n, "scatter_add");
  std::vector<double> sums(static_cast<size_t>(data.size()));
  for (int64_t i = 0; i < data.size(); ++i) sums[i] = load(data, i);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < count; ++i)
      for (int64_t in = 0; in < inner; ++in)
        sums[(o * n + rows[i]) * inner + in] += load(updates, (o * count + i) * inner + in);
  for (int64_t i = 0; i < out.size(); ++i) store(out, i, sums[i]);
}

void pad(const Array& x, const std::vector<Attr>& attrs, Array& out) {
  fill_scalar(out, attrs[2]);
  std::vector<int64_t> out_strides = ops::row_major_strides(out.shape);
  for_each_index(x.shape, [&](int64_t flat, const std::vector<int64_t>& index) {
    int64_t at = 0;
    for (size_t d = 0; d < index.size(); ++d) at += (index[d] + attrs[0].ints[d]) * out_strides[d];
    copy_element(x, flat, out, at);
  });
}

// Where each output position's window starts, and its steps, along H and W.
struct Window {
  int64_t kernel[2], strides[2], pads[4], dilations[2];
};

Window window_of(uint32_t op, const std::vector<const Array*>& in, const std::vector<Attr>& attrs) {
  Window w{};
  bool conv = op == LAZYLAB_OP_Conv2d;
  const std::vector<int64_t>& strides = attrs[conv ? 0 : 1].ints;
  const std::vector<int64_t>& pads = attrs[conv ? 1 : 2].ints;
  for (int d = 0; d < 2; ++d) {
    w.kernel[d] = conv ? in[1]->shape[2 + d] : attrs[0].ints[d];
    w.strides[d] = strides[d];
    w.dilations[d] = conv ? attrs[2].ints[d] : op == LAZYLAB_OP_MaxPool2d ? attrs[3].ints[d] : 1;
    w.pads[d] = pads[d];
    w.pads[d + 2] = pads[d + 2];
  }
  return w;
}

// Calls fn(y, x) for each position of window (i, j) inside an h x w plane,
// and returns how many positions it has counting padding.
template <class Fn>
int64_t for_each_in_window(const Window& w, int64_t i, int64_t j, int64_t h, int64_t width, Fn&& fn) {
  for (int64_t p = 0; p < w.kernel[0]; ++p) {
    int64_t y = i * w.strides[0] - w.pads[0] + p * w.dilations[0];
    for (int64_t q = 0; q < w.kernel[1]; ++q) {
      int64_t x = j * w.strides[1] - w.pads[1] + q * w.dilations[1];
      if (y >= 0 && y < h && x >= 0 && x < width) fn(p, q, y * width + x);
    }
  }
  // count_include_pad counts the window clipped to the padded input.
  int64_t rows = std::min(i * w.strides[0] - w.pads[0] + w.kernel[0], h + w.pads[2]) - (i * w.strides[0] - w.pads[0]);
  int64_t cols =
      std::min(j * w.strides[1] - w.pads[1] + w.kernel[1], width + w.pads[3]) - (j * w.strides[1] - w.pads[1]);
  return rows * cols;
}

void conv2d(const Array& x, const Array& weight, const Window& w, int64_t groups, Array& out) {
  int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], width = x.shape[3];
  int64_t o = out.shape[1], oh = out.shape[2], ow = out.shape[3], kh = w.kernel[0], kw = w.kernel[1];
  int64_t group_in = c / groups, group_out = o / groups;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t f = 0; f < o; ++f) {
      int64_t first_channel = (f / group_out) * group_in;
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = 0;
          for (int64_t ci = 0; ci < group_in; ++ci) {
            int64_t plane = (b * c + first_channel + ci) * h * width, taps = ((f * group_in + ci) * kh) * kw;
            for_each_in_window(w, i, j, h, width, [&](int64_t p, int64_t q, int64_t at) {
              acc += load(x, plane + at) * load(weight, taps + p * kw + q);
            });
          }
          store(out, ((b * o + f) * oh + i) * ow + j, acc);
        }
    }
}

void pool(uint32_t op, const Array& x, const Window& w, bool count_include_pad, Array& out) {
  int64_t planes = x.shape[0] * x.shape[1], h = x.shape[2], width = x.shape[3], oh = out.shape[2], ow = out.shape[3];
  bool max = op == LAZYLAB_OP_MaxPool2d;
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double acc = max ? -INFINITY : 0;
        int64_t inside = 0;
        int64_t padded = for_each_in_window(w, i, j, h, width, [&](int64_t, int64_t, int64_t at) {
          double v = load(x, plane * h * width + at);
          acc = max ? DoubleMath::max(acc, v) : acc + v;
          ++inside;
        });
        if (!max) acc /= static_cast<double>(count_include_pad ? padded : inside);
        store(out, (plane * oh + i) * ow + j, acc);
      }
}

}  // namespace

void evaluate(uint32_t op, const std::vector<const Array*>& in, const std::vector<Attr>& attrs, Array& out) {
  switch (op) {
    case LAZYLAB_OP_Constant: return fill_scalar(out, attrs[0]);
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
    case LAZYLAB_OP_Gather: return gather(*in[0], *in[1], attrs[0].i, out);
    case LAZYLAB_OP_ScatterAdd: return scatter_add(*in[0], *in[1], *in[2], attrs[0].i, out);
    case LAZYLAB_OP_Pad: return pad(*in[0], attrs, out);
    case LAZYLAB_OP_Conv2d: return conv2d(*in[0], *in[1], window_of(op, in, attrs), attrs[3].i, out);
    case LAZYLAB_OP_MaxPool2d:
    case LAZYLAB_OP_AvgPool2d: return pool(op, *in[0], window_of(op, in, attrs), attrs[3].i != 0, out);
    default: break;
  }
  if (in.size() == 1) return unary(op, *in[0], out);
  if (in.size() == 2) return binary(op, *in[0], *in[1], out);
  throw std::runtime_error("interp: op id " + std::to_string(op) + " has no kernel");
}

}  // namespace lazylab::reference
