// The verifier rejects what passes or hand-built graphs can get wrong.
#include "core/verifier.h"
#include "support.h"

using namespace lazylab;

namespace {

Attrs ordinal(int64_t i) {
  Attrs attrs;
  attrs[0].i = i;
  return attrs;
}

const TensorType kF32x4{DType::F32, {4}};

std::string verify_error(const Graph& graph) {
  Status status = verify(graph);
  REQUIRE_FALSE(status.ok());
  return status.error().message;
}

}  // namespace

TEST_CASE("a well-formed graph verifies") {
  Graph g;
  NodeId x = g.add(OpId::Parameter, kF32x4, {}, ordinal(0));
  g.add_root(g.add(OpId::Exp, kF32x4, {x}));
  CHECK(verify(g).ok());
}

TEST_CASE("operands must precede their user (no cycles)") {
  Graph g;
  g.add(OpId::Parameter, kF32x4, {}, ordinal(0));
  NodeId y = g.add(OpId::Exp, kF32x4, {2});  // refers forward
  g.add(OpId::Exp, kF32x4, {y});
  g.add_root(y);
  CHECK(verify_error(g) == "verifier: %1 = exp(%2) : f32[4]: operand %2 does not precede it");
}

TEST_CASE("wrong result types are caught") {
  Graph g;
  NodeId x = g.add(OpId::Parameter, kF32x4, {}, ordinal(0));
  g.add_root(g.add(OpId::Exp, TensorType{DType::F32, {5}}, {x}));
  CHECK(verify_error(g) == "verifier: %1 = exp(%0) : f32[5]: exp: declared type f32[5] but operands give f32[4]");
}

TEST_CASE("attribute ranges are checked") {
  Graph g;
  NodeId x = g.add(OpId::Parameter, kF32x4, {}, ordinal(0));
  Attrs attrs;
  attrs[0].ints = {3};
  g.add_root(g.add(OpId::ReduceSum, TensorType{DType::F32, {}}, {x}, attrs));
  CHECK(verify_error(g).find("axis 3 out of range for rank 1") != std::string::npos);
  Graph t;
  NodeId m = t.add(OpId::Parameter, TensorType{DType::F32, {2, 3}}, {}, ordinal(0));
  Attrs perm;
  perm[0].ints = {0, 0};
  t.add_root(t.add(OpId::Transpose, TensorType{DType::F32, {2, 2}}, {m}, perm));
  CHECK(verify_error(t).find("perm is not a permutation") != std::string::npos);
}

TEST_CASE("parameter ordinals must be dense and unique") {
  Graph g;
  NodeId a = g.add(OpId::Parameter, kF32x4, {}, ordinal(0));
  NodeId b = g.add(OpId::Parameter, kF32x4, {}, ordinal(2));
  g.add_root(g.add(OpId::Add, kF32x4, {a, b}));
  CHECK(verify_error(g).find("parameter ordinals must be 0..1") != std::string::npos);
}

TEST_CASE("a graph needs roots that exist") {
  Graph g;
  g.add(OpId::Parameter, kF32x4, {}, ordinal(0));
  CHECK(verify_error(g) == "verifier: graph has no roots");
  g.add_root(7);
  CHECK(verify_error(g) == "verifier: root %7 does not exist");
}
