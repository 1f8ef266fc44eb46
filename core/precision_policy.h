// Precision policies: which dtype each op of an f32 program computes in,
// selected with autocast{policy=NAME} (passes/autocast.cpp) and registered
// like fusion strategies (built in, or from a pass plugin), so policies can
// be swapped and compared. The pass puts in the casts; fusion absorbs them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph.h"
#include "pass.h"

namespace lazylab {

// What a policy says of an op that reads f32 values.
enum class Precision {
  Low,     // in the policy's low dtype (16 bits: products, convolutions; f64 for the `f64` reference)
  Full,    // in f32
  Follow,  // in the widest dtype of its operands (splat constants aside), as PyTorch's autocast promotes
};

class PrecisionPolicy {
 public:
  virtual ~PrecisionPolicy() = default;
  virtual DType low_dtype() const = 0;
  virtual Precision precision_of(const Node& node) const = 0;
};

struct PrecisionPolicyInfo {
  std::string name;
  std::string summary;  // one line: what runs in which dtype
  std::function<std::unique_ptr<PrecisionPolicy>(const PassOptions&)> create;
  std::vector<PassOptionSpec> options = {};
  std::string provenance = {};  // "plugin NAME VERSION"; empty for built-ins
};

using PrecisionPolicyRegistry = Registry<PrecisionPolicyInfo>;
extern template class Registry<PrecisionPolicyInfo>;
using PrecisionPolicyRegistrar = Registrar<PrecisionPolicyInfo>;

// Ops whose result loses what it keeps when computed in 16 bits: sums and
// means (long accumulations), softmax and layernorm (a sum, a variance), and
// exp, log, pow and rsqrt (PyTorch's autocast keeps these in f32 too). Every
// built-in policy keeps them in f32.
bool needs_full_precision(OpId op);

// The 16-bit dtype option every built-in policy takes: dtype=bf16|f16.
PassOptionSpec low_dtype_option();
DType low_dtype_of(const PassOptions& options);

}  // namespace lazylab
