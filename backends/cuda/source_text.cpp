#include "source_text.h"

#include <fmt/format.h>

#include <cmath>

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
    default: return "unsigned char";
  }
}

const char* register_type(uint32_t dtype) { return dtype == LAZYLAB_BOOL ? "bool" : storage_type(dtype); }

std::string literal(double v, uint32_t dtype) {
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
    case LAZYLAB_I32: return fmt::format("((int){}LL)", static_cast<int32_t>(reference::to_integer(v)));
    case LAZYLAB_I64: return fmt::format("((long long){}ULL)", static_cast<uint64_t>(reference::to_integer(v)));
    default: return v != 0 ? "true" : "false";
  }
}

// A scalar attribute's value (a constant's, a pad's fill) as a literal:
// exact in `i` for integer and bool dtypes (ABI 3.6), in `f` for floats.
std::string scalar_literal(const lazylab_attr& value, uint32_t dtype) {
  switch (dtype) {
    case LAZYLAB_F32:
    case LAZYLAB_F64: return literal(value.f, dtype);
    case LAZYLAB_I32: return fmt::format("((int){}LL)", static_cast<int32_t>(value.i));
    case LAZYLAB_I64: return fmt::format("((long long){}ULL)", static_cast<uint64_t>(value.i));
    default: return value.i != 0 ? "true" : "false";
  }
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
  if (!is_float(type) && type == LAZYLAB_I32 && !wide) return lowest ? "(-2147483647 - 1)" : "2147483647";
  if (!is_float(type)) return lowest ? "(-9223372036854775807LL - 1)" : "9223372036854775807LL";
  if (wide)
    return lowest ? "(-__longlong_as_double(0x7ff0000000000000LL))" : "__longlong_as_double(0x7ff0000000000000LL)";
  return literal(lowest ? -INFINITY : INFINITY, type);
}

namespace {

// Whether an output written here may take the memory of a parameter read
// here (buffer donation, ABI 3.8: an update in place, element for element).
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

}  // namespace

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
