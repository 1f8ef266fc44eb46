// The C++ view of the op table (plugins/include/lazylab/ops.def). Nothing
// else lists ops.
#pragma once

#include <array>
#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "expected.h"
#include "lazylab/op_table.hpp"
#include "tensor_type.h"

namespace lazylab {

enum class OpId : uint16_t {
#define LAZYLAB_OP(id, ...) id,
#include "lazylab/ops.def"
#undef LAZYLAB_OP
};
inline constexpr int kNumOps = LAZYLAB_OP_COUNT;

// The category and type rule enums are the plugins' (declared once, in the
// installed op_table.hpp beside ops.def).
using OpCategory = ops::Category;
using TypeRule = ops::TypeRule;
// Scalar: a value of the node's dtype (a constant's, a pad's fill), exact
// for every dtype; see scalar_attr.
enum class AttrKind : uint8_t { Int, Float, Bool, Ints, Scalar };

inline constexpr int kMaxAttrs = 4;

struct AttrSpec {
  std::string_view name;
  AttrKind kind = AttrKind::Int;
};

struct OpInfo {
  OpId id;
  std::string_view name;
  OpCategory category;
  int arity;  // -1: variadic
  TypeRule type_rule;
  int num_attrs = 0;
  std::array<AttrSpec, kMaxAttrs> attrs{};
};

// Attribute lists are rare (reductions, layout ops); a std::vector costs
// nothing when empty, which keeps the common elementwise node small.
using Ints = std::vector<int64_t>;

// One attribute's value; which member is meaningful follows the op's schema.
struct AttrValue {
  // User-provided, so `Attrs{}` runs these initialisers instead of zero-filling
  // the whole array first (a `rep stos` per traced node).
  constexpr AttrValue() {}
  int64_t i = 0;
  double f = 0;
  Ints ints;
  bool operator==(const AttrValue& other) const;  // floats compare bitwise
};
using Attrs = std::array<AttrValue, kMaxAttrs>;

// A scalar attribute of a node of `dtype`: an integer or bool one exactly in
// `i`, with its nearest double in `f` (what plugins before ABI 3.6 read); a
// float one in `f`, `i` 0. From a double as storing it into `dtype` does
// (truncated toward zero, an i32 wrapped, a bool 0 or 1), or from an
// integer exactly (wrapped likewise; a float dtype takes its nearest double).
AttrValue scalar_attr(DType dtype, double value);
AttrValue integer_scalar_attr(DType dtype, int64_t value);
// Why `value` is no scalar of `dtype` (an i32 past 32 bits, `f` not `i`'s
// double), or empty.
std::string scalar_attr_problem(DType dtype, const AttrValue& value);
// The attributes of an op that has none: one shared set, so recording such an
// op builds and destroys no array of four values. Constant-initialised, so
// it is ready before any static initialiser could trace.
extern const Attrs kNoAttrs;
inline const Attrs& no_attrs() { return kNoAttrs; }

namespace detail {
extern const OpInfo kOpTable[];  // by OpId: op_info() is all that reads it
}
// Inline: a repeated trace asks it for every op.
inline const OpInfo& op_info(OpId op) { return detail::kOpTable[static_cast<int>(op)]; }
// What an elementwise kernel computes element for element: elementwise ops,
// and broadcasts and constants, which it reads as indexed values. The fusion
// strategies grow elementwise groups and epilogues over these.
inline bool fuses_as_elementwise(OpId op) {
  return op_info(op).category == OpCategory::Elementwise || op == OpId::Broadcast || op == OpId::Constant;
}
// The dtype a composite's primitives compute in, its decomposition's and
// its fused gradient's: f32 for a 16-bit float, whose per-op rounding would
// lose what the whole op keeps (a softmax's sum, a layernorm's variance; the
// interpreter rounds the whole op once), else its own.
inline DType composite_dtype(DType dtype) { return is_float(dtype) && dtype_size(dtype) < 4 ? DType::F32 : dtype; }
std::optional<OpId> find_op(std::string_view name);
std::string_view op_name(OpId op);
// "int", "ints", "scalar", ...: the kind as ops.def's schemas spell it.
std::string_view attr_kind_name(AttrKind kind);
std::optional<int> attr_index(OpId op, std::string_view attr_name);

// Result type of `op` applied to `operands` with `attrs`. `declared` is the
// type stated by the node; required by TypeRule::Declared ops and, for the
// others, checked against the inferred type when present.
Expected<TensorType> infer_type(OpId op, std::span<const TensorType* const> operands, const Attrs& attrs,
                                const TensorType* declared);

}  // namespace lazylab
