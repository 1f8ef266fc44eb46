// A workload's outputs for several steps on one context: the first step
// compiles, the others hit the cache and run the same executable again, so
// a fault that shows in some steps only is caught.
#pragma once

#include <string>
#include <vector>

#include "core/text_format.h"
#include "runner/workload.h"
#include "support.h"

namespace lazylab::testing {

using StepOutputs = std::vector<std::vector<float>>;  // one vector per output

inline std::vector<StepOutputs> run_steps(Backend& backend, const Workload& workload, const std::string& pipeline_text,
                                          int steps, uint64_t seed = 3) {
  Engine engine(pipeline(pipeline_text), backend);
  Context ctx(engine);
  std::vector<Tensor> inputs = bind_inputs(ctx, workload.make_inputs(seed));
  std::vector<StepOutputs> results;
  for (int step = 0; step < steps; ++step) {
    StepOutputs outputs;
    for (const Tensor& t : workload.step(ctx, inputs)) outputs.push_back(values(t));
    results.push_back(std::move(outputs));
  }
  return results;
}

// Every step's every element close to `want` (doctest's Approx: relative
// `epsilon` of `scale` + the larger magnitude).
inline void check_steps(const std::vector<StepOutputs>& steps, const StepOutputs& want, double epsilon, double scale) {
  for (size_t step = 0; step < steps.size(); ++step) {
    CAPTURE(step);
    REQUIRE(steps[step].size() == want.size());
    for (size_t o = 0; o < want.size(); ++o)
      for (size_t i = 0; i < want[o].size(); ++i)
        REQUIRE(steps[step][o][i] == doctest::Approx(want[o][i]).epsilon(epsilon).scale(scale));
  }
}

// A workload's f32 outputs for one step whose inputs are buffers of the
// backend's own (each the abs of its seeded values, by a step before), all given up with the call
// (`give_up`) or held; `donated`: the buffers the step's outputs took.
inline StepOutputs run_giving_up_inputs(Backend& backend, const Workload& workload, const std::string& pipeline_text,
                                        bool give_up, uint64_t& donated) {
  Engine engine(pipeline(pipeline_text), backend);
  Context ctx(engine);
  std::vector<Tensor> inputs = bind_inputs(ctx, workload.make_inputs(1));
  // An upload a device backend may take is taken here; abs keeps a training
  // step's second moments, learning rate and step count positive.
  for (Tensor& input : inputs) input = abs(input);
  REQUIRE(ctx.mark_step().ok());
  uint64_t before = engine.metrics().donated_buffers;
  std::vector<Tensor> kept = give_up ? std::vector<Tensor>{} : inputs;
  std::vector<Tensor> outputs = workload.step(ctx, inputs);
  inputs.clear();
  REQUIRE(ctx.mark_step().ok());
  donated = engine.metrics().donated_buffers - before;
  StepOutputs read;
  for (const Tensor& output : outputs)
    if (output.dtype() == DType::F32) read.push_back(values(output));
  return read;
}

// Each output of the .lzir graph `text`, run once on `backend` through
// `pipeline_text`, its parameters seeded as a workload's.
template <class T = float>
std::vector<std::vector<T>> run_graph_text(Backend& backend, const std::string& text,
                                           const std::string& pipeline_text) {
  auto parsed = parse_graph(text, "t.lzir");
  REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message));
  auto workload = make_graph_workload(parsed->name, std::move(parsed->graph));
  Engine engine(pipeline(pipeline_text), backend);
  Context ctx(engine);
  std::vector<Tensor> inputs = bind_inputs(ctx, workload->make_inputs(3));
  std::vector<std::vector<T>> outputs;
  for (const Tensor& t : workload->step(ctx, inputs)) outputs.push_back(values<T>(t));
  return outputs;
}

}  // namespace lazylab::testing
