// The op table (ops.def) as plugins see it: each op's name, category,
// arity, type rule and attribute schema, so a backend asks "is this a
// reduction?" or "is this a comparison?" instead of testing ranges of op ids.
// Header-only, C++17 and later.
#ifndef LAZYLAB_OP_TABLE_HPP
#define LAZYLAB_OP_TABLE_HPP

#include <cstdint>

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

struct Row {
  const char* name;
  Category category;
  int arity;  // -1: variadic
  TypeRule type_rule;
  const char* schema;  // "name:kind,...": the attributes, in lazylab_op's order
};

inline constexpr Row kTable[LAZYLAB_OP_COUNT] = {
#define LAZYLAB_OP(id, text, category, arity, type_rule, schema) \
  {text, Category::category, arity, TypeRule::type_rule, schema},
#include "lazylab/ops.def"
#undef LAZYLAB_OP
};

constexpr const Row& row(uint32_t op) { return kTable[op]; }
constexpr Category category(uint32_t op) { return kTable[op].category; }
constexpr bool is_elementwise(uint32_t op) { return category(op) == Category::Elementwise; }
constexpr bool is_reduction(uint32_t op) { return category(op) == Category::Reduction; }
constexpr bool is_layout(uint32_t op) { return category(op) == Category::Layout; }
// An elementwise op with a bool result.
constexpr bool is_comparison(uint32_t op) { return kTable[op].type_rule == TypeRule::Compare; }
constexpr const char* name(uint32_t op) { return kTable[op].name; }

}  // namespace lazylab::ops

#endif
