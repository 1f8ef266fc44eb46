#include "gelu_epilogue.h"

#include <algorithm>
#include <initializer_list>
#include <set>

#include "lazylab/op_formulas.hpp"

namespace lazylab::cuda {
namespace {

constexpr uint32_t kNone = ~uint32_t{0};

// The op of `ops` computing `v`; null where none does (an input).
const lazylab_op* producer_of(const std::vector<const lazylab_op*>& ops, uint32_t v) {
  auto it = std::find_if(ops.begin(), ops.end(), [&](const lazylab_op* op) { return op->result == v; });
  return it == ops.end() ? nullptr : *it;
}

// A "math" for op_formulas.hpp that, instead of computing, finds the op
// computing each primitive among the epilogue's ops: so the epilogue is
// recognised as the formula decompose wrote it from, whatever the formula
// becomes. A primitive with no such op, or with a failed operand, fails.
class FormulaMatch {
 public:
  struct Value {
    uint32_t id = kNone;  // the value computing it; kNone once the match failed
    double constant = 0;
    bool is_constant = false;
  };
  using Predicate = Value;

  explicit FormulaMatch(const std::vector<const lazylab_op*>& ops) : ops_(ops) {}

  Value of(uint32_t id) const { return {id}; }
  Value constant(double c) { return {kNone, c, true}; }
  Value neg(Value x) { return find(LAZYLAB_OP_Neg, x); }
  Value abs(Value x) { return find(LAZYLAB_OP_Abs, x); }
  Value exp(Value x) { return find(LAZYLAB_OP_Exp, x); }
  Value log(Value x) { return find(LAZYLAB_OP_Log, x); }
  Value sqrt(Value x) { return find(LAZYLAB_OP_Sqrt, x); }
  Value tanh(Value x) { return find(LAZYLAB_OP_Tanh, x); }
  Value erf(Value x) { return find(LAZYLAB_OP_Erf, x); }
  Value add(Value a, Value b) { return find(LAZYLAB_OP_Add, a, b, true); }
  Value mul(Value a, Value b) { return find(LAZYLAB_OP_Mul, a, b, true); }
  Value sub(Value a, Value b) { return find(LAZYLAB_OP_Sub, a, b); }
  Value div(Value a, Value b) { return find(LAZYLAB_OP_Div, a, b); }
  Value pow(Value a, Value b) { return find(LAZYLAB_OP_Pow, a, b); }
  Value max(Value a, Value b) { return find(LAZYLAB_OP_Max, a, b, true); }
  Value min(Value a, Value b) { return find(LAZYLAB_OP_Min, a, b, true); }
  // The gelu formula compares nothing; any formula that does is not matched.
  Predicate eq(Value, Value) { return {}; }
  Predicate ne(Value, Value) { return {}; }
  Predicate lt(Value, Value) { return {}; }
  Predicate le(Value, Value) { return {}; }
  Predicate gt(Value, Value) { return {}; }
  Predicate ge(Value, Value) { return {}; }
  Value select(Predicate, Value, Value) { return {}; }
  Value from_predicate(Predicate) { return {}; }

  // The values of the ops matched so far (constants included).
  const std::set<uint32_t>& matched() const { return matched_; }

 private:
  // The op `op` reading these operands (either order where it commutes).
  Value find(uint32_t op, Value x) {
    if (failed(x)) return {};
    for (const lazylab_op* candidate : ops_)
      if (candidate->op == op && candidate->num_operands == 1 && reads(candidate->operands[0], x))
        return take(*candidate, {x});
    return {};
  }
  Value find(uint32_t op, Value a, Value b, bool commutes = false) {
    if (failed(a) || failed(b)) return {};
    for (const lazylab_op* candidate : ops_) {
      if (candidate->op != op || candidate->num_operands != 2) continue;
      const uint32_t* in = candidate->operands;
      if (reads(in[0], a) && reads(in[1], b)) return take(*candidate, {a, b});
      if (commutes && reads(in[0], b) && reads(in[1], a)) return take(*candidate, {b, a});
    }
    return {};
  }

  // The op's result, and its constant operands, as matched.
  Value take(const lazylab_op& op, std::initializer_list<Value> operands) {
    matched_.insert(op.result);
    uint32_t i = 0;
    for (const Value& v : operands) {
      if (v.is_constant) matched_.insert(op.operands[i]);
      ++i;
    }
    return of(op.result);
  }

  static bool failed(const Value& v) { return !v.is_constant && v.id == kNone; }

  // Whether `operand` is what `v` expects: that value, or a constant op of
  // that value as the program's f32 holds it.
  bool reads(uint32_t operand, const Value& v) const {
    if (!v.is_constant) return operand == v.id;
    const lazylab_op* op = producer_of(ops_, operand);
    return op && op->op == LAZYLAB_OP_Constant && op->num_attrs == 1 &&
           static_cast<float>(op->attrs[0].f) == static_cast<float>(v.constant);
  }

  const std::vector<const lazylab_op*>& ops_;
  std::set<uint32_t> matched_;
};

bool is_cast_to(const lazylab_op* op, const lazylab_program& program, uint32_t dtype) {
  return op && op->op == LAZYLAB_OP_Cast && op->num_operands == 1 && program.values[op->result].dtype == dtype;
}

}  // namespace

std::optional<GeluBias> match_gelu_bias(const lazylab_program& program, const lazylab_kernel& kernel,
                                        const std::vector<const lazylab_op*>& epilogue) {
  const lazylab_contraction& c = kernel.contraction;
  const uint32_t narrow = program.values[c.matmul].dtype;
  if ((narrow != LAZYLAB_BF16 && narrow != LAZYLAB_F16) || epilogue.empty()) return std::nullopt;
  // The result: the last op, narrowing an f32 value to the product's dtype,
  // or a reshape of that (the same bytes: a block's [batch, seq, hidden]
  // product read on as [batch * seq, hidden]).
  const lazylab_op* last = epilogue.back();
  const lazylab_op* out = last->op == LAZYLAB_OP_Reshape ? producer_of(epilogue, last->operands[0]) : last;
  if (!is_cast_to(out, program, narrow)) return std::nullopt;
  // Its input must be gelu(widened product + widened bias), in f32.
  const lazylab_op* sum = nullptr;
  for (const lazylab_op* op : epilogue)
    if (op->op == LAZYLAB_OP_Add && program.values[op->result].dtype == LAZYLAB_F32) {
      sum = op;
      break;
    }
  if (!sum) return std::nullopt;
  FormulaMatch match(epilogue);
  FormulaMatch::Value gelu{};
  if (!formulas::unary(match, LAZYLAB_OP_Gelu, match.of(sum->result), gelu) || gelu.id != out->operands[0])
    return std::nullopt;
  // The sum's operands: the widened product, and the widened broadcast bias.
  std::optional<GeluBias> found;
  std::set<uint32_t> used = match.matched();
  for (int product_side = 0; product_side < 2 && !found; ++product_side) {
    const lazylab_op* product = producer_of(epilogue, sum->operands[product_side]);
    const lazylab_op* widened_bias = producer_of(epilogue, sum->operands[1 - product_side]);
    if (!is_cast_to(product, program, LAZYLAB_F32) || product->operands[0] != c.matmul ||
        !is_cast_to(widened_bias, program, LAZYLAB_F32))
      continue;
    const lazylab_op* view = producer_of(epilogue, widened_bias->operands[0]);
    if (!view || view->op != LAZYLAB_OP_Broadcast) continue;
    for (uint32_t i = 0; i < kernel.num_accesses; ++i) {
      const lazylab_access& a = kernel.accesses[i];
      if (a.value != view->result || a.kind != LAZYLAB_ACCESS_REPEAT || a.period != c.n) continue;
      const lazylab_value& bias = program.values[a.source];
      int64_t elements = 1;
      for (uint32_t d = 0; d < bias.rank; ++d) elements *= bias.shape[d];
      if (bias.dtype == narrow && elements == c.n) found = GeluBias{a.source, last->result};
    }
    if (found)
      used.insert({sum->result, product->result, widened_bias->result, view->result, out->result, last->result});
  }
  if (!found || used.size() != epilogue.size()) return std::nullopt;
  // Nothing but the result may leave the kernel: cuBLASLt writes only it.
  for (const lazylab_op* op : epilogue)
    if (op != last && program.values[op->result].kind != LAZYLAB_VALUE_KERNEL_LOCAL) return std::nullopt;
  if (program.values[c.matmul].kind != LAZYLAB_VALUE_KERNEL_LOCAL) return std::nullopt;
  return found;
}

}  // namespace lazylab::cuda
