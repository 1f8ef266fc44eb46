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

void banded_sgemm(const openblas::Runtime& blas, tbb::task_arena* arena, const SgemmOperands& p) {
  int threads = arena ? arena->max_concurrency() : 1;
  bool by_rows = p.m >= kLeastRows * threads, by_columns = !by_rows && p.n >= kLeastColumns * threads;
  blas.set_num_threads(1);
  if (threads <= 1 || (!by_rows && !by_columns)) {
    sgemm(blas, p);
  } else {
    int64_t extent = by_rows ? p.m : p.n, band = (extent + threads - 1) / threads;
    parallel_chunks(*arena, 0, threads, 1, [&](int64_t first, int64_t end) {
      for (int64_t t = first; t < end; ++t) {
        int64_t start = t * band, size = std::min(extent, start + band) - start;
        if (size > 0) sgemm(blas, by_rows ? rows_of(p, start, size) : columns_of(p, start, size));
      }
    });
  }
  blas.set_num_threads(threads);  // as the backend set it, for the products that use OpenBLAS's threads
}

}  // namespace lazylab::cpu
