// A run of elementwise ops where each op's result is the next one's
// operand (chain's add, mul, relu; gelu's polynomial), executed strip by
// strip with the strip held in vector registers: the intermediates between
// the ops never go to memory, so a long run costs its arithmetic, not one
// load and one store per op per element. The row loops (row_plan.h) turn
// such runs of their instructions into one of these.
#pragma once

#include <cstdint>
#include <vector>

#include "overlapped_traffic.h"

namespace lazylab::cpu {

struct RunStep {
  uint32_t op;  // LAZYLAB_OP_*: a unary op, or a binary op with one operand the running value
  enum Other : uint8_t { None, Scalar, Pointer, Running } other = None;
  bool running_first = true;  // the running value is the binary op's first operand
};

// A step's other operand in one segment.
struct RunOperand {
  const float* ptr = nullptr;  // Pointer: the segment's elements
  float scalar = 0;            // Scalar
};

// Whether a run can hold this op, one of those the row loops run.
bool run_supports(uint32_t op);

// out[i] = steps applied in order to in[i], for i < n. out may alias in, or
// be null where only the sum is wanted.
// With `sum`, also *sum = the sum of out[0 .. n) (in another order than one
// by one), taken from the registers: a row's reduce_sum of the run's result
// costs no pass of its own. With `traffic`, carries it out evenly over the
// run's strips, while the run computes, and finishes it. With `streams`,
// stores the strips with non-temporal stores (where `out` is vector-aligned).
void execute_run(float* out, const float* in, const std::vector<RunStep>& steps, const RunOperand* others, int64_t n,
                 float* sum = nullptr, OverlappedTraffic* traffic = nullptr, bool streams = false);

}  // namespace lazylab::cpu
