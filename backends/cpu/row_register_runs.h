// Rewrites of a row kernel's instructions into register runs
// (register_run.h), each over a strip of the segment in vector registers:
// chains of unary and binary instructions joined, a row sum taken from a
// run's registers, and a cheap buffer only runs read recomputed in each.
#pragma once

#include <vector>

#include "row_instructions.h"

namespace lazylab::cpu {

// Joins chains of elementwise instructions whose intermediates nothing else
// reads into runs.
void form_register_runs(std::vector<Instr>& instrs, std::vector<RunInstr>& runs);
// A reduce_sum or reduce_mean of a run's result (a segment a whole row)
// taken from the run's registers; a run only summed stores nothing.
void fold_sums_into_runs(std::vector<Instr>& instrs, std::vector<RunInstr>& runs);
// A cheap op whose buffer only register runs read, recomputed as the first
// step of each (layernorm's x - mean).
void recompute_cheap_buffers(std::vector<Instr>& instrs, std::vector<RunInstr>& runs);

}  // namespace lazylab::cpu
