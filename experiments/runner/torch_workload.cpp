// A PyTorch training program as a workload: the Python package's exporter
// (python/lazylab/torch/export.py) runs it lazily for a few steps and saves
// the steady-state step graph with its inputs (weights, optimizer state, a
// batch, the learning rate); the workload replays that step, so every
// pipeline and backend runs the very graph the lazy device would, checked
// against the reference like any other.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "child_process.h"
#include "workload.h"

namespace lazylab {
namespace {

namespace fs = std::filesystem;

// A fresh folder under the temporary directory, removed when it goes.
struct ScratchFolder {
  fs::path path;
  ScratchFolder() {
    std::string pattern = (fs::temp_directory_path() / "lazylab-torch-XXXXXX").string();
    if (mkdtemp(pattern.data())) path = pattern;
  }
  ~ScratchFolder() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

// LAZYLAB_PYTHON, else the Python the package was built for (meson's
// python_interpreter) where it exists, else python3 on the PATH.
std::string torch_python() {
  const char* chosen = std::getenv("LAZYLAB_PYTHON");
  if (chosen && *chosen) return chosen;
  std::error_code ec;
  if (fs::exists(LAZYLAB_PYTHON_INTERPRETER, ec)) return LAZYLAB_PYTHON_INTERPRETER;
  return "python3";
}

}  // namespace

Expected<std::unique_ptr<Workload>> make_torch_workload(const std::string& program, const WorkloadParams& params) {
  ScratchFolder scratch;
  if (scratch.path.empty()) return make_error(fmt::format("{}: cannot make a temporary folder", program));
  std::vector<std::string> argv = {torch_python(), "-m",    "lazylab.torch.export",
                                   program,        "--out", scratch.path.string()};
  for (const auto& [name, value] : params) argv.push_back(fmt::format("--param={}={}", name, value));
  ChildOptions options;
  options.timeout_s = 600;
  options.stdout_file = (scratch.path / "stdout.txt").string();
  options.stderr_file = (scratch.path / "stderr.txt").string();
  std::string path = package_python_path();
  if (!path.empty()) options.set_environment.push_back("PYTHONPATH=" + path);
  ChildOutcome outcome = run_child(argv, options);
  if (!outcome.succeeded()) {
    std::string why = last_lines(options.stderr_file, 3);
    return make_error(fmt::format("{}: capturing its step with `{} -m lazylab.torch.export` {}{}", program, argv[0],
                                  outcome.describe(argv[0]), why.empty() ? "" : ": " + why));
  }
  return make_file_workload((scratch.path / "step.lzir").string(), (scratch.path / "step.weights").string());
}

}  // namespace lazylab
