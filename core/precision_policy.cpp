#include "core/precision_policy.h"

namespace lazylab {

bool needs_full_precision(OpId op) {
  switch (op) {
    case OpId::ReduceSum:
    case OpId::ReduceMean:
    case OpId::Softmax:
    case OpId::Layernorm:
    case OpId::Exp:
    case OpId::Log:
    case OpId::Pow:
    case OpId::Rsqrt: return true;
    default: return false;
  }
}

PassOptionSpec low_dtype_option() {
  PassOptionSpec spec;
  spec.name = "dtype";
  spec.kind = OptionKind::Enum;
  spec.default_value = "bf16";
  spec.help = "the 16-bit float the low-precision ops compute in";
  spec.choices = {"bf16", "f16"};
  return spec;
}

DType low_dtype_of(const PassOptions& options) {
  return options.has("dtype") && options.get("dtype") == "f16" ? DType::F16 : DType::BF16;
}

}  // namespace lazylab
