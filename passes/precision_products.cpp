// Precision policy `products`: products and convolutions in 16 bits (f32
// accumulation on cuBLASLt's tensor cores; f64 on the reference), the ops
// that need f32 in f32, the rest following their operands: PyTorch's
// autocast on CUDA, whose lower-precision list is its products.
#include "core/precision_policy.h"

namespace lazylab {
namespace {

class Products : public PrecisionPolicy {
 public:
  explicit Products(DType low) : low_(low) {}
  DType low_dtype() const override { return low_; }
  Precision precision_of(const Node& node) const override {
    if (node.op == OpId::Matmul || node.op == OpId::Conv2d) return Precision::Low;
    return needs_full_precision(node.op) ? Precision::Full : Precision::Follow;
  }

 private:
  DType low_;
};

const PrecisionPolicyRegistrar kRegistrar{
    {"products",
     "Products and convolutions in 16 bits, sums, norms, exp and log in f32, the rest following their operands",
     [](const PassOptions& options) { return std::make_unique<Products>(low_dtype_of(options)); },
     {low_dtype_option()}}};

}  // namespace
}  // namespace lazylab
