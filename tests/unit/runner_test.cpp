// The runner's comparisons: a speedup compares cells that differ only in
// pipeline, never cells of another size or another backend option set.
#include "runner/runner.h"
#include "support.h"

#include <random>

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
  CHECK(cells[0].speedup.value == 1.0);
  CHECK(cells[1].speedup.value == 1.0);
}

TEST_CASE("one backend listed with two option sets gives two separate baselines") {
  // Matching by backend name alone reported 38.58x here.
  std::vector<CellResult> cells = {cell("chain", {{"n", 1024}}, "eager", "cpu", "threads=1", 3.858),
                                   cell("chain", {{"n", 1024}}, "fused", "cpu", "threads=1", 1.0),
                                   cell("chain", {{"n", 1024}}, "eager", "cpu", "threads=2", 0.1),
                                   cell("chain", {{"n", 1024}}, "fused", "cpu", "threads=2", 0.05)};
  compute_speedups(cells, "eager");
  CHECK(cells[0].speedup.value == 1.0);
  CHECK(cells[1].speedup.value == doctest::Approx(3.858));
  CHECK(cells[2].speedup.value == 1.0);
  CHECK(cells[3].speedup.value == doctest::Approx(2.0));
}

TEST_CASE("a cell without a baseline cell has no speedup") {
  std::vector<CellResult> cells = {cell("chain", {{"n", 8}}, "fused", "cpu", "", 1.0),
                                   cell("chain", {{"n", 16}}, "eager", "cpu", "", 1.0)};
  compute_speedups(cells, "eager");
  CHECK(cells[0].speedup.value == 0.0);
  CHECK(cells[1].speedup.value == 1.0);
}

namespace {

// `n` samples around `center`, spread +-`jitter` (deterministic).
std::vector<double> samples_around(double center, double jitter, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> noise(-jitter, jitter);
  std::vector<double> samples(n);
  for (double& s : samples) s = center + noise(rng);
  return samples;
}

CellResult sampled_cell(std::string pipeline, std::vector<double> samples) {
  CellResult c = cell("softmax", {{"rows", 8}}, std::move(pipeline), "cpu", "", 0);
  c.step_samples_ms = std::move(samples);
  c.step_ms = spread_of(c.step_samples_ms);
  return c;
}

}  // namespace

TEST_CASE("the bootstrap interval holds the median and narrows with quieter samples") {
  Estimate noisy = bootstrap_median(samples_around(1.0, 0.5, 30, 1), 7);
  Estimate quiet = bootstrap_median(samples_around(1.0, 0.01, 30, 1), 7);
  CHECK(noisy.low <= noisy.value);
  CHECK(noisy.value <= noisy.high);
  CHECK(quiet.relative_width() < noisy.relative_width() / 10);
  CHECK(quiet.value == doctest::Approx(1.0).epsilon(0.01));
  // Seeded: the same samples give the same interval.
  Estimate again = bootstrap_median(samples_around(1.0, 0.5, 30, 1), 7);
  CHECK(again.low == noisy.low);
  CHECK(again.high == noisy.high);
}

TEST_CASE("a real 2x difference is significant; two draws of the same distribution are not") {
  std::vector<CellResult> cells = {sampled_cell("eager", samples_around(2.0, 0.1, 30, 1)),
                                   sampled_cell("fused", samples_around(1.0, 0.05, 30, 2)),
                                   sampled_cell("same", samples_around(2.0, 0.1, 30, 3))};
  compute_speedups(cells, "eager", 11);
  CHECK(cells[0].speedup.value == 1.0);
  CHECK(cells[1].speedup.value == doctest::Approx(2.0).epsilon(0.05));
  CHECK(cells[1].speedup.low > 1.0);
  CHECK(cells[1].speedup_verdict == Verdict::Higher);
  CHECK(cells[2].speedup.contains(1.0));
  CHECK(cells[2].speedup_verdict == Verdict::NoSignificantDifference);
}

TEST_CASE("a wide spread marks a cell noisy; a tight one does not") {
  CellResult wide = sampled_cell("eager", samples_around(1.0, 0.6, 15, 4));
  CellResult tight = sampled_cell("eager", samples_around(1.0, 0.01, 15, 4));
  summarize_samples(wide, 1);
  summarize_samples(tight, 1);
  CHECK(wide.noisy);
  CHECK_FALSE(tight.noisy);
}

TEST_CASE("failed cells neither get nor give a speedup") {
  std::vector<CellResult> cells = {cell("chain", {{"n", 8}}, "eager", "cpu", "", 2.0),
                                   cell("chain", {{"n", 8}}, "fused", "cpu", "", 1.0)};
  cells[0].status = CellStatus::Failed;
  compute_speedups(cells, "eager");
  CHECK(cells[0].speedup.value == 0.0);
  CHECK(cells[1].speedup.value == 0.0);
}

TEST_CASE("a cell that recompiles on most steps is warned about, with the first diagnosis") {
  CellResult c = cell("chain", {{"n", 8}}, "eager", "cpu", "", 1.0);
  c.metrics.cache_misses = 13;
  c.metrics.recompile_diagnoses = {"constant at %3 changes: 0.99 -> 0.98; make it a dynamic scalar"};
  CHECK(recompile_warning(c, 13) ==
        "recompiled 12 times in 13 steps: constant at %3 changes: 0.99 -> 0.98; make it a dynamic scalar");
  c.metrics.cache_misses = 2;
  CHECK(recompile_warning(c, 13).empty());  // once is a shape seen once, not a pattern
  c.metrics.cache_misses = 1;
  CHECK(recompile_warning(c, 13).empty());
}
