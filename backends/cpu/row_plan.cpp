#include "row_plan.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>

#include "lazylab/row_space.hpp"
#include "narrow_floats.h"
#include "row_executor.h"
#include "row_instructions.h"
#include "row_register_runs.h"

namespace lazylab::cpu {
namespace {

using row_exec::is_binary_formula;
using row_exec::is_unary_formula;
using row_exec::kLinesInFlight;
using row_exec::RowPlan;

// Renders a kernel's row space (lazylab/row_space.hpp) as instructions,
// or declines, saying why, where the loops cannot run an op.
class RowCompiler {
 public:
  RowCompiler(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values) : kernel_(kernel), values_(values) {}

  Planned<RowKernelPlan> compile(const RowPlanOptions& options) {
    if (!read_description()) return nullptr;  // not a row-space kernel
    if (rows_ * cols_ <= 0) return decline("an empty row space");
    if (auto op = first_of_unsupported_dtypes())
      return decline(op_named(*op) +
                     ": the loops hold f32, bf16 and f16 values (bools only from comparisons, i64 only as casts)");
    auto plan = std::make_unique<RowPlan>(rows_, cols_, reduces_, options);
    for (uint32_t i = 0; i < kernel_.num_ops; ++i) {
      why_.clear();
      size_t before = plan->instrs.size();
      if (!compile_op(kernel_.ops[i], i, *plan))
        return decline(op_named(kernel_.ops[i]) + ": " + (why_.empty() ? "no loop runs it" : why_));
      if (is_narrow_float(values_[kernel_.ops[i].result].dtype)) finish_narrow(kernel_.ops[i].result, before, *plan);
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
  static std::vector<row_exec::RowInput> row_inputs(const RowPlan& plan) {
    std::vector<row_exec::RowInput> inputs;
    auto note = [&](const Slot& slot) {
      auto same = [&](const row_exec::RowInput& input) { return input.value == slot.value; };
      if (slot.where == Slot::Memory && slot.kind == Slot::Full && slot.floats() &&
          std::none_of(inputs.begin(), inputs.end(), same))
        inputs.push_back({slot.value, slot.is_narrow() ? int64_t{2} : int64_t{sizeof(float)}});
    };
    for (const Instr& in : plan.instrs) {
      if (in.kind == InstrKind::Unary || in.kind == InstrKind::Binary || in.kind == InstrKind::Select ||
          in.kind == InstrKind::Reduce || in.kind == InstrKind::Run || in.kind == InstrKind::Materialize ||
          in.kind == InstrKind::Widen)
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
      in.leaves_program = in.out.floats() && !in.out.is_narrow() && in.kind != InstrKind::Convert &&
                          in.kind != InstrKind::Narrow && in.out.where == Slot::Memory && in.out.kind == Slot::Full &&
                          values_[in.out.value].kind == LAZYLAB_VALUE_OUTPUT;
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

  // These loops hold f32 values (a bf16 or f16 value widened, and rounded
  // to its dtype's precision per op); bools only as a comparison's result, a
  // select's predicate or a broadcast of one; i64s only as a cast of f32
  // values and cast back.
  const lazylab_op* first_of_unsupported_dtypes() const {
    for (uint32_t i = 0; i < kernel_.num_ops; ++i) {
      const lazylab_op& op = kernel_.ops[i];
      uint32_t result = values_[op.result].dtype;
      bool cast = op.op == LAZYLAB_OP_Cast;
      // Bools are 1s and 0s in floats: a comparison's, a constant's, a
      // select's among them (max pooling's gradient: the first maximum).
      bool makes_bool = op.op == LAZYLAB_OP_Broadcast || op.op == LAZYLAB_OP_Constant || op.op == LAZYLAB_OP_Select ||
                        ops::is_comparison(op.op);
      if (!computes_in_f32(result) && !(result == LAZYLAB_BOOL && makes_bool) && !(result == LAZYLAB_I64 && cast))
        return &op;
      for (uint32_t k = 0; k < op.num_operands; ++k) {
        uint32_t operand = values_[op.operands[k]].dtype;
        bool predicate = op.op == LAZYLAB_OP_Select || op.op == LAZYLAB_OP_Broadcast;
        bool cast_back = cast && operand == LAZYLAB_I64 && computes_in_f32(result);
        if (!computes_in_f32(operand) && !(operand == LAZYLAB_BOOL && predicate) && !cast_back) return &op;
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
    if (is_narrow_float(values_[source].dtype)) slot.narrow = values_[source].dtype;
    return slot;
  }

  // A value as an instruction's operand: a 16-bit float value of memory read
  // in full (or repeating, or spread) is widened into a local buffer first,
  // once, which later reads share.
  std::optional<Slot> operand(uint32_t id, RowPlan& plan) {
    auto slot = read(id);
    if (!slot || !needs_widening(*slot)) return slot;
    Slot local{Slot::Full, Slot::Local, id};
    local.local = unused_buffer();
    plan.instrs.push_back({InstrKind::Widen, 0, local, *slot, {}, {}});
    slots_[id] = local;
    return local;
  }

  static bool needs_widening(const Slot& slot) {
    return slot.where == Slot::Memory && slot.is_narrow() &&
           (slot.kind == Slot::Full || slot.kind == Slot::Suffix || slot.kind == Slot::Spread);
  }

  // A buffer no value reads any more: not one freed by the op being compiled,
  // which still reads it.
  int unused_buffer() {
    if (free_buffers_.empty()) return num_buffers_++;
    int buffer = free_buffers_.back();
    free_buffers_.pop_back();
    return buffer;
  }

  // A 16-bit result: the instructions this op emitted into its slot round
  // it to the dtype's precision, and one leaving the kernel is narrowed into
  // its memory.
  void finish_narrow(uint32_t id, size_t first_instr, RowPlan& plan) {
    auto it = slots_.find(id);
    if (it == slots_.end() || it->second.where != Slot::Local) return;  // a view or a splat: already rounded
    const Slot& result = it->second;
    uint32_t dtype = values_[id].dtype;
    for (size_t k = first_instr; k < plan.instrs.size(); ++k) {
      Instr& in = plan.instrs[k];
      bool into_result = in.out.where == Slot::Local && in.out.kind == result.kind && in.out.local == result.local;
      if (into_result && in.kind != InstrKind::Widen) in.rounds_to = dtype;
    }
    if (!space_->leaves(id)) return;
    Slot memory{result.kind, Slot::Memory, id};
    memory.narrow = dtype;
    plan.instrs.push_back({InstrKind::Narrow, 0, memory, result, {}, {}});
  }

  // A constant of `dtype` as the loops hold it: rounded once from the double.
  static float constant_of(uint32_t dtype, double value) {
    if (dtype == LAZYLAB_BOOL) return value != 0 ? 1.0f : 0.0f;  // held as 1s and 0s
    if (dtype == LAZYLAB_BF16) return static_cast<float>(BFloat16(value));
    if (dtype == LAZYLAB_F16) return static_cast<float>(Float16(value));
    return static_cast<float>(value);
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
    // A buffer is freed by the value that owns it, not by a reshape viewing
    // it (whose source is read as long as it: rows::RowSpace): freed by both,
    // it went twice into the free list and two later values shared it
    // (found by lazylab fuzz: exp -> reshape -> sqrt, exp, div gave 1).
    for (auto& [value, last] : space_->last_reads())
      if (last == index && slots_.count(value) && slots_[value].where == Slot::Local &&
          slots_[value].kind == Slot::Full && slots_[value].value == value && !freed_.count(value)) {
        free_buffers_.push_back(slots_[value].local);
        freed_.insert({value, true});
      }
    Slot slot{kind, Slot::Memory, id};
    if (local || !space_->leaves(id) || is_narrow_float(values_[id].dtype)) {
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
      splat.splat = constant_of(values_[op.result].dtype, a->splat);
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
      splat.splat = constant_of(values_[op.result].dtype, op.attrs[0].f);
      if (space_->leaves(op.result) && values_[op.result].dtype == LAZYLAB_BOOL)
        return fail("a constant of bools leaving the kernel");
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
        slots_[op.result] = *view;
        auto source = operand(op.result, plan);  // a 16-bit view of memory, widened
        return source && materialize(op.result, *source, index, plan);
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
    auto a = operand(op.operands[0], plan);
    auto b = is_binary ? operand(op.operands[1], plan) : std::optional<Slot>(Slot{});
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
    auto a = operand(op.operands[0], plan);
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
    if (!computes_in_f32(values_[op.result].dtype)) return fail("a cast of dtypes or layouts the loops do not run");
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
    if (!computes_in_f32(values_[op.result].dtype) || a.kind != Slot::PerRow)
      return fail("a cast of dtypes or layouts the loops do not run");
    if (a.int64 && a.where != Slot::Memory) return fail("a cast of dtypes or layouts the loops do not run");
    Slot out = place_result(op.result, Slot::PerRow, index);
    plan.instrs.push_back({a.int64 ? InstrKind::Convert : InstrKind::Materialize, 0, out, a, {}, {}});
    return true;
  }

  bool compile_select(const lazylab_op& op, uint32_t index, RowPlan& plan) {
    auto predicate = operand(op.operands[0], plan), a = operand(op.operands[1], plan),
         b = operand(op.operands[2], plan);
    auto kind = layout_of(op.result);
    if (!predicate || !a || !b || !kind || !a->floats() || !b->floats())
      return why_.empty() ? fail("an operand or its result the loops cannot index") : false;
    if (values_[op.result].dtype != LAZYLAB_BOOL) {
      Slot out = place_result(op.result, *kind, index);
      plan.instrs.push_back({InstrKind::Select, op.op, out, *predicate, *a, *b});
      return true;
    }
    // A select of bools (1s and 0s here, as a comparison's) is held locally
    // and stored as bytes where it leaves.
    if (*kind != Slot::Full) return fail("a select of bools with a result per row");
    Slot local = place_result(op.result, *kind, index, true);
    plan.instrs.push_back({InstrKind::Select, op.op, local, *predicate, *a, *b});
    if (!space_->leaves(op.result)) return true;
    Slot bytes{Slot::Full, Slot::Memory, op.result};
    bytes.byte = true;
    plan.instrs.push_back({InstrKind::Materialize, 0, bytes, local, {}, {}});
    return true;
  }

  // The description says it reduces the last axis of the row space.
  bool compile_reduce(const lazylab_op& op, uint32_t index, RowPlan& plan) {
    auto a = operand(op.operands[0], plan);
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
