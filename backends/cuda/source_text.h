// How generated CUDA C++ spells lazylab's values: types, literals, casts,
// the formulas' primitives (op_formulas.hpp), a reduction's combiner and
// identity, and a generated function's parameter list. Shared by the
// row-space renderer (row_space_source.h), the op-by-op one (op_source.h)
// and the program's assembly (codegen.cpp).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "codegen.h"
#include "lazylab/backend_abi.h"

namespace lazylab::cuda {

bool is_float(uint32_t dtype);
// How a dtype is stored in memory, and held in a register (bools as bool;
// bf16 and f16, stored as the prelude's 16-bit types, in f32 registers).
const char* storage_type(uint32_t dtype);
const char* register_type(uint32_t dtype);
// Whether values of the dtype compute in f32 (f32, bf16, f16).
bool computes_in_f32(uint32_t dtype);
// `v` as a literal of `dtype` (NaN and infinities by their bits; a 16-bit
// float's rounded value as an f32 literal).
std::string literal(double v, uint32_t dtype);
// An op's f32 result rounded as its 16-bit float dtype stores it (the
// interpreter's per-op rounding, which a softmax of rounded exps amplifies
// past bf16's tolerance when left out); other dtypes' as they are.
std::string rounded(uint32_t dtype, const std::string& x);
// An integer as a literal of integer `dtype`, wrapped as the dtype holds it.
std::string integer_literal(long long v, uint32_t dtype);
// A scalar attribute's value (a constant's, a pad's fill) as a literal:
// exact in `i` for integer and bool dtypes (ABI 3.6), in `f` for floats.
std::string scalar_literal(const lazylab_attr& value, uint32_t dtype);
// `x` of dtype `from` as dtype `to`, as the reference converts.
std::string cast_expr(const std::string& x, uint32_t from, uint32_t to);
int64_t elements_of(const lazylab_value& v);
std::vector<int64_t> shape_of(const lazylab_value& v);
// The integer type of generated index arithmetic over at most `largest`
// elements: int where every index fits (a 32-bit division or remainder by a
// constant is a multiply and a shift, a 64-bit one a sequence of them),
// else long long; `literal` writes a constant of it.
struct IndexType {
  bool narrow;
  const char* name() const { return narrow ? "int" : "long long"; }
  std::string literal(int64_t value) const;
};
IndexType index_type(int64_t largest);
// The device functor of a reduction's combiner (the op table's).
const char* combiner_functor(uint32_t reduce_op);
// The literal a reduction's accumulator starts from (see source_text.cpp).
std::string identity_literal(uint32_t reduce_op, uint32_t type, bool wide);
// Whether an output written here may take the memory of a parameter read
// here (buffer donation, ABI 3.8: an update in place, element for element).
bool writes_over_a_read(const lazylab_program& program, const std::set<uint32_t>& reads,
                        const std::set<uint32_t>& writes);
// The parameter list: every value read (const) then every value written,
// each appended to launch.values; not __restrict__ where an output may be
// written over a value read (buffer donation, ABI 3.8).
std::string parameters(const lazylab_program& program, const std::set<uint32_t>& reads,
                       const std::set<uint32_t>& writes, Launch& launch);

// The formulas' primitives as CUDA C++ expressions of one dtype. Integer
// arithmetic wraps (through unsigned), as the reference's does.
struct SourceMath {
  using Value = std::string;
  using Predicate = std::string;
  uint32_t dtype;

  bool f32() const { return computes_in_f32(dtype); }
  std::string type() const { return register_type(dtype); }
  std::string call(const char* f32_name, const char* f64_name, const std::string& x) const {
    return fmt::format("{}({})", f32() ? f32_name : f64_name, x);
  }
  std::string wrap(const char* op, const std::string& a, const std::string& b) const {
    return fmt::format("(({})((unsigned long long)({}) {} (unsigned long long)({})))", type(), a, op, b);
  }

  std::string constant(double v) const { return literal(v, dtype); }
  std::string neg(const std::string& x) const {
    return is_float(dtype) ? fmt::format("(-{})", x)
                           : fmt::format("(({})(0ull - (unsigned long long)({})))", type(), x);
  }
  std::string abs(const std::string& x) const {
    return is_float(dtype) ? call("fabsf", "fabs", x) : fmt::format("(({0}) < 0 ? {1} : ({0}))", x, neg(x));
  }
  std::string exp(const std::string& x) const { return call("expf", "exp", x); }
  std::string log(const std::string& x) const { return call("logf", "log", x); }
  std::string sqrt(const std::string& x) const { return call("sqrtf", "sqrt", x); }
  std::string tanh(const std::string& x) const { return call("tanhf", "tanh", x); }
  std::string erf(const std::string& x) const { return call("erff", "erf", x); }
  std::string pow(const std::string& a, const std::string& b) const {
    return fmt::format("{}({}, {})", f32() ? "powf" : "pow", a, b);
  }
  std::string add(const std::string& a, const std::string& b) const {
    return is_float(dtype) ? fmt::format("({} + {})", a, b) : wrap("+", a, b);
  }
  std::string sub(const std::string& a, const std::string& b) const {
    return is_float(dtype) ? fmt::format("({} - {})", a, b) : wrap("-", a, b);
  }
  std::string mul(const std::string& a, const std::string& b) const {
    return is_float(dtype) ? fmt::format("({} * {})", a, b) : wrap("*", a, b);
  }
  std::string div(const std::string& a, const std::string& b) const {
    return is_float(dtype) ? fmt::format("({} / {})", a, b) : fmt::format("lazylab_div<{}>({}, {})", type(), a, b);
  }
  std::string max(const std::string& a, const std::string& b) const {
    return fmt::format("LazylabMax()({}, {})", a, b);
  }
  std::string min(const std::string& a, const std::string& b) const {
    return fmt::format("LazylabMin()({}, {})", a, b);
  }
  std::string eq(const std::string& a, const std::string& b) const { return fmt::format("({} == {})", a, b); }
  std::string ne(const std::string& a, const std::string& b) const { return fmt::format("({} != {})", a, b); }
  std::string lt(const std::string& a, const std::string& b) const { return fmt::format("({} < {})", a, b); }
  std::string le(const std::string& a, const std::string& b) const { return fmt::format("({} <= {})", a, b); }
  std::string gt(const std::string& a, const std::string& b) const { return fmt::format("({} > {})", a, b); }
  std::string ge(const std::string& a, const std::string& b) const { return fmt::format("({} >= {})", a, b); }
  std::string select(const std::string& c, const std::string& a, const std::string& b) const {
    return fmt::format("({} ? {} : {})", c, a, b);
  }
  std::string from_predicate(const std::string& c) const {
    return fmt::format("({} ? ({})1 : ({})0)", c, type(), type());
  }
};

}  // namespace lazylab::cuda
