// Workloads: the reference suite of WORKLOADS.md built in by name, with
// parameters overridable from YAML, and workloads read from .lzir files.
// A workload makes seeded host inputs and traces one step on a Context.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "torch_capture.h"

namespace lazylab {

struct HostTensor {
  TensorType type;
  BufferPtr data;
};

using WorkloadParams = std::map<std::string, int64_t>;

// "cols=64,rows=8"
std::string describe_params(const WorkloadParams& params);

class Workload {
 public:
  virtual ~Workload() = default;
  virtual std::string name() const = 0;
  virtual WorkloadParams params() const = 0;
  // The types make_inputs gives, without allocating them.
  virtual std::vector<TensorType> input_types() const = 0;
  // Inputs from `seed`, never all zeros; equal seeds give equal inputs.
  virtual std::vector<HostTensor> make_inputs(uint64_t seed) const = 0;
  // Traces one step; the outputs are the step's results.
  virtual std::vector<Tensor> step(Context& context, const std::vector<Tensor>& inputs) const = 0;
  // How many of the first inputs are data rather than weights: a training
  // step (training_step.h) trains the float inputs after them.
  virtual size_t data_inputs() const { return 1; }
  // Ops a step records, for per-op figures (chain-tiny); 0 when not meaningful.
  virtual int64_t ops_per_step() const { return 0; }
  // A `torch:` workload's capture; null for every other kind.
  virtual const TorchCapture* torch_capture() const { return nullptr; }
  // Why the workload has no step: a program whose capture failed, a model
  // using what lazylab lacks. Its cells fail with this and the run goes on
  // (a mistake in the experiment file stops it instead). Null where it has one.
  virtual const std::string* failure() const { return nullptr; }
};

struct WorkloadInfo {
  std::string name;
  std::string summary;
  WorkloadParams defaults;
};

std::vector<WorkloadInfo> builtin_workloads();

// A built-in workload by name; `overrides` must name known parameters.
Expected<std::unique_ptr<Workload>> make_builtin_workload(const std::string& name, const WorkloadParams& overrides);

// A workload replaying a .lzir graph: parameters become seeded inputs, or,
// with `weights` (a folder as `lazylab import` writes), parameter N takes
// the array in WEIGHTS/N.npy where there is one.
Expected<std::unique_ptr<Workload>> make_file_workload(const std::string& path, const std::string& weights = "");
// The same for a graph in memory (verified by the caller), named `name`.
std::unique_ptr<Workload> make_graph_workload(std::string name, Graph graph);

// An ONNX model (experiments/onnx); `params` bind its symbolic dimensions.
// A model using what lazylab lacks gives a failed workload; a malformed one
// an error.
Expected<std::unique_ptr<Workload>> make_onnx_workload(const std::string& path, const WorkloadParams& params);

// A PyTorch training program (lazylab/torch/loop.py's protocol): its
// steady-state step, captured in a Python child process (LAZYLAB_PYTHON,
// default the Python the package is built for) by `capture` (the lazy
// device where empty; the exporter names the others); `params` override
// the program's PARAMS. A capture that fails gives a failed workload; a
// mistake in the entry (an unknown parameter or capture) an error.
Expected<std::unique_ptr<Workload>> make_torch_workload(const std::string& program, const WorkloadParams& params,
                                                        const std::string& capture = "");

// A workload that could not be made, for `why` (see Workload::failure).
std::unique_ptr<Workload> make_failed_workload(std::string name, WorkloadParams params, std::string why);

// A file (ends in .lzir, .onnx or .py) or a built-in name; `capture` is a
// .py program's only.
Expected<std::unique_ptr<Workload>> make_workload(const std::string& name_or_file, const WorkloadParams& overrides,
                                                  const std::string& weights = "", const std::string& capture = "");

// `workload` with each f32 input stored in `dtype` (bf16 or f16): its
// seeded values rounded to that dtype, widened to f32 at the start of each
// step (stored_inputs.cpp says why).
std::unique_ptr<Workload> with_inputs_stored_in(std::unique_ptr<Workload> workload, DType dtype);

// Puts host inputs on a context.
std::vector<Tensor> bind_inputs(Context& context, const std::vector<HostTensor>& inputs);

}  // namespace lazylab
