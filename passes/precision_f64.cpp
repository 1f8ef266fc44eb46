// Precision policy `f64`: every op in f64, the outputs rounded back to their
// f32 once. Not for speed: as an experiment's reference pipeline it makes
// the reported errors those of each cell against an f64 computation, so
// f32's own rounding and bf16's show apart (an f32 reference would hide f32's).
#include "core/precision_policy.h"

namespace lazylab {
namespace {

class Everything64 : public PrecisionPolicy {
 public:
  DType low_dtype() const override { return DType::F64; }
  Precision precision_of(const Node&) const override { return Precision::Low; }
};

const PrecisionPolicyRegistrar kRegistrar{{"f64",
                                           "Every op in f64 (a reference to measure f32 and 16-bit results against)",
                                           [](const PassOptions&) { return std::make_unique<Everything64>(); }}};

}  // namespace
}  // namespace lazylab
