#include "row_register_runs.h"

#include <algorithm>
#include <map>
#include <optional>

#include "lazylab/op_table.hpp"

namespace lazylab::cpu {
namespace {

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
  if (in.rounds_to != LAZYLAB_F32) return false;  // a 16-bit result, rounded after its loop
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
         in.rounds_to == LAZYLAB_F32 && in.out.kind == Slot::PerRow && same_buffer(in.a, buffer);
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

}  // namespace

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

namespace {

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

}  // namespace

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

}  // namespace lazylab::cpu
