#include "banded_sgemm.h"

#include <algorithm>

#include "parallel.h"

namespace lazylab::cpu {
namespace {

constexpr int64_t kLeastRows = 16, kLeastColumns = 32;

}  // namespace

void sgemm(const openblas::Runtime& blas, const SgemmOperands& p) {
  blas.sgemm(CblasRowMajor, p.trans_a, p.trans_b, p.m, p.n, p.k, 1.0f, p.a, p.lda, p.b, p.ldb, p.beta, p.c, p.ldc);
}

SgemmOperands rows_of(const SgemmOperands& p, int64_t first, int64_t count) {
  SgemmOperands part = p;
  part.m = count;
  part.a += p.trans_a == CblasTrans ? first : first * p.lda;
  part.c += first * p.ldc;
  return part;
}

SgemmOperands columns_of(const SgemmOperands& p, int64_t first, int64_t count) {
  SgemmOperands part = p;
  part.n = count;
  part.b += p.trans_b == CblasTrans ? first * p.ldb : first;
  part.c += first;
  return part;
}

SgemmOperands depths_of(const SgemmOperands& p, int64_t first, int64_t count) {
  SgemmOperands part = p;
  part.k = count;
  part.a += p.trans_a == CblasTrans ? first * p.lda : first;
  part.b += p.trans_b == CblasTrans ? first : first * p.ldb;
  return part;
}

namespace {

// sgemm of each band of `extent` rows or columns, one band a thread, each
// followed by after(first, size); OpenBLAS single-threaded meanwhile.
void in_bands(const openblas::Runtime& blas, tbb::task_arena& arena, const SgemmOperands& p, bool by_rows,
              const std::function<void(int64_t, int64_t)>* after) {
  int threads = arena.max_concurrency();
  int64_t extent = by_rows ? p.m : p.n, band = (extent + threads - 1) / threads;
  blas.set_num_threads(1);
  parallel_chunks(arena, 0, threads, 1, [&](int64_t first, int64_t end) {
    for (int64_t t = first; t < end; ++t) {
      int64_t start = t * band, size = std::min(extent, start + band) - start;
      if (size <= 0) continue;
      sgemm(blas, by_rows ? rows_of(p, start, size) : columns_of(p, start, size));
      if (after) (*after)(start, size);
    }
  });
  blas.set_num_threads(threads);  // as the backend set it, for the products that use OpenBLAS's threads
}

}  // namespace

void banded_sgemm(const openblas::Runtime& blas, tbb::task_arena* arena, const SgemmOperands& p) {
  int threads = arena ? arena->max_concurrency() : 1;
  bool by_rows = p.m >= kLeastRows * threads, by_columns = !by_rows && p.n >= kLeastColumns * threads;
  if (threads > 1 && (by_rows || by_columns)) return in_bands(blas, *arena, p, by_rows, nullptr);
  blas.set_num_threads(1);
  sgemm(blas, p);
  blas.set_num_threads(threads);
}

void row_bands(const openblas::Runtime& blas, tbb::task_arena& arena, const SgemmOperands& p,
               const std::function<void(int64_t, int64_t)>& after) {
  in_bands(blas, arena, p, true, &after);
}

}  // namespace lazylab::cpu
