// A workload whose f32 inputs are stored in a 16-bit float dtype, as a
// model's weights are once converted (PyTorch's model.to(torch.bfloat16)):
// the workload's seeded values rounded to the dtype, and each step widens
// them to f32 before the workload's own step. The program is then the same
// f32 program over values the dtype holds, for every kind of workload (a
// built-in, a .lzir file, an ONNX model); under autocast the narrowing cast
// of such an input meets its widening and both go (canonicalize's
// cast-of-exact-cast), so products read the stored values as they are.
#include <fmt/format.h>

#include "core/tensor_ops.h"
#include "workload.h"

namespace lazylab {
namespace {

HostTensor stored_in(const HostTensor& input, DType dtype) {
  TensorType type{dtype, input.type.shape};
  auto buffer = std::make_shared<Buffer>(type.bytes());
  const auto* from = reinterpret_cast<const float*>(input.data->data());
  visit_dtype(dtype, [&]<class T>(T) {
    auto* to = reinterpret_cast<T*>(buffer->data());
    for (int64_t i = 0; i < type.num_elements(); ++i) to[i] = static_cast<T>(from[i]);
  });
  return {type, std::move(buffer)};
}

class StoredInputs : public Workload {
 public:
  StoredInputs(std::unique_ptr<Workload> inner, DType dtype) : inner_(std::move(inner)), dtype_(dtype) {
    for (const TensorType& type : inner_->input_types()) stored_.push_back(type.dtype == DType::F32);
  }
  std::string name() const override { return inner_->name(); }
  WorkloadParams params() const override { return inner_->params(); }
  std::vector<TensorType> input_types() const override {
    std::vector<TensorType> types = inner_->input_types();
    for (size_t i = 0; i < types.size(); ++i)
      if (stored_[i]) types[i].dtype = dtype_;
    return types;
  }
  std::vector<HostTensor> make_inputs(uint64_t seed) const override {
    std::vector<HostTensor> inputs = inner_->make_inputs(seed);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (stored_[i]) inputs[i] = stored_in(inputs[i], dtype_);
    return inputs;
  }
  std::vector<Tensor> step(Context& context, const std::vector<Tensor>& inputs) const override {
    std::vector<Tensor> widened;
    for (size_t i = 0; i < inputs.size(); ++i) widened.push_back(stored_[i] ? cast(inputs[i], DType::F32) : inputs[i]);
    return inner_->step(context, widened);
  }
  int64_t ops_per_step() const override { return inner_->ops_per_step(); }
  size_t data_inputs() const override { return inner_->data_inputs(); }
  const std::string* failure() const override { return inner_->failure(); }

 private:
  std::unique_ptr<Workload> inner_;
  DType dtype_;
  std::vector<bool> stored_;  // each input: f32 in the workload, so stored in dtype_
};

}  // namespace

std::unique_ptr<Workload> with_inputs_stored_in(std::unique_ptr<Workload> workload, DType dtype) {
  return std::make_unique<StoredInputs>(std::move(workload), dtype);
}

}  // namespace lazylab
