// lazylab compare's verdicts on synthetic samples: a known slowdown, no
// difference, a difference under the threshold, cells that fail now.
#include <random>

#include "runner/compare.h"
#include "support.h"

using namespace lazylab;

namespace {

CellResult timed_cell(std::string pipeline, double center, double jitter, uint64_t seed) {
  CellResult c;
  c.workload = c.workload_shown = "softmax";
  c.backend = c.backend_shown = "cpu";
  c.pipeline = std::move(pipeline);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> noise(-jitter, jitter);
  for (int i = 0; i < 30; ++i) c.step_samples_ms.push_back(center + noise(rng));
  c.step_ms = spread_of(c.step_samples_ms);
  return c;
}

LoadedReport report_of(std::vector<CellResult> cells) {
  LoadedReport report;
  report.cells = std::move(cells);
  return report;
}

}  // namespace

TEST_CASE("a 30% slowdown is a regression; the same distribution again is not") {
  LoadedReport old_run = report_of({timed_cell("a", 1.0, 0.05, 1), timed_cell("b", 1.0, 0.05, 2)});
  LoadedReport new_run = report_of({timed_cell("a", 1.3, 0.05, 3), timed_cell("b", 1.0, 0.05, 4)});
  Comparison c = compare_reports(old_run, new_run, 0.05, 0);
  REQUIRE(c.cells.size() == 2);
  CHECK(c.cells[0].change == Change::Slower);
  CHECK(c.cells[0].ratio.value == doctest::Approx(1.3).epsilon(0.05));
  CHECK(c.cells[0].ratio.low > 1.0);
  CHECK(c.cells[1].change == Change::NoSignificantChange);
  CHECK(c.cells[1].ratio.contains(1.0));
  CHECK(c.regressed());
}

TEST_CASE("a faster cell is no regression; a significant change under the threshold is no change") {
  LoadedReport old_run = report_of({timed_cell("a", 2.0, 0.01, 1), timed_cell("b", 1.0, 0.001, 2)});
  LoadedReport new_run = report_of({timed_cell("a", 1.0, 0.01, 3), timed_cell("b", 1.02, 0.001, 4)});
  Comparison c = compare_reports(old_run, new_run, 0.05, 0);
  CHECK(c.cells[0].change == Change::Faster);
  CHECK(c.cells[1].ratio.low > 1.0);                        // significant...
  CHECK(c.cells[1].change == Change::NoSignificantChange);  // ...but under 5%
  CHECK_FALSE(c.regressed());
  CHECK(compare_reports(old_run, new_run, 0.01, 0).cells[1].change == Change::Slower);
}

TEST_CASE("cells that fail now, run now, or exist on one side only") {
  CellResult failing = timed_cell("a", 1.0, 0.05, 1);
  failing.status = CellStatus::Failed;
  failing.error = "compile error";
  LoadedReport old_run = report_of({timed_cell("a", 1.0, 0.05, 1), timed_cell("gone", 1.0, 0.05, 1)});
  LoadedReport new_run = report_of({failing, timed_cell("added", 1.0, 0.05, 1)});
  Comparison c = compare_reports(old_run, new_run, 0.05, 0);
  CHECK(c.count(Change::FailedNow) == 1);
  CHECK(c.count(Change::OnlyNew) == 1);
  CHECK(c.count(Change::OnlyOld) == 1);
  CHECK(c.regressed());
  Comparison back = compare_reports(new_run, old_run, 0.05, 0);
  CHECK(back.count(Change::FixedNow) == 1);
}
