#include "core/op_info.h"

#include <bit>
#include <cstring>
#include <string>

namespace lazylab {
namespace {

constexpr std::optional<AttrKind> parse_attr_kind(std::string_view kind) {
  if (kind == "int") return AttrKind::Int;
  if (kind == "float") return AttrKind::Float;
  if (kind == "bool") return AttrKind::Bool;
  if (kind == "ints") return AttrKind::Ints;
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
#define LAZYLAB_OP(id, name, category, arity, type_rule, schema) \
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
