#include <fmt/format.h>

#include <iostream>

#include "options.h"
#include "runner/compare.h"

namespace lazylab::cli {

int compare_command(const Args& args) {
  po::options_description options("lazylab compare options");
  std::string old_path, new_path;
  double threshold = 0.05;
  uint64_t seed = 0;
  options.add_options()("old", po::value(&old_path)->required(), "the earlier report (JSON)")(
      "new", po::value(&new_path)->required(), "the later report (JSON)")(
      "threshold", po::value(&threshold)->default_value(0.05),
      "changes smaller than this share (0.05: 5%) count as no significant change")(
      "seed", po::value(&seed)->default_value(0), "seed of the bootstrap resampling");
  po::positional_options_description positional;
  positional.add("old", 1).add("new", 1);
  po::variables_map vm;
  if (auto exit = parse_args(args,
                             "usage: lazylab compare OLD.json NEW.json [--threshold 0.05]\n"
                             "exit status: 0 no significant regression, 5 a cell is significantly slower or fails "
                             "now, 1 error",
                             options, positional, vm))
    return *exit;
  if (!(threshold >= 0) || threshold > 10) {
    std::cerr << fmt::format("lazylab: --threshold must be between 0 and 10, got {}\n", threshold);
    return kExitUsage;
  }
  auto old_run = load_report(old_path);
  auto new_run = load_report(new_path);
  for (auto* loaded : {&old_run, &new_run})
    if (!*loaded) {
      std::cerr << "lazylab: " << loaded->error().message << "\n";
      return kExitError;
    }
  Comparison comparison = compare_reports(*old_run, *new_run, threshold, seed);
  std::cout << comparison_text(comparison, old_path, new_path, threshold);
  if (comparison.regressed()) {
    std::cerr << fmt::format("lazylab: {} cells slower, {} fail now\n", comparison.count(Change::Slower),
                             comparison.count(Change::FailedNow));
    return kExitRegression;
  }
  return kExitOk;
}

}  // namespace lazylab::cli
