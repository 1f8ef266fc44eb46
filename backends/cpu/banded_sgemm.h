// A row-major sgemm on TBB's threads, each taking a band of the product's
// rows (or, for a product of few rows, of its columns) with OpenBLAS
// single-threaded, so that OpenBLAS's own threads are not woken: after a
// call they spin for their next one (sched_yield, for up to 2^28 cycles),
// and on a machine of few cores they take the cores from the TBB threads
// that run every other kernel. In a profile of ResNet-18's training step
// on a 2-core EPYC, OpenBLAS's spinning thread drew as many samples as
// TBB's working one.
#pragma once

#include <tbb/task_arena.h>

#include <cstdint>
#include <functional>

#include "openblas_runtime.h"

namespace lazylab::cpu {

struct SgemmOperands {
  CBLAS_TRANSPOSE trans_a, trans_b;
  int64_t m, n, k;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  float beta;
  float* c;
  int64_t ldc;
};

// One call: C = A B + beta C (alpha 1).
void sgemm(const openblas::Runtime& blas, const SgemmOperands& p);
// Rows [first, first + count) of the product: A's and C's rows.
SgemmOperands rows_of(const SgemmOperands& p, int64_t first, int64_t count);
// Columns [first, first + count) of the product: B's and C's columns.
SgemmOperands columns_of(const SgemmOperands& p, int64_t first, int64_t count);
// The sum over k in [first, first + count) only: A's columns, B's rows.
SgemmOperands depths_of(const SgemmOperands& p, int64_t first, int64_t count);

// C = A B + beta C (alpha 1), banded over the arena's threads where each
// band gets at least 16 rows or 32 columns, else one call on this thread;
// OpenBLAS single-threaded for the calls, then set back to the arena's
// threads, as the backend sets it for the products that still use them.
void banded_sgemm(const openblas::Runtime& blas, tbb::task_arena* arena, const SgemmOperands& p);

// The product in one band of rows per arena thread, whatever their number,
// each band's `after(first_row, rows)` on its thread right after its sgemm
// (a GEMM's epilogue while the band is in cache). OpenBLAS as above.
void row_bands(const openblas::Runtime& blas, tbb::task_arena& arena, const SgemmOperands& p,
               const std::function<void(int64_t, int64_t)>& after);

}  // namespace lazylab::cpu
