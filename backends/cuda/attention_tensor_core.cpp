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

// x rounded to bf16 (to nearest even), as an f32.
__device__ __forceinline__ float rounded_bf16(float x) { return __uint_as_float(pack<true>(0.f, x)); }

__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// ROWS x WIDTH (a multiple of 8) of src (row stride src_stride) into dst
// (row stride dst_stride) as 16-byte copies; zeros at rows >= rows_valid
// and columns >= cols (a multiple of 8).
template <int ROWS, int WIDTH, int BLOCK = THREADS>
__device__ __forceinline__ void load_tile(unsigned short* dst, int dst_stride, const unsigned short* __restrict__ src,
                                          long long src_stride, int rows_valid, int cols) {
  constexpr int CHUNKS = WIDTH / 8;
  for (int i = threadIdx.x; i < ROWS * CHUNKS; i += BLOCK) {
    const int r = i / CHUNKS, c = i % CHUNKS * 8;
    const bool valid = r < rows_valid && c < cols;
    copy16(shared_address(dst + r * dst_stride + c), valid ? src + r * src_stride + c : src, valid);
  }
}

// The scores of one tile as the program computes them, folded into the
// online softmax: s holds a warp's 16 rows by BC keys as C fragments (the
// raw f32 sums of q k), rounded, times the scale rounded, masked, then in
// base 2 for ex2; row_max and row_sum move on, alpha is the factor the
// output's sums so far take (rescale); p gets the
// probabilities rounded to 16 bits as the next product's A fragments (the
// C fragment of two 8-column tiles is the A fragment of one 16-deep step).
// The maxima are taken over the rounded scores before the factor to base 2
// (positive: log2 e, times the scale where that is a power of two), which
// each exponent's argument then takes in one fma. A row's running max moves
// only where a tile's passes it by more than 8 (FlashAttention-4's rule):
// the probabilities stay at most 2^8, which f32 sums and 16-bit
// probabilities hold, and the quotient, the sum over the same base, is the
// same; most tiles then leave alpha at 1 and the output unscaled.
template <bool BF16, int M, int N, bool CAUSAL, bool EXACT_SCALE, int MASK>
__device__ __forceinline__ void softmax_tile(const float (&s)[BC / 8][4], unsigned (&p)[BC / 16][4],
                                             float (&alpha)[2], float (&row_max)[2], float (&row_sum)[2], int n0,
                                             int warp_first, const int (&row)[2], int t,
                                             const unsigned char* __restrict__ mask, float scale) {
  const float NEG_INF = -__int_as_float(0x7f800000);
  const float to_log2 = EXACT_SCALE ? scale * LOG2E : LOG2E;
  const bool edge = MASK != 0 || n0 + BC > N || (CAUSAL && n0 + BC - 1 > warp_first);
  // Not in s: the warpgroup kernel's products write s while they run, and
  // an instruction writing it there would serialize them.
  float e[BC / 8][4];
  float tile_max[2] = {NEG_INF, NEG_INF};
#pragma unroll
  for (int j = 0; j < BC / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float x[2];
      if constexpr (BF16) {
        // A bf16 is an f32's high half: packed over a zero, the rounded
        // score is an f32 in one instruction, not a pack and two unpacks.
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          x[i] = rounded_bf16(s[j][2 * h + i]);
          if constexpr (!EXACT_SCALE) x[i] = rounded_bf16(x[i] * scale);
        }
      } else {
        unsigned r = pack<BF16>(s[j][2 * h], s[j][2 * h + 1]);
        if constexpr (!EXACT_SCALE) r = pack<BF16>(low<BF16>(r) * scale, high<BF16>(r) * scale);
        x[0] = low<BF16>(r);
        x[1] = high<BF16>(r);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int col = n0 + j * 8 + 2 * t + i;
        if (edge && (col >= N || (CAUSAL && col > row[h]) ||
                     (MASK != 0 && row[h] < M && (mask[(long long)row[h] * N + col] != 0) != (MASK == 1))))
          x[i] = NEG_INF;
        e[j][2 * h + i] = x[i];
        tile_max[h] = fmaxf(tile_max[h], x[i]);
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
    tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
    const float peak = tile_max[h] * to_log2;
    const bool moves = peak > row_max[h] + 8.f;  // -inf + 8 is -inf: the first finite score moves it
    const float kept = moves ? peak : row_max[h];
    // While every score so far is -inf, nothing is accumulated: keep 0.
    const float base = kept == NEG_INF ? 0.f : kept;
    alpha[h] = moves ? exp2_ftz(row_max[h] - base) : 1.f;
    row_max[h] = kept;
    row_sum[h] *= alpha[h];
#pragma unroll
    for (int j = 0; j < BC / 8; ++j) {
      e[j][2 * h] = exp2_ftz(fmaf(e[j][2 * h], to_log2, -base));
      e[j][2 * h + 1] = exp2_ftz(fmaf(e[j][2 * h + 1], to_log2, -base));
      row_sum[h] += e[j][2 * h] + e[j][2 * h + 1];
    }
  }
#pragma unroll
  for (int kk = 0; kk < BC / 16; ++kk) {
    p[kk][0] = pack<BF16>(e[2 * kk][0], e[2 * kk][1]);
    p[kk][1] = pack<BF16>(e[2 * kk][2], e[2 * kk][3]);
    p[kk][2] = pack<BF16>(e[2 * kk + 1][0], e[2 * kk + 1][1]);
    p[kk][3] = pack<BF16>(e[2 * kk + 1][2], e[2 * kk + 1][3]);
  }
}

// The output's sums so far times the tile's alpha, skipped where no row of
// the warp's moved its max (alpha 1 in every lane).
template <int DVP>
__device__ __forceinline__ void rescale(float (&o)[DVP / 8][4], const float (&alpha)[2]) {
  if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#pragma unroll
  for (int j = 0; j < DVP / 8; ++j) {
    o[j][0] *= alpha[0], o[j][1] *= alpha[0];
    o[j][2] *= alpha[1], o[j][3] *= alpha[1];
  }
}

// A warp's 16 output rows divided by their sums, through shared memory
// (`staging`, 16 rows of QS elements the warp's own) so that they leave in
// 16-byte stores, out_row apart; `rows` of them are the output's.
template <bool BF16, int DV, int DVP, int QS>
__device__ __forceinline__ void store_rows(const float (&o)[DVP / 8][4], float (&row_sum)[2], unsigned short* staging,
                                           unsigned short* __restrict__ out, long long out_row, int rows, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
  }
#pragma unroll
  for (int j = 0; j < DVP / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      *reinterpret_cast<unsigned*>(staging + (g + 8 * h) * QS + j * 8 + 2 * t) =
          pack<BF16>(o[j][2 * h] / row_sum[h], o[j][2 * h + 1] / row_sum[h]);
  __syncwarp();
  constexpr int CHUNKS = DV / 8;
  for (int i = lane; i < 16 * CHUNKS; i += 32) {
    const int r = i / CHUNKS, c = i % CHUNKS * 8;
    if (r < rows) *reinterpret_cast<uint4*>(out + r * out_row + c) = *reinterpret_cast<const uint4*>(staging + r * QS + c);
  }
}

// M, N queries and keys (below 2^31); D, DV head dims (multiples of 8), DP,
// DVP padded to 16; K_ROWS: k is [n, d] (else [d, n], N a multiple of 8);
// EXACT_SCALE: the scale is a power of two, so a rounded score times it needs
// no rounding again; MASK: 0 none, 1 (2) a score kept where mask[row, col]
// is true (false); views.at(operand, batch) and views.row(operand) place q,
// k, v and out (0 to 3) in memory, every row 16 bytes aligned.
template <bool BF16, int M, int N, int D, int DV, int DP, int DVP, bool K_ROWS, bool CAUSAL, bool EXACT_SCALE,
          int MASK, class Views>
__device__ __forceinline__ void attention(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                          const unsigned short* __restrict__ v, const unsigned char* __restrict__ mask,
                                          unsigned short* __restrict__ out, float scale, Views views) {
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
  const long long q_row = views.row(0), k_row = views.row(1), v_row = views.row(2), out_row = views.row(3);
  q += views.at(0, batch) + row_start * q_row;
  k += views.at(1, batch);
  v += views.at(2, batch);
  out += views.at(3, batch) + row_start * out_row;
  const int rows_valid = M - row_start < BR ? M - row_start : BR;
  const int key_end = CAUSAL ? (row_start + BR < N ? row_start + BR : N) : N;
  const int warp_first = row_start + warp * 16, warp_last = warp_first + 15;
  const int row[2] = {warp_first + g, warp_first + g + 8};
  const int tiles = (key_end + BC - 1) / BC;
  auto load_keys = [&](int tile) {
    const int n0 = tile * BC;
    const int keys_valid = N - n0 < BC ? N - n0 : BC;
    unsigned short* kt = Ks + (tile & 1) * K_TILE;
    if constexpr (K_ROWS)
      load_tile<BC, DP>(kt, KS, k + n0 * k_row, k_row, keys_valid, D);
    else
      load_tile<DP, BC>(kt, KS, k + n0, k_row, D, keys_valid);
    load_tile<BC, DVP>(Vs + (tile & 1) * V_TILE, VS, v + n0 * v_row, v_row, keys_valid, DV);
  };
  load_tile<BR, DP>(Qs, QS, q, q_row, rows_valid, D);
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
      unsigned a[BC / 16][4];
      float alpha[2];
      softmax_tile<BF16, M, N, CAUSAL, EXACT_SCALE, MASK>(s, a, alpha, row_max, row_sum, n0, warp_first, row, t, mask,
                                                         scale);
      rescale<DVP>(o, alpha);
#pragma unroll
      for (int kk = 0; kk < BC / 16; ++kk) {
#pragma unroll
        for (int p = 0; p < DVP / 16; ++p) {
          unsigned b[4];
          ldmatrix_trans(b, shared_address(vt + (kk * 16 + lane % 8 + lane / 8 % 2 * 8) * VS + p * 16 + lane / 16 * 8));
          mma<BF16>(o[2 * p], a[kk], b[0], b[1]);
          mma<BF16>(o[2 * p + 1], a[kk], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // this stage's K and V are next overwritten
  }
  store_rows<BF16, DV, DVP, QS>(o, row_sum, Qs + warp * 16 * QS, out + warp * 16 * out_row, out_row,
                                rows_valid - warp * 16, lane);
}
}  // namespace lazylab_attention16
)";

// Hopper's warpgroup products (sm_90a): four warps, 64 query rows, issue
// one product whose B operand is in shared memory: the scores Q by K (both
// there), the output the probabilities (registers: the scores' C fragments,
// as above) by V. Operands lie in core matrices (8 rows of 16 bytes, 128
// contiguous bytes, no swizzle): a tile's 8-row group i and 16-byte chunk c
// at (i * chunks + c) * 128 bytes, so a descriptor's leading offset
// (between core matrices along the depth) and stride (along M or N) are
// constants of the tile's width; Q's and K's rows are the depth's (the
// depth contiguous), V's the keys' (its depth, so B transposed). K and V
// come three stages deep, copied by a warp of their own where no mask is
// causal, else by every thread.
const char* const kAttentionWgmmaTemplate = R"(
namespace lazylab_attention16 {
__device__ __forceinline__ unsigned long long descriptor(unsigned address, unsigned leading, unsigned stride) {
  return (unsigned long long)((address & 0x3FFFF) >> 4) | (unsigned long long)(leading >> 4) << 16 |
         (unsigned long long)(stride >> 4) << 32;
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
}
// Registers an asynchronous product wrote or read, pinned after its wait:
// the compiler moves no use of them above it.
template <int ROWS_, int COLS_>
__device__ __forceinline__ void pin(float (&x)[ROWS_][COLS_]) {
#pragma unroll
  for (int i = 0; i < ROWS_; ++i)
#pragma unroll
    for (int j = 0; j < COLS_; ++j) asm volatile("" : "+f"(x[i][j])::"memory");
}
template <int ROWS_, int COLS_>
__device__ __forceinline__ void pin(unsigned (&x)[ROWS_][COLS_]) {
#pragma unroll
  for (int i = 0; i < ROWS_; ++i)
#pragma unroll
    for (int j = 0; j < COLS_; ++j) asm volatile("" : "+r"(x[i][j])::"memory");
}
// Shared memory written by cp.async, next read by the tensor cores.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// ROWS x WIDTH (a multiple of 8) of src into dst as core matrices, zeros at
// rows >= rows_valid and columns >= cols: eight threads fill one core
// matrix (128 bytes of shared memory, eight rows' 16 bytes of global),
// `thread` one of BLOCK copying. UNROLLED: each thread's copies unrolled,
// their count known at compile time: in a loop over the block's stride
// their index arithmetic was a third of the instructions of a tile at head
// dim 64 (the SASS), though removing it took only 0.4% of the time. The
// pipelined form keeps the loop: unrolled, the addresses it holds spilled
// 60 bytes at head dim 128.
template <int ROWS, int WIDTH, int BLOCK, bool UNROLLED = true>
__device__ __forceinline__ void load_core_tile(unsigned short* dst, const unsigned short* __restrict__ src,
                                               long long src_stride, int rows_valid, int cols, int thread) {
  constexpr int CHUNKS = WIDTH / 8, COPIES = ROWS * CHUNKS;
  auto copy = [&](int i) {
    const int r = i / (8 * CHUNKS) * 8 + i % 8, c = i / 8 % CHUNKS * 8;
    const bool valid = r < rows_valid && c < cols;
    copy16(shared_address(dst + i * 8), valid ? src + r * src_stride + c : src, valid);
  };
  if constexpr (UNROLLED) {
#pragma unroll
    for (int j = 0; j < (COPIES + BLOCK - 1) / BLOCK; ++j)
      if (COPIES % BLOCK == 0 || thread + j * BLOCK < COPIES) copy(thread + j * BLOCK);
  } else {
    for (int i = thread; i < COPIES; i += BLOCK) copy(i);
  }
}

// Shared-memory barriers (mbarrier): a phase completes when its count of
// arrivals has come; a waiter names the parity of the phase it waits for.
__device__ __forceinline__ void barrier_init(unsigned address, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(address), "r"(count) : "memory");
}
__device__ __forceinline__ void barrier_arrive(unsigned address) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(address) : "memory");
}
// An arrival made once this thread's cp.async copies so far have landed.
__device__ __forceinline__ void barrier_arrive_on_copies(unsigned address) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(address) : "memory");
}
__device__ __forceinline__ void barrier_wait(unsigned address, unsigned parity) {
  unsigned done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(address), "r"(parity)
        : "memory");
  } while (!done);
}
// The threads of warpgroup `group` meet (barrier 0 is the block's). The
// barrier's number an immediate: from a register, ptxas reserves all 16.
__device__ __forceinline__ void group_barrier(int group) {
  if (group == 0)
    asm volatile("bar.sync 1, 128;" ::: "memory");
  else if (group == 1)
    asm volatile("bar.sync 2, 128;" ::: "memory");
  else if (group == 2)
    asm volatile("bar.sync 3, 128;" ::: "memory");
  else
    asm volatile("bar.sync 4, 128;" ::: "memory");
}
// Warpgroups taking turns to issue their score products (FlashAttention-3's
// ping-pong): warpgroup g waits on barrier 5 + g, which warpgroup g - 1
// (the last for 0) arrives at once it has issued its own, so that one
// warpgroup's softmax runs while the next's products do instead of every
// warpgroup's at once. Each barrier counts the 128 threads waiting and the
// 128 arriving.
template <int ID, bool ARRIVE>
__device__ __forceinline__ void turn_barrier() {
  if constexpr (ARRIVE)
    asm volatile("bar.arrive %0, 256;" ::"n"(ID) : "memory");
  else
    asm volatile("bar.sync %0, 256;" ::"n"(ID) : "memory");
}
// Warpgroup `group`'s barrier, waited on or (ARRIVE) arrived at; its
// number an immediate, as group_barrier's.
template <bool ARRIVE>
__device__ __forceinline__ void turn_barrier(int group) {
  if (group == 0)
    turn_barrier<5, ARRIVE>();
  else if (group == 1)
    turn_barrier<6, ARRIVE>();
  else if (group == 2)
    turn_barrier<7, ARRIVE>();
  else
    turn_barrier<8, ARRIVE>();
}
__device__ __forceinline__ void wait_turn(int group) { turn_barrier<false>(group); }
template <int GROUPS>
__device__ __forceinline__ void pass_turn(int group) {
  turn_barrier<true>((group + 1) % GROUPS);
}

// As attention() above, k as [n, d], a block of GROUPS warpgroups of 64
// rows each, each waiting for its products (the other warpgroups filling
// the gaps), and one more warpgroup that alone copies K and V, STAGES tiles
// ahead: a stage is `full` once its copies have landed and `empty` once
// every consumer warp is past its products, so that the warpgroups run
// apart instead of meeting at a block barrier each tile (on an H200 at [16
// x 16, 1024, 64], four warpgroups 0.225 ms against 0.263 with the barrier,
// two 0.260 against 0.282). The copying warpgroup gives its registers up
// to PRODUCER_REGISTERS a thread, the others take CONSUMER_REGISTERS
// (setmaxnreg; the block's registers at launch must hold both: the kernel
// is compiled to its launch bound's maximum), and the warpgroups take
// turns to issue their scores (wait_turn): at [256 heads, 1024, 128],
// 0.411 ms against 0.479 with a single copying warp, every thread held to
// 128 registers; at head dim 64 0.218 against 0.224. Each warpgroup's Q
// rows, and after them its output's, lie in its own 64 rows of QS
// elements, so that it meets only its own threads. score_product and
// output_product are the two products' function objects
// (warpgroup_product's), generated for the tiles' widths.
template <int GROUPS, int PRODUCER_REGISTERS, int CONSUMER_REGISTERS, bool BF16, int M, int N, int D, int DV, int DP,
          int DVP, bool CAUSAL, bool EXACT_SCALE, int MASK, class ScoreProduct, class OutputProduct, class Views>
__device__ __forceinline__ void attention_wgmma_loaded(const unsigned short* __restrict__ q,
                                                       const unsigned short* __restrict__ k,
                                                       const unsigned short* __restrict__ v,
                                                       const unsigned char* __restrict__ mask,
                                                       unsigned short* __restrict__ out, float scale,
                                                       ScoreProduct score_product, OutputProduct output_product,
                                                       Views views) {
  // Every warpgroup takes a turn each tile: a causal mask's skipped tiles would stop them.
  static_assert(!CAUSAL, "the loaded form takes no causal mask");
  constexpr int ROWS = 64 * GROUPS, CONSUMERS = 128 * GROUPS, STAGES = 3;
  constexpr int QS = (DP > DVP ? DP : DVP) + 8;
  constexpr int K_TILE = BC * DP, V_TILE = BC * DVP;
  constexpr unsigned K_STRIDE = DP / 8 * 128, V_LEADING = DVP / 8 * 128;
  const float NEG_INF = -__int_as_float(0x7f800000);
  extern __shared__ uint4 attention16_shared[];
  unsigned short* Qs = reinterpret_cast<unsigned short*>(attention16_shared);
  unsigned short* Ks = Qs + ROWS * QS;
  unsigned short* Vs = Ks + STAGES * K_TILE;
  const unsigned full = shared_address(Vs + STAGES * V_TILE), empty = full + 8 * STAGES;  // a barrier a stage
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  long long batch, first_row;
  lazylab_attention_block(ROWS, batch, first_row);
  const int row_start = (int)first_row;
  const long long q_row = views.row(0), k_row = views.row(1), v_row = views.row(2), out_row = views.row(3);
  const int rows_valid = M - row_start < ROWS ? M - row_start : ROWS;
  const int key_end = CAUSAL ? (row_start + ROWS < N ? row_start + ROWS : N) : N;
  const int tiles = (key_end + BC - 1) / BC;
  if (threadIdx.x == 0)
    for (int i = 0; i < STAGES; ++i) {
      barrier_init(full + 8 * i, 128);
      barrier_init(empty + 8 * i, CONSUMERS / 32);
    }
  __syncthreads();
  if (warp >= CONSUMERS / 32) {  // the copying warpgroup
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PRODUCER_REGISTERS));
    k += views.at(1, batch);
    v += views.at(2, batch);
    for (int tile = 0; tile < tiles; ++tile) {
      const int n0 = tile * BC, stage = tile % STAGES;
      if (tile >= STAGES) barrier_wait(empty + 8 * stage, (tile / STAGES - 1) & 1);
      const int keys_valid = N - n0 < BC ? N - n0 : BC;
      // The thread's index opaque to the compiler each tile, so that it
      // keeps no copy's address across tiles (in PRODUCER_REGISTERS, that
      // spilled).
      int thread = threadIdx.x - CONSUMERS;
      asm volatile("mov.u32 %0, %0;" : "+r"(thread));
      load_core_tile<BC, DP, 128>(Ks + stage * K_TILE, k + n0 * k_row, k_row, keys_valid, D, thread);
      load_core_tile<BC, DVP, 128>(Vs + stage * V_TILE, v + n0 * v_row, v_row, keys_valid, DV, thread);
      barrier_arrive_on_copies(full + 8 * stage);
    }
    asm volatile("cp.async.wait_all;" ::: "memory");  // (none committed: the barriers track them)
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGISTERS));
  // The warpgroup's index, the same in every lane as the compiler sees it,
  // so that the products' descriptors are uniform values.
  const int group = __shfl_sync(0xffffffffu, warp / 4, 0);
  unsigned short* group_rows = Qs + group * 64 * QS;
  const int group_first = row_start + group * 64, warp_first = row_start + warp * 16;
  const int row[2] = {warp_first + g, warp_first + g + 8};
  // (A group past the last row copies none, from a row that is there.)
  load_core_tile<64, DP, 128>(group_rows, q + views.at(0, batch) + (group_first < M ? group_first : row_start) * q_row,
                              q_row, rows_valid - group * 64, D, threadIdx.x % 128);
  commit();
  wait_copies<0>();
  fence_async_shared();
  group_barrier(group);
  // A descriptor's address is its low 14 bits, in 16 bytes: an offset adds to it.
  const unsigned long long q_desc = descriptor(shared_address(group_rows), 128, K_STRIDE);
  const unsigned long long k_desc = descriptor(shared_address(Ks), 128, K_STRIDE);
  const unsigned long long v_desc = descriptor(shared_address(Vs), V_LEADING, 128);
  float o[DVP / 8][4];
#pragma unroll
  for (int j = 0; j < DVP / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float row_max[2] = {NEG_INF, NEG_INF}, row_sum[2] = {0.f, 0.f}, alpha[2];
  float s[BC / 8][4];
  unsigned p[BC / 16][4];
  if (group == GROUPS - 1) pass_turn<GROUPS>(group);  // warpgroup 0 goes first
  for (int tile = 0; tile < tiles; ++tile) {
    const int stage = tile % STAGES;
    barrier_wait(full + 8 * stage, (tile / STAGES) & 1);
    fence_async_shared();
    const unsigned long long kt = k_desc + stage * (K_TILE * 2 / 16), vt = v_desc + stage * (V_TILE * 2 / 16);
    wait_turn(group);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk) score_product(s, q_desc + kk * 16, kt + kk * 16, kk > 0);
    wgmma_commit();
    // The last warpgroup's last turn is passed to no one.
    if (group != GROUPS - 1 || tile + 1 < tiles) pass_turn<GROUPS>(group);
    wgmma_wait<0>();
    pin(s);
    softmax_tile<BF16, M, N, CAUSAL, EXACT_SCALE, MASK>(s, p, alpha, row_max, row_sum, tile * BC, warp_first, row, t,
                                                       mask, scale);
    rescale<DVP>(o, alpha);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) output_product(o, p[kk], vt + kk * 2 * V_LEADING / 16, true);
    wgmma_commit();
    wgmma_wait<0>();
    pin(o);
    __syncwarp();
    if (lane == 0) barrier_arrive(empty + 8 * stage);
  }
  group_barrier(group);  // the group's Q rows take its output
  store_rows<BF16, DV, DVP, QS>(o, row_sum, group_rows + warp % 4 * 16 * QS,
                                out + views.at(3, batch) + warp_first * out_row, out_row,
                                rows_valid - warp * 16, lane);
}

// As attention() above, k as [n, d], a block of GROUPS warpgroups of 64
// rows each, K and V copied by every thread, the warps meeting at a block
// barrier each tile: the form for causal masks (in the form with a warp to
// copy, a causal block of two warpgroups at [16 x 16, 1024, 64] ran 0.239
// ms against this form's 0.211 on an H200, where without the mask it ran
// 0.260 against 0.282). PIPELINED: a tile's output product (its
// probabilities `now`) and the next tile's scores issued together, the
// next tile's softmax (into `then`) computed while the output's product
// runs; else one product after the other, the next warpgroup's (GROUPS
// blocks an SM) filling the gaps.
// score_product and output_product are the two products' function objects
// (warpgroup_product's), generated for the tiles' widths.
template <int GROUPS, bool PIPELINED, bool BF16, int M, int N, int D, int DV, int DP, int DVP, bool CAUSAL,
          bool EXACT_SCALE, int MASK, class ScoreProduct, class OutputProduct, class Views>
__device__ __forceinline__ void attention_wgmma(const unsigned short* __restrict__ q,
                                                const unsigned short* __restrict__ k,
                                                const unsigned short* __restrict__ v,
                                                const unsigned char* __restrict__ mask,
                                                unsigned short* __restrict__ out, float scale,
                                                ScoreProduct score_product, OutputProduct output_product,
                                                Views views) {
  constexpr int ROWS = 64 * GROUPS, BLOCK = 128 * GROUPS, STAGES = 3;
  constexpr int QS = (DP > DVP ? DP : DVP) + 8;  // the output's rows, staged where Q was
  constexpr int K_TILE = BC * DP, V_TILE = BC * DVP;
  constexpr unsigned K_STRIDE = DP / 8 * 128, V_LEADING = DVP / 8 * 128;
  const float NEG_INF = -__int_as_float(0x7f800000);
  extern __shared__ uint4 attention16_shared[];
  unsigned short* Qs = reinterpret_cast<unsigned short*>(attention16_shared);
  unsigned short* Ks = Qs + ROWS * QS;
  unsigned short* Vs = Ks + STAGES * K_TILE;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  long long batch, first_row;
  lazylab_attention_block(ROWS, batch, first_row);
  const int row_start = (int)first_row;
  const long long q_row = views.row(0), k_row = views.row(1), v_row = views.row(2), out_row = views.row(3);
  q += views.at(0, batch) + row_start * q_row;
  k += views.at(1, batch);
  v += views.at(2, batch);
  out += views.at(3, batch) + row_start * out_row;
  const int rows_valid = M - row_start < ROWS ? M - row_start : ROWS;
  const int key_end = CAUSAL ? (row_start + ROWS < N ? row_start + ROWS : N) : N;
  const int warp_first = row_start + warp * 16;
  const int row[2] = {warp_first + g, warp_first + g + 8};
  const int tiles = (key_end + BC - 1) / BC;
  auto load_keys = [&](int tile) {
    const int n0 = tile * BC, stage = tile % STAGES;
    const int keys_valid = N - n0 < BC ? N - n0 : BC;
    load_core_tile<BC, DP, BLOCK, !PIPELINED>(Ks + stage * K_TILE, k + n0 * k_row, k_row, keys_valid, D, threadIdx.x);
    load_core_tile<BC, DVP, BLOCK, !PIPELINED>(Vs + stage * V_TILE, v + n0 * v_row, v_row, keys_valid, DV,
                                               threadIdx.x);
  };
  auto scores = [&](float (&s)[BC / 8][4], int tile) {
    const unsigned q_rows = shared_address(Qs + warp / 4 * 64 * DP);
    const unsigned kt = shared_address(Ks + tile % STAGES * K_TILE);
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk)
      score_product(s, descriptor(q_rows + kk * 256, 128, K_STRIDE), descriptor(kt + kk * 256, 128, K_STRIDE), kk > 0);
  };
  load_core_tile<ROWS, DP, BLOCK, !PIPELINED>(Qs, q, q_row, rows_valid, D, threadIdx.x);
  load_keys(0);
  commit();
  if (tiles > 1) load_keys(1);
  commit();

  float o[DVP / 8][4];
#pragma unroll
  for (int j = 0; j < DVP / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float row_max[2] = {NEG_INF, NEG_INF}, row_sum[2] = {0.f, 0.f}, alpha[2];
  float s[BC / 8][4];
  unsigned p[BC / 16][4];
  auto outputs = [&](int tile, const unsigned (&probabilities)[BC / 16][4]) {
    const unsigned vt = shared_address(Vs + tile % STAGES * V_TILE);
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk)
      output_product(o, probabilities[kk], descriptor(vt + kk * 2 * V_LEADING, V_LEADING, 128), true);
  };
  if constexpr (!PIPELINED) {
    const int group_last = row_start + warp / 4 * 64 + 63;
    for (int tile = 0; tile < tiles; ++tile) {
      wait_copies<1>();  // this tile's (the next tile's may be in flight)
      fence_async_shared();
      // This tile's K and V are in place, and every warp is past the
      // products of the tile before, whose stage the tile after next takes.
      __syncthreads();
      if (tile + 2 < tiles) load_keys(tile + 2);
      commit();
      // Causal: a warpgroup whose rows all precede a tile's keys has nothing there.
      if (!CAUSAL || tile * BC <= group_last) {
        wgmma_fence();
        scores(s, tile);
        wgmma_commit();
        wgmma_wait<0>();
        pin(s);
        softmax_tile<BF16, M, N, CAUSAL, EXACT_SCALE, MASK>(s, p, alpha, row_max, row_sum, tile * BC, warp_first, row,
                                                           t, mask, scale);
        rescale<DVP>(o, alpha);
        wgmma_fence();
        outputs(tile, p);
        wgmma_commit();
        wgmma_wait<0>();
        pin(o);
      }
    }
  } else {
    wait_copies<1>();
    fence_async_shared();
    __syncthreads();
    wgmma_fence();
    scores(s, 0);
    wgmma_commit();
    wgmma_wait<0>();
    pin(s);
    softmax_tile<BF16, M, N, CAUSAL, EXACT_SCALE, MASK>(s, p, alpha, row_max, row_sum, 0, warp_first, row, t, mask, scale);

    // A tile's output product (its probabilities `now`) and the next tile's
    // scores, issued together; the next tile's softmax (into `then`) while
    // the output's product runs. Every warpgroup issues every tile's products
    // (a causal tile past its rows masked whole): a product issued on one
    // branch and not another would serialize them all; and the probabilities
    // alternate between two arrays, as copying them would.
    auto step = [&](int tile, const unsigned (&now)[BC / 16][4], unsigned (&then)[BC / 16][4]) {
      const int next = tile + 1;
      wait_copies<0>();
      fence_async_shared();
      // The next tile's K and V are in place, and every warp is past the
      // products of the tile before, whose stage the tile after next takes.
      __syncthreads();
      if (next + 1 < tiles) load_keys(next + 1);
      commit();
      wgmma_fence();
      scores(s, next);
      wgmma_commit();
      outputs(tile, now);
      wgmma_commit();
      wgmma_wait<1>();  // the scores; the output's product runs on
      pin(s);
      softmax_tile<BF16, M, N, CAUSAL, EXACT_SCALE, MASK>(s, then, alpha, row_max, row_sum, next * BC, warp_first, row, t,
                                                         mask, scale);
      wgmma_wait<0>();
      pin(o);
      rescale<DVP>(o, alpha);
    };
    unsigned p_odd[BC / 16][4];
    int tile = 0;
    for (; tile + 2 < tiles; tile += 2) {
      step(tile, p, p_odd);
      step(tile + 1, p_odd, p);
    }
    if (tile + 1 < tiles) {
      step(tile, p, p_odd);
      wgmma_fence();
      outputs(tile + 1, p_odd);
    } else {
      wgmma_fence();
      outputs(tile, p);
    }
    wgmma_commit();
    wgmma_wait<0>();
    pin(o);
  }
  __syncthreads();  // Q's rows take the output
  store_rows<BF16, DV, DVP, QS>(o, row_sum, Qs + warp * 16 * QS, out + warp * 16 * out_row, out_row,
                                rows_valid - warp * 16, lane);
}
}  // namespace lazylab_attention16
)";

namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// How the warpgroup kernel runs, as measured on an H200 (bf16,
// docs/results.md; the kernel alone, [batch x heads, 1024, d]). Where no
// mask is causal, K and V copied by a warpgroup of their own (`loaded`):
// up to head dim 64 a block of four warpgroups (256 rows, one block an SM)
// where the rows fill it and there are at least 128 blocks, else two
// blocks an SM of two; four against two: 256 heads 0.225 against 0.260
// ms, 32 heads (128 blocks) 0.034 against 0.042, but 16 heads (64 blocks)
// 0.032 against 0.027, half the 132 SMs idle. Above 64 one block of three
// (256 heads at d 128: 0.411 ms). Where the mask is causal, the
// block barrier's forms (the loaded form was slower there,
// attention_wgmma's comment): up to 64 two blocks an SM of two (four were
// no faster: gpt2-block 0.684 against 0.681 ms, a causal block's rows
// taking unequal times), above it a block of three issuing the next tile's
// scores with this tile's output (`pipelined`). `rows` (128 or 256)
// overrides the groups up to 64.
struct WgmmaForm {
  int64_t groups, blocks_per_sm;
  bool loaded, pipelined;
  // Threads: the warpgroups', and the loaded form's copying warpgroup.
  int64_t block() const { return 128 * groups + (loaded ? 128 : 0); }
  // The registers a thread at launch, as ptxas gives a kernel that sets
  // them (setmaxnreg) its launch bound's maximum: each of the four SM
  // sub-partitions' 16,384 shared among a quarter of the SM's warps
  // (rounded up: 96 for 17 warps, and for two blocks of 9), a multiple of
  // 8, at most 248 (ptxas allows 255).
  int64_t launch_registers() const {
    const int64_t warps_per_partition = (block() / 32 * blocks_per_sm + 3) / 4;
    return std::min<int64_t>(16384 / (warps_per_partition * 32) / 8 * 8, 248);
  }
  // The loaded form's copying warpgroup gives its registers up to
  // kProducerRegisters a thread, the others share them out (a multiple of
  // 8). At head dim 128 its copies' addresses spill 44 bytes in 32, but 48
  // (no spill) leaves the others 152 instead of 160: 0.449 ms against
  // 0.411 at [256 heads, 1024, 128] on an H200.
  static constexpr int64_t kProducerRegisters = 32;
  int64_t consumer_registers() const {
    return std::min<int64_t>((launch_registers() * block() - kProducerRegisters * 128) / (128 * groups) / 8 * 8, 256);
  }
};
WgmmaForm wgmma_form(const lazylab_attention& a, int64_t widest, int rows) {
  const bool loaded = !a.causal;
  if (widest > 64) return {3, 1, loaded, !loaded};
  const WgmmaForm two{2, 2, loaded, false}, four{4, 1, loaded, false};
  if (rows) return rows == 256 ? four : two;
  // Four warpgroups where they pad no more rows than two do and make about
  // a block for each SM of a Hopper GPU (132 on an H100 SXM or H200).
  const bool fills = round_up(a.m, 256) == round_up(a.m, 128) && a.batch * (round_up(a.m, 256) / 256) >= 128;
  return loaded && fills ? four : two;
}

// Whether x times `scale` is exact for every 16-bit x away from the
// subnormals: a power of two (1 among them).
bool exact_scale(double scale) {
  int exponent = 0;
  return std::frexp(scale, &exponent) == 0.5;
}

// A warpgroup product's function object, `name`: m64 by n by 16 deep in
// dtype with f32 sums, B in shared memory (`b_transposed`: its rows the
// depth), A there too or the warp's fragments in registers; it adds to d
// or, where `accumulate` is false, overwrites it. d[j][e] is the wgmma's
// register 4 j + e, the warp's C fragments. Guarded: a unit may hold two
// kernels using one.
std::string warpgroup_product(const std::string& name, int64_t n, uint32_t dtype, bool a_in_registers,
                              bool b_transposed) {
  const char* type = dtype == LAZYLAB_BF16 ? "bf16" : "f16";
  const int64_t sums = n / 2;
  std::string outputs, constraints;
  for (int64_t i = 0; i < sums; ++i) {
    outputs += fmt::format("{}%{}", i ? ", " : "", i);
    constraints += fmt::format("{}\"+f\"(d[{}][{}])", i ? ", " : "", i / 4, i % 4);
  }
  // Operands after the sums: A (a descriptor, or four registers), B's
  // descriptor, whether to accumulate.
  int64_t a_operands = a_in_registers ? 4 : 1;
  std::string a_operand = a_in_registers ? fmt::format("{{%{}, %{}, %{}, %{}}}", sums, sums + 1, sums + 2, sums + 3)
                                         : fmt::format("%{}", sums);
  return fmt::format(
      "#ifndef {0}_DEFINED\n#define {0}_DEFINED\nstruct {0} {{\n"
      "  __device__ __forceinline__ void operator()(float (&d)[{1}][4], {2}, unsigned long long b, bool accumulate) "
      "const {{\n"
      "    asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{3}, 0;\\n"
      "wgmma.mma_async.sync.aligned.m64n{4}k16.f32.{5}.{5} {{{6}}}, {7}, %{8}, p, 1, 1, {9}{10};\\n}}\\n\"\n"
      "      : {11}\n      : {12}, \"l\"(b), \"r\"((int)accumulate));\n  }}\n}};\n#endif\n",
      name, n / 8, a_in_registers ? "const unsigned (&a)[4]" : "unsigned long long a", sums + a_operands + 1, n, type,
      outputs, a_operand, sums + a_operands, a_in_registers ? "" : "0, ", b_transposed ? 1 : 0, constraints,
      a_in_registers ? "\"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3])" : "\"l\"(a)");
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
  AttentionViews views = attention_views(kernel);
  const char* names[4] = {"q", "k", "v", "output"};
  for (int i = 0; i < 4; ++i)
    if (!views.aligned(i, 8))
      return fmt::format(
          "a 16-bit attention moves rows 16 bytes at a time: {}'s view (offset {}, rows {} apart) does not start "
          "every row on 16 bytes",
          names[i], views.operands[i].offset, views.operands[i].row);
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
      "long long work) {{\n{16}"
      "  lazylab_attention16::attention<{1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {11}, {14}>(q, k, v, {15}, out, "
      "{10}, Views{{}});\n}}\n",
      name, dtype == LAZYLAB_BF16 ? "true" : "false", a.m, a.n, a.d, a.dv, dp, dvp, a.k_transposed ? "true" : "false",
      a.causal ? "true" : "false",
      fmt::format("__int_as_float({:#x})", std::bit_cast<uint32_t>(static_cast<float>(a.scale))),
      exact_scale(a.scale) ? "true" : "false", min_blocks, mask.parameter, mask.kind, mask.argument,
      views_struct(attention_views(kernel)));
}

std::optional<std::string> attention_wgmma_refusal(const lazylab_kernel& kernel) {
  const lazylab_attention& a = kernel.attention;
  if (!a.k_transposed) return std::string("k is given as [d, n] (the warpgroup kernel reads k's rows)");
  if (std::max(round_up(a.d, 16), round_up(a.dv, 16)) > 128)
    return fmt::format("the warpgroup kernel's shared memory holds head dims up to 128, not {} and {}", a.d, a.dv);
  return std::nullopt;
}

std::string attention_wgmma_function(const lazylab_kernel& kernel, uint32_t dtype, const std::string& name,
                                     Launch& launch, int block_rows) {
  const lazylab_attention& a = kernel.attention;
  constexpr int64_t kKeys = 64;
  int64_t dp = round_up(a.d, 16), dvp = round_up(a.dv, 16);
  const WgmmaForm form = wgmma_form(a, std::max(dp, dvp), block_rows);
  const int64_t groups = form.groups, rows = 64 * groups;
  int64_t elements = rows * (std::max(dp, dvp) + 8) + 3 * kKeys * dp + 3 * kKeys * dvp;  // Q or the output, 3 stages
  // The loaded form: a warpgroup copying K and V, two barriers a stage.
  const int64_t bytes = elements * 2 + (form.loaded ? 6 * 8 : 0), block = form.block();
  AttentionMask mask = attention_launch(kernel, name, bytes, launch, rows);
  launch.block = static_cast<uint32_t>(block);
  if (form.loaded) launch.registers = static_cast<uint32_t>(form.launch_registers());
  const char* type = dtype == LAZYLAB_BF16 ? "bf16" : "f16";
  std::string scores = fmt::format("lazylab_wgmma_n{}_{}_shared", kKeys, type);
  std::string outputs = fmt::format("lazylab_wgmma_n{}_{}_transposed", dvp, type);
  return warpgroup_product(scores, kKeys, dtype, false, false) + warpgroup_product(outputs, dvp, dtype, true, true) +
         fmt::format(
             "extern \"C\" __global__ void __launch_bounds__({17}, {10}) {0}(const unsigned short* __restrict__ q, "
             "const unsigned short* __restrict__ k,\n    const unsigned short* __restrict__ v, {11}unsigned short* "
             "__restrict__ out, long long work) {{\n{19}"
             "  lazylab_attention16::attention_wgmma{20}<{18}{21}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, "
             "{12}>(q, k, v, {13}, out, {14}, {15}{{}}, {16}{{}}, Views{{}});\n}}\n",
             name, dtype == LAZYLAB_BF16 ? "true" : "false", a.m, a.n, a.d, a.dv, dp, dvp, a.causal ? "true" : "false",
             exact_scale(a.scale) ? "true" : "false", form.blocks_per_sm, mask.parameter, mask.kind, mask.argument,
             fmt::format("__int_as_float({:#x})", std::bit_cast<uint32_t>(static_cast<float>(a.scale))), scores,
             outputs, block, groups, views_struct(attention_views(kernel)), form.loaded ? "_loaded" : "",
             form.loaded ? fmt::format(", {}, {}", WgmmaForm::kProducerRegisters, form.consumer_registers())
                         : (form.pipelined ? ", true" : ", false"));
}

}  // namespace lazylab::cuda
