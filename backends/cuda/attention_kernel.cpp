#include "attention_kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <stdexcept>

namespace lazylab::cuda {

// Thread (tx, ty) of 16 x 16 owns query rows ty + 16 i (i < 8) of the
// block's 128, score columns tx + 16 j (j < 4) of the tile's 64 and output
// columns tx * DVT + e. Rows are interleaved so that the two rows a warp
// reads at once are one padded row apart (no bank conflict); K sits in
// shared memory as rows of d, so the score loop reads four of d at a time
// from Q and from K. Each row's running max and sum live in the 16 threads
// that share the row (a half warp): they reduce with shuffles, and the
// probabilities they write to shared memory are read back only by that half
// warp, so a __syncwarp orders them. Q is scaled by the scale times log2(e)
// as it is loaded, so the scores come out in base 2 and each exponential is
// one ex2.approx (2 ulp). Sizes that are not multiples of the
// tiles read zeros and mask the columns past n with -inf.
const char* const kAttentionTemplate = R"(
namespace lazylab_attention {
constexpr int BR = 128, BC = 64, THREADS = 256;

__device__ __forceinline__ float dot4(float4 a, float4 b, float acc) {
  acc = fmaf(a.x, b.x, acc);
  acc = fmaf(a.y, b.y, acc);
  acc = fmaf(a.z, b.z, acc);
  return fmaf(a.w, b.w, acc);
}

// 2^x, flushing a result below 2^-126 to 0 (a probability that small
// changes no sum it joins).
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// rows x cols (row stride src_stride) of src, times `factor`, into dst (row
// stride dst_stride, width WIDTH >= cols), zeros past `rows_valid` and `cols`.
template <int ROWS, int WIDTH, bool VEC>
__device__ __forceinline__ void load_rows(float* dst, int dst_stride, const float* __restrict__ src,
                                          long long src_stride, int rows_valid, int cols, float factor = 1.f) {
  if constexpr (VEC) {  // cols == WIDTH, a multiple of 4, and src 16-byte aligned
    constexpr int GROUPS = WIDTH / 4;
    for (int t = threadIdx.x; t < ROWS * GROUPS; t += THREADS) {
      const int r = t / GROUPS, g = t % GROUPS;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (r < rows_valid) v = *reinterpret_cast<const float4*>(src + r * src_stride + g * 4);
      v.x *= factor, v.y *= factor, v.z *= factor, v.w *= factor;
      *reinterpret_cast<float4*>(dst + r * dst_stride + g * 4) = v;
    }
  } else {
    for (int t = threadIdx.x; t < ROWS * WIDTH; t += THREADS) {
      const int r = t / WIDTH, c = t % WIDTH;
      dst[r * dst_stride + c] = (r < rows_valid && c < cols) ? src[r * src_stride + c] * factor : 0.f;
    }
  }
}

// Rows of k for keys [0, keys_valid) from a [d, n] layout (k read as it is,
// its rows n apart): dst[key][c] = src[c * n + key].
template <int WIDTH>
__device__ __forceinline__ void load_transposed(float* dst, int dst_stride, const float* __restrict__ src, long long n,
                                                int keys_valid, int d) {
  for (int t = threadIdx.x; t < BC * WIDTH; t += THREADS) {
    const int key = t % BC, c = t / BC;
    dst[key * dst_stride + c] = (key < keys_valid && c < d) ? src[c * n + key] : 0.f;
  }
}

// M, N queries and keys; D, DV head dims; DP, DVP padded to 8 and 16;
// K_ROWS: k is [n, d] (else [d, n]); MASK: 0 none, 1 (2) a score kept where
// mask[row, col] is true (false); VQ, VK, VV: q's, k's, v's rows 16 bytes
// apart and aligned, D (DV) a multiple of 4. views.at(operand, batch) and
// views.row(operand) place q, k, v and out (0 to 3) in memory.
template <long long M, long long N, int D, int DV, int DP, int DVP, bool K_ROWS, bool CAUSAL, int MASK, bool VQ,
          bool VK, bool VV, class Views>
__device__ __forceinline__ void attention(const float* __restrict__ q, const float* __restrict__ k,
                                          const float* __restrict__ v, const unsigned char* __restrict__ mask,
                                          float* __restrict__ out, float scale, Views views) {
  constexpr int QS = DP + 4, VS = DVP, PS = BC + 4, DVT = DVP / 16;
  extern __shared__ float4 shared_memory[];
  float* Qs = reinterpret_cast<float*>(shared_memory);
  float* Ks = Qs + BR * QS;
  float* Vs = Ks + BC * QS;
  float* Ps = Vs + BC * VS;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  long long batch, m0;
  lazylab_attention_block(BR, batch, m0);
  const long long q_row = views.row(0), k_row = views.row(1), v_row = views.row(2), out_row = views.row(3);
  q += views.at(0, batch) + m0 * q_row;
  k += views.at(1, batch);
  v += views.at(2, batch);
  out += views.at(3, batch);
  const int rows_valid = (int)(M - m0 < BR ? M - m0 : BR);
  // The scores come out scaled and in base 2: q times scale * log2(e), so
  // exp(x - max) = 2^(x' - max'), one ex2 each.
  load_rows<BR, DP, VQ && D == DP>(Qs, QS, q, q_row, rows_valid, D, scale * 1.4426950408889634f);
  float o[8][DVT], m[8], l[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    m[i] = -__int_as_float(0x7f800000);
    l[i] = 0.f;
#pragma unroll
    for (int e = 0; e < DVT; ++e) o[i][e] = 0.f;
  }
  const long long key_end = CAUSAL ? (m0 + BR < N ? m0 + BR : N) : N;
  for (long long n0 = 0; n0 < key_end; n0 += BC) {
    const int keys_valid = (int)(N - n0 < BC ? N - n0 : BC);
    __syncthreads();  // the previous tile's K and V are no longer read
    if (K_ROWS)
      load_rows<BC, DP, VK && D == DP>(Ks, QS, k + n0 * k_row, k_row, keys_valid, D);
    else
      load_transposed<DP>(Ks, QS, k + n0, k_row, keys_valid, D);
    load_rows<BC, DVP, VV && DV == DVP>(Vs, VS, v + n0 * v_row, v_row, keys_valid, DV);
    __syncthreads();

    float s[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) s[i][j] = 0.f;
#pragma unroll 1
    for (int c = 0; c < DP; c += 4) {
      float4 kk[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) kk[j] = *reinterpret_cast<const float4*>(Ks + (tx + 16 * j) * QS + c);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float4 qq = *reinterpret_cast<const float4*>(Qs + (ty + 16 * i) * QS + c);
#pragma unroll
        for (int j = 0; j < 4; ++j) s[i][j] = dot4(qq, kk[j], s[i][j]);
      }
    }

    // Only the last tile has columns past n; only tiles reaching past the
    // block's first row have columns past a row's own (causal).
    const bool edge = MASK != 0 || n0 + BC > N || (CAUSAL && n0 + BC > m0 + 1);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const long long row = m0 + ty + 16 * i;
      float tile_max = -__int_as_float(0x7f800000);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const long long col = n0 + tx + 16 * j;
        float x = s[i][j];
        if (edge && (col >= N || (CAUSAL && col > row) ||
                     (MASK != 0 && row < M && (mask[row * N + col] != 0) != (MASK == 1))))
          x = -__int_as_float(0x7f800000);
        s[i][j] = x;
        tile_max = fmaxf(tile_max, x);
      }
#pragma unroll
      for (int offset = 8; offset > 0; offset >>= 1)
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, offset));
      const float peak = fmaxf(m[i], tile_max);
      // While every score so far is -inf, nothing is accumulated: keep 0.
      const float base = peak == -__int_as_float(0x7f800000) ? 0.f : peak;
      const float alpha = exp2_ftz(m[i] - base);
      m[i] = peak;
      l[i] *= alpha;
#pragma unroll
      for (int e = 0; e < DVT; ++e) o[i][e] *= alpha;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float p = exp2_ftz(s[i][j] - base);
        l[i] += p;
        Ps[(ty + 16 * i) * PS + tx + 16 * j] = p;
      }
    }
    __syncwarp();

#pragma unroll 1
    for (int c = 0; c < BC; c += 4) {
      float vv[4][DVT];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        if constexpr (DVT % 4 == 0) {
#pragma unroll
          for (int e = 0; e < DVT; e += 4) {
            const float4 w = *reinterpret_cast<const float4*>(Vs + (c + r) * VS + tx * DVT + e);
            vv[r][e] = w.x, vv[r][e + 1] = w.y, vv[r][e + 2] = w.z, vv[r][e + 3] = w.w;
          }
        } else {
#pragma unroll
          for (int e = 0; e < DVT; ++e) vv[r][e] = Vs[(c + r) * VS + tx * DVT + e];
        }
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float4 p = *reinterpret_cast<const float4*>(Ps + (ty + 16 * i) * PS + c);
#pragma unroll
        for (int e = 0; e < DVT; ++e)
          o[i][e] = fmaf(p.w, vv[3][e], fmaf(p.z, vv[2][e], fmaf(p.y, vv[1][e], fmaf(p.x, vv[0][e], o[i][e]))));
      }
    }
    __syncwarp();  // the next tile's probabilities overwrite these
  }

#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float total = l[i];
#pragma unroll
    for (int offset = 8; offset > 0; offset >>= 1) total += __shfl_xor_sync(0xffffffffu, total, offset);
    const long long row = m0 + ty + 16 * i;
    if (row >= M) continue;
#pragma unroll
    for (int e = 0; e < DVT; ++e) {
      const int col = tx * DVT + e;
      if (col < DV) out[row * out_row + col] = o[i][e] / total;
    }
  }
}
}  // namespace lazylab_attention
)";

namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

}  // namespace

bool AttentionViews::aligned(int i, int64_t elements) const {
  const OperandView& view = operands[i];
  bool all = view.offset % elements == 0 && view.row % elements == 0;
  for (int64_t stride : view.batch) all = all && stride % elements == 0;
  return all;
}

AttentionViews attention_views(const lazylab_kernel& kernel) {
  AttentionViews views;
  if (const lazylab_attention_views* given = lazylab_kernel_attention_views(&kernel)) {
    views.batch_shape.assign(given->batch_shape, given->batch_shape + given->batch_rank);
    const lazylab_attention_view* each[4] = {&given->q, &given->k, &given->v, &given->output};
    for (int i = 0; i < 4; ++i)
      views.operands[i] = {each[i]->offset, each[i]->row_stride,
                           std::vector<int64_t>(each[i]->batch_strides, each[i]->batch_strides + given->batch_rank)};
    return views;
  }
  const lazylab_attention& a = kernel.attention;
  const int64_t k_row = a.k_transposed ? a.d : a.n;
  views.batch_shape = {a.batch};
  views.operands[0] = {0, a.d, {a.m * a.d}};
  views.operands[1] = {0, k_row, {a.n * a.d}};
  views.operands[2] = {0, a.dv, {a.n * a.dv}};
  views.operands[3] = {0, a.dv, {a.m * a.dv}};
  return views;
}

std::string views_struct(const AttentionViews& views) {
  // Batch dim j's index from the flattened one: b / (the dims after it) % its size.
  std::vector<std::string> index(views.batch_shape.size());
  int64_t inner = 1;
  for (size_t j = views.batch_shape.size(); j-- > 0;) {
    int64_t size = views.batch_shape[j];
    if (size != 1) index[j] = inner == 1 ? fmt::format("b % {}LL", size) : fmt::format("b / {}LL % {}LL", inner, size);
    inner *= size;
  }
  std::string at, row;
  for (int i = 0; i < 4; ++i) {
    const OperandView& view = views.operands[i];
    std::string sum = fmt::format("{}LL", view.offset);
    for (size_t j = 0; j < index.size(); ++j)
      if (!index[j].empty() && view.batch[j] != 0) sum += fmt::format(" + ({}) * {}LL", index[j], view.batch[j]);
    at += i < 3 ? fmt::format("operand == {} ? {} : ", i, sum) : sum;
    row += i < 3 ? fmt::format("operand == {} ? {}LL : ", i, view.row) : fmt::format("{}LL", view.row);
  }
  return fmt::format(
      "  struct Views {{\n"
      "    __device__ __forceinline__ long long at(int operand, long long b) const {{\n      return {};\n    }}\n"
      "    __device__ __forceinline__ long long row(int operand) const {{ return {}; }}\n  }};\n",
      at, row);
}

AttentionMask attention_mask(const lazylab_kernel& kernel) {
  AttentionMask mask;
  uint32_t value = lazylab_kernel_attention_mask(&kernel);
  if (value == LAZYLAB_NO_MASK) return mask;
  mask.value = value;
  mask.kind = kernel.attention_mask.keep_where ? 1 : 2;
  mask.parameter = "const unsigned char* __restrict__ mask, ";
  mask.argument = "mask";
  return mask;
}

AttentionMask attention_launch(const lazylab_kernel& kernel, const std::string& name, int64_t shared_bytes,
                               Launch& launch, int64_t rows) {
  const lazylab_attention& a = kernel.attention;
  int64_t row_tiles = (a.m + rows - 1) / rows;
  if (a.batch > 0x7fffffff || row_tiles > 65535)
    throw std::invalid_argument(
        fmt::format("codegen: attention of {} batches x {} rows is past CUDA's grid", a.batch, a.m));
  AttentionMask mask = attention_mask(kernel);
  launch.function = name;
  launch.values = {a.q, a.k, a.v};
  if (mask.value != kNoValue) launch.values.push_back(mask.value);
  launch.values.push_back(a.output);
  launch.work = a.batch * a.m * a.dv;  // 0: nothing to launch
  launch.block = 256;
  launch.blocks = static_cast<uint32_t>(a.batch);
  launch.blocks_y = static_cast<uint32_t>(row_tiles);
  launch.shared_bytes = static_cast<uint32_t>(shared_bytes);
  return mask;
}

std::string attention_function(const lazylab_kernel& kernel, const std::string& name, Launch& launch) {
  const lazylab_attention& a = kernel.attention;
  int64_t dp = round_up(a.d, 8), dvp = round_up(a.dv, 16);
  constexpr int64_t kRows = 128, kKeys = 64;
  int64_t floats = kRows * (dp + 4) + kKeys * (dp + 4) + kKeys * dvp + kRows * (kKeys + 4);
  AttentionMask mask = attention_launch(kernel, name, floats * 4, launch);
  // Two blocks an SM where the output fits 4 columns a thread.
  int min_blocks = dvp / 16 <= 4 ? 2 : 1;
  // Rows read as float4s where each starts 16 bytes apart.
  AttentionViews views = attention_views(kernel);
  auto vector = [&](int operand, int64_t width) {
    return width % 4 == 0 && views.aligned(operand, 4) ? "true" : "false";
  };
  return fmt::format(
      "extern \"C\" __global__ void __launch_bounds__(256, {8}) {0}(const float* __restrict__ q, const float* "
      "__restrict__ k,\n    const float* __restrict__ v, {10}float* __restrict__ out, long long work) {{\n{13}"
      "  lazylab_attention::attention<{1}LL, {2}LL, {3}, {4}, {5}, {6}, {7}, {11}, {14}, {15}, {16}>(q, k, v, {12}, "
      "out, {9}, Views{{}});\n}}\n",
      name, a.m, a.n, a.d, a.dv, dp, dvp,
      fmt::format("{}, {}", a.k_transposed ? "true" : "false", a.causal ? "true" : "false"), min_blocks,
      fmt::format("__int_as_float({:#x})", std::bit_cast<uint32_t>(static_cast<float>(a.scale))), mask.parameter,
      mask.kind, mask.argument, views_struct(views), vector(0, a.d), vector(1, a.d), vector(2, a.dv));
}

}  // namespace lazylab::cuda
