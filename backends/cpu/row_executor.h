// RowPlan: runs a row kernel's instructions (row_instructions.h) segment by
// segment, a whole row when it reduces, else cache-sized tiles (or flat
// segments across rows), every instruction a vectorisable loop over the
// segment or a register run, segments in parallel on TBB; inputs prefetched
// ahead, large outputs streamed past the caches. Included by row_plan.cpp,
// which fills a plan's instructions.
#pragma once

#include <tbb/enumerable_thread_specific.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "float_math.h"
#include "lazylab/op_formulas.hpp"
#include "lazylab/reference_semantics.hpp"
#include "narrow_floats.h"
#include "overlapped_traffic.h"
#include "parallel.h"
#include "row_instructions.h"
#include "row_plan.h"
#include "row_reductions.h"
#include "scalar_division.h"

namespace lazylab::cpu::row_exec {
// Internal to row_plan.cpp, its one includer: the loops inline as they
// did there.
namespace {

// A value read in full from memory, its elements of this many bytes (4, or
// 2 for a 16-bit float).
struct RowInput {
  uint32_t value;
  int64_t element_bytes;
};

// An operand as the loops see it: a pointer, or a scalar for the segment.
struct View {
  const float* ptr = nullptr;
  float scalar = 0;
  const uint8_t* mask = nullptr;  // a bool array
};

struct Scratch {
  std::vector<float> buffers;
  // A segment of output on its way to memory past the caches; two, so that
  // one segment's copy can go on while the next one computes.
  std::vector<float> stream[2];
  std::vector<float> per_row;
  std::vector<float> spreads;  // a segment per Spread slot
  // What each Spread's segment holds: its phase (first element modulo the
  // pattern's length) and length; -1 for nothing. A pattern no longer than
  // a segment (a small image's channels) is then written once a chunk.
  std::vector<int64_t> spread_phase, spread_length;
  std::vector<RunOperand> run_operands;
  OverlappedTraffic traffic;
};

// An operand of a loop: the segment's elements, or one value for all.
template <bool Elements>
struct Operand {
  const float* ptr;
  float scalar;
  Vec vector(int64_t i) const {
    if constexpr (Elements) {
      return load_vector(ptr + i);
    } else {
      return VectorMath::constant(scalar);
    }
  }
  float element(int64_t i) const {
    if constexpr (Elements)
      return ptr[i];
    else
      return scalar;
  }
};

// out[i] = p[i] ? a[i] : b[i], p a comparison's 1s and 0s in this kernel
// (as SIMD blends) or a bool array in memory.
template <class A, class B>
inline void select_elements(float* out, View predicate, A a, B b, int64_t n) {
  if (predicate.mask) {
    for (int64_t i = 0; i < n; ++i) out[i] = predicate.mask[i] ? a.element(i) : b.element(i);
    return;
  }
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Mask chosen = load_vector(predicate.ptr + i) != 0;
    store_vector(out + i, chosen ? a.vector(i) : b.vector(i));
  }
  for (; i < n; ++i) out[i] = predicate.ptr[i] != 0 ? a.element(i) : b.element(i);
}

inline void select_loop(float* out, View predicate, View a, View b, int64_t n) {
  if (!predicate.mask && !predicate.ptr) {  // one predicate for the segment: a copy
    View chosen = predicate.scalar != 0 ? a : b;
    if (chosen.ptr)
      std::copy(chosen.ptr, chosen.ptr + n, out);
    else
      std::fill(out, out + n, chosen.scalar);
    return;
  }
  if (a.ptr && b.ptr)
    select_elements(out, predicate, Operand<true>{a.ptr, 0}, Operand<true>{b.ptr, 0}, n);
  else if (a.ptr)
    select_elements(out, predicate, Operand<true>{a.ptr, 0}, Operand<false>{nullptr, b.scalar}, n);
  else if (b.ptr)
    select_elements(out, predicate, Operand<false>{nullptr, a.scalar}, Operand<true>{b.ptr, 0}, n);
  else
    select_elements(out, predicate, Operand<false>{nullptr, a.scalar}, Operand<false>{nullptr, b.scalar}, n);
}

// out[i] = Op(a[i], b[i]): the op's formula on SIMD vectors, then on floats
// for the tail.
template <uint32_t Op, class A, class B>
inline void binary_elements(float* out, A a, B b, int64_t n) {
  VectorMath vector_math;
  FloatMath float_math;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Vec result{};
    formulas::binary(vector_math, Op, a.vector(i), b.vector(i), result);
    store_vector(out + i, result);
  }
  for (; i < n; ++i) formulas::binary(float_math, Op, a.element(i), b.element(i), out[i]);
}

template <uint32_t Op>
inline void binary_loop(float* out, View a, View b, int64_t n) {
  if (a.ptr && b.ptr)
    binary_elements<Op>(out, Operand<true>{a.ptr, 0}, Operand<true>{b.ptr, 0}, n);
  else if (a.ptr)
    binary_elements<Op>(out, Operand<true>{a.ptr, 0}, Operand<false>{nullptr, b.scalar}, n);
  else if (b.ptr)
    binary_elements<Op>(out, Operand<false>{nullptr, a.scalar}, Operand<true>{b.ptr, 0}, n);
  else
    binary_elements<Op>(out, Operand<false>{nullptr, a.scalar}, Operand<false>{nullptr, b.scalar}, n);
}

template <uint32_t Op>
inline void unary_loop(float* out, View a, int64_t n) {
  FloatMath float_math;
  if (!a.ptr) {
    float value = 0;
    formulas::unary(float_math, Op, a.scalar, value);
    std::fill(out, out + n, value);
    return;
  }
  VectorMath vector_math;
  Operand<true> x{a.ptr, 0};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Vec result{};
    formulas::unary(vector_math, Op, x.vector(i), result);
    store_vector(out + i, result);
  }
  for (; i < n; ++i) formulas::unary(float_math, Op, a.ptr[i], out[i]);
}

// The formula ops with one and two operands; arity from the op table.
constexpr bool is_unary_formula(uint32_t op) { return formulas::has_formula(op) && ops::row(op).arity == 1; }
constexpr bool is_binary_formula(uint32_t op) { return formulas::has_formula(op) && ops::row(op).arity == 2; }

inline void binary(uint32_t op, float* out, View a, View b, int64_t n) {
  if (op == LAZYLAB_OP_Div && a.ptr && !b.ptr && divides_by_product(b.scalar))
    return divide_each(out, a.ptr, b.scalar, n, 0, store_vector);
  formulas::with_formula_op(op, [&](auto constant) {
    if constexpr (is_binary_formula(constant.value)) binary_loop<constant.value>(out, a, b, n);
  });
}

inline void unary(uint32_t op, float* out, View a, int64_t n) {
  formulas::with_formula_op(op, [&](auto constant) {
    if constexpr (is_unary_formula(constant.value)) unary_loop<constant.value>(out, a, n);
  });
}

// A comparison's 1s and 0s, or a view of bools, out to a bool value's bytes.
inline void store_bytes(uint8_t* out, View a, int64_t n) {
  if (a.mask)
    std::memcpy(out, a.mask, static_cast<size_t>(n));
  else if (a.ptr)
    for (int64_t i = 0; i < n; ++i) out[i] = a.ptr[i] != 0;
  else
    std::fill(out, out + n, static_cast<uint8_t>(a.scalar != 0));
}

// Whole numbers as floats out to an i64 value.
inline void store_integers(int64_t* out, View a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(a.ptr ? a.ptr[i] : a.scalar);
}

// x cast to i64 and back, as the reference casts (out of range: 0): exact,
// since a float as large as 2^23 is a whole number already.
inline void truncate_loop(float* out, View a, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(static_cast<double>(reference::to_integer(a.ptr ? a.ptr[i] : a.scalar)));
}

inline void copy_loop(float* out, View a, int64_t n) {
  if (a.ptr)
    std::copy(a.ptr, a.ptr + n, out);
  else
    std::fill(out, out + n, a.scalar);
}

// About the misses a core keeps in flight (Zen's L1 has 24 miss buffers):
// a burst of up to this many prefetches is not dropped.
constexpr int64_t kLinesInFlight = 32;

constexpr int64_t kChunksPerThread = 4;
// As run_segments_of's element count: fewer than any kernel's parallel_min,
// so the segments run on the calling thread.
constexpr int64_t kOnThisThread = 0;

class RowPlan : public RowKernelPlan {
 public:
  RowPlan(int64_t rows, int64_t cols, bool reduces, const RowPlanOptions& options)
      : rows_(rows), cols_(cols), options_(options) {
    set_segment(reduces ? cols : std::min(cols, options.tile));
  }

  // A kernel that neither reduces nor reads a value per row or a repeating
  // one sees every value as a flat array: a whole run() then walks
  // cache-sized segments across row boundaries. With rows as short as a 3x3
  // kernel's, a segment a row cost a dispatch of every op per 3 elements (the
  // SGD update of a [128, 128, 3, 3] weight: 3.6 ms, 1 GB/s).
  // `pattern`: a length segments are a multiple of where it fits in a tile,
  // so that a repeating value tiled into scratch is written once a chunk.
  void span_rows(int64_t pattern = 1) {
    spans_rows_ = true;
    int64_t segment = pattern <= options_.tile ? options_.tile / pattern * pattern : options_.tile;
    set_segment(std::min(rows_ * cols_, segment));
  }

  std::vector<Instr> instrs;
  std::vector<RunInstr> runs;
  size_t longest_run = 0;  // steps of the longest run
  int num_buffers = 0, num_per_row = 0, num_spreads = 0;

  bool streams = false;  // outputs go to memory with non-temporal stores
  // A register run carries out the memory traffic, spread over its strips
  // (overlapped_traffic.h): in a segment whose inputs are more lines than the
  // core can have in flight at once.
  bool overlaps_traffic = false;
  // The one streamed output, not read again in the kernel, is copied out
  // while the next segment's run computes.
  bool defers_stream = false;
  // That output is a local buffer divided by a per-row value, and the
  // deferred copy divides: the local buffers then come in two sets, a
  // segment's in the set of its parity, so the next segment's run does not
  // overwrite what is being copied.
  bool defers_division = false;
  std::vector<RowInput> row_inputs;  // values read in full from memory

  int64_t segment_input_lines() const {
    int64_t bytes = 0;
    for (const RowInput& input : row_inputs) bytes += segment_ * input.element_bytes;
    return bytes / PrefetchQueue::kLineBytes;
  }

  int64_t rows() const override { return rows_; }
  int64_t cols() const override { return cols_; }

  void run(const Memory& memory) override {
    if (spans_rows_)
      run_segments_of(memory, 0, (rows_ * cols_ + segment_ - 1) / segment_, rows_ * cols_, streams, true);
    else
      run_segments_of(memory, 0, rows_ * segments_per_row_, rows_ * cols_, streams, false);
  }

  // An epilogue's output block is in cache, just written by the GEMM: it
  // stays there.
  void run_rows(const Memory& memory, int64_t first_row, int64_t end_row) override {
    run_segments_of(memory, first_row * segments_per_row_, end_row * segments_per_row_, (end_row - first_row) * cols_,
                    false, false);
  }
  void run_rows_here(const Memory& memory, int64_t first_row, int64_t end_row) override {
    run_segments_of(memory, first_row * segments_per_row_, end_row * segments_per_row_, kOnThisThread, false, false);
  }
  bool runs_columns_apart() const override {
    if (num_per_row > 0) return false;
    for (const Instr& in : instrs)
      if (in.kind == InstrKind::Reduce || (in.kind == InstrKind::Run && runs[in.run].sum_out)) return false;
    return true;
  }
  void run_block_here(const Memory& memory, int64_t first_row, int64_t end_row, int64_t first_col,
                      int64_t end_col) override {
    Scratch& scratch = scratch_.local();
    prepare(scratch);
    for (int64_t row = first_row; row < end_row; ++row)
      for (int64_t c0 = first_col; c0 < end_col; c0 += segment_)
        run_segment(memory, scratch, 0, {row, c0, std::min(segment_, end_col - c0)}, false);
  }

 private:
  // Where segment `s` lies: a row and the column it starts at, or (flat) an
  // offset into every value as row 0.
  struct Place {
    int64_t row, c0, len;
  };

  Place place(int64_t s, bool flat) const {
    if (flat) return {0, s * segment_, std::min(segment_, rows_ * cols_ - s * segment_)};
    int64_t c0 = (s % segments_per_row_) * segment_;
    return {s / segments_per_row_, c0, std::min(segment_, cols_ - c0)};
  }

  void set_segment(int64_t segment) {
    segment_ = segment;
    segments_per_row_ = (cols_ + segment_ - 1) / segment_;
    // Far enough ahead that a short row's inputs arrive before it is reached.
    prefetch_distance_ = std::max<int64_t>(1, kPrefetchBytes / (segment_ * static_cast<int64_t>(sizeof(float))));
  }

  void run_segments_of(const Memory& memory, int64_t first, int64_t end, int64_t elements, bool stream, bool flat) {
    auto run_segments = [&](int64_t chunk_first, int64_t chunk_end) {
      Scratch& scratch = scratch_.local();
      prepare(scratch);
      for (int64_t s = chunk_first; s < chunk_end; ++s) {
        if (s + prefetch_distance_ < chunk_end) {
          Place ahead = place(s + prefetch_distance_, flat);
          if (overlaps_traffic)
            queue_inputs(memory, ahead, scratch.traffic.prefetch);
          else
            prefetch_inputs(memory, ahead);
        }
        run_segment(memory, scratch, s, place(s, flat), stream);
      }
      scratch.traffic.stream.finish();
      if (stream) stream_fence();
    };
    if (elements < options_.parallel_min || !options_.arena) {
      // Per thread even here: a GEMM runs its batches' epilogues on several
      // threads at once, each through this path.
      run_segments(first, end);
      return;
    }
    // Chunks of a quarter of a thread's share at least: a chunk starts with
    // none of its inputs in flight and ends waiting on its last output's
    // copy. Left to split down to two rows, softmax took 11% longer and
    // layernorm 4% (alternating runs, 64 MiB flushed before each step).
    int64_t share = (end - first) / (kChunksPerThread * std::max(1, options_.arena->max_concurrency()));
    int64_t grain = std::max({int64_t{1}, options_.parallel_min / std::max<int64_t>(segment_, 1) / 4, share});
    parallel_chunks(*options_.arena, first, end, grain, run_segments);
  }

  // A later segment's inputs, asked for while this one computes, so that a
  // kernel that reads a row and then works on it keeps memory busy.
  void queue_inputs(const Memory& memory, Place at, PrefetchQueue& queue) const {
    queue.clear();
    for (const RowInput& input : row_inputs) queue.add(first_byte(memory, input, at), at.len * input.element_bytes);
  }

  const char* first_byte(const Memory& memory, const RowInput& input, Place at) const {
    return static_cast<const char*>(memory.address(input.value)) + (at.row * cols_ + at.c0) * input.element_bytes;
  }

  void prefetch_inputs(const Memory& memory, Place at) const {
    for (const RowInput& input : row_inputs) {
      const char* first = first_byte(memory, input, at);
      int64_t bytes = at.len * input.element_bytes;
      for (int64_t line = 0; line < bytes; line += PrefetchQueue::kLineBytes) __builtin_prefetch(first + line, 0, 3);
    }
  }

  void prepare(Scratch& scratch) const {
    scratch.buffers.resize(static_cast<size_t>(local_sets() * num_buffers) * segment_);
    for (std::vector<float>& buffer : scratch.stream) buffer.resize(streams ? segment_ : 0);
    scratch.per_row.resize(num_per_row);
    scratch.spreads.resize(static_cast<size_t>(num_spreads) * segment_);
    scratch.spread_phase.assign(num_spreads, -1);  // memory may hold new values since the last run
    scratch.spread_length.assign(num_spreads, 0);
    scratch.run_operands.resize(longest_run);
  }

  void run_registers(const Instr& in, const Memory& memory, Scratch& scratch, int64_t row, int64_t c0, int64_t len,
                     float* out, bool streams = false) const {
    const RunInstr& run = runs[in.run];
    for (size_t s = 0; s < run.steps.size(); ++s) {
      RunStep::Other kind = run.steps[s].other;
      View v =
          kind == RunStep::Scalar || kind == RunStep::Pointer ? view(run.others[s], memory, scratch, row, c0) : View{};
      scratch.run_operands[s] = {v.ptr, v.scalar};
    }
    View input = view(in.a, memory, scratch, row, c0);
    float sum = 0;
    execute_run(run.stores ? out : nullptr, input.ptr, run.steps, scratch.run_operands.data(), len,
                run.sum_out ? &sum : nullptr, overlaps_traffic ? &scratch.traffic : nullptr, streams);
    if (run.sum_out)
      row_out(*run.sum_out, memory, scratch, row) = run.sum_is_mean ? sum / static_cast<float>(len) : sum;
  }

  View byte_view(const Slot& slot, const Memory& memory, Scratch& scratch, int64_t row, int64_t c0) const {
    auto* base = static_cast<const uint8_t*>(memory.address(slot.value));
    switch (slot.kind) {
      case Slot::Full: return {nullptr, 0, base + row * cols_ + c0};
      case Slot::Suffix: return {nullptr, 0, base + (row * cols_ + c0) % slot.period};
      case Slot::PerRow: return {nullptr, static_cast<float>(base[row])};
      case Slot::Spread: return {nullptr, 0, spread(base, slot, scratch, row * cols_ + c0)};
      default: return {nullptr, static_cast<float>(base[0])};
    }
  }

  // A 16-bit value of memory read per row or as one number (read in full
  // only by a Widen).
  View narrow_view(const Slot& slot, const Memory& memory, int64_t row) const {
    auto* base = static_cast<const uint16_t*>(memory.address(slot.value));
    return {nullptr, widen_one(slot.narrow, base[slot.kind == Slot::PerRow ? row : 0])};
  }

  View view(const Slot& slot, const Memory& memory, Scratch& scratch, int64_t row, int64_t c0) const {
    if (slot.byte) return byte_view(slot, memory, scratch, row, c0);
    if (slot.is_narrow()) return narrow_view(slot, memory, row);
    switch (slot.kind) {
      case Slot::Splat: return {nullptr, slot.splat};
      case Slot::PerRow:
        return {nullptr, slot.where == Slot::Local ? scratch.per_row[slot.local] : memory.f32(slot.value)[row]};
      case Slot::Suffix: return {memory.f32(slot.value) + (row * cols_ + c0) % slot.period, 0};
      case Slot::Spread: return {spread(memory.f32(slot.value), slot, scratch, row * cols_ + c0), 0};
      case Slot::Scalar: return {nullptr, memory.f32(slot.value)[0]};
      case Slot::Full:
        if (slot.where == Slot::Local) return {local_buffer(scratch, slot.local, row, c0), 0};
        return {memory.f32(slot.value) + row * cols_ + c0, 0};
    }
    return {};
  }

  // A Spread slot's values (floats or bools) for the segment starting at
  // flat element `first` (up to segment_ elements), in its scratch: runs of
  // equal values, or (period 1) the source tiled.
  template <typename T>
  const T* spread(const T* source, const Slot& slot, Scratch& scratch, int64_t first) const {
    T* out = reinterpret_cast<T*>(scratch.spreads.data() + static_cast<size_t>(slot.local) * segment_);
    int64_t n = std::min(segment_, rows_ * cols_ - first);
    int64_t phase = first % (slot.period * slot.groups);
    if (scratch.spread_phase[slot.local] == phase && scratch.spread_length[slot.local] >= n) return out;
    scratch.spread_phase[slot.local] = phase;
    scratch.spread_length[slot.local] = n;
    for (int64_t i = 0; i < n;) {
      int64_t at = first + i;
      if (slot.period == 1) {
        int64_t from = at % slot.groups, run = std::min(n - i, slot.groups - from);
        std::copy_n(source + from, run, out + i);
        i += run;
        continue;
      }
      int64_t run = std::min(n - i, slot.period - at % slot.period);
      std::fill_n(out + i, run, source[at / slot.period % slot.groups]);
      i += run;
    }
    return out;
  }

  int local_sets() const { return defers_division ? 2 : 1; }

  float* local_buffer(Scratch& scratch, int local, int64_t row, int64_t c0) const {
    int64_t set = defers_division ? (row * segments_per_row_ + c0 / segment_) % 2 : 0;
    return scratch.buffers.data() + (set * num_buffers + local) * segment_;
  }

  float* full_out(const Slot& slot, const Memory& memory, Scratch& scratch, int64_t row, int64_t c0) const {
    if (slot.where == Slot::Local) return local_buffer(scratch, slot.local, row, c0);
    return memory.f32(slot.value) + row * cols_ + c0;
  }

  float& row_out(const Slot& slot, const Memory& memory, Scratch& scratch, int64_t row) const {
    return slot.where == Slot::Local ? scratch.per_row[slot.local] : memory.f32(slot.value)[row];
  }

  void run_segment(const Memory& memory, Scratch& scratch, int64_t segment, Place at, bool stream) const {
    for (const Instr& in : instrs) {
      run_instruction(in, memory, scratch, segment, at, stream);
      if (in.rounds_to != LAZYLAB_F32) round_result(in, memory, scratch, at);
    }
  }

  void run_instruction(const Instr& in, const Memory& memory, Scratch& scratch, int64_t segment, Place at,
                       bool stream) const {
    auto [row, c0, len] = at;
    if (in.out.byte) {
      store_bytes(static_cast<uint8_t*>(memory.address(in.out.value)) + row * cols_ + c0,
                  view(in.a, memory, scratch, row, c0), len);
      return;
    }
    if (in.out.int64) {
      store_integers(static_cast<int64_t*>(memory.address(in.out.value)) + row * cols_ + c0,
                     view(in.a, memory, scratch, row, c0), len);
      return;
    }
    if (in.kind == InstrKind::Widen) return widen_segment(in, memory, scratch, at);
    if (in.kind == InstrKind::Narrow) return narrow_segment(in, memory, scratch, at);
    if (in.kind == InstrKind::Convert && in.out.kind == Slot::PerRow) {
      auto integer = static_cast<const int64_t*>(memory.address(in.a.value))[row];
      row_out(in.out, memory, scratch, row) = static_cast<float>(static_cast<double>(integer));
      return;
    }
    if (in.kind == InstrKind::Convert) {  // as the reference loads an i64: through double
      const int64_t* source = static_cast<const int64_t*>(memory.address(in.a.value)) + row * cols_ + c0;
      float* out = full_out(in.out, memory, scratch, row, c0);
      for (int64_t i = 0; i < len; ++i) out[i] = static_cast<float>(static_cast<double>(source[i]));
      return;
    }
    bool full = in.out.kind == Slot::Full;
    bool streamed = stream && in.leaves_program;
    if (streamed && defers_division && &in == &instrs.back()) {
      View quotient_of = view(in.a, memory, scratch, row, c0), divisor = view(in.b, memory, scratch, row, c0);
      scratch.traffic.stream.start(full_out(in.out, memory, scratch, row, c0), quotient_of.ptr, len, divisor.scalar);
      return;
    }
    // A run's stores go past the caches themselves, spread over its strips
    // (layernorm 12-13% faster than through a buffer copied out later).
    if (streamed && in.kind == InstrKind::Run) {
      run_registers(in, memory, scratch, row, c0, len, full_out(in.out, memory, scratch, row, c0), true);
      return;
    }
    float* out = streamed ? scratch.stream[segment % 2].data()
                 : full   ? full_out(in.out, memory, scratch, row, c0)
                          : nullptr;
    execute(in, memory, scratch, row, c0, len, out);
    if (!streamed) return;
    float* destination = full_out(in.out, memory, scratch, row, c0);
    if (defers_stream)
      scratch.traffic.stream.start(destination, out, len);
    else
      stream_copy(destination, out, len);
  }

  // A 16-bit value of memory, in full, repeating or spread, into a local
  // buffer of floats.
  void widen_segment(const Instr& in, const Memory& memory, Scratch& scratch, Place at) const {
    auto* base = static_cast<const uint16_t*>(memory.address(in.a.value));
    int64_t first = at.row * cols_ + at.c0;
    const uint16_t* from = in.a.kind == Slot::Full     ? base + first
                           : in.a.kind == Slot::Suffix ? base + first % in.a.period
                                                       : spread(base, in.a, scratch, first);
    widen(in.a.narrow, from, full_out(in.out, memory, scratch, at.row, at.c0), at.len);
  }

  // Floats rounded into a 16-bit value of memory: the segment, or the row's.
  void narrow_segment(const Instr& in, const Memory& memory, Scratch& scratch, Place at) const {
    auto* base = static_cast<uint16_t*>(memory.address(in.out.value));
    View a = view(in.a, memory, scratch, at.row, at.c0);
    if (in.out.kind == Slot::PerRow) {
      base[at.row] = narrow_one(in.out.narrow, a.scalar);
      return;
    }
    uint16_t* out = base + at.row * cols_ + at.c0;
    if (a.ptr)
      narrow(in.out.narrow, a.ptr, out, at.len);
    else
      std::fill(out, out + at.len, narrow_one(in.out.narrow, a.scalar));
  }

  // An op's result of a 16-bit dtype, computed in f32, rounded to the
  // dtype's precision as the interpreter rounds it.
  void round_result(const Instr& in, const Memory& memory, Scratch& scratch, Place at) const {
    if (in.out.kind == Slot::PerRow) {
      float& value = row_out(in.out, memory, scratch, at.row);
      value = round_one(in.rounds_to, value);
    } else if (in.out.kind == Slot::Full) {
      round_to(in.rounds_to, full_out(in.out, memory, scratch, at.row, at.c0), at.len);
    }
  }

  // One instruction on one segment; `out` is where a full result goes.
  void execute(const Instr& in, const Memory& memory, Scratch& scratch, int64_t row, int64_t c0, int64_t len,
               float* out) const {
    {
      if (in.kind == InstrKind::Run) {
        run_registers(in, memory, scratch, row, c0, len, out);
        return;
      }
      View a = view(in.a, memory, scratch, row, c0);
      if (in.kind == InstrKind::Reduce) {
        row_out(in.out, memory, scratch, row) = reduce_row(in.op, a.ptr, len);
        return;
      }
      if (in.kind == InstrKind::Truncate) return truncate_loop(out, a, len);
      View b =
          in.kind == InstrKind::Binary || in.kind == InstrKind::Select ? view(in.b, memory, scratch, row, c0) : View{};
      if (in.kind == InstrKind::Select) {
        View c = view(in.c, memory, scratch, row, c0);
        if (in.out.kind == Slot::PerRow)
          row_out(in.out, memory, scratch, row) = a.scalar != 0 ? b.scalar : c.scalar;
        else
          select_loop(out, a, b, c, len);
        return;
      }
      if (in.out.kind == Slot::PerRow) {  // once per row, in double like the reference
        double result = 0;
        if (in.kind == InstrKind::Binary)
          reference::apply_binary(in.op, a.scalar, b.scalar, result);
        else if (in.kind == InstrKind::Unary)
          reference::apply_unary(in.op, a.scalar, result);
        else
          result = a.scalar;
        row_out(in.out, memory, scratch, row) = static_cast<float>(result);
        return;
      }
      if (in.kind == InstrKind::Binary)
        binary(in.op, out, a, b, len);
      else if (in.kind == InstrKind::Unary)
        unary(in.op, out, a, len);
      else
        copy_loop(out, a, len);
    }
  }

  static constexpr int64_t kPrefetchBytes = 16 << 10;
  int64_t rows_, cols_, segment_ = 0, segments_per_row_ = 1, prefetch_distance_ = 1;
  bool spans_rows_ = false;
  RowPlanOptions options_;
  tbb::enumerable_thread_specific<Scratch> scratch_;
};

}  // namespace
}  // namespace lazylab::cpu::row_exec
