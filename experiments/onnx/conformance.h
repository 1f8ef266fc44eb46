// ONNX's backend node tests (Debian's libonnx-testdata) as a lazylab test
// suite: each test's model is imported, run on a backend through a pipeline
// for each of its data sets, and its outputs compared with the expected
// ones. A test passes, fails (with the first difference), is unsupported
// (an op or feature lazylab lacks, named), or is disputed: it fails where
// its data contradict what lazylab computes on purpose (conformance.cpp
// lists each such test with why), counted apart and never as passed.
#pragma once

#include <string>
#include <vector>

#include "core/backend.h"
#include "core/pipeline.h"

namespace lazylab {

// Where Debian's libonnx-testdata puts the node tests.
inline constexpr const char* kOnnxNodeTestDir = "/usr/share/libonnx-testdata/data/node";

enum class ConformanceOutcome { Passed, Failed, Unsupported, Disputed };
const char* outcome_name(ConformanceOutcome outcome);

struct ConformanceResult {
  std::string test;  // the folder's name: test_add_bcast
  ConformanceOutcome outcome = ConformanceOutcome::Passed;
  std::string op;      // for unsupported: the op (or feature) lazylab lacks
  std::string detail;  // why it failed or is unsupported
};

struct ConformanceTolerance {
  double rtol = 1e-3, atol = 1e-7;  // ONNX's backend test defaults (assert_allclose)
};

// One node test folder (model.onnx, test_data_set_*/{input,output}_N.pb).
ConformanceResult run_node_test(const std::string& folder, Backend& backend, const Pipeline& pipeline,
                                const ConformanceTolerance& tolerance = {});

}  // namespace lazylab
