// A 2-D convolution (groups of 1) of any stride, padding and dilation,
// computed directly on AVX-512 with the output positions in the vector
// lanes, for the images where an unfolded product runs well below the
// machine's rate (a ResNet-18 at 224x224: OpenBLAS's sgemm alone reaches
// 250 of this 2-core Xeon's 490 GFLOP/s on layer1's [64, 576] x [576,
// 3136], 176 on layer4's [512, 4608] x [4608, 49], and the unfolding costs
// as much again).
//
// The input is dealt into phase planes (phase_planes.h): a tap reads the
// input at its output's number plus a fixed offset, so a register of 16
// consecutive outputs is one unaligned load a tap, whatever the stride, and
// nothing is unfolded. A tile is eight filters by three registers: 24
// sums, each tap's three loads and eight weights broadcast from the weight
// tensor as it lies (a filter's taps are consecutive, so the eight filters
// are eight streams, read forward). A task takes a band (36 registers) of
// an image's outputs of eight filters, its channels in chunks where their
// inputs would not stay in L1 between tiles (the sums so far kept in
// memory between chunks), then hands the band to the caller (the kernel's
// epilogue, while it is in L1). Stores drop the results past each output
// row with a compressed masked store. A 1x1 convolution at stride 1
// without padding reads the input as it lies.
#pragma once

#include <tbb/enumerable_thread_specific.h>
#include <tbb/task_arena.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "direct_kernel.h"
#include "phase_planes.h"

namespace lazylab::cpu {

class PhaseConv : public DirectKernel {
 public:
  // Rows [first_row, end_row) of the output ([images x filters, out_h x
  // out_w]) are written in columns [first_col, end_col), on the calling
  // thread, and not written again.
  using BlockDone = std::function<void(int64_t first_row, int64_t end_row, int64_t first_col, int64_t end_col)>;

  // Whether this build has the kernel (AVX-512) and the shape has outputs
  // to compute; groups of 1 are the caller's to check.
  static bool takes(const DirectShape& shape);

  explicit PhaseConv(const DirectShape& shape);
  void run(const float* x, const float* w, float* out, tbb::task_arena* arena) override;
  // run(), calling `block_done` for each block of outputs once it is
  // written.
  void run(const float* x, const float* w, float* out, tbb::task_arena* arena, const BlockDone& block_done);

 private:
  // A register of outputs: where its first kept lane goes in an output
  // plane, which lanes are kept, and where the next register's go.
  struct Store {
    int64_t at;
    uint32_t lanes;
    int64_t end;
  };

  bool reads_input_as_it_lies() const;
  int64_t chunk_channels() const;
  void deal_phases(const float* x, tbb::task_arena* arena);
  void run_task(const float* input, const float* w, float* out, int64_t image, int64_t block, int64_t band,
                const BlockDone& block_done) const;

  DirectShape s_;
  PhasePlanes planes_;
  int64_t taps_;               // channels x kh x kw: a filter's weights
  int64_t registers_;          // an image's outputs, out_h x the planes' width, in registers of 16
  int64_t chunk_channels_;     // channels summed before their sums go to memory
  std::vector<Store> stores_;  // by register
  mutable tbb::enumerable_thread_specific<std::vector<float>> partials_;  // a task's band's sums so far, by thread
  std::vector<float> phases_;  // [images, channels, the planes' slots], then a margin of zeros
};

}  // namespace lazylab::cpu
