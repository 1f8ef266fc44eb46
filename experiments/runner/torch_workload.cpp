// A PyTorch training program as a workload: the Python package's exporter
// (python/lazylab/torch/export.py) captures its steady-state step (on the
// lazy device, or traced by torch.fx) and saves the graph with its inputs
// (weights, optimizer state, a batch, the learning rate); the workload
// replays that step, so every pipeline and backend runs the very graph the
// capture made, checked
// against the reference like any other. The exporter checks the captured
// step against eager PyTorch's first and says what the capture cost
// (capture.json); the workload carries that into the report.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "child_process.h"
#include "results_json.h"
#include "workload.h"

namespace lazylab {
namespace {

namespace fs = std::filesystem;

constexpr int kExporterUsageError = 2;  // lazylab.torch.export's, as argparse's

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

// The saved step, replayed as a file workload, with its capture.
class TorchWorkload : public Workload {
 public:
  TorchWorkload(std::unique_ptr<Workload> step, TorchCapture capture)
      : step_(std::move(step)), capture_(std::move(capture)) {}
  std::string name() const override { return step_->name(); }
  WorkloadParams params() const override { return step_->params(); }
  std::vector<TensorType> input_types() const override { return step_->input_types(); }
  std::vector<HostTensor> make_inputs(uint64_t seed) const override { return step_->make_inputs(seed); }
  std::vector<Tensor> step(Context& context, const std::vector<Tensor>& inputs) const override {
    return step_->step(context, inputs);
  }
  const TorchCapture* torch_capture() const override { return &capture_; }

 private:
  std::unique_ptr<Workload> step_;
  TorchCapture capture_;
};

}  // namespace

Expected<std::unique_ptr<Workload>> make_torch_workload(const std::string& program, const WorkloadParams& params,
                                                        const std::string& capture) {
  ScratchFolder scratch;
  if (scratch.path.empty()) return make_error(fmt::format("{}: cannot make a temporary folder", program));
  std::vector<std::string> argv = {torch_python(), "-m",    "lazylab.torch.export",
                                   program,        "--out", scratch.path.string()};
  if (!capture.empty()) argv.push_back("--capture=" + capture);
  for (const auto& [name, value] : params) argv.push_back(fmt::format("--param={}={}", name, value));
  ChildOptions options;
  options.timeout_s = 600;
  options.stdout_file = (scratch.path / "stdout.txt").string();
  options.stderr_file = (scratch.path / "stderr.txt").string();
  std::string path = package_python_path();
  if (!path.empty()) options.set_environment.push_back("PYTHONPATH=" + path);
  ChildOutcome outcome = run_child(argv, options);
  auto failed = [&](const std::string& why) { return make_failed_workload(program, params, why); };
  if (!outcome.succeeded()) {
    std::string why = last_lines(options.stderr_file, 3);
    std::string message = fmt::format("{}: capturing its step with `{} -m lazylab.torch.export{}` {}{}", program,
                                      argv[0], capture.empty() ? "" : " --capture=" + capture,
                                      outcome.describe(argv[0]), why.empty() ? "" : ": " + why);
    // The exporter's usage errors (exit 2): the entry's parameters or
    // capture are wrong, which stops the run like any mistake in the file.
    if (outcome.exit_code == kExporterUsageError) return make_error(message);
    return failed(message);
  }
  fs::path record_file = scratch.path / "capture.json";
  std::ifstream in(record_file);
  nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
  if (!in || json.is_discarded()) return failed(fmt::format("{}: the exporter wrote no capture record", program));
  auto record = capture_from_json(json);
  if (!record) return failed(fmt::format("{}: {}", program, record.error().message));
  auto step = make_file_workload((scratch.path / "step.lzir").string(), (scratch.path / "step.weights").string());
  if (!step) return failed(step.error().message);
  return std::unique_ptr<Workload>(std::make_unique<TorchWorkload>(std::move(*step), std::move(*record)));
}

}  // namespace lazylab
