#include "row_space_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "lazylab/op_formulas.hpp"
#include "lazylab/op_table.hpp"
#include "source_text.h"

namespace lazylab::cuda {
namespace {

// A row-space kernel's ops ([rows, cols]), as the description indexes them.
class RowSpaceSource {
 public:
  RowSpaceSource(const lazylab_program& program, rows::RowSpace space, const ComputedValue* computed = nullptr)
      : program_(program),
        space_(std::move(space)),
        rows_(space_.rows()),
        cols_(space_.cols()),
        computed_value_(computed) {}

  // `from_the_end`: the loop walks the elements last first. A contraction's
  // epilogue reads the product that cuBLASLt has just written, last tiles
  // last: those are still in L2 when the epilogue starts, if it starts there
  // (gpt2-block's three generated epilogues took 1.5-3 us less each on an
  // H100, alternating runs; mlp's gelu pass did not change).
  std::string elementwise(const std::string& name, Launch& launch, bool from_the_end = false) {
    int64_t n = rows_ * cols_;
    // A computed element is a thread's work (a direct convolution's window):
    // one a thread, so that small planes still fill the device.
    vec_ = computed_value_ ? 1 : n % 8 == 0 && moves_16_bit_only() ? 8 : n % 4 == 0 ? 4 : 1;
    collect_memory();
    launch.function = name;
    launch.work = n / vec_;
    std::string body;
    for (uint32_t v : vector_loads_)
      body += fmt::format("    const {1} q{0} = reinterpret_cast<const {1}*>(p{0})[t];\n", v, vector_type(v));
    for (int lane = 0; lane < vec_; ++lane) {
      lane_ = lane;
      scope_.clear();
      body += vec_ == 1 ? "    const long long i_0 = t;\n"
                        : fmt::format("    const long long i_{0} = t * {1} + {0};\n", lane, vec_);
      body += fmt::format("    const long long r_{0} = i_{0} / {1}LL;\n", lane, cols_);
      if (computed_value_) body += computed_element();
      for (const lazylab_op* op : space_.ops()) body += element_op(*op);
      for (uint32_t v : space_.writes())
        if (!vector_store(v)) body += store_element(v);
    }
    for (uint32_t v : space_.writes())
      if (vector_store(v))
        body += fmt::format("    reinterpret_cast<{}*>(p{})[t] = {};\n", vector_type(v), v, vector_of(v));
    return fmt::format(
        "extern \"C\" __global__ void {}({}) {{\n"
        "  for (long long s = blockIdx.x * (long long)blockDim.x + threadIdx.x; s < work;\n"
        "       s += (long long)blockDim.x * gridDim.x) {{\n"
        "    const long long t = {};\n"
        "{}  }}\n}}\n",
        name, parameters(program_, memory_reads(), space_.writes(), launch), from_the_end ? "work - 1 - s" : "s", body);
  }

  // A row per warp (rows up to kWarpRowCols) or per block; with 128-bit
  // accesses where the row allows, and the row's f32 inputs held in
  // registers (each thread's share, loaded once) where they fit, so every
  // pass over the row after the first reads no memory.
  std::string row_reduction(const std::string& name, Launch& launch, int block_threads) {
    plan_row_threads(block_threads);
    collect_memory();
    if (cached_) held_ = value_to_hold();
    launch.function = name;
    launch.work = rows_;
    launch.block_per_item = true;
    launch.block = block_;
    launch.items_per_block = warp_rows_ ? block_ / 32 : 1;
    std::string shared, body;
    for (const lazylab_op* op : space_.ops()) {
      if (ops::is_reduction(op->op)) {
        body += reduction(*op, shared);
      } else if (space_.per_row(op->result)) {
        body +=
            fmt::format("    const {} v{} = {};\n", register_type(dtype(op->result)), op->result, result_of(*op, true));
        row_known_.insert(op->result);
      }
      if (space_.per_row(op->result) && stored_per_row(op->result) && space_.leaves(op->result))
        body += fmt::format("    if (lane_in_row == 0) p{0}[row] = ({1})v{0};\n", op->result,
                            storage_type(dtype(op->result)));
    }
    // Everything stored in full, computed once more in one last pass.
    std::string last_loop;
    for (int lane = 0; lane < vec_; ++lane) {
      open_lane(lane, last_loop);
      for (uint32_t v : space_.writes())
        if (!stored_per_row(v)) last_loop += column_value(v) + (vector_store(v) ? "" : store_element(v));
    }
    for (uint32_t v : space_.writes())
      if (!stored_per_row(v) && vector_store(v))
        last_loop += fmt::format("      reinterpret_cast<{}*>(p{} + base)[g] = {};\n", vector_type(v), v, vector_of(v));
    bool stores_in_full =
        std::any_of(space_.writes().begin(), space_.writes().end(), [&](uint32_t v) { return !stored_per_row(v); });
    if (stores_in_full) body += row_loop(last_loop);
    std::string row_threads = warp_rows_ ? "32" : "(int)blockDim.x";
    return fmt::format(
        "extern \"C\" __global__ void {}({}) {{\n{}"
        "  const int lane_in_row = threadIdx.x % {};\n"
        "  const long long rows_per_block = {};\n"
        "  for (long long row = blockIdx.x * rows_per_block + threadIdx.x / {}; row < work;\n"
        "       row += gridDim.x * rows_per_block) {{\n"
        "    const long long base = row * {}LL;\n{}{}  }}\n}}\n",
        name, parameters(program_, space_.reads(), space_.writes(), launch), shared, row_threads,
        launch.items_per_block, row_threads, cols_, cached_loads(), body);
  }

 private:
  static constexpr int64_t kWarpRowCols = 1024;
  static constexpr int64_t kCachedGroups = 8;  // 128-bit groups a thread holds per cached input

  // How the row is split among threads; vec_ before collect_memory().
  void plan_row_threads(int block_threads) {
    row_mode_ = true;
    vec_ = cols_ % 4 == 0 ? 4 : 1;
    warp_rows_ = cols_ <= kWarpRowCols;
    int64_t groups = cols_ / vec_;
    if (warp_rows_) {
      block_ = 256;
      cached_ = vec_ == 4 && groups <= 32 * kCachedGroups;
      per_thread_ = (groups + 31) / 32;
    } else {
      // The fewest threads that hold the row in registers: softmax's 8,192
      // columns took 0.184 ms on an H100 with 256 threads of 8 groups each,
      // 0.189 with 512 of 4, 0.349 with 1,024 of 2 (one run, row-block).
      block_ = 128;
      while (block_ < 1024 && block_ * kCachedGroups < groups) block_ *= 2;
      if (block_threads) block_ = block_threads;
      cached_ = vec_ == 4 && groups <= block_ * kCachedGroups;
      per_thread_ = (groups + block_ - 1) / block_;
    }
    indexed_vectors_ = cached_;
  }

  // A loop over this thread's groups of the row (vec_ elements each).
  std::string row_loop(const std::string& lanes) const {
    std::string threads = warp_rows_ ? "32" : "(long long)blockDim.x";
    int64_t groups = cols_ / vec_;
    if (cached_)
      return fmt::format(
          "#pragma unroll\n    for (int k = 0; k < {0}; ++k) {{\n"
          "      const long long g = lane_in_row + k * {1};\n      if (g >= {2}LL) break;\n{3}{4}    }}\n",
          per_thread_, threads, groups, group_loads(), lanes);
    return fmt::format("    for (long long g = lane_in_row; g < {}LL; g += {}) {{\n{}{}    }}\n", groups, threads,
                       group_loads(), lanes);
  }

  // Element `lane` of the group: its index, then a fresh scope.
  void open_lane(int lane, std::string& code) {
    lane_ = lane;
    scope_.clear();
    code += fmt::format("      const long long i_{0} = base + g * {1} + {0};\n      const long long r_{0} = row;\n",
                        lane, vec_);
  }

  // The cached inputs' 128-bit groups for this thread, at the row's start.
  std::string cached_loads() const {
    if (!cached_ || vector_loads_.empty()) return "";
    std::string threads = warp_rows_ ? "32" : "(long long)blockDim.x";
    std::string declare, load;
    for (uint32_t v : vector_loads_) {
      declare += fmt::format("    {} q{}[{}];\n", vector_type(v), v, per_thread_);
      load += fmt::format("      q{0}[k] = reinterpret_cast<const {1}*>(p{0} + base)[g];\n", v, vector_type(v));
    }
    return fmt::format(
        "{}#pragma unroll\n    for (int k = 0; k < {}; ++k) {{\n"
        "      const long long g = lane_in_row + k * {};\n      if (g >= {}LL) break;\n{}    }}\n",
        declare, per_thread_, threads, cols_ / vec_, load);
  }

  // Each group's 128-bit reads where a loop body starts: uncached inputs and
  // vectors along the row (loads a loop body does not use are dead code).
  std::string group_loads() const {
    std::string code;
    if (!cached_ && vec_ == 4)
      for (uint32_t v : vector_loads_)
        code +=
            fmt::format("      const {1} q{0} = reinterpret_cast<const {1}*>(p{0} + base)[g];\n", v, vector_type(v));
    for (uint32_t v : repeat_vectors_)
      code += fmt::format("      const {1} w{0} = reinterpret_cast<const {1}*>(p{0})[g];\n", v, vector_type(v));
    return code;
  }

  uint32_t dtype(uint32_t v) const { return program_.values[v].dtype; }

  bool is_computed(uint32_t v) const { return computed_value_ && computed_value_->value == v; }

  // The computed value's element of this lane, once: e<v>_<lane>.
  std::string computed_element() const {
    std::vector<std::string> pointers;
    for (uint32_t v : computed_value_->operands) pointers.push_back(fmt::format("p{}", v));
    uint32_t v = computed_value_->value;
    return fmt::format("    const {0} e{1}_{2} = {3}({4}, i_{2});\n", storage_type(dtype(v)), v, lane_,
                       computed_value_->function, fmt::join(pointers, ", "));
  }

  // The memory the kernel reads: a computed value's operands for it.
  std::set<uint32_t> memory_reads() const {
    std::set<uint32_t> reads = space_.reads();
    if (!computed_value_) return reads;
    reads.erase(computed_value_->value);
    reads.insert(computed_value_->operands.begin(), computed_value_->operands.end());
    return reads;
  }

  const lazylab_access& access(uint32_t v) const {
    const lazylab_access* a = space_.access(v);
    if (!a) throw std::invalid_argument(fmt::format("codegen: %{} has no access", v));
    return *a;
  }

  // The elements `v` has in memory, as stored: one per row (else full).
  bool stored_per_row(uint32_t v) const { return space_.stored(v) == rows::Stored::PerRow; }

  // The vector loads, four elements in one (128 bits of f32, 64 of bf16 or
  // f16): of values read in full by the ops themselves (not only through a
  // view), the thread's four elements; in a row kernel, of a vector along
  // the row (a layernorm's weights), a group's.
  void collect_memory() {
    for (const lazylab_op* op : space_.ops()) {
      if (!rows::is_view(*op)) continue;
      const lazylab_access& a = access(op->result);
      if (row_mode_ && vec_ == 4 && a.kind == LAZYLAB_ACCESS_REPEAT && a.period == cols_ &&
          !space_.produced(a.source) && vectorized(a.source))
        repeat_vectors_.insert(a.source);
    }
    if (vec_ > 1)
      for (uint32_t v : space_.reads())
        if (const lazylab_access* a = space_.access(v);
            a && vectorized(v) && a->kind == LAZYLAB_ACCESS_FULL && !is_computed(v))
          vector_loads_.insert(v);
  }

  // Values moved four elements at a time: f32 as a float4, the 16-bit floats
  // as a uint2 of their bits; eight 16-bit floats as a uint4.
  bool vectorized(uint32_t v) const {
    uint32_t t = dtype(v);
    return t == LAZYLAB_F32 || t == LAZYLAB_BF16 || t == LAZYLAB_F16;
  }
  const char* vector_type(uint32_t v) const {
    return dtype(v) == LAZYLAB_F32 ? "float4" : vec_ == 8 ? "uint4" : "uint2";
  }

  // Whether every value an elementwise kernel moves whole a vector at a time
  // is a 16-bit float: then eight elements a thread, 128 bits a load and a
  // store, keep twice the bytes in flight of four (mlp's gelu epilogue in
  // bf16, 8192 x 4096, took 0.054 ms on an H200 against 0.058 with four).
  bool moves_16_bit_only() const {
    for (uint32_t v : space_.reads())
      if (const lazylab_access* a = space_.access(v); a && a->kind == LAZYLAB_ACCESS_FULL && dtype(v) == LAZYLAB_F32)
        return false;
    for (uint32_t v : space_.writes())
      if (space_.stored(v) == rows::Stored::Full && dtype(v) == LAZYLAB_F32) return false;
    return true;
  }

  // This lane's element of a vector `q` of v's dtype, as an f32.
  std::string lane_of(uint32_t v, const std::string& q) const {
    if (dtype(v) == LAZYLAB_F32) return fmt::format("{}.{}", q, "xyzw"[lane_]);
    return fmt::format("lazylab_lane<{}>({}, {})", storage_type(dtype(v)), q, lane_);
  }

  bool vector_store(uint32_t v) const { return vec_ > 1 && vectorized(v) && space_.stored(v) == rows::Stored::Full; }

  // Memory `source` read the way `kind` says, at this lane's element.
  std::string load(uint32_t source, uint32_t kind, int64_t period) const {
    if (is_computed(source)) {
      if (kind != LAZYLAB_ACCESS_FULL)
        throw std::invalid_argument(fmt::format("codegen: computed %{} is read other than in full", source));
      return loaded(source, fmt::format("e{}_{}", source, lane_));
    }
    std::string at;
    switch (kind) {
      case LAZYLAB_ACCESS_FULL:
        if (vector_loads_.count(source))
          return lane_of(source, fmt::format("q{}{}", source, indexed_vectors_ ? "[k]" : ""));
        at = fmt::format("i_{}", lane_);
        break;
      case LAZYLAB_ACCESS_PER_ROW: at = fmt::format("r_{}", lane_); break;
      case LAZYLAB_ACCESS_ROW_GROUP: at = group_index(fmt::format("r_{}", lane_), source, period); break;
      case LAZYLAB_ACCESS_SCALAR: at = "0"; break;
      case LAZYLAB_ACCESS_REPEAT:
        if (repeat_vectors_.count(source)) return lane_of(source, fmt::format("w{}", source));
        at = repeat_index(period);
        break;
      default: throw std::invalid_argument("codegen: a splat has no memory");
    }
    return loaded(source, fmt::format("p{}[{}]", source, at));
  }

  // An element read from memory as its register holds it: a bool's byte as
  // a bool, a 16-bit float as an f32 (explicitly: a conditional of it and a
  // float would be ambiguous).
  std::string loaded(uint32_t source, const std::string& element) const {
    if (dtype(source) == LAZYLAB_BOOL) return fmt::format("({} != 0)", element);
    if (computes_in_f32(dtype(source)) && dtype(source) != LAZYLAB_F32) return fmt::format("((float){})", element);
    return element;
  }

  // The element of `source` that row `row` reads through a ROW_GROUP access:
  // each element spans `period` rows (a per-channel value over NCHW).
  std::string group_index(const std::string& row, uint32_t source, int64_t period) const {
    return fmt::format("({} / {}LL) % {}LL", row, period, space_.elements(source));
  }

  // Element i_lane of a value repeating every `period` elements, without a
  // 64-bit remainder per element where the layout allows.
  std::string repeat_index(int64_t period) const {
    if (row_mode_ && cols_ % period == 0)  // the row's start is a multiple of the period
      return fmt::format("(int)((g * {} + {}) % {}LL)", vec_, lane_, period);
    if (row_mode_ && period % cols_ == 0)  // whole rows repeat (a [seq, seq] mask under the heads)
      return fmt::format("(row % {}LL) * {}LL + g * {} + {}", period / cols_, cols_, vec_, lane_);
    if (!row_mode_ && vec_ > 1 && period % vec_ == 0)  // the group's lanes are consecutive within one period
      return fmt::format("i_0 % {}LL + {}", period, lane_);
    return fmt::format("i_{} % {}LL", lane_, period);
  }

  // The expression for an operand: this kernel's variable, or a memory read.
  std::string operand(uint32_t v) const {
    if (space_.produced(v)) return var(v);
    const lazylab_access& a = access(v);
    return load(v, a.kind, a.period);
  }

  // The group's lanes' values of `v` as one vector (vector_type); a value
  // known per row (a row's statistic broadcast along it and stored in full)
  // is each lane's.
  std::string vector_of(uint32_t v) const {
    std::vector<std::string> lanes;
    for (int lane = 0; lane < vec_; ++lane)
      lanes.push_back(row_known_.count(v) ? fmt::format("v{}", v) : fmt::format("v{}_{}", v, lane));
    if (dtype(v) == LAZYLAB_F32) return fmt::format("make_float4({})", fmt::join(lanes, ", "));
    return fmt::format("lazylab_pack{}<{}>({})", vec_, storage_type(dtype(v)), fmt::join(lanes, ", "));
  }

  std::string var(uint32_t v) const {
    return row_known_.count(v) ? fmt::format("v{}", v) : fmt::format("v{}_{}", v, lane_);
  }

  // One op's value as an expression of its operands' (already declared).
  std::string expression(const lazylab_op& op, bool per_row) const {
    auto read = [&](uint32_t v) { return per_row ? row_operand(v) : operand(v); };
    uint32_t result_type = dtype(op.result);
    if (op.op == LAZYLAB_OP_Constant) return scalar_literal(op.attrs[0], result_type);
    if (rows::is_view(op)) {
      const lazylab_access& a = access(op.result);
      if (a.kind == LAZYLAB_ACCESS_SPLAT)  // the constant `source` holds an integer exactly
        return space_.produced(a.source) ? expression(*space_.producer(a.source), per_row)
                                         : literal(a.splat, result_type);
      if (space_.produced(a.source)) return read(a.source);
      return per_row ? row_load(a.source, a.kind, a.period) : load(a.source, a.kind, a.period);
    }
    if (op.op == LAZYLAB_OP_Select)
      return fmt::format("({} ? {} : {})", read(op.operands[0]), read(op.operands[1]), read(op.operands[2]));
    if (op.op == LAZYLAB_OP_Cast) return cast_expr(read(op.operands[0]), dtype(op.operands[0]), result_type);
    SourceMath math{dtype(op.operands[0])};
    std::string out;
    if (op.num_operands == 1 && formulas::unary(math, op.op, read(op.operands[0]), out)) return out;
    if (op.num_operands == 2 && formulas::binary(math, op.op, read(op.operands[0]), read(op.operands[1]), out))
      return out;
    throw std::invalid_argument(fmt::format("codegen: op '{}' in a row-space kernel", ops::name(op.op)));
  }

  // An op's value as its dtype holds it: rounded, unless a view moves
  // values of that dtype unchanged (a bf16 bias broadcast along the rows).
  std::string result_of(const lazylab_op& op, bool per_row) const {
    std::string value = expression(op, per_row);
    if (rows::is_view(op)) {
      const lazylab_access& a = access(op.result);
      if (a.kind != LAZYLAB_ACCESS_SPLAT && dtype(a.source) == dtype(op.result)) return value;
    }
    return rounded(dtype(op.result), value);
  }

  std::string element_op(const lazylab_op& op) {
    scope_.insert(op.result);
    return fmt::format("    const {} v{}_{} = {};\n", register_type(dtype(op.result)), op.result, lane_,
                       result_of(op, false));
  }

  std::string store_element(uint32_t v) const {
    std::string value = fmt::format("({}){}", storage_type(dtype(v)), var(v));
    if (stored_per_row(v))
      return fmt::format("    if (i_{0} % {1}LL == 0) p{2}[r_{0}] = {3};\n", lane_, cols_, v, value);
    return fmt::format("    p{}[i_{}] = {};\n", v, lane_, value);
  }

  // --- row reductions: per-row values in the row's scope, the rest in loops.

  std::string row_load(uint32_t source, uint32_t kind, int64_t period = 0) const {
    std::string at = kind == LAZYLAB_ACCESS_SCALAR      ? "0"
                     : kind == LAZYLAB_ACCESS_ROW_GROUP ? group_index("row", source, period)
                                                        : "row";
    return loaded(source, fmt::format("p{}[{}]", source, at));
  }

  std::string row_operand(uint32_t v) const {
    if (row_known_.count(v)) return fmt::format("v{}", v);
    if (space_.produced(v)) return expression(*space_.producer(v), true);  // a constant or view
    return row_load(v, access(v).kind, access(v).period);
  }

  // Declarations computing `v` at element i_0 of the row (and what it needs),
  // each once per loop body.
  std::string column_value(uint32_t v) {
    if (row_known_.count(v) || !space_.produced(v) || scope_.count(v)) return "";
    if (computed_.count(v)) {  // held from the first pass over the row
      scope_.insert(v);
      return fmt::format("      const {0} v{1}_{2} = c{1}[k][{2}];\n", register_type(dtype(v)), v, lane_);
    }
    const lazylab_op& op = *space_.producer(v);
    std::string code;
    if (rows::is_view(op)) {
      const lazylab_access& a = access(v);
      if (a.kind != LAZYLAB_ACCESS_SPLAT && space_.produced(a.source)) code += column_value(a.source);
    } else {
      for (uint32_t k = 0; k < op.num_operands; ++k) code += column_value(op.operands[k]);
    }
    scope_.insert(v);
    // A view or constant of per-row values, needed per element, reads them per row.
    return code + fmt::format("      const {} v{}_{} = {};\n", register_type(dtype(v)), v, lane_,
                              result_of(op, space_.per_row(v)));
  }

  std::string reduction(const lazylab_op& op, std::string& shared) {
    uint32_t type = dtype(op.result);
    bool integer = !is_float(type);
    const char* functor = combiner_functor(op.op);
    bool sums = ops::combiner(op.op) == LAZYLAB_OP_Add;
    // A bool max or min is held as an int: warp shuffles move no bools (a
    // reduce_min of bools did not compile; found by lazylab fuzz).
    bool boolean = type == LAZYLAB_BOOL;
    std::string acc_type = integer && sums ? "unsigned long long" : boolean ? "int" : register_type(type);
    std::string init = identity_literal(op.op, type, false);
    if (!warp_rows_) shared += fmt::format("  __shared__ {} s{}[32];\n", acc_type, op.result);
    // The first pass over the row holds value_to_hold()'s value in
    // registers for the later passes instead of computing it again in each.
    uint32_t input = op.operands[0];
    std::optional<uint32_t> hold = first_reduction_ ? held_ : std::nullopt;
    first_reduction_ = false;
    std::string lanes;
    for (int lane = 0; lane < vec_; ++lane) {
      open_lane(lane, lanes);
      lanes += column_value(input);
      if (hold) lanes += fmt::format("      c{0}[k][{1}] = v{0}_{1};\n", *hold, lane);
      lanes +=
          fmt::format("      a{1} = {0}()(a{1}, ({2}){3});\n", functor, op.result, acc_type, operand_in_loop(input));
    }
    std::string held;
    if (hold) {
      held = fmt::format("    {} c{}[{}][{}];\n", register_type(dtype(*hold)), *hold, per_thread_, vec_);
      computed_.insert(*hold);
    }
    std::string combine = warp_rows_ ? fmt::format("lazylab_warp_reduce(a{}, {}())", op.result, functor)
                                     : fmt::format("lazylab_block_reduce(a{0}, s{0}, {1}())", op.result, functor);
    std::string result = fmt::format("a{}", op.result);
    if (boolean)  // the reference's sum or mean of bools, stored as a bool: whether one is true
      result = fmt::format("a{} != 0", op.result);
    else if (op.op == LAZYLAB_OP_ReduceMean)
      result = integer ? fmt::format("(long long)a{} / {}LL", op.result, cols_)
                       : fmt::format("a{} / ({}){}", op.result, acc_type, cols_);
    row_known_.insert(op.result);
    return held + fmt::format("    {0} a{1} = {2};\n{3}    a{1} = {4};\n    const {5} v{1} = {6};\n", acc_type,
                              op.result, init, row_loop(lanes), combine, register_type(type),
                              rounded(type, fmt::format("({})({})", register_type(type), result)));
  }

  // --- what the first pass over the row holds for the later ones.

  // The values computed per element for `v` (itself, its operands, ...),
  // stopping at per-row values and memory; at `stop`'s members, which are
  // collected in `reached` instead of followed.
  void needed_for(uint32_t v, std::set<uint32_t>& seen, const std::set<uint32_t>* stop,
                  std::set<uint32_t>* reached) const {
    if (!space_.produced(v) || space_.per_row(v) || !seen.insert(v).second) return;
    if (stop && stop->count(v)) {
      reached->insert(v);
      return;
    }
    const lazylab_op& op = *space_.producer(v);
    if (rows::is_view(op)) {
      if (const lazylab_access& a = access(v); a.kind != LAZYLAB_ACCESS_SPLAT)
        needed_for(a.source, seen, stop, reached);
      return;
    }
    for (uint32_t k = 0; k < op.num_operands; ++k) needed_for(op.operands[k], seen, stop, reached);
  }

  // The arithmetic recomputing `v` would repeat: its ops among `computed`,
  // views, constants and casts free (the loads stay in registers).
  int64_t work_of(uint32_t v, const std::set<uint32_t>& computed) const {
    std::set<uint32_t> seen;
    needed_for(v, seen, nullptr, nullptr);
    return std::count_if(seen.begin(), seen.end(), [&](uint32_t u) {
      const lazylab_op& op = *space_.producer(u);
      return computed.count(u) && !rows::is_view(op) && op.op != LAZYLAB_OP_Constant && op.op != LAZYLAB_OP_Cast;
    });
  }

  // Of the values the first pass computes, the one the later passes would
  // compute again at the most cost: a softmax's scaled, masked scores,
  // which its sum and output read; its backward's probabilities (the
  // exponential over the sum), which the first pass reads only inside the
  // product it sums. One value at most: an f32 softmax of 8,192 columns
  // holding its exps as well took 0.165 ms on an H200 against 0.140
  // computing them again (the registers cost more than the exps). Nothing
  // where recomputing costs no arithmetic.
  std::optional<uint32_t> value_to_hold() const {
    std::vector<uint32_t> later;  // what the passes after the first compute
    const lazylab_op* first = nullptr;
    for (const lazylab_op* op : space_.ops())
      if (ops::is_reduction(op->op)) (first ? later.push_back(op->operands[0]) : void(first = op));
    if (!first) return std::nullopt;
    for (uint32_t v : space_.writes())
      if (!stored_per_row(v)) later.push_back(v);
    std::set<uint32_t> computed, seen, reached;
    needed_for(first->operands[0], computed, nullptr, nullptr);
    for (uint32_t v : later) needed_for(v, seen, &computed, &reached);
    std::optional<uint32_t> best;
    int64_t most = 0;
    for (uint32_t v : reached)
      if (int64_t work = work_of(v, computed); work > most) best = v, most = work;
    return best;
  }

  std::string operand_in_loop(uint32_t v) const {
    if (row_known_.count(v)) return fmt::format("v{}", v);
    if (space_.produced(v)) return fmt::format("v{}_{}", v, lane_);
    const lazylab_access& a = access(v);
    return load(v, a.kind, a.period);
  }

  const lazylab_program& program_;
  rows::RowSpace space_;
  int64_t rows_, cols_;
  const ComputedValue* computed_value_;  // or null
  std::set<uint32_t> vector_loads_;
  std::set<uint32_t> scope_;      // declared in the current loop body or lane
  std::set<uint32_t> row_known_;  // declared once for the row
  std::set<uint32_t> computed_;   // computed in an earlier pass over the row, held in c<v>[k][lane]
  bool first_reduction_ = true;
  std::optional<uint32_t> held_;  // value_to_hold()'s
  int vec_ = 1;
  int lane_ = 0;
  // Row reductions: a warp per row (else a block), block_ threads, each
  // holding per_thread_ groups of the row in registers when cached_.
  bool row_mode_ = false, warp_rows_ = false, cached_ = false, indexed_vectors_ = false;
  std::set<uint32_t> repeat_vectors_;
  int64_t block_ = 256, per_thread_ = 1;
};

}  // namespace

std::string elementwise_function(const lazylab_program& program, rows::RowSpace space, const std::string& name,
                                 Launch& launch, bool from_the_end, const ComputedValue* computed) {
  return RowSpaceSource(program, std::move(space), computed).elementwise(name, launch, from_the_end);
}

std::string row_reduction_function(const lazylab_program& program, rows::RowSpace space, const std::string& name,
                                   Launch& launch, int block_threads) {
  return RowSpaceSource(program, std::move(space)).row_reduction(name, launch, block_threads);
}

}  // namespace lazylab::cuda
