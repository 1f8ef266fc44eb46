// What a kernel is, worked out once from the ops fusion put in it: its kind,
// its iteration space and how it indexes each value. `lower` attaches it to
// every kernel of the Program and it crosses the plugin ABI (lazylab_kernel,
// ABI 2.1), so the backends read it instead of working it out again; fusion
// strategies ask the same analysis whether a merged group would still be one
// row-space kernel.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "expected.h"
#include "graph.h"

struct lazylab_capabilities;

namespace lazylab {

// The values of lazylab_kernel_kind and lazylab_access_kind.
enum class KernelKind : uint8_t { Opaque, Elementwise, RowReduction, Contraction, Layout, Window, Attention };
enum class Access : uint8_t { Full, PerRow, Splat, Scalar, Repeat, RowGroup };

// How `value` is indexed in the row space [rows, cols]; a broadcast's result
// reads `source` (its operand, through any chain of broadcasts), anything
// else is its own source.
struct ValueAccess {
  NodeId value = 0;
  Access kind = Access::Full;
  NodeId source = 0;
  int64_t period = 0;  // Repeat: elements; RowGroup: rows per source element
  double splat = 0;    // Splat
};

struct Contraction {
  NodeId matmul = 0, lhs = 0, rhs = 0;
  bool lhs_transposed = false, rhs_transposed = false;
  int64_t batch = 1, m = 0, n = 0, k = 0;
};

// A strided copy: element (i_0, ..., i_last) of `shape` reads operand element
// offset + sum_d i_d * strides[d].
struct StridedLayout {
  std::vector<int64_t> shape, strides;
  int64_t offset = 0;
};

// lazylab_attention: softmax(scale * q kᵀ, causally masked or not) v per
// batch, q [batch..., m, d], k [batch..., n, d] read transposed (or, where
// k_transposed is false, [batch..., d, n] read as it is), v [batch..., n, dv].
// In f32; or (ABI 3.15) in autocast's 16-bit form, q, k, v and both products
// in `dtype` (bf16 or f16) and the softmax between in f32: the scores
// rounded to `dtype`, scaled (and masked) in it, widened; the probabilities
// rounded to `dtype` for the second product. A mask is causal, or (ABI
// 3.15) read from memory: a bool [m, n] value, the score kept where it is
// mask_keeps, and -inf elsewhere.
// Where an attention operand lies in its value's memory (ABI 3.16's
// lazylab_attention_view): element (b..., i, c) of the operand at offset +
// sum_j b_j batch_strides[j] + i * row_stride + c.
struct AttentionView {
  int64_t offset = 0, row_stride = 0;
  std::vector<int64_t> batch_strides;
  bool operator==(const AttentionView&) const = default;
};

// The view that reads a row-major value of `shape` [batch..., rows, cols].
AttentionView row_major_view(const Dims& shape);

struct Attention {
  NodeId output = 0, q = 0, k = 0, v = 0;  // the values in memory: the operands, or what their views read
  DType dtype = DType::F32;                // q's, k's, v's and the products'
  bool k_transposed = false, causal = false;
  NodeId mask = kNoNode;  // a mask read from memory, or kNoNode
  bool mask_keeps = true;
  int64_t batch = 1, m = 0, n = 0, d = 0, dv = 0;
  double scale = 1.0;
  Dims batch_shape;  // the output's dims before its last two
  AttentionView q_view, k_view, v_view, output_view;
  // Layout ops inside the kernel make an operand or read the output (ABI
  // 3.16's attention_views): some view is not its value's row-major one.
  bool through_views = false;
};

// What a description may ask of the backend's kernels beyond ABI 3.9.
struct DescribeOptions {
  bool row_groups = false;  // Access::RowGroup (ABI 3.10's reads_row_groups)
};

// What a backend with `caps` reads; without capabilities (fusion for no
// backend in particular) there is no limit.
DescribeOptions describe_options(const lazylab_capabilities* caps);

struct KernelDescription {
  KernelKind kind = KernelKind::Opaque;
  int64_t rows = 0, cols = 0;
  std::vector<ValueAccess> accesses;  // row-space kinds and a contraction's epilogue
  Contraction contraction;
  StridedLayout layout;
  Attention attention;

  // The access recorded for `value`, or nullptr.
  const ValueAccess* access_of(NodeId value) const;
};

// Whether `shape` has one element per row of the row space `space`: its
// leading dims, with the last dropped or 1.
bool is_row_shape(const Dims& shape, const Dims& space);

// Whether `node` is a transpose of the last two dims only: a matmul reads
// its operand so, as a transposed operand.
bool swaps_last_two(const Node& node);

// The layout ops a layout kernel may chain (ABI 3.3's fuses_layout_views):
// each reads the one before, and the kernel is one strided copy of the first
// one's operand.
bool is_chain_layout(OpId op);

// The strides that read a strided view `in` in the order of `shape` (the
// same elements), or nullopt where dims it merges are not one run of memory.
std::optional<std::vector<int64_t>> reshaped_strides(const StridedLayout& in, const std::vector<int64_t>& shape);

// The layout op `node` applied to a strided view `in` of memory (its
// operand's): the view of the same memory that is its result, or nullopt.
std::optional<StridedLayout> view_after(const Node& node, const StridedLayout& in);

// A row-major value of `shape` as a strided view of its own memory.
StridedLayout contiguous(const Dims& shape);

// Whether a reshape from `in` to `out` keeps the last dimension, so every row
// of one is a row of the other: inside a kernel it is a view (ABI 3.3).
bool keeps_rows(const Dims& in, const Dims& out);

// `ops` (in program order) as one row-space kernel (elementwise, or with
// last-axis reductions), or an error saying why they are not one.
// A broadcast of leading dims other than the last (a per-channel [C] over
// NCHW's rows) is a RowGroup where `options` allow it.
Expected<KernelDescription> describe_row_space(const Graph& graph, std::span<const NodeId> ops,
                                               DescribeOptions options = {});

// `ops` as one conv2d with an elementwise epilogue over its result, seen as
// [rows = N * O, cols = OH * OW]: values of the result's shape are Full, a
// per-channel broadcast is PerRow for N = 1 (a row is a channel) and a
// RowGroup of period 1 for N > 1 where `options` allow, splats and scalars
// as in a row-space kernel. An error says why they are not one.
Expected<KernelDescription> describe_window(const Graph& graph, std::span<const NodeId> ops,
                                            DescribeOptions options = {});

// The description of a kernel holding `ops`: an attention, a contraction, a
// window, a layout copy or a row-space kernel where the ops form one, else
// Opaque.
KernelDescription describe_kernel(const Graph& graph, std::span<const NodeId> ops, DescribeOptions options = {});

std::string_view kind_name(KernelKind kind);

}  // namespace lazylab
