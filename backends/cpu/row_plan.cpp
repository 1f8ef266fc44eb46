#include "row_plan.h"

#include <tbb/enumerable_thread_specific.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "lazylab/reference_semantics.hpp"
#include "parallel.h"
#include "register_run.h"
#include "vector_math.h"

namespace lazylab::cpu {
namespace {

// How an op reads or writes one value within a segment (row r, columns
// [c0, c0 + len)).
struct Slot {
  enum Kind { Full, PerRow, Splat, Suffix, Scalar } kind = Full;
  enum Where { Memory, Local } where = Memory;
  uint32_t value = 0;  // Memory
  int local = -1;      // Local: buffer index (Full) or scalar index (PerRow)
  float splat = 0;     // Splat
  int64_t period = 0;  // Suffix: elements of the broadcast source
  bool byte = false;   // a bool value (uint8), only ever a select's predicate
};

enum class InstrKind { Unary, Binary, Select, Reduce, Materialize, Run };

struct Instr {
  InstrKind kind;
  uint32_t op;
  Slot out;
  Slot a, b, c;
  int run = -1;  // Run: index into RowPlan::runs; reads `a`, writes `out`
};

// Unary and binary instructions fused into one register run: each step's
// other operand (RunStep::other of None or Running has none).
struct RunInstr {
  std::vector<RunStep> steps;
  std::vector<Slot> others;
};

// An operand as the loops see it: a pointer, or a scalar for the segment.
struct View {
  const float* ptr = nullptr;
  float scalar = 0;
  const uint8_t* mask = nullptr;  // a bool array
};

void select_loop(float* out, View predicate, View a, View b, int64_t n) {
  auto pick = [](const View& v, int64_t i) { return v.ptr ? v.ptr[i] : v.scalar; };
  if (predicate.mask)
    for (int64_t i = 0; i < n; ++i) out[i] = predicate.mask[i] ? pick(a, i) : pick(b, i);
  else
    for (int64_t i = 0; i < n; ++i) out[i] = predicate.scalar != 0 ? pick(a, i) : pick(b, i);
}

struct Scratch {
  std::vector<float> buffers;
  std::vector<float> per_row;
  std::vector<RunOperand> run_operands;
};

template <class F>
void binary_loop(float* out, View a, View b, int64_t n, F f) {
  if (a.ptr && b.ptr)
    for (int64_t i = 0; i < n; ++i) out[i] = f(a.ptr[i], b.ptr[i]);
  else if (a.ptr)
    for (int64_t i = 0; i < n; ++i) out[i] = f(a.ptr[i], b.scalar);
  else if (b.ptr)
    for (int64_t i = 0; i < n; ++i) out[i] = f(a.scalar, b.ptr[i]);
  else
    for (int64_t i = 0; i < n; ++i) out[i] = f(a.scalar, b.scalar);
}

template <class F>
void unary_loop(float* out, View a, int64_t n, F f) {
  if (a.ptr)
    for (int64_t i = 0; i < n; ++i) out[i] = f(a.ptr[i]);
  else
    for (int64_t i = 0; i < n; ++i) out[i] = f(a.scalar);
}

// NaN-propagating max/min, as the reference defines them.
inline float max_nan(float x, float y) { return (x != x || y != y) ? NAN : (x > y ? x : y); }
inline float min_nan(float x, float y) { return (x != x || y != y) ? NAN : (x < y ? x : y); }

void binary(uint32_t op, float* out, View a, View b, int64_t n) {
  switch (op) {
    case LAZYLAB_OP_Add: return binary_loop(out, a, b, n, [](float x, float y) { return x + y; });
    case LAZYLAB_OP_Sub: return binary_loop(out, a, b, n, [](float x, float y) { return x - y; });
    case LAZYLAB_OP_Mul: return binary_loop(out, a, b, n, [](float x, float y) { return x * y; });
    case LAZYLAB_OP_Div: return binary_loop(out, a, b, n, [](float x, float y) { return x / y; });
    case LAZYLAB_OP_Max: return binary_loop(out, a, b, n, max_nan);
    case LAZYLAB_OP_Min: return binary_loop(out, a, b, n, min_nan);
    case LAZYLAB_OP_Pow: return binary_loop(out, a, b, n, [](float x, float y) { return std::pow(x, y); });
  }
}

void transcendental(VectorFn fn, float* out, View a, int64_t n) {
  if (a.ptr) return vector_fn(fn, out, a.ptr, n);
  float value = scalar_fn(fn, a.scalar);
  std::fill(out, out + n, value);
}

void unary(uint32_t op, float* out, View a, int64_t n) {
  switch (op) {
    case LAZYLAB_OP_Exp: return transcendental(VectorFn::Exp, out, a, n);
    case LAZYLAB_OP_Log: return transcendental(VectorFn::Log, out, a, n);
    case LAZYLAB_OP_Tanh: return transcendental(VectorFn::Tanh, out, a, n);
    case LAZYLAB_OP_Sigmoid: return transcendental(VectorFn::Sigmoid, out, a, n);
    case LAZYLAB_OP_Neg: return unary_loop(out, a, n, [](float x) { return -x; });
    case LAZYLAB_OP_Abs: return unary_loop(out, a, n, [](float x) { return std::fabs(x); });
    case LAZYLAB_OP_Relu: return unary_loop(out, a, n, [](float x) { return x > 0 ? x : 0.0f; });
    case LAZYLAB_OP_Sqrt: return unary_loop(out, a, n, [](float x) { return std::sqrt(x); });
    case LAZYLAB_OP_Rsqrt: return unary_loop(out, a, n, [](float x) { return 1.0f / std::sqrt(x); });
  }
}

// Sixteen running partial results so the loop vectorises without -ffast-math.
template <class F>
float reduce_row(const float* x, int64_t n, float init, F f) {
  float lanes[16];
  std::fill(lanes, lanes + 16, init);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 16; ++k) lanes[k] = f(lanes[k], x[i + k]);
  float total = init;
  for (int k = 0; k < 16; ++k) total = f(total, lanes[k]);
  for (; i < n; ++i) total = f(total, x[i]);
  return total;
}

// max/min without a NaN test per element: plain comparisons in the lanes
// (keeping the earlier value on ties, as std::max in the reference does),
// and a separate flag for whether any element was NaN (the result then).
template <class Pick>
float reduce_extreme(const float* x, int64_t n, float init, Pick pick) {
  float lanes[16];
  int nan_seen[16] = {};
  std::fill(lanes, lanes + 16, init);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 16; ++k) {
      lanes[k] = pick(lanes[k], x[i + k]);
      nan_seen[k] |= x[i + k] != x[i + k];
    }
  float total = init;
  bool nan = false;
  for (int k = 0; k < 16; ++k) total = pick(total, lanes[k]), nan = nan || nan_seen[k];
  for (; i < n; ++i) total = pick(total, x[i]), nan = nan || x[i] != x[i];
  return nan ? NAN : total;
}

float reduce(uint32_t op, const float* x, int64_t n) {
  switch (op) {
    case LAZYLAB_OP_ReduceMax: return reduce_extreme(x, n, -INFINITY, [](float m, float v) { return v > m ? v : m; });
    case LAZYLAB_OP_ReduceMin: return reduce_extreme(x, n, INFINITY, [](float m, float v) { return v < m ? v : m; });
    case LAZYLAB_OP_ReduceSum: return reduce_row(x, n, 0.0f, [](float s, float v) { return s + v; });
    default: return reduce_row(x, n, 0.0f, [](float s, float v) { return s + v; }) / static_cast<float>(n);
  }
}

bool is_fused_unary(uint32_t op) {
  switch (op) {
    case LAZYLAB_OP_Neg:
    case LAZYLAB_OP_Abs:
    case LAZYLAB_OP_Relu:
    case LAZYLAB_OP_Exp:
    case LAZYLAB_OP_Log:
    case LAZYLAB_OP_Sqrt:
    case LAZYLAB_OP_Rsqrt:
    case LAZYLAB_OP_Tanh:
    case LAZYLAB_OP_Sigmoid: return true;
    default: return false;
  }
}

bool is_fused_binary(uint32_t op) {
  switch (op) {
    case LAZYLAB_OP_Add:
    case LAZYLAB_OP_Sub:
    case LAZYLAB_OP_Mul:
    case LAZYLAB_OP_Div:
    case LAZYLAB_OP_Max:
    case LAZYLAB_OP_Min:
    case LAZYLAB_OP_Pow: return true;
    default: return false;
  }
}

class RowPlan : public RowKernelPlan {
 public:
  RowPlan(int64_t rows, int64_t cols, bool reduces, const RowPlanOptions& options)
      : rows_(rows), cols_(cols), options_(options) {
    segment_ = reduces ? cols : std::min(cols, options.tile);
    segments_per_row_ = (cols + segment_ - 1) / segment_;
  }

  std::vector<Instr> instrs;
  std::vector<RunInstr> runs;
  size_t longest_run = 0;  // steps of the longest run
  int num_buffers = 0, num_per_row = 0;

  int64_t rows() const override { return rows_; }
  int64_t cols() const override { return cols_; }

  void run(const Memory& memory) override { run_rows(memory, 0, rows_); }

  void run_rows(const Memory& memory, int64_t first_row, int64_t end_row) override {
    int64_t first = first_row * segments_per_row_, end = end_row * segments_per_row_;
    if ((end_row - first_row) * cols_ < options_.parallel_min || !options_.arena) {
      // Per thread even here: a GEMM runs its batches' epilogues on several
      // threads at once, each through this path.
      Scratch& scratch = scratch_.local();
      prepare(scratch);
      for (int64_t s = first; s < end; ++s) run_segment(memory, scratch, s);
      return;
    }
    int64_t grain = std::max<int64_t>(1, options_.parallel_min / std::max<int64_t>(segment_, 1) / 4);
    parallel_chunks(*options_.arena, first, end, grain, [&](int64_t chunk_first, int64_t chunk_end) {
      Scratch& scratch = scratch_.local();
      prepare(scratch);
      for (int64_t s = chunk_first; s < chunk_end; ++s) run_segment(memory, scratch, s);
    });
  }

 private:
  void prepare(Scratch& scratch) const {
    scratch.buffers.resize(static_cast<size_t>(num_buffers) * segment_);
    scratch.per_row.resize(num_per_row);
    scratch.run_operands.resize(longest_run);
  }

  void run_registers(const Instr& in, const Memory& memory, Scratch& scratch, int64_t row, int64_t c0,
                     int64_t len) const {
    const RunInstr& run = runs[in.run];
    for (size_t s = 0; s < run.steps.size(); ++s) {
      RunStep::Other kind = run.steps[s].other;
      View v =
          kind == RunStep::Scalar || kind == RunStep::Pointer ? view(run.others[s], memory, scratch, row, c0) : View{};
      scratch.run_operands[s] = {v.ptr, v.scalar};
    }
    View input = view(in.a, memory, scratch, row, c0);
    execute_run(full_out(in.out, memory, scratch, row, c0), input.ptr, run.steps, scratch.run_operands.data(), len);
  }

  View byte_view(const Slot& slot, const Memory& memory, int64_t row, int64_t c0) const {
    auto* base = static_cast<const uint8_t*>(memory.address(slot.value));
    switch (slot.kind) {
      case Slot::Full: return {nullptr, 0, base + row * cols_ + c0};
      case Slot::Suffix: return {nullptr, 0, base + (row * cols_ + c0) % slot.period};
      case Slot::PerRow: return {nullptr, static_cast<float>(base[row])};
      default: return {nullptr, static_cast<float>(base[0])};
    }
  }

  View view(const Slot& slot, const Memory& memory, Scratch& scratch, int64_t row, int64_t c0) const {
    if (slot.byte) return byte_view(slot, memory, row, c0);
    switch (slot.kind) {
      case Slot::Splat: return {nullptr, slot.splat};
      case Slot::PerRow:
        return {nullptr, slot.where == Slot::Local ? scratch.per_row[slot.local] : memory.f32(slot.value)[row]};
      case Slot::Suffix: return {memory.f32(slot.value) + (row * cols_ + c0) % slot.period, 0};
      case Slot::Scalar: return {nullptr, memory.f32(slot.value)[0]};
      case Slot::Full:
        if (slot.where == Slot::Local) return {scratch.buffers.data() + slot.local * segment_, 0};
        return {memory.f32(slot.value) + row * cols_ + c0, 0};
    }
    return {};
  }

  float* full_out(const Slot& slot, const Memory& memory, Scratch& scratch, int64_t row, int64_t c0) const {
    if (slot.where == Slot::Local) return scratch.buffers.data() + slot.local * segment_;
    return memory.f32(slot.value) + row * cols_ + c0;
  }

  float& row_out(const Slot& slot, const Memory& memory, Scratch& scratch, int64_t row) const {
    return slot.where == Slot::Local ? scratch.per_row[slot.local] : memory.f32(slot.value)[row];
  }

  void run_segment(const Memory& memory, Scratch& scratch, int64_t segment) const {
    int64_t row = segment / segments_per_row_;
    int64_t c0 = (segment % segments_per_row_) * segment_;
    int64_t len = std::min(segment_, cols_ - c0);
    for (const Instr& in : instrs) {
      if (in.kind == InstrKind::Run) {
        run_registers(in, memory, scratch, row, c0, len);
        continue;
      }
      View a = view(in.a, memory, scratch, row, c0);
      if (in.kind == InstrKind::Reduce) {
        row_out(in.out, memory, scratch, row) = reduce(in.op, a.ptr, len);
        continue;
      }
      View b =
          in.kind == InstrKind::Binary || in.kind == InstrKind::Select ? view(in.b, memory, scratch, row, c0) : View{};
      if (in.kind == InstrKind::Select) {
        View c = view(in.c, memory, scratch, row, c0);
        if (in.out.kind == Slot::PerRow)
          row_out(in.out, memory, scratch, row) = a.scalar != 0 ? b.scalar : c.scalar;
        else
          select_loop(full_out(in.out, memory, scratch, row, c0), a, b, c, len);
        continue;
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
        continue;
      }
      float* out = full_out(in.out, memory, scratch, row, c0);
      if (in.kind == InstrKind::Binary)
        binary(in.op, out, a, b, len);
      else if (in.kind == InstrKind::Unary)
        unary(in.op, out, a, len);
      else
        unary_loop(out, a, len, [](float x) { return x; });
    }
  }

  int64_t rows_, cols_, segment_ = 0, segments_per_row_ = 1;
  RowPlanOptions options_;
  tbb::enumerable_thread_specific<Scratch> scratch_;
};

bool same_buffer(const Slot& x, const Slot& y) {
  return x.where == Slot::Local && y.where == Slot::Local && x.kind == Slot::Full && y.kind == Slot::Full &&
         x.local == y.local;
}

bool same_operand(const Slot& x, const Slot& y) {
  return x.kind == y.kind && x.where == y.where && x.value == y.value && x.local == y.local && x.splat == y.splat &&
         !x.byte && !y.byte;
}

bool can_join_run(const Instr& in) {
  if (in.kind != InstrKind::Unary && in.kind != InstrKind::Binary) return false;
  if (in.out.kind != Slot::Full || in.a.byte || in.b.byte) return false;
  return run_supports(in.op);
}

// Whether the local buffer `written` by instrs[at] is read after instrs[at + 1]
// before something writes it again.
bool read_after_next(const std::vector<Instr>& instrs, size_t at, const Slot& written) {
  if (at + 1 < instrs.size() && same_buffer(instrs[at + 1].out, written)) return false;
  for (size_t k = at + 2; k < instrs.size(); ++k) {
    const Instr& in = instrs[k];
    for (const Slot* read : {&in.a, &in.b, &in.c})
      if (same_buffer(*read, written)) return true;
    if (same_buffer(in.out, written)) return false;
  }
  return false;
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
  auto kind = other.kind == Slot::Full || other.kind == Slot::Suffix ? RunStep::Pointer : RunStep::Scalar;
  return std::pair{RunStep{in.op, kind, a_runs}, other};
}

// Replaces each chain of two or more unary/binary instructions, where every
// intermediate result is a local buffer read only by the next instruction,
// with one register run.
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
             !read_after_next(instrs, end - 1, instrs[end - 1].out)) {
        auto step = step_for(instrs[end], instrs[end - 1].out, false);
        if (!step) break;
        run.steps.push_back(step->first);
        run.others.push_back(step->second);
        ++end;
      }
    }
    if (run.steps.size() < 2) {
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

// Turns a kernel into instructions, or gives up (nullopt) on anything the
// loops cannot run.
class RowCompiler {
 public:
  RowCompiler(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values) : kernel_(kernel), values_(values) {}

  std::unique_ptr<RowKernelPlan> compile(const RowPlanOptions& options) {
    if (!find_row_space()) return nullptr;
    compute_last_uses();
    auto plan = std::make_unique<RowPlan>(rows_, cols_, reduces_, options);
    for (uint32_t i = 0; i < kernel_.num_ops; ++i)
      if (!compile_op(kernel_.ops[i], i, *plan)) return nullptr;
    form_register_runs(plan->instrs, plan->runs);
    for (const RunInstr& run : plan->runs) plan->longest_run = std::max(plan->longest_run, run.steps.size());
    plan->num_buffers = num_buffers_;
    plan->num_per_row = num_per_row_;
    return plan;
  }

 private:
  bool find_row_space() {
    int64_t largest = 0;
    for (uint32_t i = 0; i < kernel_.num_ops; ++i) {
      const lazylab_op& op = kernel_.ops[i];
      for (uint32_t id : {op.result}) {
        if (values_[id].dtype != LAZYLAB_F32 && !(values_[id].dtype == LAZYLAB_BOOL && op.op == LAZYLAB_OP_Broadcast))
          return false;
        if (values_[id].size() > largest) largest = values_[id].size(), space_ = values_[id].shape;
      }
      bool reduction = op.op >= LAZYLAB_OP_ReduceSum && op.op <= LAZYLAB_OP_ReduceMean;
      reduces_ = reduces_ || reduction;
      for (uint32_t k = 0; k < op.num_operands; ++k) {
        const ValueInfo& v = values_[op.operands[k]];
        bool predicate = (op.op == LAZYLAB_OP_Select && k == 0) || op.op == LAZYLAB_OP_Broadcast;
        if (v.dtype != LAZYLAB_F32 && !(v.dtype == LAZYLAB_BOOL && predicate)) return false;
        if (reduction && v.size() > largest) largest = v.size(), space_ = v.shape;
      }
    }
    cols_ = space_.empty() ? 1 : space_.back();
    rows_ = cols_ ? largest / cols_ : 0;
    return largest > 0;
  }

  void compute_last_uses() {
    for (uint32_t i = 0; i < kernel_.num_ops; ++i)
      for (uint32_t k = 0; k < kernel_.ops[i].num_operands; ++k) last_use_[kernel_.ops[i].operands[k]] = i;
  }

  // A value read from memory (a parameter or another kernel's output).
  std::optional<Slot> memory_slot(uint32_t id) const {
    int64_t n = values_[id].size();
    std::optional<Slot> slot;
    if (n == rows_ * cols_)
      slot = Slot{Slot::Full, Slot::Memory, id};
    else if (n == rows_)
      slot = Slot{Slot::PerRow, Slot::Memory, id};
    if (slot) slot->byte = values_[id].dtype == LAZYLAB_BOOL;
    return slot;
  }

  std::optional<Slot> read(uint32_t id) const {
    auto it = slots_.find(id);
    if (it != slots_.end()) return it->second;
    return memory_slot(id);
  }

  // Frees local buffers whose last use is op `index`, then places the result.
  Slot place_result(uint32_t id, Slot::Kind kind, uint32_t index) {
    for (auto& [value, last] : last_use_)
      if (last == index && slots_.count(value) && slots_[value].where == Slot::Local &&
          slots_[value].kind == Slot::Full && !freed_.count(value)) {
        free_buffers_.push_back(slots_[value].local);
        freed_.insert({value, true});
      }
    Slot slot{kind, Slot::Memory, id};
    if (values_[id].kind == LAZYLAB_VALUE_KERNEL_LOCAL) {
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
    int64_t n = values_[id].size();
    if (n == rows_ * cols_) return Slot::Full;
    if (n == rows_) return Slot::PerRow;
    return std::nullopt;
  }

  // A broadcast is a view: a scalar, one value per row, or a repeating suffix.
  std::optional<Slot> broadcast_view(const lazylab_op& op) const {
    auto view = broadcast_source_view(op);
    if (view && view->where == Slot::Memory) view->byte = values_[op.operands[0]].dtype == LAZYLAB_BOOL;
    return view;
  }

  // Whether the broadcast puts every dim of its source that is not 1 on a
  // leading dim of the result, of the same size: then it gives each row one
  // value. A [1, N] source also has N elements, but its dim is the last one:
  // it repeats a row.
  static bool spreads_over_rows(const std::vector<int64_t>& in, const lazylab_attr& dims,
                                const std::vector<int64_t>& out) {
    for (uint32_t d = 0; d < dims.num_ints; ++d)
      if (in[d] != 1 && (dims.ints[d] >= static_cast<int64_t>(out.size()) - 1 || in[d] != out[dims.ints[d]]))
        return false;
    return true;
  }

  std::optional<Slot> broadcast_source_view(const lazylab_op& op) const {
    uint32_t source = op.operands[0];
    const ValueInfo& in = values_[source];
    const std::vector<int64_t>& out = values_[op.result].shape;
    const lazylab_attr& dims = op.attrs[0];
    bool stretches = in.size() != values_[op.result].size();
    if (auto it = slots_.find(source); it != slots_.end()) {
      if (it->second.kind == Slot::Splat) return it->second;
      if (it->second.kind == Slot::PerRow && (!stretches || spreads_over_rows(in.shape, dims, out))) return it->second;
      return std::nullopt;
    }
    if (in.size() == 1) return Slot{Slot::Scalar, Slot::Memory, source};
    if (values_[op.result].size() == rows_) {  // a per-row result: only from a broadcast that stretches nothing
      if (stretches) return std::nullopt;
      return Slot{Slot::PerRow, Slot::Memory, source};
    }
    if (values_[op.result].size() != rows_ * cols_ || out.empty() || out.back() != cols_) return std::nullopt;
    size_t rank = out.size();
    // A repeating suffix: the source is exactly the result's trailing dims.
    bool suffix = dims.num_ints == in.shape.size();
    for (uint32_t d = 0; suffix && d < dims.num_ints; ++d)
      suffix = dims.ints[d] == static_cast<int64_t>(rank - dims.num_ints + d) && in.shape[d] == out[dims.ints[d]];
    if (suffix && in.size() % cols_ == 0) return Slot{Slot::Suffix, Slot::Memory, source, -1, 0, in.size()};
    if (in.size() == rows_ && rows_ > 1 && spreads_over_rows(in.shape, dims, out))
      return Slot{Slot::PerRow, Slot::Memory, source};
    return std::nullopt;
  }

  bool compile_op(const lazylab_op& op, uint32_t index, RowPlan& plan) {
    if (op.op == LAZYLAB_OP_Constant) {
      Slot splat{Slot::Splat};
      splat.splat = static_cast<float>(op.attrs[0].f);
      if (values_[op.result].kind != LAZYLAB_VALUE_KERNEL_LOCAL) return materialize(op.result, splat, index, plan);
      slots_[op.result] = splat;
      return true;
    }
    if (op.op == LAZYLAB_OP_Broadcast) {
      auto view = broadcast_view(op);
      if (!view) return false;
      if (values_[op.result].kind != LAZYLAB_VALUE_KERNEL_LOCAL) {
        if (view->byte) return false;  // bool results leave through the reference path
        return materialize(op.result, *view, index, plan);
      }
      slots_[op.result] = *view;
      return true;
    }
    if (op.op == LAZYLAB_OP_Select) return compile_select(op, index, plan);
    bool reduction = op.op >= LAZYLAB_OP_ReduceSum && op.op <= LAZYLAB_OP_ReduceMean;
    if (reduction) return compile_reduce(op, index, plan);
    bool is_unary = op.num_operands == 1 && is_fused_unary(op.op);
    bool is_binary = op.num_operands == 2 && is_fused_binary(op.op);
    if (!is_unary && !is_binary) return false;
    auto a = read(op.operands[0]);
    auto b = is_binary ? read(op.operands[1]) : std::optional<Slot>(Slot{});
    auto kind = layout_of(op.result);
    if (!a || !b || !kind) return false;
    Slot out = place_result(op.result, *kind, index);
    plan.instrs.push_back({is_binary ? InstrKind::Binary : InstrKind::Unary, op.op, out, *a, *b, {}});
    return true;
  }

  bool compile_select(const lazylab_op& op, uint32_t index, RowPlan& plan) {
    auto predicate = read(op.operands[0]), a = read(op.operands[1]), b = read(op.operands[2]);
    auto kind = layout_of(op.result);
    if (!predicate || !predicate->byte || !a || !b || !kind) return false;
    Slot out = place_result(op.result, *kind, index);
    plan.instrs.push_back({InstrKind::Select, op.op, out, *predicate, *a, *b});
    return true;
  }

  bool compile_reduce(const lazylab_op& op, uint32_t index, RowPlan& plan) {
    const ValueInfo& in = values_[op.operands[0]];
    bool last_axis = op.attrs[0].num_ints == 1 && op.attrs[0].ints[0] == static_cast<int64_t>(in.shape.size()) - 1;
    auto a = read(op.operands[0]);
    if (!last_axis || in.size() != rows_ * cols_ || !a || a->kind != Slot::Full) return false;
    Slot out = place_result(op.result, Slot::PerRow, index);
    plan.instrs.push_back({InstrKind::Reduce, op.op, out, *a, {}, {}});
    return true;
  }

  // Writes a view (a constant, a broadcast) out in full because it leaves
  // the kernel.
  bool materialize(uint32_t id, Slot source, uint32_t index, RowPlan& plan) {
    auto kind = layout_of(id);
    if (!kind) return false;
    Slot out = place_result(id, *kind, index);
    plan.instrs.push_back({InstrKind::Materialize, 0, out, source, {}, {}});
    return true;
  }

  const lazylab_kernel& kernel_;
  const std::vector<ValueInfo>& values_;
  std::vector<int64_t> space_;
  int64_t rows_ = 0, cols_ = 0;
  bool reduces_ = false;
  std::map<uint32_t, Slot> slots_;
  std::map<uint32_t, uint32_t> last_use_;
  std::map<uint32_t, bool> freed_;
  std::vector<int> free_buffers_;
  int num_buffers_ = 0, num_per_row_ = 0;
};

}  // namespace

std::unique_ptr<RowKernelPlan> make_row_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                             const RowPlanOptions& options) {
  return RowCompiler(kernel, values).compile(options);
}

}  // namespace lazylab::cpu
