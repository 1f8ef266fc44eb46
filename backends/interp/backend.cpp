// interp: the reference backend. Runs every op of every kernel in order with
// obviously correct loops (kernels.cpp); every other backend is checked
// against it. Kernel-local values get their own scratch storage, since the
// interpreter materialises every op.
#include <cstring>
#include <stdexcept>

#include "kernels.h"  // backends/reference
#include "lazylab/backend_plugin.hpp"

namespace lazylab::interp {
namespace {

using reference::Array;
using reference::Attr;
using reference::evaluate;

struct Step {
  uint32_t op;
  uint32_t result;
  std::vector<uint32_t> operands;
  std::vector<Attr> attrs;
};

class InterpExecutable : public plugin::Executable {
 public:
  explicit InterpExecutable(const lazylab_program& program) : arena_(program.arena_bytes) {
    for (uint32_t v = 0; v < program.num_values; ++v) {
      const lazylab_value& value = program.values[v];
      Array array{value.dtype, std::vector<int64_t>(value.shape, value.shape + value.rank), nullptr};
      arrays_.push_back(std::move(array));
      kinds_.push_back(value.kind);
      ordinals_.push_back(value.ordinal);
      if (value.kind == LAZYLAB_VALUE_ARENA) arrays_.back().data = arena_.data() + value.offset;
      if (value.kind == LAZYLAB_VALUE_KERNEL_LOCAL) {
        scratch_.emplace_back(value.bytes);
        arrays_.back().data = scratch_.back().data();
      }
    }
    for (uint32_t k = 0; k < program.num_kernels; ++k)
      for (uint32_t i = 0; i < program.kernels[k].num_ops; ++i) steps_.push_back(copy_step(program.kernels[k].ops[i]));
    outputs_.assign(program.outputs, program.outputs + program.num_outputs);
  }

  void execute(const void* const* parameters, void* const* outputs) override {
    for (size_t v = 0; v < arrays_.size(); ++v)
      if (kinds_[v] == LAZYLAB_VALUE_PARAMETER)
        arrays_[v].data = const_cast<void*>(parameters[ordinals_[v]]);
      else if (kinds_[v] == LAZYLAB_VALUE_OUTPUT)
        arrays_[v].data = outputs[ordinals_[v]];
    std::vector<const Array*> operands;
    for (const Step& step : steps_) {
      operands.clear();
      for (uint32_t id : step.operands) operands.push_back(&arrays_[id]);
      evaluate(step.op, operands, step.attrs, arrays_[step.result]);
    }
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const Array& value = arrays_[outputs_[i]];
      if (kinds_[outputs_[i]] != LAZYLAB_VALUE_OUTPUT || ordinals_[outputs_[i]] != static_cast<int64_t>(i))
        std::memcpy(outputs[i], value.data, bytes_of(value));
    }
  }

 private:
  static Step copy_step(const lazylab_op& op) {
    Step step{op.op, op.result, std::vector<uint32_t>(op.operands, op.operands + op.num_operands), {}};
    for (uint32_t a = 0; a < op.num_attrs; ++a)
      step.attrs.push_back(Attr{op.attrs[a].i, op.attrs[a].f,
                                std::vector<int64_t>(op.attrs[a].ints, op.attrs[a].ints + op.attrs[a].num_ints)});
    return step;
  }
  static size_t bytes_of(const Array& a) {
    size_t element = a.dtype == LAZYLAB_F64 || a.dtype == LAZYLAB_I64 ? 8 : a.dtype == LAZYLAB_BOOL ? 1 : 4;
    return static_cast<size_t>(a.size()) * element;
  }

  std::vector<std::byte> arena_;
  std::vector<std::vector<std::byte>> scratch_;
  std::vector<Array> arrays_;
  std::vector<uint32_t> kinds_;
  std::vector<int64_t> ordinals_;
  std::vector<Step> steps_;
  std::vector<uint32_t> outputs_;
};

class InterpBackend : public plugin::Backend {
 public:
  explicit InterpBackend(const std::map<std::string, std::string>& options) {
    if (!options.empty()) throw std::invalid_argument("interp takes no options, got '" + options.begin()->first + "'");
  }
  void capabilities(lazylab_capabilities& caps) const override {
    for (uint32_t op = 0; op < LAZYLAB_OP_COUNT; ++op) caps.supports_op[op] = op != LAZYLAB_OP_Parameter;
    caps.max_ops_per_kernel = 0;
  }
  std::string device_description() const override { return "host CPU, reference loops (f64 accumulation)"; }
  std::unique_ptr<plugin::Executable> compile(const lazylab_program& program) override {
    return std::make_unique<InterpExecutable>(program);
  }
};

}  // namespace
}  // namespace lazylab::interp

LAZYLAB_DEFINE_BACKEND(lazylab::interp::InterpBackend, "interp",
                       "Reference interpreter: obviously correct loops, one op at a time")
