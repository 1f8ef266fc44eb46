// The op table (ops.def) as plugins see it: each op's name, category,
// arity, type rule and attribute schema, so a backend asks "is this a
// reduction?" or "is this a comparison?" instead of testing ranges of op ids.
// Header-only, C++17 and later.
#ifndef LAZYLAB_OP_TABLE_HPP
#define LAZYLAB_OP_TABLE_HPP

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "lazylab/backend_abi.h"

namespace lazylab::ops {

enum class Category : uint8_t { Leaf, Elementwise, Layout, Reduction, Contraction, Composite, Window };
enum class TypeRule : uint8_t {
  Declared,
  Same,
  Compare,
  Select,
  Transpose,
  Slice,
  Concat,
  Reduce,
  Matmul,
  Gather,
  Pad,
  Window,
  Scatter
};

// ops.def's Facts column (its header comment says what each means).
namespace facts {
inline constexpr uint32_t None = 0;
inline constexpr uint32_t FloatOnly = 1u << 0;
inline constexpr uint32_t Commutative = 1u << 1;
inline constexpr uint32_t View = 1u << 2;
inline constexpr uint32_t Repeats = 1u << 3;
inline constexpr uint32_t IdentityZero = 1u << 4, IdentityOne = 2u << 4, IdentityLowest = 3u << 4,
                          IdentityHighest = 4u << 4, IdentityMask = 7u << 4;
inline constexpr uint32_t CombineAdd = 1u << 7, CombineMax = 2u << 7, CombineMin = 3u << 7, CombineMask = 3u << 7;
}  // namespace facts

// The identity element of a binary op, or of a reduction's combiner.
enum class Identity : uint8_t { None, Zero, One, Lowest, Highest };

struct Row {
  const char* name;
  Category category;
  int arity;  // -1: variadic
  TypeRule type_rule;
  const char* schema;  // "name:kind,...": the attributes, in lazylab_op's order
  uint32_t facts;      // facts:: flags
};

namespace detail {
using namespace facts;
inline constexpr Row kTable[LAZYLAB_OP_COUNT] = {
#define LAZYLAB_OP(id, text, category, arity, type_rule, schema, op_facts) \
  {text, Category::category, arity, TypeRule::type_rule, schema, op_facts},
#include "lazylab/ops.def"
#undef LAZYLAB_OP
};
}  // namespace detail
using detail::kTable;

constexpr const Row& row(uint32_t op) { return kTable[op]; }
constexpr Category category(uint32_t op) { return kTable[op].category; }
constexpr bool is_elementwise(uint32_t op) { return category(op) == Category::Elementwise; }
constexpr bool is_reduction(uint32_t op) { return category(op) == Category::Reduction; }
constexpr bool is_layout(uint32_t op) { return category(op) == Category::Layout; }
// An elementwise op with a bool result.
constexpr bool is_comparison(uint32_t op) { return kTable[op].type_rule == TypeRule::Compare; }
constexpr const char* name(uint32_t op) { return kTable[op].name; }

// Where attribute `attribute` lies in an op's attrs (its schema's order),
// or -1 where the op has none of that name.
constexpr int attribute_index(uint32_t op, std::string_view attribute) {
  std::string_view schema = kTable[op].schema;
  for (int index = 0; !schema.empty(); ++index) {
    size_t comma = schema.find(',');
    std::string_view entry = schema.substr(0, comma);
    if (entry.substr(0, entry.find(':')) == attribute) return index;
    schema = comma == std::string_view::npos ? std::string_view{} : schema.substr(comma + 1);
  }
  return -1;
}

constexpr bool has_fact(uint32_t op, uint32_t fact) { return (kTable[op].facts & fact) == fact; }
// Operands and result are floating: the type rules refuse integers.
constexpr bool is_float_only(uint32_t op) { return has_fact(op, facts::FloatOnly); }
constexpr bool is_commutative(uint32_t op) { return has_fact(op, facts::Commutative); }
// Each result element is one element of operand 0 at an affine index (a
// strided view: broadcast, reshape, transpose, slice) ...
constexpr bool is_view(uint32_t op) { return has_fact(op, facts::View); }
// ... and each at most once (a broadcast repeats them).
constexpr bool is_injective_view(uint32_t op) { return is_view(op) && !has_fact(op, facts::Repeats); }

// A reduction's combiner: LAZYLAB_OP_Add, _Max or _Min; LAZYLAB_OP_COUNT for
// an op that is no reduction.
constexpr uint32_t combiner(uint32_t op) {
  switch (kTable[op].facts & facts::CombineMask) {
    case facts::CombineAdd: return LAZYLAB_OP_Add;
    case facts::CombineMax: return LAZYLAB_OP_Max;
    case facts::CombineMin: return LAZYLAB_OP_Min;
    default: return LAZYLAB_OP_COUNT;
  }
}

// e with f(x, e) = x for a binary op (f(e, x) = x too where commutative); a
// reduction's is its combiner's, the value it starts from.
constexpr Identity identity(uint32_t op) {
  if (uint32_t c = combiner(op); c != LAZYLAB_OP_COUNT) op = c;
  return static_cast<Identity>((kTable[op].facts & facts::IdentityMask) >> 4);
}

// An identity as a double (Lowest and Highest as -inf and +inf) and as an
// integer accumulator (as the least and greatest long long: a start that any
// integer of a dtype replaces).
constexpr double identity_value(Identity e) {
  return e == Identity::One       ? 1.0
         : e == Identity::Lowest  ? -std::numeric_limits<double>::infinity()
         : e == Identity::Highest ? std::numeric_limits<double>::infinity()
                                  : 0.0;
}
constexpr long long identity_integer(Identity e) {
  return e == Identity::One       ? 1
         : e == Identity::Lowest  ? std::numeric_limits<long long>::min()
         : e == Identity::Highest ? std::numeric_limits<long long>::max()
                                  : 0;
}

// Strides of a row-major array of `shape` (any container of integers), in
// elements: the layout of every value lazylab hands a backend.
template <class Shape>
std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

}  // namespace lazylab::ops

#endif
