#include "core/op_info.h"

#include <bit>
#include <cstring>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "lazylab/reference_semantics.hpp"

namespace lazylab {
namespace {

// The schema's spelling of each attribute kind (ops.def), both ways.
constexpr std::pair<std::string_view, AttrKind> kAttrKindNames[] = {
    {"int", AttrKind::Int},   {"float", AttrKind::Float},   {"bool", AttrKind::Bool},
    {"ints", AttrKind::Ints}, {"scalar", AttrKind::Scalar},
};

constexpr std::optional<AttrKind> parse_attr_kind(std::string_view kind) {
  for (auto [name, value] : kAttrKindNames)
    if (name == kind) return value;
  return std::nullopt;
}

// Parses "a:int,b:ints" at compile time; a malformed schema fails the build.
consteval OpInfo make_info(OpId id, std::string_view name, OpCategory category, int arity, TypeRule rule,
                           std::string_view schema) {
  OpInfo info{id, name, category, arity, rule};
  while (!schema.empty()) {
    size_t comma = schema.find(',');
    std::string_view item = schema.substr(0, comma);
    size_t colon = item.find(':');
    if (colon == std::string_view::npos || info.num_attrs == kMaxAttrs) throw "bad schema";
    auto kind = parse_attr_kind(item.substr(colon + 1));
    if (!kind) throw "bad attribute kind";
    info.attrs[info.num_attrs++] = AttrSpec{item.substr(0, colon), *kind};
    schema = comma == std::string_view::npos ? std::string_view{} : schema.substr(comma + 1);
  }
  return info;
}

}  // namespace

namespace detail {
constinit const OpInfo kOpTable[] = {
#define LAZYLAB_OP(id, name, category, arity, type_rule, schema, facts) \
  make_info(OpId::id, name, OpCategory::category, arity, TypeRule::type_rule, schema),
#include "lazylab/ops.def"
#undef LAZYLAB_OP
};
}  // namespace detail

using detail::kOpTable;

bool AttrValue::operator==(const AttrValue& other) const {
  return i == other.i && std::bit_cast<uint64_t>(f) == std::bit_cast<uint64_t>(other.f) && ints == other.ints;
}

constinit const Attrs kNoAttrs{};

AttrValue scalar_attr(DType dtype, double value) {
  if (is_float(dtype)) {
    AttrValue attr;
    attr.f = value;
    return attr;
  }
  if (dtype == DType::Bool) return integer_scalar_attr(dtype, value != 0);  // 0.5 and NaN are true
  return integer_scalar_attr(dtype, reference::to_integer(value));
}

AttrValue integer_scalar_attr(DType dtype, int64_t value) {
  AttrValue attr;
  if (is_float(dtype)) {
    attr.f = static_cast<double>(value);
    return attr;
  }
  attr.i = reference::wrap_integer(static_cast<uint32_t>(dtype), value);
  attr.f = static_cast<double>(attr.i);
  return attr;
}

std::string scalar_attr_problem(DType dtype, const AttrValue& value) {
  if (is_float(dtype)) return value.i == 0 ? "" : fmt::format("a {} scalar with an integer part", dtype_name(dtype));
  if (reference::wrap_integer(static_cast<uint32_t>(dtype), value.i) != value.i)
    return fmt::format("{} is not a value of {}", value.i, dtype_name(dtype));
  if (std::bit_cast<uint64_t>(value.f) != std::bit_cast<uint64_t>(static_cast<double>(value.i)))
    return fmt::format("its double {} is not its integer {}'s", value.f, value.i);
  return "";
}

std::string_view attr_kind_name(AttrKind kind) {
  for (auto [name, value] : kAttrKindNames)
    if (value == kind) return name;
  return "?";
}

std::string_view op_name(OpId op) { return op_info(op).name; }

std::optional<OpId> find_op(std::string_view name) {
  for (const OpInfo& info : kOpTable)
    if (info.name == name) return info.id;
  return std::nullopt;
}

std::optional<int> attr_index(OpId op, std::string_view attr_name) {
  const OpInfo& info = op_info(op);
  for (int i = 0; i < info.num_attrs; ++i)
    if (info.attrs[i].name == attr_name) return i;
  return std::nullopt;
}

}  // namespace lazylab
