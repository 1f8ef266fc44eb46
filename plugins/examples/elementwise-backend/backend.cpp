// An example backend plugin: f32 elementwise ops only, written against the
// plugin SDK alone (lazylab/backend_plugin.hpp). It shows the three things a
// backend does: declare what it can run, turn a Program into a plan at
// compile time, and run the plan against the memory plan's arena.
#include <cstring>
#include <stdexcept>
#include <vector>

#include "lazylab/backend_plugin.hpp"
#include "lazylab/op_table.hpp"
#include "lazylab/reference_semantics.hpp"

namespace {

bool is_elementwise(uint32_t op) {
  double out = 0;
  return lazylab::reference::apply_unary(op, 1.0, out) || lazylab::reference::apply_binary(op, 1.0, 1.0, out);
}

struct Step {
  uint32_t op;
  uint32_t result;
  std::vector<uint32_t> operands;
  double constant = 0;
};

class ElementwiseExecutable : public lazylab::plugin::HostExecutable {
 public:
  ElementwiseExecutable(const lazylab_program& program, std::shared_ptr<lazylab::plugin::HostMemoryPool> pool)
      : HostExecutable(program, std::move(pool)), arena_(program.arena_bytes) {
    for (uint32_t v = 0; v < program.num_values; ++v) {
      const lazylab_value& value = program.values[v];
      if (value.dtype != LAZYLAB_F32) throw std::invalid_argument("example backend: only f32 values");
      sizes_.push_back(value.bytes / sizeof(float));
      kinds_.push_back(value.kind);
      ordinals_.push_back(value.ordinal);
      offsets_.push_back(value.offset);
      if (value.kind == LAZYLAB_VALUE_KERNEL_LOCAL) scratch_.emplace_back(sizes_.back());
      local_.push_back(value.kind == LAZYLAB_VALUE_KERNEL_LOCAL ? scratch_.size() - 1 : 0);
    }
    for (uint32_t k = 0; k < program.num_kernels; ++k)
      for (uint32_t i = 0; i < program.kernels[k].num_ops; ++i) {
        const lazylab_op& op = program.kernels[k].ops[i];
        Step step{op.op, op.result, {op.operands, op.operands + op.num_operands}};
        if (op.op == LAZYLAB_OP_Constant) step.constant = op.attrs[0].f;
        steps_.push_back(std::move(step));
      }
    outputs_.assign(program.outputs, program.outputs + program.num_outputs);
  }

  void run(const void* const* parameters, void* const* outputs) override {
    parameters_ = parameters;
    output_buffers_ = outputs;
    for (const Step& step : steps_) run(step);
    for (size_t i = 0; i < outputs_.size(); ++i)
      if (kinds_[outputs_[i]] != LAZYLAB_VALUE_OUTPUT || ordinals_[outputs_[i]] != static_cast<int64_t>(i))
        std::memcpy(outputs[i], data(outputs_[i]), sizes_[outputs_[i]] * sizeof(float));
  }

 private:
  float* data(uint32_t value) {
    switch (kinds_[value]) {
      case LAZYLAB_VALUE_PARAMETER: return const_cast<float*>(static_cast<const float*>(parameters_[ordinals_[value]]));
      case LAZYLAB_VALUE_ARENA: return reinterpret_cast<float*>(arena_.data() + offsets_[value]);
      case LAZYLAB_VALUE_OUTPUT: return static_cast<float*>(output_buffers_[ordinals_[value]]);
      default: return scratch_[local_[value]].data();
    }
  }

  void run(const Step& step) {
    float* out = data(step.result);
    size_t n = sizes_[step.result];
    const float* a = step.operands.size() > 0 ? data(step.operands[0]) : nullptr;
    const float* b = step.operands.size() > 1 ? data(step.operands[1]) : nullptr;
    for (size_t i = 0; i < n; ++i) {
      double result = step.constant;
      if (step.op == LAZYLAB_OP_Reshape)
        result = a[i];
      else if (b)
        lazylab::reference::apply_binary(step.op, a[i], b[i], result);
      else if (a)
        lazylab::reference::apply_unary(step.op, a[i], result);
      out[i] = static_cast<float>(result);
    }
  }

  std::vector<std::byte> arena_;
  std::vector<std::vector<float>> scratch_;
  std::vector<size_t> sizes_, local_;
  std::vector<uint32_t> kinds_;
  std::vector<int64_t> ordinals_;
  std::vector<uint64_t> offsets_;
  std::vector<Step> steps_;
  std::vector<uint32_t> outputs_;
  const void* const* parameters_ = nullptr;
  void* const* output_buffers_ = nullptr;
};

class ElementwiseBackend : public lazylab::plugin::Backend {
 public:
  // Declares no options (a static constexpr lazylab_option_spec kOptions[]
  // would declare some): the helper refuses any.
  explicit ElementwiseBackend(const lazylab::plugin::BackendOptions&) {}
  // Constants, reshapes and same-dtype elementwise math; the host refuses
  // programs with anything else before compile() is called.
  void capabilities(lazylab_capabilities& caps) const override {
    for (uint32_t op = 0; op < LAZYLAB_OP_COUNT; ++op)
      caps.supports_op[op] = op == LAZYLAB_OP_Constant || op == LAZYLAB_OP_Reshape ||
                             (is_elementwise(op) && !lazylab::ops::is_comparison(op));
  }
  std::string device_description() const override { return "host CPU, scalar loops (example plugin)"; }
  std::unique_ptr<lazylab::plugin::Executable> compile(const lazylab_program& program, int32_t) override {
    return std::make_unique<ElementwiseExecutable>(program, host_memory_);
  }
};

}  // namespace

LAZYLAB_DEFINE_BACKEND(ElementwiseBackend, "example", "Example plugin: f32 elementwise ops in scalar loops")
