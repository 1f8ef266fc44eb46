#include "footprint.h"

namespace lazylab {

Expected<Footprint> trace_footprint(const Workload& workload, const EngineOptions& options) {
  Footprint footprint;
  Context context;  // captures only: nothing runs, nothing is allocated
  context.set_max_trace_nodes(options.max_trace_nodes);
  std::vector<Tensor> inputs;
  for (const TensorType& type : workload.input_types()) {
    footprint.input_bytes += type.bytes();
    inputs.push_back(context.placeholder(type));
  }
  std::vector<Tensor> outputs = workload.step(context, inputs);
  for (const Tensor& output : outputs)
    if (!output.ok()) {
      if (context.pending_nodes() >= options.max_trace_nodes) return *output.error();
      return footprint;  // it needs data to trace (a sync inside the step, say): the run itself tells
    }
  for (const Tensor& output : outputs) {
    footprint.output_bytes += output.type().bytes();
    footprint.reference_bytes += static_cast<uint64_t>(output.type().num_elements()) * sizeof(double);
  }
  footprint.outputs_known = true;
  return footprint;
}

}  // namespace lazylab
