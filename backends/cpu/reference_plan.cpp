#include "reference_plan.h"

#include <map>

#include "lazylab/reference/kernels.h"

namespace lazylab::cpu {
namespace {

struct Step {
  uint32_t op;
  uint32_t result;
  std::vector<uint32_t> operands;
  std::vector<reference::Attr> attrs;
};

class ReferencePlan : public KernelPlan {
 public:
  ReferencePlan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values) : values_(values) {
    for (uint32_t i = 0; i < kernel.num_ops; ++i) {
      const lazylab_op& op = kernel.ops[i];
      Step step{op.op, op.result, {op.operands, op.operands + op.num_operands}, {}};
      for (uint32_t a = 0; a < op.num_attrs; ++a)
        step.attrs.push_back(
            {op.attrs[a].i, op.attrs[a].f, {op.attrs[a].ints, op.attrs[a].ints + op.attrs[a].num_ints}});
      for (uint32_t id : step.operands) touch(id);
      touch(step.result);
      steps_.push_back(std::move(step));
    }
  }

  void run(const Memory& memory) override {
    for (auto& [id, array] : arrays_)
      if (values_[id].kind != LAZYLAB_VALUE_KERNEL_LOCAL) array.data = memory.address(id);
    std::vector<const reference::Array*> operands;
    for (const Step& step : steps_) {
      operands.clear();
      for (uint32_t id : step.operands) operands.push_back(&arrays_.at(id));
      reference::evaluate(step.op, operands, step.attrs, arrays_.at(step.result));
    }
  }

 private:
  void touch(uint32_t id) {
    if (arrays_.count(id)) return;
    const ValueInfo& info = values_[id];
    reference::Array array{info.dtype, info.shape, nullptr};
    if (info.kind == LAZYLAB_VALUE_KERNEL_LOCAL) {
      scratch_.emplace_back(info.bytes);
      array.data = scratch_.back().data();
    }
    arrays_.emplace(id, std::move(array));
  }

  const std::vector<ValueInfo>& values_;
  std::vector<Step> steps_;
  std::map<uint32_t, reference::Array> arrays_;
  std::vector<std::vector<std::byte>> scratch_;
};

}  // namespace

std::unique_ptr<KernelPlan> make_reference_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values) {
  return std::make_unique<ReferencePlan>(kernel, values);
}

}  // namespace lazylab::cpu
