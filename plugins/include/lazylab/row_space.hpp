// A row-space kernel lowered once for every backend that renders it: an
// elementwise kernel, a row reduction, or the epilogue of a contraction or
// a convolution, over the [rows, cols] of the kernel's description. For the
// values its ops touch it says what makes each (an op here, or memory read
// through its access), whether a value is the same along a row, what is
// read from memory and what is written there (and whether in full or one
// element a row), and where each value is last read. The cpu backend's
// loops and the cuda backend's generated source render it, as tinygrad's
// renderers render one linearised program: neither works these out again,
// and a new backend starts from them. Header-only, C++17 and later.
#ifndef LAZYLAB_ROW_SPACE_HPP
#define LAZYLAB_ROW_SPACE_HPP

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "lazylab/backend_abi.h"
#include "lazylab/op_table.hpp"

namespace lazylab::rows {

// How a value is laid out in memory when it leaves the kernel.
enum class Stored : uint8_t {
  Full,    // rows * cols elements, row-major
  PerRow,  // one element a row
  Neither  // another element count: no row-space loop stores it
};

// A broadcast or a reshape: inside a row-space kernel a view of its source,
// indexed as its access says, never computed.
inline bool is_view(const lazylab_op& op) { return op.op == LAZYLAB_OP_Broadcast || op.op == LAZYLAB_OP_Reshape; }

// What the lowering needs of a value: where the Program keeps it (a
// lazylab_value_kind), its dtype and its element count. A backend may see a
// value differently from the Program (the cpu gives a kernel-local product
// memory), so it says.
struct ValueFacts {
  uint32_t kind = LAZYLAB_VALUE_KERNEL_LOCAL;
  uint32_t dtype = LAZYLAB_F32;
  int64_t elements = 0;
};

// A value of the Program as it stands.
inline ValueFacts facts_of(const lazylab_value& value) {
  int64_t n = 1;
  for (uint32_t d = 0; d < value.rank; ++d) n *= value.shape[d];
  return {value.kind, value.dtype, n};
}

class RowSpace {
 public:
  // `ops`: the kernel's ops in order, or the part of them a backend renders
  // as an epilogue (the description's accesses still index them);
  // `facts(v)`: value v's ValueFacts. A value leaves the kernel where it has
  // memory (the arena or an output). The RowSpace points into `kernel`'s
  // accesses and at `ops`: they must outlive it.
  template <class Facts>
  RowSpace(const lazylab_kernel& kernel, std::vector<const lazylab_op*> ops, const Facts& facts)
      : rows_(kernel.rows), cols_(kernel.cols), ops_(std::move(ops)) {
    for (uint32_t i = 0; i < kernel.num_accesses; ++i) accesses_[kernel.accesses[i].value] = &kernel.accesses[i];
    for (size_t i = 0; i < ops_.size(); ++i) {
      const lazylab_op& op = *ops_[i];
      note_reads(op, static_cast<int64_t>(i));
      producers_[op.result] = &op;
      for (uint32_t k = 0; k < op.num_operands; ++k) facts_[op.operands[k]] = facts(op.operands[k]);
      if (const lazylab_access* a = access(op.result)) facts_[a->source] = facts(a->source);
      ValueFacts result = facts(op.result);
      facts_[op.result] = result;
      if (result.kind == LAZYLAB_VALUE_ARENA || result.kind == LAZYLAB_VALUE_OUTPUT) writes_.insert(op.result);
    }
    extend_reads_through_reshapes();
  }

  // The kernel's ops in order: all that its description covers.
  static std::vector<const lazylab_op*> all_ops(const lazylab_kernel& kernel) {
    std::vector<const lazylab_op*> ops;
    for (uint32_t i = 0; i < kernel.num_ops; ++i) ops.push_back(&kernel.ops[i]);
    return ops;
  }

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  const std::vector<const lazylab_op*>& ops() const { return ops_; }
  // Of a value the ops read, make or view.
  uint32_t dtype(uint32_t v) const { return facts_.at(v).dtype; }
  int64_t elements(uint32_t v) const { return facts_.at(v).elements; }

  // Whether an op reduces the last axis: every row is then one unit of work.
  bool reduces() const {
    for (const lazylab_op* op : ops_)
      if (ops::is_reduction(op->op)) return true;
    return false;
  }

  // The op making `v` here; nullptr where `v` is read from memory.
  const lazylab_op* producer(uint32_t v) const {
    auto it = producers_.find(v);
    return it == producers_.end() ? nullptr : it->second;
  }
  bool produced(uint32_t v) const { return producers_.count(v) != 0; }

  // How `v` is indexed (a view: how it reads its source); nullptr where the
  // description records nothing for it.
  const lazylab_access* access(uint32_t v) const {
    auto it = accesses_.find(v);
    return it == accesses_.end() ? nullptr : it->second;
  }

  // Whether `v` is one value for a whole row (a splat, a scalar, a value
  // per row or per group of rows, or a view of one): computed once a row.
  bool per_row(uint32_t v) const {
    const lazylab_access* a = access(v);
    if (!a) return false;
    switch (a->kind) {
      case LAZYLAB_ACCESS_SPLAT:
      case LAZYLAB_ACCESS_SCALAR:
      case LAZYLAB_ACCESS_ROW_GROUP: return true;
      case LAZYLAB_ACCESS_PER_ROW: return a->source == v || !produced(a->source) || per_row(a->source);
      default: return false;
    }
  }

  // Values read from memory (an op's operand not made here, a view's
  // source), by id.
  const std::set<uint32_t>& reads() const { return reads_; }
  // Results written to memory, by id.
  const std::set<uint32_t>& writes() const { return writes_; }
  bool leaves(uint32_t v) const { return writes_.count(v) != 0; }

  // How `v` lies in memory: all of the row space, or one element a row.
  Stored stored(uint32_t v) const {
    int64_t n = elements(v);
    return n == rows_ * cols_ ? Stored::Full : n == rows_ ? Stored::PerRow : Stored::Neither;
  }

  // The index in ops() of the last op reading `v`, or -1; a reshape is a
  // view of its operand's storage, which lives as long as the view is read.
  int64_t last_read(uint32_t v) const {
    auto it = last_reads_.find(v);
    return it == last_reads_.end() ? -1 : it->second;
  }
  // Every value read, with last_read's index.
  const std::map<uint32_t, int64_t>& last_reads() const { return last_reads_; }

 private:
  void note_reads(const lazylab_op& op, int64_t index) {
    for (uint32_t k = 0; k < op.num_operands; ++k) last_reads_[op.operands[k]] = index;
    if (is_view(op)) {
      const lazylab_access* a = access(op.result);
      if (a && a->kind != LAZYLAB_ACCESS_SPLAT && !produced(a->source)) reads_.insert(a->source);
      return;
    }
    for (uint32_t k = 0; k < op.num_operands; ++k)
      if (!produced(op.operands[k])) reads_.insert(op.operands[k]);
  }

  void extend_reads_through_reshapes() {
    for (size_t i = ops_.size(); i-- > 0;) {
      const lazylab_op& op = *ops_[i];
      auto view = last_reads_.find(op.result);
      if (op.op != LAZYLAB_OP_Reshape || view == last_reads_.end()) continue;
      int64_t& source = last_reads_[op.operands[0]];
      if (view->second > source) source = view->second;
    }
  }

  int64_t rows_, cols_;
  std::vector<const lazylab_op*> ops_;
  std::map<uint32_t, ValueFacts> facts_;
  std::map<uint32_t, const lazylab_access*> accesses_;
  std::map<uint32_t, const lazylab_op*> producers_;
  std::set<uint32_t> reads_, writes_;
  std::map<uint32_t, int64_t> last_reads_;
};

}  // namespace lazylab::rows

#endif
