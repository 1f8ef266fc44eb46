#include "attention_tensor_core.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "attention_kernel.h"

namespace lazylab::cuda {

// Fragments (PTX ISA, mma.m16n8k16): lane = 4 g + t. A (16 x 16) holds rows
// g and g + 8, columns 2t, 2t + 1 and those plus 8; B (16 x 8) rows 2t, 2t + 1
// and those plus 8 of column g; C (16 x 8, f32) rows g and g + 8, columns 2t
// and 2t + 1. ldmatrix.x4 gives four 8 x 8 blocks, lanes 8i to 8i + 7 naming
// block i's rows; with .trans each lane gets two elements of a column. Rows
// in shared memory are padded by 8 elements (16 bytes), so the eight rows an
// ldmatrix reads fall in different banks.
const char* const kAttention16Template = R"(
namespace lazylab_attention16 {
constexpr int BR = 128, BC = 64, THREADS = 256;
constexpr float LOG2E = 1.4426950408889634f;

__device__ __forceinline__ unsigned shared_address(const void* p) {
  unsigned long long a;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
  return (unsigned)a;
}

// 16 bytes from global to shared memory, or zeros where !valid.
__device__ __forceinline__ void copy16(unsigned dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(PENDING) : "memory");
}

__device__ __forceinline__ void ldmatrix(unsigned (&r)[4], unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_trans(unsigned (&r)[4], unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

// c += a b, 16 x 8 x 16, f32 sums.
template <bool BF16>
__device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (BF16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// lo and hi rounded to nearest even, packed (lo in the low half).
template <bool BF16>
__device__ __forceinline__ unsigned pack(float lo, float hi) {
  unsigned r;
  if constexpr (BF16)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <bool BF16>
__device__ __forceinline__ float low(unsigned packed) {
  if constexpr (BF16) return __uint_as_float(packed << 16);
  float f;
  asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, l; }" : "=f"(f) : "r"(packed));
  return f;
}
template <bool BF16>
__device__ __forceinline__ float high(unsigned packed) {
  if constexpr (BF16) return __uint_as_float(packed & 0xffff0000u);
  float f;
  asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "r"(packed));
  return f;
}

__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// ROWS x WIDTH (a multiple of 8) of src (row stride src_stride) into dst
// (row stride dst_stride) as 16-byte copies; zeros at rows >= rows_valid
// and columns >= cols (a multiple of 8).
template <int ROWS, int WIDTH>
__device__ __forceinline__ void load_tile(unsigned short* dst, int dst_stride, const unsigned short* __restrict__ src,
                                          long long src_stride, int rows_valid, int cols) {
  constexpr int CHUNKS = WIDTH / 8;
  for (int i = threadIdx.x; i < ROWS * CHUNKS; i += THREADS) {
    const int r = i / CHUNKS, c = i % CHUNKS * 8;
    const bool valid = r < rows_valid && c < cols;
    copy16(shared_address(dst + r * dst_stride + c), valid ? src + r * src_stride + c : src, valid);
  }
}

// M, N queries and keys (below 2^31); D, DV head dims (multiples of 8), DP,
// DVP padded to 16; K_ROWS: k is [n, d] (else [d, n], N a multiple of 8);
// EXACT_SCALE: the scale is a power of two, so a rounded score times it needs
// no rounding again; MASK: 0 none, 1 (2) a score kept where mask[row, col]
// is true (false).
template <bool BF16, int M, int N, int D, int DV, int DP, int DVP, bool K_ROWS, bool CAUSAL, bool EXACT_SCALE,
          int MASK>
__device__ __forceinline__ void attention(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                          const unsigned short* __restrict__ v, const unsigned char* __restrict__ mask,
                                          unsigned short* __restrict__ out, float scale) {
  constexpr int QS = (DP > DVP ? DP : DVP) + 8;  // Q's rows, then the output's
  constexpr int KS = K_ROWS ? DP + 8 : BC + 8, K_TILE = (K_ROWS ? BC : DP) * KS;
  constexpr int VS = DVP + 8, V_TILE = BC * VS;
  const float NEG_INF = -__int_as_float(0x7f800000);
  extern __shared__ uint4 attention16_shared[];
  unsigned short* Qs = reinterpret_cast<unsigned short*>(attention16_shared);
  unsigned short* Ks = Qs + BR * QS;
  unsigned short* Vs = Ks + 2 * K_TILE;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  long long batch, first_row;
  lazylab_attention_block(BR, batch, first_row);
  const int row_start = (int)first_row;
  q += batch * M * D + (long long)row_start * D;
  k += batch * N * D;
  v += batch * N * DV;
  out += batch * M * DV + (long long)row_start * DV;
  const int rows_valid = M - row_start < BR ? M - row_start : BR;
  const int warp_first = row_start + warp * 16, warp_last = warp_first + 15;
  const int row[2] = {warp_first + g, warp_first + g + 8};

  const int key_end = CAUSAL ? (row_start + BR < N ? row_start + BR : N) : N;
  const int tiles = (key_end + BC - 1) / BC;
  auto load_keys = [&](int tile) {
    const int n0 = tile * BC;
    const int keys_valid = N - n0 < BC ? N - n0 : BC;
    unsigned short* kt = Ks + (tile & 1) * K_TILE;
    if constexpr (K_ROWS)
      load_tile<BC, DP>(kt, KS, k + (long long)n0 * D, D, keys_valid, D);
    else
      load_tile<DP, BC>(kt, KS, k + n0, N, D, keys_valid);
    load_tile<BC, DVP>(Vs + (tile & 1) * V_TILE, VS, v + (long long)n0 * DV, DV, keys_valid, DV);
  };
  load_tile<BR, DP>(Qs, QS, q, D, rows_valid, D);
  load_keys(0);
  commit();

  unsigned qf[DP / 16][4];
  float o[DVP / 8][4];
#pragma unroll
  for (int j = 0; j < DVP / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float row_max[2] = {NEG_INF, NEG_INF}, row_sum[2] = {0.f, 0.f};

  for (int tile = 0; tile < tiles; ++tile) {
    if (tile + 1 < tiles) {
      load_keys(tile + 1);
      commit();
      wait_copies<1>();
    } else {
      wait_copies<0>();
    }
    __syncthreads();
    if (tile == 0) {
#pragma unroll
      for (int kk = 0; kk < DP / 16; ++kk)
        ldmatrix(qf[kk], shared_address(Qs + (warp * 16 + lane % 16) * QS + kk * 16 + lane / 16 * 8));
    }
    const int n0 = tile * BC;
    // Causal: a warp whose rows all precede this tile's keys has nothing here.
    if (!CAUSAL || n0 <= warp_last) {
      const unsigned short* kt = Ks + (tile & 1) * K_TILE;
      const unsigned short* vt = Vs + (tile & 1) * V_TILE;
      float s[BC / 8][4];
#pragma unroll
      for (int j = 0; j < BC / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < DP / 16; ++kk) {
#pragma unroll
        for (int p = 0; p < BC / 16; ++p) {
          unsigned b[4];
          if constexpr (K_ROWS)
            ldmatrix(b, shared_address(kt + (p * 16 + lane % 8 + lane / 16 * 8) * KS + kk * 16 + lane / 8 % 2 * 8));
          else
            ldmatrix_trans(b, shared_address(kt + (kk * 16 + lane % 8 + lane / 8 % 2 * 8) * KS + p * 16 + lane / 16 * 8));
          mma<BF16>(s[2 * p], qf[kk], b[0], b[1]);
          mma<BF16>(s[2 * p + 1], qf[kk], b[2], b[3]);
        }
      }

      // As the program: the product rounded, times the scale rounded, masked;
      // then in base 2 for ex2.
      const bool edge = MASK != 0 || n0 + BC > N || (CAUSAL && n0 + BC - 1 > warp_first);
      float tile_max[2] = {NEG_INF, NEG_INF};
#pragma unroll
      for (int j = 0; j < BC / 8; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          unsigned r = pack<BF16>(s[j][2 * h], s[j][2 * h + 1]);
          float x[2];
          if constexpr (EXACT_SCALE) {
            x[0] = low<BF16>(r) * (scale * LOG2E), x[1] = high<BF16>(r) * (scale * LOG2E);
          } else {
            r = pack<BF16>(low<BF16>(r) * scale, high<BF16>(r) * scale);
            x[0] = low<BF16>(r) * LOG2E, x[1] = high<BF16>(r) * LOG2E;
          }
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = n0 + j * 8 + 2 * t + e;
            if (edge && (col >= N || (CAUSAL && col > row[h]) ||
                         (MASK != 0 && row[h] < M && (mask[(long long)row[h] * N + col] != 0) != (MASK == 1))))
              x[e] = NEG_INF;
            s[j][2 * h + e] = x[e];
            tile_max[h] = fmaxf(tile_max[h], x[e]);
          }
        }
      }
      float alpha[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
        const float peak = fmaxf(row_max[h], tile_max[h]);
        // While every score so far is -inf, nothing is accumulated: keep 0.
        const float base = peak == NEG_INF ? 0.f : peak;
        alpha[h] = exp2_ftz(row_max[h] - base);
        row_max[h] = peak;
        row_sum[h] *= alpha[h];
#pragma unroll
        for (int j = 0; j < BC / 8; ++j) {
          s[j][2 * h] = exp2_ftz(s[j][2 * h] - base);
          s[j][2 * h + 1] = exp2_ftz(s[j][2 * h + 1] - base);
          row_sum[h] += s[j][2 * h] + s[j][2 * h + 1];
        }
      }
#pragma unroll
      for (int j = 0; j < DVP / 8; ++j) {
        o[j][0] *= alpha[0], o[j][1] *= alpha[0];
        o[j][2] *= alpha[1], o[j][3] *= alpha[1];
      }

#pragma unroll
      for (int kk = 0; kk < BC / 16; ++kk) {
        const unsigned a[4] = {pack<BF16>(s[2 * kk][0], s[2 * kk][1]), pack<BF16>(s[2 * kk][2], s[2 * kk][3]),
                               pack<BF16>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                               pack<BF16>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int p = 0; p < DVP / 16; ++p) {
          unsigned b[4];
          ldmatrix_trans(b, shared_address(vt + (kk * 16 + lane % 8 + lane / 8 % 2 * 8) * VS + p * 16 + lane / 16 * 8));
          mma<BF16>(o[2 * p], a, b[0], b[1]);
          mma<BF16>(o[2 * p + 1], a, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // this stage's K and V are next overwritten
  }

  // The output through shared memory (Q's rows, this warp's own), so that
  // it leaves in 16-byte stores.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
  }
  unsigned short* os = Qs + warp * 16 * QS;
#pragma unroll
  for (int j = 0; j < DVP / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      *reinterpret_cast<unsigned*>(os + (g + 8 * h) * QS + j * 8 + 2 * t) =
          pack<BF16>(o[j][2 * h] / row_sum[h], o[j][2 * h + 1] / row_sum[h]);
  __syncwarp();
  constexpr int CHUNKS = DV / 8;
  for (int i = lane; i < 16 * CHUNKS; i += 32) {
    const int r = i / CHUNKS, c = i % CHUNKS * 8;
    if (warp * 16 + r < rows_valid)
      *reinterpret_cast<uint4*>(out + (warp * 16 + r) * DV + c) = *reinterpret_cast<const uint4*>(os + r * QS + c);
  }
}
}  // namespace lazylab_attention16
)";

namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Whether x times `scale` is exact for every 16-bit x away from the
// subnormals: a power of two (1 among them).
bool exact_scale(double scale) {
  int exponent = 0;
  return std::frexp(scale, &exponent) == 0.5;
}

}  // namespace

std::optional<std::string> attention16_refusal(const lazylab_kernel& kernel) {
  const lazylab_attention& a = kernel.attention;
  if (a.d % 8 != 0 || a.dv % 8 != 0)
    return fmt::format("a 16-bit attention's head dims must be multiples of 8 (rows of 16-byte copies), not {} and {}",
                       a.d, a.dv);
  if (a.m >= (int64_t{1} << 31) || a.n >= (int64_t{1} << 31))
    return fmt::format("a 16-bit attention indexes rows and keys in 32 bits, not {} and {}", a.m, a.n);
  if (!a.k_transposed && a.n % 8 != 0)
    return fmt::format("a 16-bit attention reading k as [d, n] needs n a multiple of 8, not {}", a.n);
  return std::nullopt;
}

std::string attention16_function(const lazylab_kernel& kernel, uint32_t dtype, const std::string& name,
                                 Launch& launch) {
  const lazylab_attention& a = kernel.attention;
  constexpr int64_t kRows = 128, kKeys = 64;
  int64_t dp = round_up(a.d, 16), dvp = round_up(a.dv, 16);
  int64_t q_stride = std::max(dp, dvp) + 8;
  int64_t k_tile = a.k_transposed ? kKeys * (dp + 8) : dp * (kKeys + 8);
  int64_t elements = kRows * q_stride + 2 * k_tile + 2 * kKeys * (dvp + 8);
  AttentionMask mask = attention_launch(kernel, name, elements * 2, launch);
  // Head dims up to 64 fit two blocks an SM in 128 registers a thread (ptxas
  // spills a few bytes in some; 135 to 176 without the bound): 16 warps to
  // hide each other's softmax and loads instead of 8.
  int min_blocks = std::max(dp, dvp) <= 64 ? 2 : 1;
  return fmt::format(
      "extern \"C\" __global__ void __launch_bounds__(256, {12}) {0}(const unsigned short* __restrict__ q, const "
      "unsigned short* __restrict__ k,\n    const unsigned short* __restrict__ v, {13}unsigned short* __restrict__ "
      "out, "
      "long long work) {{\n"
      "  lazylab_attention16::attention<{1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {11}, {14}>(q, k, v, {15}, out, "
      "{10});\n}}\n",
      name, dtype == LAZYLAB_BF16 ? "true" : "false", a.m, a.n, a.d, a.dv, dp, dvp, a.k_transposed ? "true" : "false",
      a.causal ? "true" : "false",
      fmt::format("__int_as_float({:#x})", std::bit_cast<uint32_t>(static_cast<float>(a.scale))),
      exact_scale(a.scale) ? "true" : "false", min_blocks, mask.parameter, mask.kind, mask.argument);
}

}  // namespace lazylab::cuda
