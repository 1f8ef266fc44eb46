// What a `torch:` workload's capture cost and how its step compared with
// eager PyTorch: the workload carries it (workload.h), the report shows it.
#pragma once

#include <cstdint>
#include <string>

namespace lazylab {

// How a `torch:` workload's step was captured and how it compared with
// eager PyTorch (python/lazylab/torch/export.py writes it as capture.json).
struct TorchCapture {
  std::string style;  // "lazy", "fx" or "dynamo"
  double aten_ops_per_step = 0;
  double capture_ms = 0;    // the host's time to capture the step: each step's (lazy), or once (fx, dynamo)
  bool every_step = false;  // whether a loop pays capture_ms each step
  // What a loop's step costs the host beyond running the graph: the capture
  // (lazy), or binding the batch and rebinding the state kept on the device
  // (fx; capture.json also has the cost with the state as torch tensors).
  double host_ms_per_step = 0;
  int64_t baked_reads = 0;  // tensors read into Python numbers that became constants of the graph (fx)
  // The captured step against eager PyTorch's on the same weights, state and
  // batch: the loss relatively, the tensors it leaves by their scale.
  double loss_error = 0, state_error = 0, loss_tolerance = 0, state_tolerance = 0;
  int64_t graphs = 1;  // the graphs a step ran as, stitched into the one saved (dynamo: its breaks, backward apart)
  double us_per_aten_op() const { return aten_ops_per_step > 0 ? capture_ms * 1e3 / aten_ops_per_step : 0; }
};

}  // namespace lazylab
