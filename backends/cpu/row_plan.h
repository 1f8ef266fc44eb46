// Fused f32 kernels in one row space [R, C] (C = the last dimension): the
// kernels that the elementwise and producer-consumer fusion strategies make.
// The kernel runs segment by segment (a whole row when it reduces, else
// cache-sized tiles), every op a tight vectorisable loop over the segment,
// so intermediates stay in L1/L2 instead of one pass over memory per op.
// Broadcasts are views, constants scalars; local buffers are reused by
// liveness; segments run in parallel with TBB.
#pragma once

#include <tbb/task_arena.h>

#include <memory>

#include "planned.h"
#include "values.h"

namespace lazylab::cpu {

struct RowPlanOptions {
  int64_t tile = 4096;                    // elements per segment when the kernel does not reduce
  int64_t parallel_min = 32768;           // below this many elements a kernel runs on the calling thread
  int64_t stream_min = int64_t{8} << 20;  // output bytes from which a kernel writes past the caches
  tbb::task_arena* arena = nullptr;
  bool direct_conv = true;  // the backend's direct-conv option (conv_plan.h)
};

// A row-space kernel that can also run on a band of its rows, so that a
// GEMM can apply its epilogue to each output block while it is in cache.
class RowKernelPlan : public KernelPlan {
 public:
  virtual int64_t rows() const = 0;
  virtual int64_t cols() const = 0;
  virtual void run_rows(const Memory& memory, int64_t first_row, int64_t end_row) = 0;
  // The same on the calling thread only (a GEMM's band on one of its tasks).
  virtual void run_rows_here(const Memory& memory, int64_t first_row, int64_t end_row) = 0;
  // Whether each element depends on its own column alone (no reduction
  // over a row), so that a block of columns can run apart from the rest.
  virtual bool runs_columns_apart() const = 0;
  // Columns [first_col, end_col) of rows [first_row, end_row), on the
  // calling thread: a convolution's epilogue over the block of outputs a
  // task just wrote, still in L1. Only where runs_columns_apart().
  virtual void run_block_here(const Memory& memory, int64_t first_row, int64_t end_row, int64_t first_col,
                              int64_t end_col) = 0;
};

// A plan (planned.h) for a row-space kernel, or why the loops cannot run one
// of its ops or layouts.
Planned<RowKernelPlan> make_row_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                     const RowPlanOptions& options);

}  // namespace lazylab::cpu
