// `lazylab fuzz`: random graphs (graph_generator.h) through every pipeline
// on every backend, each checked against the interpreter running the graph
// as written, and the interpreter itself against an independent evaluator in
// long double (precise_evaluator.h), and grad's gradient of the graph made
// f64 against central differences (gradient_check.h); a mismatch or an
// error the reference does not share is reduced
// (delta debugging over nodes) to a small .lzir with an experiment that
// reproduces it through `lazylab run`.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "core/expected.h"
#include "core/graph.h"

namespace lazylab {

struct FuzzOptions {
  uint64_t seed = 1;
  int64_t graphs = 2000;
  double seconds = 0;  // stop after this long (0: no limit)
  std::vector<std::string> backends = {"interp", "cpu"};
  // name -> pipeline text; empty: "decompose,lower" and one per fusion strategy.
  std::vector<std::pair<std::string, std::string>> pipelines;
  double rtol = 1e-3, atol = 1e-4;
  std::string out_dir;    // where reduced failures go ("": nowhere)
  bool quiet = false;     // failures only, no periodic counts
  bool gradients = true;  // each graph's gradient against central differences
};

struct FuzzFailure {
  uint64_t graph_seed = 0;
  std::string pipeline, pipeline_text, backend, problem;
  size_t nodes = 0, reduced_nodes = 0;
  std::string lzir_path, experiment_path;  // written into out_dir
};

struct FuzzReport {
  int64_t graphs = 0;             // generated
  int64_t checks = 0;             // graph x pipeline x backend runs compared, and interp x precise
  int64_t rejected = 0;           // graphs the reference itself refused (not failures)
  int64_t differentiated = 0;     // graphs whose gradient was checked
  int64_t gradient_elements = 0;  // its elements compared with central differences
  std::vector<FuzzFailure> failures;
  double seconds = 0;
};

Expected<FuzzReport> run_fuzz(const FuzzOptions& options, std::ostream* progress);

}  // namespace lazylab
