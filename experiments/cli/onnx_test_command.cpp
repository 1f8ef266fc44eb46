// lazylab onnx-test: ONNX's backend node tests on one backend and pipeline.
#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>

#include "core/pipeline.h"
#include "onnx/conformance.h"
#include "options.h"

namespace lazylab::cli {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> test_folders(const std::string& root, const std::string& filter) {
  std::vector<std::string> folders;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    std::string name = entry.path().filename().string();
    if (entry.is_directory() && fs::exists(entry.path() / "model.onnx") &&
        fnmatch(filter.c_str(), name.c_str(), 0) == 0)
      folders.push_back(entry.path().string());
  }
  std::sort(folders.begin(), folders.end());
  return folders;
}

void print_summary(const std::vector<ConformanceResult>& results, const std::string& backend,
                   const std::string& pipeline) {
  std::map<ConformanceOutcome, size_t> counts;
  std::map<std::string, size_t> unsupported_ops;
  for (const ConformanceResult& r : results) {
    ++counts[r.outcome];
    if (r.outcome == ConformanceOutcome::Unsupported) ++unsupported_ops[r.op.empty() ? "(model feature)" : r.op];
  }
  std::string ops;
  for (const auto& [op, n] : unsupported_ops) ops += fmt::format("{}{} ({})", ops.empty() ? "" : ", ", op, n);
  if (!ops.empty()) std::cout << "unsupported ops (tests): " << ops << "\n";
  std::cout << fmt::format(
      "onnx node tests on {} with '{}': {} passed, {} failed, {} unsupported, {} disputed (of {})\n", backend, pipeline,
      counts[ConformanceOutcome::Passed], counts[ConformanceOutcome::Failed], counts[ConformanceOutcome::Unsupported],
      counts[ConformanceOutcome::Disputed], results.size());
}

}  // namespace

int onnx_test_command(const Args& args) {
  po::options_description options("lazylab onnx-test options");
  std::string data, filter, backend_name, backend_options, pipeline_text;
  ConformanceTolerance tolerance;
  options.add_options()("data", po::value(&data)->default_value(kOnnxNodeTestDir),
                        "the folder of node tests (Debian's libonnx-testdata)")(
      "filter", po::value(&filter)->default_value("test_*"), "run the tests whose folder name matches this glob")(
      "backend,b", po::value(&backend_name)->default_value("interp"), "backend name or plugin path")(
      "backend-options", po::value(&backend_options)->default_value(""), "the backend's key=value,... options")(
      "pipeline,p", po::value(&pipeline_text)->default_value("decompose,lower"), "pass pipeline")(
      "rtol", po::value(&tolerance.rtol)->default_value(tolerance.rtol),
      "relative tolerance: |got - want| <= atol + rtol |want| (ONNX's default)")(
      "atol", po::value(&tolerance.atol)->default_value(tolerance.atol),
      "absolute tolerance (ONNX's default; whole models in f32 need more)")("verbose,v",
                                                                            "a line for every test, passed ones too");
  po::variables_map vm;
  if (auto exit = parse_args(args,
                             "usage: lazylab onnx-test [--backend B] [--pipeline P] [--filter GLOB] [--data DIR] "
                             "[--rtol R] [--atol A]\n"
                             "exit status: 0 none failed, 3 some failed, 1 error",
                             options, {}, vm))
    return *exit;
  auto pipeline = parse_pipeline(pipeline_text);
  if (!pipeline) {
    std::cerr << "lazylab: " << pipeline.error().message << "\n";
    return kExitUsage;
  }
  auto backend = load_backend(backend_name, backend_options);
  if (!backend) {
    std::cerr << "lazylab: " << backend.error().message << "\n";
    return kExitError;
  }
  std::vector<std::string> folders = test_folders(data, filter);
  if (folders.empty()) {
    std::cerr << fmt::format("lazylab: no node tests matching '{}' in {} (install libonnx-testdata)\n", filter, data);
    return kExitError;
  }
  std::vector<ConformanceResult> results;
  for (const std::string& folder : folders) {
    results.push_back(run_node_test(folder, **backend, *pipeline, tolerance));
    const ConformanceResult& r = results.back();
    if (r.outcome != ConformanceOutcome::Passed || vm.count("verbose"))
      std::cout << fmt::format("{:<11} {}{}\n", outcome_name(r.outcome), r.test,
                               r.detail.empty() ? "" : ": " + r.detail);
  }
  print_summary(results, backend_name, pipeline_text);
  bool failed = std::any_of(results.begin(), results.end(),
                            [](const ConformanceResult& r) { return r.outcome == ConformanceOutcome::Failed; });
  return failed ? kExitMismatch : kExitOk;
}

}  // namespace lazylab::cli
