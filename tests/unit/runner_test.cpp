// The runner's comparisons: a speedup compares cells that differ only in
// pipeline, never cells of another size or another backend option set.
#include "runner/runner.h"
#include "support.h"

using namespace lazylab;

namespace {

CellResult cell(std::string workload, WorkloadParams params, std::string pipeline, std::string backend,
                std::string options, double median_ms) {
  CellResult c;
  c.workload = std::move(workload);
  c.workload_params = std::move(params);
  c.pipeline = std::move(pipeline);
  c.backend = std::move(backend);
  c.backend_options = std::move(options);
  c.step_ms.median = median_ms;
  return c;
}

}  // namespace

TEST_CASE("a size sweep with one pipeline has no speedup over itself") {
  // Matching by workload name alone reported 26.99x here.
  std::vector<CellResult> cells = {cell("softmax", {{"rows", 64}, {"cols", 128}}, "fused", "cpu", "", 0.1),
                                   cell("softmax", {{"rows", 4096}, {"cols", 128}}, "fused", "cpu", "", 2.7)};
  compute_speedups(cells, "fused");
  CHECK(cells[0].speedup_vs_baseline == 1.0);
  CHECK(cells[1].speedup_vs_baseline == 1.0);
}

TEST_CASE("one backend listed with two option sets gives two separate baselines") {
  // Matching by backend name alone reported 38.58x here.
  std::vector<CellResult> cells = {cell("chain", {{"n", 1024}}, "eager", "cpu", "threads=1", 3.858),
                                   cell("chain", {{"n", 1024}}, "fused", "cpu", "threads=1", 1.0),
                                   cell("chain", {{"n", 1024}}, "eager", "cpu", "threads=2", 0.1),
                                   cell("chain", {{"n", 1024}}, "fused", "cpu", "threads=2", 0.05)};
  compute_speedups(cells, "eager");
  CHECK(cells[0].speedup_vs_baseline == 1.0);
  CHECK(cells[1].speedup_vs_baseline == doctest::Approx(3.858));
  CHECK(cells[2].speedup_vs_baseline == 1.0);
  CHECK(cells[3].speedup_vs_baseline == doctest::Approx(2.0));
}

TEST_CASE("a cell without a baseline cell has no speedup") {
  std::vector<CellResult> cells = {cell("chain", {{"n", 8}}, "fused", "cpu", "", 1.0),
                                   cell("chain", {{"n", 16}}, "eager", "cpu", "", 1.0)};
  compute_speedups(cells, "eager");
  CHECK(cells[0].speedup_vs_baseline == 0.0);
  CHECK(cells[1].speedup_vs_baseline == 1.0);
}
