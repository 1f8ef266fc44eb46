#include "lazylab/reference/program_runner.h"

#include <cstring>

namespace lazylab::reference {

ProgramRunner::ProgramRunner(const lazylab_program& program) : arena_(program.arena_bytes) {
  for (uint32_t v = 0; v < program.num_values; ++v) {
    const lazylab_value& value = program.values[v];
    arrays_.push_back(Array{value.dtype, std::vector<int64_t>(value.shape, value.shape + value.rank), nullptr});
    kinds_.push_back(value.kind);
    ordinals_.push_back(value.ordinal);
    bytes_.push_back(value.bytes);
    if (value.kind == LAZYLAB_VALUE_ARENA) arrays_.back().data = arena_.data() + value.offset;
    if (value.kind == LAZYLAB_VALUE_KERNEL_LOCAL) {
      scratch_.emplace_back(value.bytes);
      arrays_.back().data = scratch_.back().data();
    }
  }
  for (uint32_t k = 0; k < program.num_kernels; ++k)
    for (uint32_t i = 0; i < program.kernels[k].num_ops; ++i) {
      const lazylab_op& op = program.kernels[k].ops[i];
      Step step{k, op.op, op.result, std::vector<uint32_t>(op.operands, op.operands + op.num_operands), {}};
      for (uint32_t a = 0; a < op.num_attrs; ++a)
        step.attrs.push_back(Attr{op.attrs[a].i, op.attrs[a].f,
                                  std::vector<int64_t>(op.attrs[a].ints, op.attrs[a].ints + op.attrs[a].num_ints)});
      steps_.push_back(std::move(step));
    }
  outputs_.assign(program.outputs, program.outputs + program.num_outputs);
  num_kernels_ = program.num_kernels;
}

void ProgramRunner::run(const void* const* parameters, void* const* outputs, std::vector<double>* kernel_ms) {
  for (size_t v = 0; v < arrays_.size(); ++v)
    if (kinds_[v] == LAZYLAB_VALUE_PARAMETER)
      arrays_[v].data = const_cast<void*>(parameters[ordinals_[v]]);
    else if (kinds_[v] == LAZYLAB_VALUE_OUTPUT)
      arrays_[v].data = outputs[ordinals_[v]];
  std::vector<const Array*> operands;
  auto step = steps_.begin();
  for (uint32_t k = 0; k < num_kernels_; ++k)
    plugin::run_kernel_timed(kernel_ms, [&] {
      for (; step != steps_.end() && step->kernel == k; ++step) {
        operands.clear();
        for (uint32_t id : step->operands) operands.push_back(&arrays_[id]);
        evaluate(step->op, operands, step->attrs, arrays_[step->result]);
      }
    });
  for (size_t i = 0; i < outputs_.size(); ++i) {
    uint32_t value = outputs_[i];
    if (kinds_[value] != LAZYLAB_VALUE_OUTPUT || ordinals_[value] != static_cast<int64_t>(i))
      std::memcpy(outputs[i], arrays_[value].data, bytes_[value]);
  }
}

}  // namespace lazylab::reference
