// Precision policy `low-but-reductions`: every op in 16 bits except those
// that need f32 (sums, means, softmax, layernorm, exp, log, pow, rsqrt):
// elementwise chains and layout copies move half the bytes, where
// `products` leaves them in f32 wherever an f32 value reaches them.
#include "core/precision_policy.h"

namespace lazylab {
namespace {

class LowButReductions : public PrecisionPolicy {
 public:
  explicit LowButReductions(DType low) : low_(low) {}
  DType low_dtype() const override { return low_; }
  Precision precision_of(const Node& node) const override {
    return needs_full_precision(node.op) ? Precision::Full : Precision::Low;
  }

 private:
  DType low_;
};

const PrecisionPolicyRegistrar kRegistrar{
    {"low-but-reductions",
     "Every op in 16 bits but sums, norms, exp and log, which stay in f32",
     [](const PassOptions& options) { return std::make_unique<LowButReductions>(low_dtype_of(options)); },
     {low_dtype_option()}}};

}  // namespace
}  // namespace lazylab
