// The cpu's rendering of a row-space kernel: instructions over slots, each
// a value of the segment being run (in memory or in a local buffer, per
// element, per row, one number, or spread from a per-group value), and the
// register runs that chains of them become (register_run.h).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "lazylab/backend_abi.h"
#include "register_run.h"

namespace lazylab::cpu {

// How an op reads or writes one value within a segment (row r, columns
// [c0, c0 + len)).
struct Slot {
  // Spread: a memory value of `groups` floats, each repeated over `period`
  // consecutive elements (a RowGroup access: a per-channel value over NCHW),
  // written out per segment into scratch `local`.
  enum Kind { Full, PerRow, Splat, Suffix, Scalar, Spread } kind = Full;
  enum Where { Memory, Local } where = Memory;
  uint32_t value = 0;  // Memory
  int local = -1;      // Local: buffer index (Full) or scalar index (PerRow); Spread: its scratch
  float splat = 0;     // Splat
  int64_t period = 0;  // Suffix: elements of the broadcast source; Spread: elements a source value spans
  int64_t groups = 0;  // Spread: elements of the source
  // A bool value in memory (uint8): read only as a select's predicate, and
  // written by a Materialize from a comparison's 1s and 0s. Inside the
  // kernel a comparison's result is a float buffer of 1s and 0s.
  bool byte = false;
  // An i64 value in memory: read only by a Convert to floats, written by a
  // Materialize from a Truncate's whole numbers. Inside the kernel an i64
  // comes from a cast of floats, so its float holds it exactly.
  bool int64 = false;
  // A 16-bit float value in memory (LAZYLAB_BF16 or LAZYLAB_F16; F32: not):
  // read per row or as one number converted, in full (or repeating, or
  // spread) only by a Widen into a local buffer, written only by a Narrow.
  uint32_t narrow = LAZYLAB_F32;
  bool floats() const { return !byte && !int64; }
  bool is_narrow() const { return narrow != LAZYLAB_F32; }
};

// Truncate: a cast of floats to i64 (whole numbers, as floats); Convert: an
// i64 value in memory read as floats; Widen: a 16-bit float value in memory
// read into a local buffer of floats; Narrow: floats rounded into a 16-bit
// value in memory.
enum class InstrKind { Unary, Binary, Select, Reduce, Materialize, Run, Truncate, Convert, Widen, Narrow };

struct Instr {
  InstrKind kind;
  uint32_t op;
  Slot out;
  Slot a, b, c;
  int run = -1;                 // Run: index into RowPlan::runs; reads `a`, writes `out`
  bool leaves_program = false;  // `out` is one of the Program's outputs, in full
  // BF16 or F16: `out`'s floats are rounded to that dtype's precision once
  // computed (the op's result is of it); F32: not.
  uint32_t rounds_to = LAZYLAB_F32;
};

// Unary and binary instructions fused into one register run: each step's
// other operand (RunStep::other of None or Running has none).
struct RunInstr {
  std::vector<RunStep> steps;
  std::vector<Slot> others;
  std::optional<Slot> sum_out;  // where the row's sum of the run's result goes (a reduce_sum folded in)
  bool sum_is_mean = false;     // ... or its mean (a reduce_mean)
  bool stores = true;           // false: only the sum is read (layernorm's squares)
};

}  // namespace lazylab::cpu
