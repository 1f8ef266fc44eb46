#include "row_plan.h"

#include <tbb/enumerable_thread_specific.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>

#include "float_math.h"
#include "lazylab/reference_semantics.hpp"
#include "lazylab/row_space.hpp"
#include "parallel.h"
#include "register_run.h"
#include "row_reductions.h"
#include "scalar_division.h"

namespace lazylab::cpu {
namespace {

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
  bool floats() const { return !byte && !int64; }
};

// Truncate: a cast of floats to i64 (whole numbers, as floats); Convert: an
// i64 value in memory read as floats.
enum class InstrKind { Unary, Binary, Select, Reduce, Materialize, Run, Truncate, Convert };

struct Instr {
  InstrKind kind;
  uint32_t op;
  Slot out;
  Slot a, b, c;
  int run = -1;                 // Run: index into RowPlan::runs; reads `a`, writes `out`
  bool leaves_program = false;  // `out` is one of the Program's outputs, in full
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
void select_elements(float* out, View predicate, A a, B b, int64_t n) {
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

void select_loop(float* out, View predicate, View a, View b, int64_t n) {
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
void binary_elements(float* out, A a, B b, int64_t n) {
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
void binary_loop(float* out, View a, View b, int64_t n) {
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
void unary_loop(float* out, View a, int64_t n) {
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

void binary(uint32_t op, float* out, View a, View b, int64_t n) {
  if (op == LAZYLAB_OP_Div && a.ptr && !b.ptr && divides_by_product(b.scalar))
    return divide_each(out, a.ptr, b.scalar, n, 0, store_vector);
  formulas::with_formula_op(op, [&](auto constant) {
    if constexpr (is_binary_formula(constant.value)) binary_loop<constant.value>(out, a, b, n);
  });
}

void unary(uint32_t op, float* out, View a, int64_t n) {
  formulas::with_formula_op(op, [&](auto constant) {
    if constexpr (is_unary_formula(constant.value)) unary_loop<constant.value>(out, a, n);
  });
}

// A comparison's 1s and 0s, or a view of bools, out to a bool value's bytes.
void store_bytes(uint8_t* out, View a, int64_t n) {
  if (a.mask)
    std::memcpy(out, a.mask, static_cast<size_t>(n));
  else if (a.ptr)
    for (int64_t i = 0; i < n; ++i) out[i] = a.ptr[i] != 0;
  else
    std::fill(out, out + n, static_cast<uint8_t>(a.scalar != 0));
}

// Whole numbers as floats out to an i64 value.
void store_integers(int64_t* out, View a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(a.ptr ? a.ptr[i] : a.scalar);
}

// x cast to i64 and back, as the reference casts (out of range: 0): exact,
// since a float as large as 2^23 is a whole number already.
void truncate_loop(float* out, View a, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(static_cast<double>(reference::to_integer(a.ptr ? a.ptr[i] : a.scalar)));
}

void copy_loop(float* out, View a, int64_t n) {
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
  std::vector<uint32_t> row_inputs;  // values read in full from memory

  int64_t segment_input_lines() const {
    return static_cast<int64_t>(row_inputs.size()) * segment_ * static_cast<int64_t>(sizeof(float)) /
           PrefetchQueue::kLineBytes;
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
    int64_t bytes = at.len * static_cast<int64_t>(sizeof(float));
    for (uint32_t value : row_inputs) queue.add(memory.f32(value) + at.row * cols_ + at.c0, bytes);
  }

  void prefetch_inputs(const Memory& memory, Place at) const {
    int64_t bytes = at.len * static_cast<int64_t>(sizeof(float));
    for (uint32_t value : row_inputs) {
      const char* first = reinterpret_cast<const char*>(memory.f32(value) + at.row * cols_ + at.c0);
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

  View view(const Slot& slot, const Memory& memory, Scratch& scratch, int64_t row, int64_t c0) const {
    if (slot.byte) return byte_view(slot, memory, scratch, row, c0);
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
    auto [row, c0, len] = at;
    for (const Instr& in : instrs) {
      if (in.out.byte) {
        store_bytes(static_cast<uint8_t*>(memory.address(in.out.value)) + row * cols_ + c0,
                    view(in.a, memory, scratch, row, c0), len);
        continue;
      }
      if (in.out.int64) {
        store_integers(static_cast<int64_t*>(memory.address(in.out.value)) + row * cols_ + c0,
                       view(in.a, memory, scratch, row, c0), len);
        continue;
      }
      if (in.kind == InstrKind::Convert && in.out.kind == Slot::PerRow) {
        auto integer = static_cast<const int64_t*>(memory.address(in.a.value))[row];
        row_out(in.out, memory, scratch, row) = static_cast<float>(static_cast<double>(integer));
        continue;
      }
      if (in.kind == InstrKind::Convert) {  // as the reference loads an i64: through double
        const int64_t* source = static_cast<const int64_t*>(memory.address(in.a.value)) + row * cols_ + c0;
        float* out = full_out(in.out, memory, scratch, row, c0);
        for (int64_t i = 0; i < len; ++i) out[i] = static_cast<float>(static_cast<double>(source[i]));
        continue;
      }
      bool full = in.out.kind == Slot::Full;
      bool streamed = stream && in.leaves_program;
      if (streamed && defers_division && &in == &instrs.back()) {
        View quotient_of = view(in.a, memory, scratch, row, c0), divisor = view(in.b, memory, scratch, row, c0);
        scratch.traffic.stream.start(full_out(in.out, memory, scratch, row, c0), quotient_of.ptr, len, divisor.scalar);
        continue;
      }
      // A run's stores go past the caches themselves, spread over its strips
      // (layernorm 12-13% faster than through a buffer copied out later).
      if (streamed && in.kind == InstrKind::Run) {
        run_registers(in, memory, scratch, row, c0, len, full_out(in.out, memory, scratch, row, c0), true);
        continue;
      }
      float* out = streamed ? scratch.stream[segment % 2].data()
                   : full   ? full_out(in.out, memory, scratch, row, c0)
                            : nullptr;
      execute(in, memory, scratch, row, c0, len, out);
      if (!streamed) continue;
      float* destination = full_out(in.out, memory, scratch, row, c0);
      if (defers_stream)
        scratch.traffic.stream.start(destination, out, len);
      else
        stream_copy(destination, out, len);
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

bool same_buffer(const Slot& x, const Slot& y) {
  return x.where == Slot::Local && y.where == Slot::Local && x.kind == Slot::Full && y.kind == Slot::Full &&
         x.local == y.local;
}

bool same_operand(const Slot& x, const Slot& y) {
  return x.kind == y.kind && x.where == y.where && x.value == y.value && x.local == y.local && x.splat == y.splat &&
         x.floats() && y.floats();
}

bool can_join_run(const Instr& in) {
  if (in.kind != InstrKind::Unary && in.kind != InstrKind::Binary) return false;
  if (in.out.kind != Slot::Full || !in.a.floats() || !in.b.floats()) return false;
  return run_supports(in.op);
}

// Whether an instruction from instrs[from] on reads the local `buffer`
// before something writes it again (a run's other operands included).
bool read_before_written(const std::vector<Instr>& instrs, const std::vector<RunInstr>& runs, size_t from,
                         const Slot& buffer) {
  for (size_t k = from; k < instrs.size(); ++k) {
    const Instr& in = instrs[k];
    for (const Slot* read : {&in.a, &in.b, &in.c})
      if (same_buffer(*read, buffer)) return true;
    if (in.kind == InstrKind::Run)
      for (const Slot& other : runs[in.run].others)
        if (same_buffer(other, buffer)) return true;
    if (same_buffer(in.out, buffer)) return false;
  }
  return false;
}

// Whether the local buffer `written` by instrs[at] is read after instrs[at + 1]
// before something writes it again.
bool read_after_next(const std::vector<Instr>& instrs, const std::vector<RunInstr>& runs, size_t at,
                     const Slot& written) {
  if (at + 1 < instrs.size() && same_buffer(instrs[at + 1].out, written)) return false;
  return read_before_written(instrs, runs, at + 2, written);
}

// A reduce_sum or reduce_mean over a whole row of `buffer`.
bool sums_row_of(const Instr& in, const Slot& buffer) {
  return in.kind == InstrKind::Reduce && (in.op == LAZYLAB_OP_ReduceSum || in.op == LAZYLAB_OP_ReduceMean) &&
         in.out.kind == Slot::PerRow && same_buffer(in.a, buffer);
}

// The step for instrs[at] when `running` holds its operand's value; nullopt
// if neither operand is the running value.
std::optional<std::pair<RunStep, Slot>> step_for(const Instr& in, const Slot& running, bool first) {
  auto is_running = [&](const Slot& slot) {
    return first ? slot.kind == Slot::Full && same_operand(slot, running) : same_buffer(slot, running);
  };
  if (in.kind == InstrKind::Unary) {
    if (!is_running(in.a)) return std::nullopt;
    return std::pair{RunStep{in.op, RunStep::None, true}, Slot{}};
  }
  bool a_runs = is_running(in.a), b_runs = is_running(in.b);
  if (!a_runs && !b_runs) return std::nullopt;
  if (a_runs && b_runs) return std::pair{RunStep{in.op, RunStep::Running, true}, Slot{}};
  const Slot& other = a_runs ? in.b : in.a;
  bool elements = other.kind == Slot::Full || other.kind == Slot::Suffix || other.kind == Slot::Spread;
  auto kind = elements ? RunStep::Pointer : RunStep::Scalar;
  return std::pair{RunStep{in.op, kind, a_runs}, other};
}

// Replaces each chain of two or more unary/binary instructions, where every
// intermediate result is a local buffer read only by the next instruction,
// with one register run; and one such instruction whose row is summed next,
// so that the sum is taken from the registers.
void form_register_runs(std::vector<Instr>& instrs, std::vector<RunInstr>& runs) {
  std::vector<Instr> formed;
  for (size_t at = 0; at < instrs.size();) {
    const Instr& head = instrs[at];
    Slot input = head.a.kind == Slot::Full ? head.a : head.b;
    auto first = can_join_run(head) ? step_for(head, input, true) : std::nullopt;
    RunInstr run;
    size_t end = at + 1;
    if (first) {
      run.steps.push_back(first->first);
      run.others.push_back(first->second);
      while (end < instrs.size() && can_join_run(instrs[end]) && instrs[end - 1].out.where == Slot::Local &&
             !read_after_next(instrs, runs, end - 1, instrs[end - 1].out)) {
        auto step = step_for(instrs[end], instrs[end - 1].out, false);
        if (!step) break;
        run.steps.push_back(step->first);
        run.others.push_back(step->second);
        ++end;
      }
    }
    bool summed_next = end < instrs.size() && sums_row_of(instrs[end], instrs[end - 1].out);
    if (run.steps.size() < 2 && !(run.steps.size() == 1 && summed_next)) {
      formed.push_back(head);
      ++at;
      continue;
    }
    Instr fused{InstrKind::Run, 0, instrs[end - 1].out, input, {}, {}, static_cast<int>(runs.size())};
    runs.push_back(std::move(run));
    formed.push_back(fused);
    at = end;
  }
  instrs = std::move(formed);
}

// A reduce_sum or reduce_mean over a whole row right after the run that made
// it (softmax's sum of exponentials, layernorm's mean of squares) is taken by
// the run from its registers; a run whose result is then not read again does
// not store it.
void fold_sums_into_runs(std::vector<Instr>& instrs, std::vector<RunInstr>& runs) {
  std::vector<Instr> folded;
  for (size_t at = 0; at < instrs.size(); ++at) {
    folded.push_back(instrs[at]);
    if (at + 1 >= instrs.size() || instrs[at].kind != InstrKind::Run || !sums_row_of(instrs[at + 1], instrs[at].out))
      continue;
    RunInstr& run = runs[instrs[at].run];
    run.sum_out = instrs[at + 1].out;
    run.sum_is_mean = instrs[at + 1].op == LAZYLAB_OP_ReduceMean;
    run.stores = instrs[at].out.where != Slot::Local || read_before_written(instrs, runs, at + 2, instrs[at].out);
    ++at;
  }
  instrs = std::move(folded);
}

// Whether instrs[from .. to) write `slot`'s value (a run's folded sum included).
bool written_between(const std::vector<Instr>& instrs, const std::vector<RunInstr>& runs, size_t from, size_t to,
                     const Slot& slot) {
  auto same_place = [&](const Slot& out) {
    if (slot.where == Slot::Memory) return out.where == Slot::Memory && out.value == slot.value;
    return out.where == Slot::Local && out.kind == slot.kind && out.local == slot.local;
  };
  for (size_t k = from; k < to; ++k) {
    if (same_place(instrs[k].out)) return true;
    if (instrs[k].kind == InstrKind::Run && runs[instrs[k].run].sum_out && same_place(*runs[instrs[k].run].sum_out))
      return true;
  }
  return false;
}

// The instructions after instrs[def] that read its local buffer, if every one
// is a run that takes it as its input; nullopt otherwise.
std::optional<std::vector<size_t>> runs_reading(const std::vector<Instr>& instrs, const std::vector<RunInstr>& runs,
                                                size_t def) {
  const Slot& buffer = instrs[def].out;
  std::vector<size_t> readers;
  for (size_t k = def + 1; k < instrs.size(); ++k) {
    const Instr& in = instrs[k];
    bool reads_input = same_buffer(in.a, buffer);
    bool reads_other = same_buffer(in.b, buffer) || same_buffer(in.c, buffer);
    if (in.kind == InstrKind::Run)
      for (const Slot& other : runs[in.run].others) reads_other = reads_other || same_buffer(other, buffer);
    if (reads_other || (reads_input && in.kind != InstrKind::Run)) return std::nullopt;
    if (reads_input) readers.push_back(k);
    if (same_buffer(in.out, buffer)) break;
  }
  if (readers.empty()) return std::nullopt;
  return readers;
}

// An instruction that a run can recompute from what it read: one cheap op
// (formula_is_cheap) of memory and per-row or constant operands.
bool recomputable(const Instr& in) {
  if (!can_join_run(in) || in.out.where != Slot::Local || !formula_is_cheap(in.op)) return false;
  auto operand_stays = [](const Slot& slot) {
    return slot.kind != Slot::Full || slot.where == Slot::Memory;  // not a local buffer
  };
  return in.a.kind == Slot::Full && operand_stays(in.a) && (in.kind == InstrKind::Unary || operand_stays(in.b));
}

// A cheap instruction whose local buffer only runs read (layernorm's
// x - mean, read by the sum of its squares and by the output's run) is
// recomputed as the first step of each of those runs, from its operands,
// instead of stored once and loaded by each: a store and a load an element
// traded for one op, where L1's store rate bounded the row.
void recompute_cheap_buffers(std::vector<Instr>& instrs, std::vector<RunInstr>& runs) {
  for (size_t def = 0; def < instrs.size(); ++def) {
    const Instr& in = instrs[def];
    if (!recomputable(in)) continue;
    auto readers = runs_reading(instrs, runs, def);
    if (!readers) continue;
    size_t last = readers->back();
    bool operands_stay = !written_between(instrs, runs, def + 1, last, in.a) &&
                         (in.kind == InstrKind::Unary || !written_between(instrs, runs, def + 1, last, in.b));
    auto step = step_for(in, in.a, true);
    if (!operands_stay || !step) continue;
    for (size_t reader : *readers) {
      RunInstr& run = runs[instrs[reader].run];
      run.steps.insert(run.steps.begin(), step->first);
      run.others.insert(run.others.begin(), step->second);
      instrs[reader].a = in.a;
    }
    instrs.erase(instrs.begin() + static_cast<std::ptrdiff_t>(def));
    --def;
  }
}

// Renders a kernel's row space (lazylab/row_space.hpp) as instructions,
// or declines, saying why, where the loops cannot run an op.
class RowCompiler {
 public:
  RowCompiler(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values) : kernel_(kernel), values_(values) {}

  Planned<RowKernelPlan> compile(const RowPlanOptions& options) {
    if (!read_description()) return nullptr;  // not a row-space kernel
    if (rows_ * cols_ <= 0) return decline("an empty row space");
    if (auto op = first_of_unsupported_dtypes())
      return decline(op_named(*op) + ": the loops hold f32 values (bools only from comparisons, i64 only as casts)");
    auto plan = std::make_unique<RowPlan>(rows_, cols_, reduces_, options);
    for (uint32_t i = 0; i < kernel_.num_ops; ++i) {
      why_.clear();
      if (!compile_op(kernel_.ops[i], i, *plan))
        return decline(op_named(kernel_.ops[i]) + ": " + (why_.empty() ? "no loop runs it" : why_));
    }
    form_register_runs(plan->instrs, plan->runs);
    if (reduces_) fold_sums_into_runs(plan->instrs, plan->runs);  // a segment is then a whole row
    recompute_cheap_buffers(plan->instrs, plan->runs);
    for (const RunInstr& run : plan->runs) plan->longest_run = std::max(plan->longest_run, run.steps.size());
    plan->num_buffers = num_buffers_;
    plan->num_per_row = num_per_row_;
    plan->num_spreads = num_spreads_;
    mark_program_outputs(*plan);
    plan->streams = output_bytes(*plan) >= options.stream_min;
    plan->row_inputs = row_inputs(*plan);
    plan->overlaps_traffic = !plan->runs.empty() && plan->segment_input_lines() > kLinesInFlight;
    plan->defers_stream = plan->overlaps_traffic && plan->streams && one_output_never_read_again(*plan);
    plan->defers_division = plan->defers_stream && divides_local_by_row_value(plan->instrs.back());
    if (!reduces_ && num_per_row_ == 0) span_rows_if_flat(*plan);
    plan->num_spreads = num_spreads_;
    return plan;
  }

 private:
  static std::vector<uint32_t> row_inputs(const RowPlan& plan) {
    std::vector<uint32_t> inputs;
    auto note = [&](const Slot& slot) {
      if (slot.where == Slot::Memory && slot.kind == Slot::Full && slot.floats() &&
          std::find(inputs.begin(), inputs.end(), slot.value) == inputs.end())
        inputs.push_back(slot.value);
    };
    for (const Instr& in : plan.instrs) {
      if (in.kind == InstrKind::Unary || in.kind == InstrKind::Binary || in.kind == InstrKind::Select ||
          in.kind == InstrKind::Reduce || in.kind == InstrKind::Run || in.kind == InstrKind::Materialize)
        note(in.a);
      if (in.kind == InstrKind::Binary || in.kind == InstrKind::Select) note(in.b);
      if (in.kind == InstrKind::Select) note(in.c);
    }
    for (const RunInstr& run : plan.runs)
      for (const Slot& other : run.others) note(other);
    return inputs;
  }

  // Walks flat segments across rows where every value the kernel reads or
  // writes in memory is a full array, one number or a repeating one. A
  // repeating value (a suffix of the shape: max pooling's window offsets
  // over rows of 16) is then tiled into scratch, as a row group of period 1.
  void span_rows_if_flat(RowPlan& plan) {
    std::map<std::pair<uint32_t, int64_t>, int> tiled;  // (value, period) -> its scratch
    int64_t pattern = 1;
    auto tile = [&](Slot& slot) {
      if (slot.kind != Slot::Suffix) return;
      auto [it, added] = tiled.try_emplace({slot.value, slot.period}, num_spreads_);
      if (added) ++num_spreads_;
      pattern = std::lcm(pattern, slot.period);
      slot.kind = Slot::Spread;
      slot.groups = slot.period;
      slot.period = 1;
      slot.local = it->second;
    };
    auto suffix_of_floats_or_bools = [](const Slot& slot) { return slot.kind == Slot::Suffix && !slot.int64; };
    auto flat_or_tiled = [&](const Slot& slot) { return flat(slot) || suffix_of_floats_or_bools(slot); };
    for (const Instr& in : plan.instrs)
      if (!flat(in.out) || !flat_or_tiled(in.a) || !flat_or_tiled(in.b) || !flat_or_tiled(in.c)) return;
    for (const RunInstr& run : plan.runs)
      if (!std::all_of(run.others.begin(), run.others.end(), flat_or_tiled)) return;
    for (Instr& in : plan.instrs)
      for (Slot* slot : {&in.a, &in.b, &in.c}) tile(*slot);
    for (RunInstr& run : plan.runs)
      for (Slot& other : run.others) tile(other);
    plan.span_rows(pattern);
  }

  static bool flat(const Slot& slot) { return slot.kind != Slot::PerRow && slot.kind != Slot::Suffix; }

  // Whether the kernel has one output going to memory in full and nothing
  // after its instruction reads it there (its copy may then be deferred).
  // A slot left unset reads as value 0: at worst a copy not deferred.
  static bool one_output_never_read_again(const RowPlan& plan) {
    auto leaves = [](const Instr& in) { return in.leaves_program; };
    if (std::count_if(plan.instrs.begin(), plan.instrs.end(), leaves) != 1) return false;
    auto output = std::find_if(plan.instrs.begin(), plan.instrs.end(), leaves);
    auto is_output = [&](const Slot& slot) { return slot.where == Slot::Memory && slot.value == output->out.value; };
    auto reads_output = [&](const Instr& in) {
      bool run_reads = in.kind == InstrKind::Run &&
                       std::any_of(plan.runs[in.run].others.begin(), plan.runs[in.run].others.end(), is_output);
      return is_output(in.a) || is_output(in.b) || is_output(in.c) || run_reads;
    };
    return std::none_of(output + 1, plan.instrs.end(), reads_output);
  }

  static bool divides_local_by_row_value(const Instr& in) {
    return in.leaves_program && in.kind == InstrKind::Binary && in.op == LAZYLAB_OP_Div && in.a.where == Slot::Local &&
           in.a.kind == Slot::Full && in.b.kind == Slot::PerRow && !in.b.byte;
  }

  // Only what leaves the Program goes past the caches: a value the next
  // kernel reads (attention's probabilities, read by the second product) is
  // better left in the last-level cache.
  void mark_program_outputs(RowPlan& plan) const {
    for (Instr& in : plan.instrs)
      in.leaves_program = in.out.floats() && in.kind != InstrKind::Convert && in.out.where == Slot::Memory &&
                          in.out.kind == Slot::Full && values_[in.out.value].kind == LAZYLAB_VALUE_OUTPUT;
  }

  int64_t output_bytes(const RowPlan& plan) const {
    auto leaves = [](const Instr& in) { return in.leaves_program; };
    return std::count_if(plan.instrs.begin(), plan.instrs.end(), leaves) * rows_ * cols_ *
           static_cast<int64_t>(sizeof(float));
  }

  static std::string op_named(const lazylab_op& op) {
    return std::string("op '") + ops::name(op.op) + "' (%" + std::to_string(op.result) + ")";
  }

  // Records why an op cannot run on the loops.
  bool fail(const char* why) const {
    why_ = why;
    return false;
  }

  // The iteration space and each value's indexing, as lower described them.
  bool read_description() {
    if (!lazylab_kernel_described(&kernel_)) return false;
    bool row_space = kernel_.kind == LAZYLAB_KERNEL_ELEMENTWISE || kernel_.kind == LAZYLAB_KERNEL_ROW_REDUCTION ||
                     kernel_.kind == LAZYLAB_KERNEL_CONTRACTION ||  // a contraction's epilogue
                     kernel_.kind == LAZYLAB_KERNEL_WINDOW;         // a convolution's
    if (!row_space) return false;
    // As this backend sees the values: a product it gave memory leaves.
    auto facts = [&](uint32_t v) { return rows::ValueFacts{values_[v].kind, values_[v].dtype, values_[v].size()}; };
    space_.emplace(kernel_, rows::RowSpace::all_ops(kernel_), facts);
    rows_ = kernel_.rows;
    cols_ = kernel_.cols;
    reduces_ = kernel_.kind == LAZYLAB_KERNEL_ROW_REDUCTION;
    return true;
  }

  // These loops hold f32 values; bools only as a comparison's result, a
  // select's predicate or a broadcast of one; i64s only as a cast of f32
  // values and cast back.
  const lazylab_op* first_of_unsupported_dtypes() const {
    for (uint32_t i = 0; i < kernel_.num_ops; ++i) {
      const lazylab_op& op = kernel_.ops[i];
      uint32_t result = values_[op.result].dtype;
      bool cast = op.op == LAZYLAB_OP_Cast;
      bool makes_bool = op.op == LAZYLAB_OP_Broadcast || ops::is_comparison(op.op);
      if (result != LAZYLAB_F32 && !(result == LAZYLAB_BOOL && makes_bool) && !(result == LAZYLAB_I64 && cast))
        return &op;
      for (uint32_t k = 0; k < op.num_operands; ++k) {
        uint32_t operand = values_[op.operands[k]].dtype;
        bool predicate = (op.op == LAZYLAB_OP_Select && k == 0) || op.op == LAZYLAB_OP_Broadcast;
        bool cast_back = cast && operand == LAZYLAB_I64 && result == LAZYLAB_F32;
        if (operand != LAZYLAB_F32 && !(operand == LAZYLAB_BOOL && predicate) && !cast_back) return &op;
      }
    }
    return nullptr;
  }

  const lazylab_access* access(uint32_t value) const { return space_->access(value); }

  // Memory `source` read as the access says.
  std::optional<Slot> memory_slot(uint32_t source, const lazylab_access& a) const {
    Slot slot{Slot::Full, Slot::Memory, source};
    switch (a.kind) {
      case LAZYLAB_ACCESS_FULL: break;
      case LAZYLAB_ACCESS_PER_ROW: slot.kind = Slot::PerRow; break;
      case LAZYLAB_ACCESS_SCALAR: slot.kind = Slot::Scalar; break;
      case LAZYLAB_ACCESS_REPEAT:
        if (a.period % cols_ != 0) {  // a segment must not wrap around
          fail("reads a value repeating within a row");
          return std::nullopt;
        }
        slot.kind = Slot::Suffix;
        slot.period = a.period;
        break;
      case LAZYLAB_ACCESS_ROW_GROUP:  // spread along each segment, so that the loops stay flat
        if (a.period <= 0 || values_[source].size() <= 0 || values_[source].dtype == LAZYLAB_I64) {
          fail("reads an empty or i64 value per group of rows");
          return std::nullopt;
        }
        slot.kind = Slot::Spread;
        slot.period = a.period * cols_;
        slot.groups = values_[source].size();
        slot.local = num_spreads_++;
        break;
      default: fail("reads memory through an access the loops do not index"); return std::nullopt;
    }
    slot.byte = values_[source].dtype == LAZYLAB_BOOL;
    slot.int64 = values_[source].dtype == LAZYLAB_I64;
    return slot;
  }

  std::optional<Slot> read(uint32_t id) const {
    auto it = slots_.find(id);
    if (it != slots_.end()) return it->second;
    const lazylab_access* a = access(id);
    if (!a) return std::nullopt;
    return memory_slot(id, *a);
  }

  // Frees local buffers whose last use is op `index`, then places the result
  // (in a local buffer where it is the kernel's own, or `local`).
  Slot place_result(uint32_t id, Slot::Kind kind, uint32_t index, bool local = false) {
    for (auto& [value, last] : space_->last_reads())
      if (last == index && slots_.count(value) && slots_[value].where == Slot::Local &&
          slots_[value].kind == Slot::Full && !freed_.count(value)) {
        free_buffers_.push_back(slots_[value].local);
        freed_.insert({value, true});
      }
    Slot slot{kind, Slot::Memory, id};
    if (local || !space_->leaves(id)) {
      slot.where = Slot::Local;
      if (kind == Slot::PerRow) {
        slot.local = num_per_row_++;
      } else if (!free_buffers_.empty()) {
        slot.local = free_buffers_.back();
        free_buffers_.pop_back();
      } else {
        slot.local = num_buffers_++;
      }
    }
    slots_[id] = slot;
    return slot;
  }

  std::optional<Slot::Kind> layout_of(uint32_t id) const {
    const lazylab_access* a = access(id);
    if (a && a->kind == LAZYLAB_ACCESS_FULL) return Slot::Full;
    if (a && a->kind == LAZYLAB_ACCESS_PER_ROW) return Slot::PerRow;
    return std::nullopt;
  }

  // A broadcast is a view of its source, indexed as the description says;
  // the source is a value of this kernel or memory.
  std::optional<Slot> broadcast_view(const lazylab_op& op) const {
    const lazylab_access* a = access(op.result);
    if (!a) return std::nullopt;
    if (a->kind == LAZYLAB_ACCESS_SPLAT) {
      Slot splat{Slot::Splat};
      splat.splat = static_cast<float>(a->splat);
      return splat;
    }
    if (auto it = slots_.find(a->source); it != slots_.end()) {
      if (it->second.kind == Slot::Splat || it->second.kind == Slot::PerRow) return it->second;
      bool same_elements = a->kind == LAZYLAB_ACCESS_FULL && it->second.kind == Slot::Full;  // a reshape
      if (same_elements) return it->second;
      return std::nullopt;
    }
    return memory_slot(a->source, *a);
  }

  bool compile_op(const lazylab_op& op, uint32_t index, RowPlan& plan) {
    if (op.op == LAZYLAB_OP_Constant) {
      Slot splat{Slot::Splat};
      splat.splat = static_cast<float>(op.attrs[0].f);
      if (space_->leaves(op.result)) return materialize(op.result, splat, index, plan);
      slots_[op.result] = splat;
      return true;
    }
    if (op.op == LAZYLAB_OP_Broadcast || op.op == LAZYLAB_OP_Reshape) {
      auto view = broadcast_view(op);
      if (!view) return fail("a view of a value of this kernel that the loops cannot index");
      if (space_->leaves(op.result)) {
        // A view of bools: of memory (bytes) or of a comparison here (1s and
        // 0s in floats, found by lazylab fuzz: written out as floats).
        if (view->byte || values_[op.result].dtype == LAZYLAB_BOOL) return materialize_bytes(op.result, *view, plan);
        if (!view->floats()) return fail("an i64 view leaving the kernel");
        return materialize(op.result, *view, index, plan);
      }
      slots_[op.result] = *view;
      return true;
    }
    if (op.op == LAZYLAB_OP_Select) return compile_select(op, index, plan);
    if (op.op == LAZYLAB_OP_Cast) return compile_cast(op, index, plan);
    bool reduction = ops::is_reduction(op.op);
    if (reduction) return compile_reduce(op, index, plan);
    bool is_unary = op.num_operands == 1 && is_unary_formula(op.op);
    bool is_binary = op.num_operands == 2 && is_binary_formula(op.op);
    if (!is_unary && !is_binary) return fail("no elementwise loop computes it");
    auto a = read(op.operands[0]);
    auto b = is_binary ? read(op.operands[1]) : std::optional<Slot>(Slot{});
    auto kind = layout_of(op.result);
    if (!a || !b || !kind || !a->floats() || !b->floats())
      return why_.empty() ? fail("an operand or its result the loops cannot index") : false;
    if (values_[op.result].dtype == LAZYLAB_BOOL) return compile_comparison(op, *a, *b, *kind, index, plan);
    Slot out = place_result(op.result, *kind, index);
    plan.instrs.push_back({is_binary ? InstrKind::Binary : InstrKind::Unary, op.op, out, *a, *b, {}});
    return true;
  }

  // A comparison's 1s and 0s go to a local buffer, which later ops read
  // (a select as its predicate); one that leaves the kernel is then stored
  // as bytes from there.
  bool compile_comparison(const lazylab_op& op, Slot a, Slot b, Slot::Kind kind, uint32_t index, RowPlan& plan) {
    if (kind != Slot::Full) return fail("a comparison with a result per row");
    bool leaves = space_->leaves(op.result);
    Slot local = place_result(op.result, kind, index, true);
    plan.instrs.push_back({InstrKind::Binary, op.op, local, a, b, {}});
    if (!leaves) return true;
    Slot bytes{Slot::Full, Slot::Memory, op.result};
    bytes.byte = true;
    plan.instrs.push_back({InstrKind::Materialize, 0, bytes, local, {}, {}});
    return true;
  }

  // f32 -> i64: the whole numbers in a local buffer (stored as i64 where the
  // value leaves); i64 -> f32: a copy of such a buffer, or a Convert of
  // memory.
  bool compile_cast(const lazylab_op& op, uint32_t index, RowPlan& plan) {
    auto a = read(op.operands[0]);
    auto kind = layout_of(op.result);
    if (!a || a->byte) return fail("a cast of dtypes or layouts the loops do not run");
    if (kind == Slot::PerRow) return compile_row_cast(op, *a, index, plan);
    if (kind != Slot::Full) return fail("a cast of dtypes or layouts the loops do not run");
    if (values_[op.result].dtype == LAZYLAB_I64) {
      if (!a->floats()) return fail("a cast of dtypes or layouts the loops do not run");
      Slot local = place_result(op.result, Slot::Full, index, true);
      plan.instrs.push_back({InstrKind::Truncate, op.op, local, *a, {}, {}});
      if (!space_->leaves(op.result)) return true;
      Slot integers{Slot::Full, Slot::Memory, op.result};
      integers.int64 = true;
      plan.instrs.push_back({InstrKind::Materialize, 0, integers, local, {}, {}});
      return true;
    }
    if (values_[op.result].dtype != LAZYLAB_F32) return fail("a cast of dtypes or layouts the loops do not run");
    if (a->int64 && (a->kind != Slot::Full || a->where != Slot::Memory))
      return fail("a cast of dtypes or layouts the loops do not run");
    Slot out = place_result(op.result, Slot::Full, index);
    plan.instrs.push_back({a->int64 ? InstrKind::Convert : InstrKind::Materialize, 0, out, *a, {}, {}});
    return true;
  }

  // A value a row cast to floats: a copy, or an i64 of memory read through
  // double as the reference does (a cross entropy's labels, spread over
  // their rows: the GPT's one-hot kernel ran on the reference kernels, 0.9
  // ms of its 8 ms step).
  bool compile_row_cast(const lazylab_op& op, const Slot& a, uint32_t index, RowPlan& plan) {
    if (values_[op.result].dtype != LAZYLAB_F32 || a.kind != Slot::PerRow)
      return fail("a cast of dtypes or layouts the loops do not run");
    if (a.int64 && a.where != Slot::Memory) return fail("a cast of dtypes or layouts the loops do not run");
    Slot out = place_result(op.result, Slot::PerRow, index);
    plan.instrs.push_back({a.int64 ? InstrKind::Convert : InstrKind::Materialize, 0, out, a, {}, {}});
    return true;
  }

  bool compile_select(const lazylab_op& op, uint32_t index, RowPlan& plan) {
    auto predicate = read(op.operands[0]), a = read(op.operands[1]), b = read(op.operands[2]);
    auto kind = layout_of(op.result);
    if (!predicate || !a || !b || !kind || !a->floats() || !b->floats())
      return why_.empty() ? fail("an operand or its result the loops cannot index") : false;
    Slot out = place_result(op.result, *kind, index);
    plan.instrs.push_back({InstrKind::Select, op.op, out, *predicate, *a, *b});
    return true;
  }

  // The description says it reduces the last axis of the row space.
  bool compile_reduce(const lazylab_op& op, uint32_t index, RowPlan& plan) {
    auto a = read(op.operands[0]);
    if (!a || a->kind != Slot::Full) return why_.empty() ? fail("a reduction of a value not read in full") : false;
    Slot out = place_result(op.result, Slot::PerRow, index);
    plan.instrs.push_back({InstrKind::Reduce, op.op, out, *a, {}, {}});
    return true;
  }

  // A view of bools (an attention mask spread over the batch) written out in
  // full because it leaves the kernel; later ops read the view.
  bool materialize_bytes(uint32_t id, Slot source, RowPlan& plan) {
    if (space_->stored(id) != rows::Stored::Full || values_[id].dtype != LAZYLAB_BOOL)
      return fail("a view of bools leaving the kernel, not of the row space's size");
    Slot out{Slot::Full, Slot::Memory, id};
    out.byte = true;
    plan.instrs.push_back({InstrKind::Materialize, 0, out, source, {}, {}});
    slots_[id] = source;
    return true;
  }

  // Writes a view (a constant, a broadcast) out in full because it leaves
  // the kernel.
  bool materialize(uint32_t id, Slot source, uint32_t index, RowPlan& plan) {
    // A constant or a view is described by where its elements come from; as
    // stored it is a full or a per-row value, row-major like any other.
    rows::Stored stored = space_->stored(id);
    if (stored == rows::Stored::Neither)
      return fail("a constant or view leaving the kernel, neither per element nor per row");
    Slot out = place_result(id, stored == rows::Stored::Full ? Slot::Full : Slot::PerRow, index);
    plan.instrs.push_back({InstrKind::Materialize, 0, out, source, {}, {}});
    return true;
  }

  const lazylab_kernel& kernel_;
  const std::vector<ValueInfo>& values_;
  int64_t rows_ = 0, cols_ = 0;
  bool reduces_ = false;
  std::map<uint32_t, Slot> slots_;
  std::optional<rows::RowSpace> space_;  // read_description()
  std::map<uint32_t, bool> freed_;
  std::vector<int> free_buffers_;
  int num_buffers_ = 0, num_per_row_ = 0;
  mutable std::string why_;  // why the op being compiled cannot run (fail())
  // Spread slots, each with its own scratch: counted as memory is read
  // (read() is const; a broadcast's view is made once and kept in slots_).
  mutable int num_spreads_ = 0;
};

}  // namespace

Planned<RowKernelPlan> make_row_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                     const RowPlanOptions& options) {
  return RowCompiler(kernel, values).compile(options);
}

}  // namespace lazylab::cpu
