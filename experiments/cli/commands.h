// The lazylab CLI's subcommands; each takes the arguments after its name
// and returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace lazylab::cli {

using Args = std::vector<std::string>;

// Exit codes: 0 success, 1 error (message on stderr), 2 bad usage,
// 3 the experiment ran but a result did not match the reference, 4 some
// cells failed to run (the report records why; the others ran), 5 compare
// found a significant regression, 6 fuzz found a failure.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitMismatch = 3;
inline constexpr int kExitCellsFailed = 4;
inline constexpr int kExitRegression = 5;
inline constexpr int kExitFuzzFailure = 6;

int run_command(const Args& args);
int show_command(const Args& args);
int passes_command(const Args& args);
int backends_command(const Args& args);
int workloads_command(const Args& args);
int compare_command(const Args& args);
int merge_command(const Args& args);
int fuzz_command(const Args& args);
int report_command(const Args& args);
int onnx_test_command(const Args& args);
int import_command(const Args& args);

}  // namespace lazylab::cli
