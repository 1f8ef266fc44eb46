// Recompilation diagnosis: each cache miss after the first names what
// differs from the nearest cached graph, with a hint.
#include "core/recompile_diagnosis.h"
#include "support.h"

using namespace lazylab;
using namespace lazylab::testing;

namespace {

const std::vector<std::string>& diagnoses(Session& s) { return s.ctx.metrics().recompile_diagnoses; }

}  // namespace

TEST_CASE("a constant that changes every step is named with both values") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({1, 2, 3, 4}, {4});
  for (double decay : {0.99, 0.98, 0.97}) {
    Tensor y = x * decay + 1.0;
    REQUIRE(s.ctx.sync().ok());
  }
  REQUIRE(diagnoses(s).size() == 2);
  CHECK(diagnoses(s)[0] ==
        "constant at %1 changes: 0.99 -> 0.98; make it a dynamic scalar (a parameter) instead of a constant");
  CHECK(diagnoses(s)[1].starts_with("constant at %1 changes: 0.98 -> 0.97"));
}

TEST_CASE("a dynamic scalar does not recompile") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({1, 2, 3, 4}, {4});
  for (double decay : {0.99, 0.98, 0.97}) {
    Tensor y = x * s.ctx.dynamic_scalar(decay);
    REQUIRE(s.ctx.sync().ok());
  }
  CHECK(diagnoses(s).empty());
  CHECK(s.ctx.metrics().cache_misses == 1);
}

TEST_CASE("a parameter's new shape is named by ordinal, not by its consequences") {
  Session s;
  for (int64_t n : {4, 8}) {
    Tensor x = s.ctx.from_vector<float>(std::vector<float>(n, 1.0f), {n});
    Tensor y = exp(x) + 1.0;
    REQUIRE(s.ctx.sync().ok());
  }
  REQUIRE(diagnoses(s).size() == 1);
  CHECK(diagnoses(s)[0] == "parameter 0 (%0) changes type: f32[4] -> f32[8]; pad or bucket the inputs to a few shapes");
}

TEST_CASE("a structural change names the first differing node as .lzir") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({1, 2, 3, 4}, {4});
  Tensor a = exp(x);
  REQUIRE(s.ctx.sync().ok());
  Tensor b = tanh(x);
  REQUIRE(s.ctx.sync().ok());
  REQUIRE(diagnoses(s).size() == 1);
  CHECK(
      diagnoses(s)[0].starts_with("the structure differs from the cached graph at %1: it was `%1 = exp(%0) : f32[4]`, "
                                  "now `%1 = tanh(%0) : f32[4]`"));
}

TEST_CASE("the nearest cached graph is the one named") {
  Session s;
  Tensor x = s.ctx.from_vector<float>({1, 2, 3, 4}, {4});
  Tensor a = exp(x);  // far: another structure
  REQUIRE(s.ctx.sync().ok());
  Tensor b = x * 2.0;  // near: the same but one constant
  REQUIRE(s.ctx.sync().ok());
  Tensor c = x * 3.0;
  REQUIRE(s.ctx.sync().ok());
  check_close(values(c), {3, 6, 9, 12});
  REQUIRE(diagnoses(s).size() == 2);
  CHECK(diagnoses(s)[1].starts_with("constant at %1 changes: 2 -> 3"));
}
