// The row-space lowering every backend renders (lazylab/row_space.hpp):
// what a softmax kernel reads, writes, keeps per row and frees when.
#include "lazylab/row_space.hpp"

#include "core/pass_manager.h"
#include "core/program_view.h"
#include "support.h"

using namespace lazylab;
using namespace lazylab::testing;

namespace {

struct Lowered {
  Module module;
  std::unique_ptr<ProgramView> view;
  const lazylab_kernel& only_kernel() const {
    REQUIRE(view->get().num_kernels == 1);
    return view->get().kernels[0];
  }
};

Lowered lowered(Context& ctx, const std::string& text) {
  Lowered out;
  out.module.graph = ctx.capture();
  REQUIRE(run_pipeline(pipeline(text), out.module).ok());
  out.view = std::make_unique<ProgramView>(*out.module.program, out.module.graph);
  return out;
}

rows::RowSpace row_space(const Lowered& lowered) {
  const lazylab_program& program = lowered.view->get();
  auto facts = [&](uint32_t v) { return rows::facts_of(program.values[v]); };
  const lazylab_kernel& kernel = lowered.only_kernel();
  return rows::RowSpace(kernel, rows::RowSpace::all_ops(kernel), facts);
}

// The op of `kind` in the row space (the first).
const lazylab_op& op_of(const rows::RowSpace& space, uint32_t kind) {
  for (const lazylab_op* op : space.ops())
    if (op->op == kind) return *op;
  FAIL("no such op");
  throw;
}

int64_t index_of(const rows::RowSpace& space, const lazylab_op& op) {
  const auto& ops = space.ops();
  return std::find(ops.begin(), ops.end(), &op) - ops.begin();
}

}  // namespace

TEST_CASE("a softmax's row space: one read, one write in full, its statistics per row") {
  Context ctx;
  std::vector<float> data(32);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 7);
  Tensor y = softmax(ctx.from_vector<float>(data, {4, 8}));
  Lowered program = lowered(ctx, "decompose,canonicalize,cse,dce,fuse{strategy=producer-consumer},lower,plan-memory");
  REQUIRE(program.only_kernel().kind == LAZYLAB_KERNEL_ROW_REDUCTION);
  rows::RowSpace space = row_space(program);
  CHECK(space.rows() == 4);
  CHECK(space.cols() == 8);
  CHECK(space.reduces());
  const lazylab_op& max = op_of(space, LAZYLAB_OP_ReduceMax);
  const lazylab_op& exp = op_of(space, LAZYLAB_OP_Exp);
  const lazylab_op& div = op_of(space, LAZYLAB_OP_Div);
  uint32_t x = max.operands[0];
  CHECK(space.reads() == std::set<uint32_t>{x});
  CHECK(space.writes() == std::set<uint32_t>{div.result});
  CHECK_FALSE(space.produced(x));
  CHECK(space.producer(exp.result) == &exp);
  CHECK(space.per_row(max.result));
  CHECK_FALSE(space.per_row(exp.result));
  CHECK(space.stored(div.result) == rows::Stored::Full);
  CHECK(space.stored(max.result) == rows::Stored::PerRow);
  // x is read last by the subtraction after the max, the exps by the
  // division after their sum; nothing reads the result.
  const lazylab_op& sub = op_of(space, LAZYLAB_OP_Sub);
  CHECK(space.last_read(x) == index_of(space, sub));
  CHECK(space.last_read(exp.result) == index_of(space, div));
  CHECK(space.last_read(div.result) == -1);
}

TEST_CASE("a row sum that leaves is stored one element a row; a constant's view reads no memory") {
  Context ctx;
  Tensor x = ctx.from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor s = sum(x * 2.0, {1});
  Lowered program = lowered(ctx, "canonicalize,fuse{strategy=producer-consumer},lower,plan-memory");
  rows::RowSpace space = row_space(program);
  const lazylab_op& total = op_of(space, LAZYLAB_OP_ReduceSum);
  CHECK(space.leaves(total.result));
  CHECK(space.stored(total.result) == rows::Stored::PerRow);
  CHECK(space.reads().size() == 1);  // x: the 2.0 is a splat
  const lazylab_op& mul = op_of(space, LAZYLAB_OP_Mul);
  REQUIRE((space.produced(mul.operands[0]) || space.produced(mul.operands[1])));  // the 2.0, made here
  for (uint32_t k = 0; k < 2; ++k)
    if (space.produced(mul.operands[k])) CHECK(space.per_row(mul.operands[k]));
}
