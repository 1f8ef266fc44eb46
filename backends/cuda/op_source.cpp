#include "op_source.h"

#include <fmt/format.h>

#include <algorithm>

#include "lazylab/dtype_table.hpp"
#include "lazylab/op_formulas.hpp"
#include "lazylab/op_table.hpp"
#include "lazylab/row_space.hpp"
#include "lazylab/window_shape.hpp"
#include "row_space_source.h"
#include "source_text.h"

namespace lazylab::cuda {

namespace {

// `shape` and `strides` with dims of one dropped and neighbours merged where
// the source runs on through them (a dim's stride its inner neighbour's
// extent times that one's stride).
void merge_contiguous_dims(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                           std::vector<int64_t>& dims, std::vector<int64_t>& steps) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!dims.empty() && steps.back() == strides[d] * shape[d]) {
      dims.back() *= shape[d];
      steps.back() = strides[d];
    } else {
      dims.push_back(shape[d]);
      steps.push_back(strides[d]);
    }
  }
}

// A copy whose innermost dim is not the source's contiguous one (`along`
// is: a transpose that moves the innermost dim, k turned over as [b, h, d,
// t]): 32 x 32 tiles through shared memory, read along the source's
// contiguous dim and written along the result's, a block a tile and the
// other dims a batch. An element a thread read 4 bytes of each 32-byte
// sector it fetched: 0.096 ms for [16, 1024, 12, 64] -> [16, 12, 64, 1024]
// in f32 on an H200.
std::string tiled_transpose(const std::string& name, uint32_t in, uint32_t out, uint32_t dtype,
                            const std::vector<int64_t>& dims, const std::vector<int64_t>& steps, int64_t offset,
                            size_t along, Launch& launch) {
  const size_t last = dims.size() - 1;
  std::vector<int64_t> out_strides(dims.size(), 1);
  for (size_t d = last; d-- > 0;) out_strides[d] = out_strides[d + 1] * dims[d + 1];
  const int64_t tiles_along = (dims[along] + 31) / 32, tiles_last = (dims[last] + 31) / 32;
  int64_t batches = 1;
  std::string batch;
  for (size_t d = last; d-- > 0;) {
    if (d == along) continue;
    batches *= dims[d];
    batch += fmt::format("    {{ const long long c = b % {0}LL; b /= {0}LL; from += c * {1}LL; to += c * {2}LL; }}\n",
                         dims[d], steps[d], out_strides[d]);
  }
  launch = Launch{name, {in, out}, batches * tiles_along * tiles_last};
  launch.block_per_item = true;
  return fmt::format(
      "extern \"C\" __global__ void {0}(const {1}* __restrict__ p{2}, {1}* __restrict__ p{3}, long long work) {{\n"
      "  __shared__ {1} tile[32][33];\n"
      "  const int x = threadIdx.x % 32, y = threadIdx.x / 32;\n"
      "  for (long long item = blockIdx.x; item < work; item += gridDim.x) {{\n"
      "    long long b = item / {4}LL, from = {5}LL, to = 0;\n"
      "    const long long j0 = item / {6}LL % {7}LL * 32, l0 = item % {6}LL * 32;\n{8}"
      "    for (int r = y; r < 32; r += 8)\n"
      "      if (j0 + x < {9}LL && l0 + r < {10}LL) tile[r][x] = p{2}[from + j0 + x + (l0 + r) * {11}LL];\n"
      "    __syncthreads();\n"
      "    for (int r = y; r < 32; r += 8)\n"
      "      if (j0 + r < {9}LL && l0 + x < {10}LL) p{3}[to + (j0 + r) * {12}LL + l0 + x] = tile[x][r];\n"
      "    __syncthreads();\n"
      "  }}\n}}\n",
      name, storage_type(dtype), in, out, tiles_along * tiles_last, offset, tiles_last, tiles_along, batch, dims[along],
      dims[last], steps[last], out_strides[along]);
}

}  // namespace

// Dims merged where contiguous, 32-bit remainders where the indices fit, and
// 16 bytes a thread where the innermost dim is contiguous and every stride a
// whole vector (buffers are 16-byte aligned, as the vector loads of the
// elementwise kernels take them): a transpose keeping the head dim, [16,
// 12, 1024, 64] -> [16, 1024, 12, 64] in f32, took 0.097 ms on an H200 an
// element a thread, with 64-bit remainders for every dim. One that moves
// the innermost dim goes through shared memory in tiles (tiled_transpose).
std::string strided_copy(const std::string& name, uint32_t in, uint32_t out, uint32_t dtype,
                         const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t offset,
                         Launch& launch) {
  std::vector<int64_t> dims, steps;
  merge_contiguous_dims(shape, strides, dims, steps);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const int64_t vec = 16 / static_cast<int64_t>(dtypes::size(dtype));
  bool vector = vec > 1 && !dims.empty() && steps.back() == 1 && dims.back() % vec == 0 && offset % vec == 0;
  for (size_t d = 0; vector && d + 1 < steps.size(); ++d) vector = steps[d] % vec == 0;
  if (vector) {
    dims.back() /= vec;
    for (size_t d = 0; d + 1 < steps.size(); ++d) steps[d] /= vec;
    offset /= vec;
    n /= vec;
  }
  if (!vector && dims.size() >= 2 && steps.back() != 1 && dims.back() >= 8) {
    auto along = std::find(steps.begin(), steps.end() - 1, 1);
    if (along != steps.end() - 1 && dims[along - steps.begin()] >= 8)
      return tiled_transpose(name, in, out, dtype, dims, steps, offset, along - steps.begin(), launch);
  }
  int64_t last = offset;  // the largest source index
  for (size_t d = 0; d < dims.size(); ++d) last += (dims[d] - 1) * steps[d];
  const bool narrow = n < (int64_t{1} << 31) && last < (int64_t{1} << 31);
  const char *index_type = narrow ? "unsigned" : "long long", *suffix = narrow ? "u" : "LL";
  std::string index = fmt::format("      {0} rest = ({0})t, source = {1}{2};\n", index_type, offset, suffix);
  for (size_t d = dims.size(); d-- > 0;) {
    if (d == 0) {
      index += fmt::format("      source += rest * {}{};\n", steps[d], suffix);
    } else {
      index += fmt::format("      {{ const {0} c = rest % {1}{3}; rest /= {1}{3}; source += c * {2}{3}; }}\n",
                           index_type, dims[d], steps[d], suffix);
    }
  }
  launch = Launch{name, {in, out}, n};
  const std::string from = vector ? fmt::format("reinterpret_cast<const uint4*>(p{})", in) : fmt::format("p{}", in);
  const std::string to = vector ? fmt::format("reinterpret_cast<uint4*>(p{})", out) : fmt::format("p{}", out);
  return fmt::format(
      "extern \"C\" __global__ void {0}(const {1}* __restrict__ p{2}, {1}* __restrict__ p{3}, long long work) {{\n"
      "  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < work;\n"
      "       t += (long long)blockDim.x * gridDim.x) {{\n{4}      {5}[t] = {6}[source];\n  }}\n}}\n",
      name, storage_type(dtype), in, out, index, to, from);
}

namespace {

// An opaque reduction of at least this many elements per output, and fewer
// outputs than the second, takes a block per output (a thread per output
// otherwise, whose reads of neighbouring outputs' elements coalesce).
constexpr int64_t kBlockReductionMin = 256;
constexpr int64_t kBlockReductionMaxOutputs = 16384;
// Where outputs x kSplitElements exceed the elements, a block per output
// leaves the device idle (a loss's mean, 8.4M elements into one: 11 ms in
// one block on an H200): each output's elements are split into chunks of
// at least kSplitElements, each chunk a block's, their partial results
// left in the device's scratch (kScratchValue) and combined by a second
// launch, a block per output, in chunk order (the same sums every run).
constexpr int64_t kSplitElements = 16384;
constexpr int64_t kMaxChunks = 1024;
// Column reductions (column_reduction()): 32 outputs a block, chunks of at
// least kColumnChunkRows rows until some kColumnBlocks blocks fill the device.
constexpr int64_t kColumnGroup = 32;
constexpr int64_t kColumnChunkRows = 64;
constexpr int64_t kColumnBlocks = 1024;

// One op of an opaque kernel, as its own launch; its operands and result
// are in memory.
class OpSource {
 public:
  explicit OpSource(const lazylab_program& program) : program_(program) {}

  std::string generate(const lazylab_op& op, const std::string& name, std::vector<Launch>& launches) const {
    if (ops::category(op.op) == ops::Category::Reduction) return reduction(op, name, launches);
    Launch launch;
    std::string source = generate_one(op, name, launch);
    launches.push_back(std::move(launch));
    return source;
  }

 private:
  std::string generate_one(const lazylab_op& op, const std::string& name, Launch& launch) const {
    const lazylab_value& out = program_.values[op.result];
    switch (ops::category(op.op)) {
      case ops::Category::Layout:
        if (op.op == LAZYLAB_OP_Concat) return concat(op, name, launch);
        if (op.op == LAZYLAB_OP_Gather) return gather(op, name, launch);
        if (op.op == LAZYLAB_OP_ScatterAdd) return scatter_add(op, name, launch);
        if (op.op == LAZYLAB_OP_Pad) return pad(op, name, launch);
        return layout(op, name, launch);
      case ops::Category::Window: return window(op, name, launch);
      case ops::Category::Contraction: return matmul(op, name, launch);
      case ops::Category::Leaf:
        if (op.op == LAZYLAB_OP_Iota) return iota(op, name, launch);
        break;
      case ops::Category::Composite:
        if (op.op == LAZYLAB_OP_Softmax) return softmax(op, name, launch);
        if (op.op == LAZYLAB_OP_Layernorm) return layernorm(op, name, launch);
        break;  // gelu: a formula, below
      default: break;
    }
    // Elementwise ops and constants: one element per point, all full.
    int64_t n = elements_of(out);
    std::vector<lazylab_access> accesses;
    accesses.push_back(op.op == LAZYLAB_OP_Constant
                           ? lazylab_access{op.result, LAZYLAB_ACCESS_SPLAT, op.result, 0, op.attrs[0].f}
                           : lazylab_access{op.result, LAZYLAB_ACCESS_FULL, op.result, 0, 0});
    for (uint32_t k = 0; k < op.num_operands; ++k)
      accesses.push_back(lazylab_access{op.operands[k], LAZYLAB_ACCESS_FULL, op.operands[k], 0, 0});
    lazylab_kernel one{};  // the op alone, as one row of n
    one.rows = n ? 1 : 0;
    one.cols = std::max<int64_t>(n, 1);
    one.num_accesses = static_cast<uint32_t>(accesses.size());
    one.accesses = accesses.data();
    // Stored, whatever the Program says: an opaque kernel's ops each write memory.
    auto facts = [&](uint32_t v) {
      rows::ValueFacts value = rows::facts_of(program_.values[v]);
      if (v == op.result) value.kind = LAZYLAB_VALUE_ARENA;
      return value;
    };
    return elementwise_function(program_, rows::RowSpace(one, {&op}, facts), name, launch);
  }

 private:
  std::string layout(const lazylab_op& op, const std::string& name, Launch& launch) const {
    const lazylab_value &in = program_.values[op.operands[0]], &out = program_.values[op.result];
    std::vector<int64_t> in_shape = shape_of(in), shape = shape_of(out), strides;
    std::vector<int64_t> in_strides = ops::row_major_strides(in_shape);
    int64_t offset = 0;
    switch (op.op) {
      case LAZYLAB_OP_Reshape:
        shape = {elements_of(out)};
        strides = {1};
        break;
      case LAZYLAB_OP_Transpose:
        for (uint32_t d = 0; d < op.attrs[0].num_ints; ++d) strides.push_back(in_strides[op.attrs[0].ints[d]]);
        break;
      case LAZYLAB_OP_Slice:
        for (size_t d = 0; d < in_shape.size(); ++d) {
          offset += op.attrs[0].ints[d] * in_strides[d];
          strides.push_back(op.attrs[2].ints[d] * in_strides[d]);
        }
        break;
      default:  // broadcast
        strides.assign(shape.size(), 0);
        for (size_t d = 0; d < in_shape.size(); ++d)
          if (in_shape[d] != 1) strides[op.attrs[0].ints[d]] = in_strides[d];
    }
    return strided_copy(name, op.operands[0], op.result, out.dtype, shape, strides, offset, launch);
  }

  std::string concat(const lazylab_op& op, const std::string& name, Launch& launch) const {
    const lazylab_value& out = program_.values[op.result];
    int64_t axis = op.attrs[0].i, inner = 1;
    for (uint32_t d = axis + 1; d < out.rank; ++d) inner *= out.shape[d];
    int64_t along = out.shape[axis];
    std::string params, pick;
    launch = Launch{name, {}, elements_of(out)};
    int64_t start = 0;
    for (uint32_t k = 0; k < op.num_operands; ++k) {
      uint32_t v = op.operands[k];
      int64_t size = program_.values[v].shape[axis];
      params += fmt::format("const {}* __restrict__ q{}, ", storage_type(out.dtype), k);
      launch.values.push_back(v);
      pick += fmt::format("    {}if (a < {}LL) p{}[t] = q{}[(o * {}LL + a - {}LL) * {}LL + in];\n", k ? "else " : "",
                          start + size, op.result, k, size, start, inner);
      start += size;
    }
    launch.values.push_back(op.result);
    return fmt::format(
        "extern \"C\" __global__ void {}({}{}* __restrict__ p{}, long long work) {{\n"
        "  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < work;\n"
        "       t += (long long)blockDim.x * gridDim.x) {{\n"
        "    const long long in = t % {}LL, a = (t / {}LL) % {}LL, o = t / ({}LL * {}LL);\n{}  }}\n}}\n",
        name, params, storage_type(out.dtype), op.result, inner, inner, along, inner, along, pick);
  }

  // A thread per result element; an index out of range is clamped (the
  // reference reports it as an error; a kernel cannot).
  std::string gather(const lazylab_op& op, const std::string& name, Launch& launch) const {
    const lazylab_value &data = program_.values[op.operands[0]], &indices = program_.values[op.operands[1]];
    int64_t axis = op.attrs[0].i, inner = 1, n = data.shape[axis], count = elements_of(indices);
    for (uint32_t d = axis + 1; d < data.rank; ++d) inner *= data.shape[d];
    launch = Launch{name, {op.operands[0], op.operands[1], op.result}, elements_of(program_.values[op.result])};
    const char* type = storage_type(data.dtype);
    return fmt::format(
        "extern \"C\" __global__ void {0}(const {1}* __restrict__ x, const {2}* __restrict__ index, {1}* __restrict__ "
        "y,"
        " long long work) {{\n"
        "  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < work;\n"
        "       t += (long long)blockDim.x * gridDim.x) {{\n"
        "    const long long in = t % {3}LL, i = (t / {3}LL) % {4}LL, o = t / ({3}LL * {4}LL);\n"
        "    long long row = (long long)index[i];\n"
        "    if (row < 0) row += {5}LL;\n"
        "    row = row < 0 ? 0 : row >= {5}LL ? {5}LL - 1 : row;\n"
        "    y[t] = x[(o * {5}LL + row) * {3}LL + in];\n  }}\n}}\n",
        name, type, storage_type(indices.dtype), inner, count, n);
  }

  // A thread per column (outer slice o, inner position in): it copies its
  // column of the data, then adds the updates in index order, so repeated
  // indices sum in one order with no atomics (the result is the same on
  // every run). Indices out of range are clamped, as gather's.
  std::string scatter_add(const lazylab_op& op, const std::string& name, Launch& launch) const {
    const lazylab_value &data = program_.values[op.operands[0]], &indices = program_.values[op.operands[1]];
    int64_t axis = op.attrs[0].i, inner = 1, outer = 1, n = data.shape[axis], count = elements_of(indices);
    for (uint32_t d = axis + 1; d < data.rank; ++d) inner *= data.shape[d];
    for (int64_t d = 0; d < axis; ++d) outer *= data.shape[d];
    launch = Launch{name, {op.operands[0], op.operands[1], op.operands[2], op.result}, outer * inner};
    const char* type = storage_type(data.dtype);
    const char* acc = data.dtype == LAZYLAB_F64 ? "double" : "float";
    return fmt::format(
        "extern \"C\" __global__ void {0}(const {1}* __restrict__ x, const {2}* __restrict__ index, "
        "const {1}* __restrict__ u, {1}* __restrict__ y, long long work) {{\n"
        "  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < work;\n"
        "       t += (long long)blockDim.x * gridDim.x) {{\n"
        "    const long long in = t % {3}LL, o = t / {3}LL;\n"
        "    for (long long r = 0; r < {5}LL; ++r) y[(o * {5}LL + r) * {3}LL + in] = x[(o * {5}LL + r) * {3}LL + in];\n"
        "    for (long long i = 0; i < {4}LL; ++i) {{\n"
        "      long long row = (long long)index[i];\n"
        "      if (row < 0) row += {5}LL;\n"
        "      row = row < 0 ? 0 : row >= {5}LL ? {5}LL - 1 : row;\n"
        "      const long long at = (o * {5}LL + row) * {3}LL + in;\n"
        "      y[at] = ({1})(({6})y[at] + ({6})u[(o * {4}LL + i) * {3}LL + in]);\n"
        "    }}\n  }}\n}}\n",
        name, type, storage_type(indices.dtype), inner, count, n, acc);
  }

  std::string pad(const lazylab_op& op, const std::string& name, Launch& launch) const {
    const lazylab_value &in = program_.values[op.operands[0]], &out = program_.values[op.result];
    std::vector<int64_t> in_strides = ops::row_major_strides(shape_of(in));
    std::string index = "    long long rest = t, source = 0;\n    bool inside = true;\n";
    for (uint32_t d = in.rank; d-- > 0;)
      index += fmt::format(
          "    {{ const long long c = rest % {0}LL - {1}LL; rest /= {0}LL; inside = inside && c >= 0 && c < {2}LL; "
          "source += c * {3}LL; }}\n",
          out.shape[d], op.attrs[0].ints[d], in.shape[d], in_strides[d]);
    launch = Launch{name, {op.operands[0], op.result}, elements_of(out)};
    const char* type = storage_type(out.dtype);
    return fmt::format(
        "extern \"C\" __global__ void {0}(const {1}* __restrict__ x, {1}* __restrict__ y, long long work) {{\n"
        "  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < work;\n"
        "       t += (long long)blockDim.x * gridDim.x) {{\n{2}"
        "    y[t] = inside ? x[source] : ({1}){3};\n  }}\n}}\n",
        name, type, index, scalar_literal(op.attrs[2], out.dtype));
  }

  // conv2d and the pools: a thread per result element, looping over its
  // window (ops.def gives the semantics); a convolution's element is
  // direct_convolution_element's.
  std::string window(const lazylab_op& op, const std::string& name, Launch& launch) const {
    const lazylab_value& out = program_.values[op.result];
    bool conv = op.op == LAZYLAB_OP_Conv2d, max = op.op == LAZYLAB_OP_MaxPool2d;
    const windows::WindowShape s = windows::window_shape(program_.values, op);
    const int64_t *kernel = s.kernel, *dilation = s.dilation;
    int64_t channels = s.channels, h = s.height, width = s.width;
    const char* type = storage_type(out.dtype);
    const char* acc = out.dtype == LAZYLAB_F64 ? "double" : "float";
    if (conv && convolution_takes_blocks(program_, op)) return window_by_blocks(op, name, launch, s);
    if (conv) {
      launch = Launch{name, {op.operands[0], op.operands[1], op.result}, elements_of(out)};
      return direct_convolution_element(program_, op, name + "_at") +
             fmt::format(
                 "extern \"C\" __global__ void {0}(const {1}* __restrict__ x, const {1}* __restrict__ w, {1}* "
                 "__restrict__ y, long long work) {{\n"
                 "  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < work;\n"
                 "       t += (long long)blockDim.x * gridDim.x)\n"
                 "    y[t] = {0}_at(x, w, t);\n}}\n",
                 name, type);
    }
    std::string body = fmt::format(
        "    const {0}* plane = x + (n * {1}LL + f) * {2}LL * {3}LL;\n"
        "    {4} acc = {5};\n    long long inside = 0;\n"
        "    for (long long p = 0; p < {6}LL; ++p) for (long long q = 0; q < {7}LL; ++q) {{\n"
        "      const long long yy = top + p * {8}LL, xx = left + q * {9}LL;\n"
        "      if (yy >= 0 && yy < {2}LL && xx >= 0 && xx < {3}LL) {{ const {4} v = plane[yy * {3}LL + xx]; "
        "acc = {10}; ++inside; }}\n"
        "    }}\n{11}    y[t] = ({0})acc;\n",
        type, channels, h, width, acc, max ? literal(-INFINITY, out.dtype) : "0", kernel[0], kernel[1], dilation[0],
        dilation[1], max ? "LazylabMax()(acc, v)" : "acc + v",
        max ? ""
            : fmt::format("    acc /= ({})({});\n", acc,
                          s.count_include_pad ? fmt::format("((top + {0}LL < {1}LL ? top + {0}LL : {1}LL) - top) * "
                                                            "((left + {2}LL < {3}LL ? left + {2}LL : {3}LL) - left)",
                                                            kernel[0], h + s.pad[2], kernel[1], width + s.pad[3])
                                              : std::string("inside")));
    launch = Launch{name, {op.operands[0], op.result}, elements_of(out)};
    return fmt::format(
        "extern \"C\" __global__ void {0}(const {1}* __restrict__ x, {1}* __restrict__ y, long long work) {{\n"
        "  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < work;\n"
        "       t += (long long)blockDim.x * gridDim.x) {{\n"
        "    const long long j = t % {2}LL, i = (t / {2}LL) % {3}LL, f = (t / ({2}LL * {3}LL)) % {4}LL,"
        " n = t / ({2}LL * {3}LL * {4}LL);\n"
        "    const long long top = i * {5}LL - {6}LL, left = j * {7}LL - {8}LL;\n{9}  }}\n}}\n",
        name, type, s.out_w, s.out_h, s.filters, s.stride[0], s.pad[0], s.stride[1], s.pad[1], body);
  }

  // A convolution of few outputs over many taps (a depthwise weight's
  // gradient: the cotangent's whole plane is the window, 12,544 taps at
  // MobileNetV2's 112 x 112) takes a block per output, its threads striding
  // over the taps, the sums combined by a block reduction: a thread apiece
  // took 1.19 ms of MobileNetV2's 4.5 ms training step on an H200.
  std::string window_by_blocks(const lazylab_op& op, const std::string& name, Launch& launch,
                               const windows::WindowShape& s) const {
    const lazylab_value& out = program_.values[op.result];
    const char* type = storage_type(out.dtype);
    const char* acc = out.dtype == LAZYLAB_F64 ? "double" : "float";
    launch = Launch{name, {op.operands[0], op.operands[1], op.result}, elements_of(out)};
    launch.block_per_item = true;
    return fmt::format(
        "extern \"C\" __global__ void {0}(const {1}* __restrict__ x, const {1}* __restrict__ w, {1}* __restrict__ y, "
        "long long work) {{\n"
        "  __shared__ {2} shared[32];\n"
        "  for (long long t = blockIdx.x; t < work; t += gridDim.x) {{\n"
        "    const long long j = t % {3}LL, i = (t / {3}LL) % {4}LL, f = (t / ({3}LL * {4}LL)) % {5}LL,"
        " n = t / ({3}LL * {4}LL * {5}LL);\n"
        "    const long long top = i * {6}LL - {7}LL, left = j * {8}LL - {9}LL;\n"
        "    const {1}* planes = x + (n * {10}LL + (f / {11}LL) * {12}LL) * {13}LL * {14}LL;\n"
        "    const {1}* taps = w + f * {15}LL;\n"
        "    {2} acc = 0;\n"
        "    for (long long k = threadIdx.x; k < {15}LL; k += blockDim.x) {{\n"
        "      const long long c = k / ({16}LL * {17}LL), p = (k / {17}LL) % {16}LL, q = k % {17}LL;\n"
        "      const long long yy = top + p * {18}LL, xx = left + q * {19}LL;\n"
        "      if (yy >= 0 && yy < {13}LL && xx >= 0 && xx < {14}LL)\n"
        "        acc += ({2})planes[(c * {13}LL + yy) * {14}LL + xx] * ({2})taps[k];\n"
        "    }}\n"
        "    acc = lazylab_block_reduce(acc, shared, LazylabSum());\n"
        "    if (threadIdx.x == 0) y[t] = ({1})acc;\n  }}\n}}\n",
        name, type, acc, s.out_w, s.out_h, s.filters, s.stride[0], s.pad[0], s.stride[1], s.pad[1], s.channels,
        s.group_filters(), s.group_channels(), s.height, s.width, s.taps(), s.kernel[0], s.kernel[1], s.dilation[0],
        s.dilation[1]);
  }

  // Composites left whole (the interpreter runs them; `decompose` makes them
  // fusible): a thread per row, accumulating in double as the reference does.
  std::string softmax(const lazylab_op& op, const std::string& name, Launch& launch) const {
    const lazylab_value& x = program_.values[op.operands[0]];
    int64_t axis = op.attrs[0].i, inner = 1;
    for (uint32_t d = axis + 1; d < x.rank; ++d) inner *= x.shape[d];
    int64_t length = x.shape[axis];
    launch = Launch{name, {op.operands[0], op.result}, elements_of(x) / std::max<int64_t>(length, 1)};
    const char* type = storage_type(x.dtype);
    return fmt::format(
        "extern \"C\" __global__ void {0}(const {1}* __restrict__ x, {1}* __restrict__ y, long long work) {{\n"
        "  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < work;\n"
        "       t += (long long)blockDim.x * gridDim.x) {{\n"
        "    const long long base = (t / {2}LL) * {3}LL * {2}LL + t % {2}LL;\n"
        "    double peak = -__longlong_as_double(0x7ff0000000000000LL), total = 0;\n"
        "    for (long long j = 0; j < {3}LL; ++j) {{ const double v = x[base + j * {2}LL]; peak = peak < v ? v : "
        "peak; }}\n"
        "    for (long long j = 0; j < {3}LL; ++j) total += exp((double)x[base + j * {2}LL] - peak);\n"
        "    for (long long j = 0; j < {3}LL; ++j)\n"
        "      y[base + j * {2}LL] = ({1})(exp((double)x[base + j * {2}LL] - peak) / total);\n  }}\n}}\n",
        name, type, inner, length);
  }

  std::string layernorm(const lazylab_op& op, const std::string& name, Launch& launch) const {
    const lazylab_value& x = program_.values[op.operands[0]];
    int64_t length = x.rank ? x.shape[x.rank - 1] : 1;
    launch = Launch{name,
                    {op.operands[0], op.operands[1], op.operands[2], op.result},
                    elements_of(x) / std::max<int64_t>(length, 1)};
    const char* type = storage_type(x.dtype);
    return fmt::format(
        "extern \"C\" __global__ void {0}(const {1}* __restrict__ x, const {1}* __restrict__ w,\n"
        "    const {1}* __restrict__ b, {1}* __restrict__ y, long long work) {{\n"
        "  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < work;\n"
        "       t += (long long)blockDim.x * gridDim.x) {{\n"
        "    const {1}* row = x + t * {2}LL;\n    double mean = 0, var = 0;\n"
        "    for (long long j = 0; j < {2}LL; ++j) mean += row[j];\n    mean /= {2}.0;\n"
        "    for (long long j = 0; j < {2}LL; ++j) {{ const double d = row[j] - mean; var += d * d; }}\n"
        "    const double inv_std = 1.0 / sqrt(var / {2}.0 + {3});\n"
        "    for (long long j = 0; j < {2}LL; ++j)\n"
        "      y[t * {2}LL + j] = ({1})((row[j] - mean) * inv_std * w[j] + b[j]);\n  }}\n}}\n",
        name, type, length, literal(op.attrs[0].f, LAZYLAB_F64));
  }

  std::string iota(const lazylab_op& op, const std::string& name, Launch& launch) const {
    const lazylab_value& out = program_.values[op.result];
    int64_t axis = op.attrs[0].i, inner = 1;
    for (uint32_t d = axis + 1; d < out.rank; ++d) inner *= out.shape[d];
    launch = Launch{name, {op.result}, elements_of(out)};
    return fmt::format(
        "extern \"C\" __global__ void {}({}* __restrict__ p{}, long long work) {{\n"
        "  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < work;\n"
        "       t += (long long)blockDim.x * gridDim.x)\n"
        "    p{}[t] = ({})((t / {}LL) % {}LL);\n}}\n",
        name, storage_type(out.dtype), op.result, op.result, storage_type(out.dtype), inner, out.shape[axis]);
  }

  // A thread per output element, looping over the reduced elements; a
  // block per output where each has many; chunks of an output to blocks of
  // their own, then combined, where the outputs are too few to fill the device.
  std::string reduction(const lazylab_op& op, const std::string& name, std::vector<Launch>& launches) const {
    const lazylab_value &in = program_.values[op.operands[0]], &out = program_.values[op.result];
    std::vector<int64_t> shape = shape_of(in), strides = ops::row_major_strides(shape);
    std::vector<bool> reduced(shape.size());
    for (uint32_t a = 0; a < op.attrs[0].num_ints; ++a) reduced[op.attrs[0].ints[a]] = true;
    std::string kept = "    long long rest = t, base = 0;\n", inner = "      long long r = k, at = base;\n";
    int64_t count = 1;
    // Where the reduced axes are the innermost (each one's stride the count
    // of those inside it), an output's elements are contiguous: at = base + k.
    bool trailing = true;
    auto step = [](const char* index, const char* offset, int64_t size, int64_t stride) {
      return fmt::format("{{ const long long c = {0} % {2}LL; {0} /= {2}LL; {1} += c * {3}LL; }}\n", index, offset,
                         size, stride);
    };
    for (size_t d = shape.size(); d-- > 0;) {
      if (shape[d] == 1) continue;
      if (reduced[d]) {
        inner += "      " + step("r", "at", shape[d], strides[d]);
        count *= shape[d];
        trailing = trailing && strides[d] == count / shape[d];
      } else {
        kept += "    " + step("rest", "base", shape[d], strides[d]);
      }
    }
    if (trailing) inner = "      const long long at = base + k;\n";
    uint32_t type = in.dtype;
    bool integer = !is_float(type);
    bool sums = ops::combiner(op.op) == LAZYLAB_OP_Add;
    bool boolean = type == LAZYLAB_BOOL;
    std::string acc = integer && sums  ? "unsigned long long"
                      : is_float(type) ? "double"
                      : boolean        ? "int"
                                       : register_type(type);
    const char* functor = combiner_functor(op.op);
    // The identity in the accumulator's type: an i32 or i8 max starts from
    // its own least (INT64_MIN held as an int is 0: a max of negatives gave 0,
    // an i8 min gave -1).
    std::string init = identity_literal(op.op, type, is_float(type) || (integer && sums));
    // A sum or mean of bools stored as a bool is whether one is true (the
    // reference's); a count cast to a byte was stored as 2 or 8 (found by
    // lazylab fuzz on the H200).
    std::string result = type == LAZYLAB_BOOL             ? "acc != 0"
                         : op.op == LAZYLAB_OP_ReduceMean ? (integer ? fmt::format("(long long)acc / {}LL", count)
                                                                     : fmt::format("acc / {}.0", count))
                                                          : "acc";
    const int64_t outputs = elements_of(out);
    const ReductionParts parts{
        name, storage_type(type), op.operands[0], op.result, kept, acc, init, count, inner, functor, result};
    if (count >= kBlockReductionMin && outputs >= kColumnGroup && reduces_outer_axes(shape, reduced))
      return column_reduction(parts, outputs, launches);
    if (count >= kBlockReductionMin && outputs < kBlockReductionMaxOutputs) {
      int64_t chunks = std::min({kMaxChunks, count / kSplitElements,
                                 static_cast<int64_t>(kScratchBytes / 8) / std::max<int64_t>(outputs, 1)});
      if (chunks > 1) return split_reduction(parts, outputs, chunks, launches);
      // A block per output element, its threads striding over the reduced
      // elements: batch norm's statistics are 16-128 sums of 512-16,384
      // elements each, which a thread apiece summed one after another (ResNet-18's
      // training step at 32x32: 79 kernels, 4.8 of its 8.6 ms on an H100).
      launches.push_back(Launch{name, {op.operands[0], op.result}, outputs});
      launches.back().block_per_item = true;
      return fmt::format(
          "extern \"C\" __global__ void {0}(const {1}* __restrict__ p{2}, {1}* __restrict__ p{3}, long long work) {{\n"
          "  __shared__ {5} shared[32];\n"
          "  for (long long t = blockIdx.x; t < work; t += gridDim.x) {{\n{4}"
          "    {5} acc = {6};\n    for (long long k = threadIdx.x; k < {7}LL; k += blockDim.x) {{\n{8}"
          "      acc = {9}()(acc, ({5})p{2}[at]);\n    }}\n"
          "    acc = lazylab_block_reduce(acc, shared, {9}());\n"
          "    if (threadIdx.x == 0) p{3}[t] = ({1})({10});\n  }}\n}}\n",
          name, parts.storage, parts.in, parts.out, kept, acc, init, count, inner, functor, result);
    }
    launches.push_back(Launch{name, {op.operands[0], op.result}, outputs});
    return fmt::format(
        "extern \"C\" __global__ void {0}(const {1}* __restrict__ p{2}, {1}* __restrict__ p{3}, long long work) {{\n"
        "  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < work;\n"
        "       t += (long long)blockDim.x * gridDim.x) {{\n{4}"
        "    {5} acc = {6};\n    for (long long k = 0; k < {7}LL; ++k) {{\n{8}"
        "      acc = {9}()(acc, ({5})p{2}[at]);\n    }}\n    p{3}[t] = ({1})({10});\n  }}\n}}\n",
        name, parts.storage, parts.in, parts.out, kept, acc, init, count, inner, functor, result);
  }

  // What a reduction's functions are made of (reduction()).
  struct ReductionParts {
    std::string name;
    const char* storage;
    uint32_t in, out;
    std::string kept, acc, init;
    int64_t count;
    std::string inner, functor, result;
  };

  // Whether every reduced axis (of more than one element) is outside every
  // kept one: the input is then [count, outputs], output t's elements at
  // k * outputs + t (a bias's gradient, summed over the rows).
  static bool reduces_outer_axes(const std::vector<int64_t>& shape, const std::vector<bool>& reduced) {
    bool inside_reduced = false;
    for (size_t d = shape.size(); d-- > 0;) {
      if (shape[d] == 1) continue;
      if (reduced[d])
        inside_reduced = true;
      else if (inside_reduced)
        return false;
    }
    return true;
  }

  // Column reductions: a warp reads a row's 32 neighbouring outputs' elements
  // (one coalesced line), the block's 8 warps every 8th row of a chunk of
  // rows, their 8 partial results combined in warp order through shared
  // memory. A block per output, threads striding down a column, read one
  // element of each 32-byte sector it fetched: 0.29 ms for a [16384, 3072]
  // bias gradient on an H200. Where the columns alone are too few blocks,
  // chunks of rows take blocks of their own, leaving their results in the
  // device's scratch for a second launch to combine in chunk order (the
  // same sums every run).
  static std::string column_reduction(const ReductionParts& p, int64_t outputs, std::vector<Launch>& launches) {
    const int64_t groups = (outputs + kColumnGroup - 1) / kColumnGroup;
    const int64_t chunks =
        std::max<int64_t>(1, std::min({kMaxChunks, (kColumnBlocks + groups - 1) / groups, p.count / kColumnChunkRows,
                                       static_cast<int64_t>(kScratchBytes / 8) / outputs}));
    const int64_t per_chunk = (p.count + chunks - 1) / chunks;
    const bool split = chunks > 1;
    launches.push_back(Launch{p.name, {p.in, split ? kScratchValue : p.out}, groups * chunks});
    launches.back().block_per_item = true;
    std::string store = split ? fmt::format("scratch[chunk * {}LL + t] = acc", outputs)
                              : fmt::format("p{}[t] = ({})({})", p.out, p.storage, p.result);
    std::string source = fmt::format(
        "extern \"C\" __global__ void {0}(const {1}* __restrict__ p{2}, {3}* __restrict__ {4}, long long work) {{\n"
        "  __shared__ {5} partial[8][33];\n"
        "  const int lane = threadIdx.x % 32, row = threadIdx.x / 32;\n"
        "  for (long long item = blockIdx.x; item < work; item += gridDim.x) {{\n"
        "    const long long t = item / {6}LL * 32 + lane, chunk = item % {6}LL;\n"
        "    {5} acc = {7};\n"
        "    if (t < {8}LL) {{\n"
        "      const long long end = min({9}LL, (chunk + 1) * {10}LL);\n"
        "#pragma unroll 4\n"
        "      for (long long k = chunk * {10}LL + row; k < end; k += 8) acc = {11}()(acc, ({5})p{2}[k * {8}LL + t]);\n"
        "    }}\n"
        "    partial[row][lane] = acc;\n"
        "    __syncthreads();\n"
        "    if (row == 0 && t < {8}LL) {{\n"
        "      for (int r = 1; r < 8; ++r) acc = {11}()(acc, partial[r][lane]);\n"
        "      {12};\n"
        "    }}\n"
        "    __syncthreads();\n"
        "  }}\n}}\n",
        p.name, p.storage, p.in, split ? p.acc : p.storage, split ? "scratch" : fmt::format("p{}", p.out), p.acc,
        chunks, p.init, outputs, p.count, per_chunk, p.functor, store);
    if (!split) return source;
    launches.push_back(Launch{p.name + "_finish", {kScratchValue, p.out}, outputs});
    return source + fmt::format(
                        "extern \"C\" __global__ void {0}_finish(const {1}* __restrict__ scratch, {2}* __restrict__ "
                        "p{3}, long long work) {{\n"
                        "  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < work;\n"
                        "       t += (long long)blockDim.x * gridDim.x) {{\n"
                        "    {1} acc = {4};\n"
                        "    for (long long c = 0; c < {5}LL; ++c) acc = {7}()(acc, scratch[c * {6}LL + t]);\n"
                        "    p{3}[t] = ({2})({8});\n  }}\n}}\n",
                        p.name, p.acc, p.storage, p.out, p.init, chunks, outputs, p.functor, p.result);
  }

  // Two launches: a block per (output, chunk) leaves the chunk's combined
  // value at scratch[output * chunks + chunk]; a block per output combines
  // its chunks in order and stores the result.
  static std::string split_reduction(const ReductionParts& p, int64_t outputs, int64_t chunks,
                                     std::vector<Launch>& launches) {
    const int64_t per_chunk = (p.count + chunks - 1) / chunks;
    launches.push_back(Launch{p.name, {p.in, kScratchValue}, outputs * chunks});
    launches.back().block_per_item = true;
    launches.push_back(Launch{p.name + "_finish", {kScratchValue, p.out}, outputs});
    launches.back().block_per_item = true;
    return fmt::format(
        "extern \"C\" __global__ void {0}(const {1}* __restrict__ p{2}, {4}* __restrict__ scratch, long long work) "
        "{{\n"
        "  __shared__ {4} shared[32];\n"
        "  for (long long item = blockIdx.x; item < work; item += gridDim.x) {{\n"
        "    const long long t = item / {10}LL, chunk = item % {10}LL;\n{3}"
        "    {4} acc = {5};\n"
        "    const long long end = min({6}LL, (chunk + 1) * {11}LL);\n"
        "    for (long long k = chunk * {11}LL + threadIdx.x; k < end; k += blockDim.x) {{\n{7}"
        "      acc = {8}()(acc, ({4})p{2}[at]);\n    }}\n"
        "    acc = lazylab_block_reduce(acc, shared, {8}());\n"
        "    if (threadIdx.x == 0) scratch[item] = acc;\n  }}\n}}\n"
        "extern \"C\" __global__ void {0}_finish(const {4}* __restrict__ scratch, {1}* __restrict__ p{12}, "
        "long long work) {{\n"
        "  __shared__ {4} shared[32];\n"
        "  for (long long t = blockIdx.x; t < work; t += gridDim.x) {{\n"
        "    {4} acc = {5};\n"
        "    for (long long c = threadIdx.x; c < {10}LL; c += blockDim.x) acc = {8}()(acc, scratch[t * {10}LL + c]);\n"
        "    acc = lazylab_block_reduce(acc, shared, {8}());\n"
        "    if (threadIdx.x == 0) p{12}[t] = ({1})({9});\n  }}\n}}\n",
        p.name, p.storage, p.in, p.kept, p.acc, p.init, p.count, p.inner, p.functor, p.result, chunks, per_chunk,
        p.out);
  }

  // Matmuls cuBLASLt does not run (integer or f64, or in an opaque kernel):
  // a thread per output element.
  std::string matmul(const lazylab_op& op, const std::string& name, Launch& launch) const {
    const lazylab_value &a = program_.values[op.operands[0]], &out = program_.values[op.result];
    int64_t m = out.shape[out.rank - 2], n = out.shape[out.rank - 1], k = a.shape[a.rank - 1];
    uint32_t type = out.dtype;
    bool integer = !is_float(type);
    std::string acc = integer ? "unsigned long long" : "double";
    launch = Launch{name, {op.operands[0], op.operands[1], op.result}, elements_of(out)};
    return fmt::format(
        "extern \"C\" __global__ void {0}(const {1}* __restrict__ pa, const {1}* __restrict__ pb, {1}* __restrict__ pc,"
        " long long work) {{\n"
        "  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < work;\n"
        "       t += (long long)blockDim.x * gridDim.x) {{\n"
        "    const long long j = t % {3}LL, i = (t / {3}LL) % {2}LL, b = t / ({2}LL * {3}LL);\n"
        "    {5} acc = 0;\n"
        "    for (long long p = 0; p < {4}LL; ++p)\n"
        "      acc += ({5})pa[(b * {2}LL + i) * {4}LL + p] * ({5})pb[(b * {4}LL + p) * {3}LL + j];\n"
        "    pc[t] = ({1})({6});\n  }}\n}}\n",
        name, storage_type(type), m, n, k, acc, type == LAZYLAB_BOOL ? "acc != 0" : "acc");
  }

  const lazylab_program& program_;
};

}  // namespace

std::string op_function(const lazylab_program& program, const lazylab_op& op, const std::string& name,
                        std::vector<Launch>& launches) {
  return OpSource(program).generate(op, name, launches);
}

bool convolution_takes_blocks(const lazylab_program& program, const lazylab_op& op) {
  return windows::window_shape(program.values, op).taps() >= kBlockReductionMin &&
         elements_of(program.values[op.result]) < kBlockReductionMaxOutputs;
}

std::string direct_convolution_element(const lazylab_program& program, const lazylab_op& op, const std::string& name) {
  const windows::WindowShape s = windows::window_shape(program.values, op);
  const uint32_t dtype = program.values[op.result].dtype;
  const char* type = storage_type(dtype);
  int64_t largest = 0;
  for (uint32_t v : {op.operands[0], op.operands[1], op.result})
    largest = std::max(largest, elements_of(program.values[v]));
  const IndexType index = index_type(largest);
  auto c = [&](int64_t value) { return index.literal(value); };
  return fmt::format(
      "__device__ __forceinline__ {0} {1}(const {0}* __restrict__ x, const {0}* __restrict__ w, long long element) {{\n"
      "  const {2} t = ({2})element;\n"
      "  const {2} j = t % {3}, i = (t / {3}) % {4}, f = (t / ({3} * {4})) % {5}, n = t / ({3} * {4} * {5});\n"
      "  const {2} top = i * {6} - {7}, left = j * {8} - {9};\n"
      "  {10} acc = 0;\n"
      "  for ({2} c = 0; c < {11}; ++c) {{\n"
      "    const {0}* plane = x + (n * {12} + (f / {13}) * {11} + c) * {14} * {15};\n"
      "    const {0}* taps = w + (f * {11} + c) * {16} * {17};\n"
      "#pragma unroll\n"
      "    for (int p = 0; p < {16}; ++p)\n"
      "#pragma unroll\n"
      "      for (int q = 0; q < {17}; ++q) {{\n"
      "        const {2} yy = top + p * {18}, xx = left + q * {19};\n"
      "        if (yy >= 0 && yy < {14} && xx >= 0 && xx < {15}) acc += ({10})plane[yy * {15} + xx] * ({10})taps[p * "
      "{17} + q];\n"
      "      }}\n  }}\n  return ({0})acc;\n}}\n",
      type, name, index.name(), c(s.out_w), c(s.out_h), c(s.filters), c(s.stride[0]), c(s.pad[0]), c(s.stride[1]),
      c(s.pad[1]), dtype == LAZYLAB_F64 ? "double" : "float", c(s.group_channels()), c(s.channels),
      c(s.group_filters()), c(s.height), c(s.width), s.kernel[0], s.kernel[1], c(s.dilation[0]), c(s.dilation[1]));
}

}  // namespace lazylab::cuda
