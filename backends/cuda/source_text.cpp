#include "source_text.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "lazylab/dtype_table.hpp"
#include "lazylab/op_table.hpp"
#include "lazylab/reference_semantics.hpp"

namespace lazylab::cuda {

bool is_float(uint32_t dtype) { return dtypes::is_float(dtype); }

const char* storage_type(uint32_t dtype) {
  switch (dtype) {
    case LAZYLAB_F32: return "float";
    case LAZYLAB_F64: return "double";
    case LAZYLAB_I32: return "int";
    case LAZYLAB_I64: return "long long";
    case LAZYLAB_BF16: return "lazylab_bf16";  // the prelude's: 16 bits, converting to and from float
    case LAZYLAB_F16: return "lazylab_f16";
    case LAZYLAB_I8: return "signed char";
    default: return "unsigned char";  // bool, u8
  }
}

bool computes_in_f32(uint32_t dtype) { return is_float(dtype) && dtype != LAZYLAB_F64; }

const char* register_type(uint32_t dtype) {
  if (dtype == LAZYLAB_BOOL) return "bool";
  return computes_in_f32(dtype) ? "float" : storage_type(dtype);
}

std::string literal(double v, uint32_t dtype) {
  if (computes_in_f32(dtype) && dtype != LAZYLAB_F32)  // a 16-bit float's value, in its f32 register
    return literal(dtypes::visit(dtype, [&]<class T>(T) { return static_cast<double>(static_cast<T>(v)); }),
                   LAZYLAB_F32);
  switch (dtype) {
    case LAZYLAB_F32: {
      float f = static_cast<float>(v);
      if (std::isnan(f)) return "__int_as_float(0x7fffffff)";
      if (std::isinf(f)) return f > 0 ? "__int_as_float(0x7f800000)" : "(-__int_as_float(0x7f800000))";
      return fmt::format("{:a}f", f);
    }
    case LAZYLAB_F64:
      if (std::isnan(v)) return "__longlong_as_double(0x7ff8000000000000LL)";
      if (std::isinf(v))
        return v > 0 ? "__longlong_as_double(0x7ff0000000000000LL)" : "(-__longlong_as_double(0x7ff0000000000000LL))";
      return fmt::format("{:a}", v);
    case LAZYLAB_BOOL: return v != 0 ? "true" : "false";
    default: return integer_literal(reference::to_integer(v), dtype);
  }
}

std::string rounded(uint32_t dtype, const std::string& x) {
  if (dtype == LAZYLAB_BF16) return fmt::format("lazylab_round_bf16({})", x);
  if (dtype == LAZYLAB_F16) return fmt::format("lazylab_round_f16({})", x);
  return x;
}

// An integer as a literal of integer `dtype`, wrapped as the dtype holds it.
std::string integer_literal(long long v, uint32_t dtype) {
  if (dtype == LAZYLAB_I64) return fmt::format("((long long){}ULL)", static_cast<uint64_t>(v));
  return fmt::format("(({}){}LL)", storage_type(dtype), reference::wrap_integer(dtype, v));
}

// A scalar attribute's value (a constant's, a pad's fill) as a literal:
// exact in `i` for integer and bool dtypes (ABI 3.6), in `f` for floats.
std::string scalar_literal(const lazylab_attr& value, uint32_t dtype) {
  if (is_float(dtype)) return literal(value.f, dtype);
  if (dtype == LAZYLAB_BOOL) return value.i != 0 ? "true" : "false";
  return integer_literal(value.i, dtype);
}

// `x` of dtype `from` as dtype `to`, as the reference converts.
std::string cast_expr(const std::string& x, uint32_t from, uint32_t to) {
  if (to == LAZYLAB_BOOL) return fmt::format("({} != 0)", x);
  if (is_float(to) || !is_float(from)) return fmt::format("(({}){})", register_type(to), x);
  return fmt::format("(({})lazylab_to_integer((double){}))", register_type(to), x);
}

int64_t elements_of(const lazylab_value& v) {
  int64_t n = 1;
  for (uint32_t d = 0; d < v.rank; ++d) n *= v.shape[d];
  return n;
}

std::vector<int64_t> shape_of(const lazylab_value& v) { return std::vector<int64_t>(v.shape, v.shape + v.rank); }

IndexType index_type(int64_t largest) { return IndexType{largest < INT32_MAX}; }

std::string IndexType::literal(int64_t value) const { return fmt::format("{}{}", value, narrow ? "" : "LL"); }

// The device functor of a reduction's combiner (the op table's).
const char* combiner_functor(uint32_t reduce_op) {
  uint32_t combine = ops::combiner(reduce_op);
  return combine == LAZYLAB_OP_Max ? "LazylabMax" : combine == LAZYLAB_OP_Min ? "LazylabMin" : "LazylabSum";
}

// The literal a reduction's accumulator starts from: its combiner's identity
// in `type`. A bool max starts false and a min true (INT64_MIN as a bool was
// true: a max over size-1 axes of false gave true; found by lazylab fuzz);
// `wide` accumulators hold integers as int64 and floats as double.
std::string identity_literal(uint32_t reduce_op, uint32_t type, bool wide) {
  ops::Identity identity = ops::identity(reduce_op);
  if (identity == ops::Identity::Zero) return "0";
  bool lowest = identity == ops::Identity::Lowest;
  if (type == LAZYLAB_BOOL) return lowest ? "0" : "1";
  if (!is_float(type) && type != LAZYLAB_I64 && !wide)  // the narrow integer's own extremes
    return dtypes::visit(type, [&]<class T>(T) {
      if constexpr (std::is_integral_v<T>)
        return fmt::format(
            "(({}){}LL)", storage_type(type),
            static_cast<long long>(lowest ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max()));
      return std::string("0");
    });
  if (!is_float(type)) return lowest ? "(-9223372036854775807LL - 1)" : "9223372036854775807LL";
  if (wide)
    return lowest ? "(-__longlong_as_double(0x7ff0000000000000LL))" : "__longlong_as_double(0x7ff0000000000000LL)";
  return literal(lowest ? -INFINITY : INFINITY, type);
}

bool writes_over_a_read(const lazylab_program& program, const std::set<uint32_t>& reads,
                        const std::set<uint32_t>& writes) {
  const int32_t* donors = lazylab_program_donors(&program);
  if (!donors) return false;
  for (uint32_t i = 0; i < program.num_outputs; ++i)
    if (donors[i] >= 0 && static_cast<uint32_t>(donors[i]) < program.num_parameters &&
        writes.count(program.outputs[i]) && reads.count(program.parameters[donors[i]]))
      return true;
  return false;
}

// The parameter list: every value read (const) then every value written;
// not __restrict__ where an output may be written over a value read.
std::string parameters(const lazylab_program& program, const std::set<uint32_t>& reads,
                       const std::set<uint32_t>& writes, Launch& launch) {
  const char* restrict = writes_over_a_read(program, reads, writes) ? "" : "__restrict__ ";
  std::string list;
  for (uint32_t v : reads) {
    list += fmt::format("const {}* {}p{}, ", storage_type(program.values[v].dtype), restrict, v);
    launch.values.push_back(v);
  }
  for (uint32_t v : writes) {
    list += fmt::format("{}* {}p{}, ", storage_type(program.values[v].dtype), restrict, v);
    launch.values.push_back(v);
  }
  return list + "long long work";
}

}  // namespace lazylab::cuda
