#include <fmt/format.h>

#include <iostream>
#include <sstream>

#include "fuzz/fuzzer.h"
#include "options.h"

namespace lazylab::cli {

int fuzz_command(const Args& args) {
  po::options_description options("lazylab fuzz options");
  FuzzOptions fuzz;
  std::string backends = "interp,cpu";
  options.add_options()("graphs,n", po::value(&fuzz.graphs)->default_value(2000), "random graphs to generate")(
      "seed", po::value(&fuzz.seed)->default_value(1), "seed of the first graph (the run is deterministic)")(
      "seconds", po::value(&fuzz.seconds)->default_value(0), "stop after this many seconds (0: no limit)")(
      "backends", po::value(&backends)->default_value("interp,cpu"), "backends to check, comma-separated")(
      "output-dir,o", po::value(&fuzz.out_dir),
      "write each failure here, reduced, as .lzir with an experiment that reproduces it")(
      "quiet,q", "print failures and the summary only")(
      "no-grad", "skip the gradient check (each graph made f64 and differentiated, against central differences)");
  po::variables_map vm;
  if (auto exit = parse_args(args,
                             "usage: lazylab fuzz [--graphs N] [--seed S] [--backends a,b] [-o DIR] [--no-grad]\n"
                             "exit status: 0 no failure, 6 a failure was found, 1 error",
                             options, {}, vm))
    return *exit;
  if (fuzz.graphs < 1 || fuzz.graphs > 100'000'000) {
    std::cerr << fmt::format("lazylab: --graphs must be between 1 and 100000000, got {}\n", fuzz.graphs);
    return kExitUsage;
  }
  fuzz.quiet = vm.count("quiet") > 0;
  fuzz.gradients = vm.count("no-grad") == 0;
  fuzz.backends.clear();
  std::stringstream list(backends);
  for (std::string name; std::getline(list, name, ',');)
    if (!name.empty()) fuzz.backends.push_back(name);
  auto report = run_fuzz(fuzz, &std::cerr);
  if (!report) {
    std::cerr << "lazylab: " << report.error().message << "\n";
    return kExitError;
  }
  std::cout << fmt::format("fuzz: {} graphs ({} refused by the reference), {} checks, {} failures in {:.1f} s",
                           report->graphs, report->rejected, report->checks, report->failures.size(), report->seconds);
  if (fuzz.gradients)
    std::cout << fmt::format("; {} differentiated, {} gradient elements against central differences",
                             report->differentiated, report->gradient_elements);
  std::cout << "\n";
  return report->failures.empty() ? kExitOk : kExitFuzzFailure;
}

}  // namespace lazylab::cli
