// grad() of traced tensors: the loss's graph captured, decomposed (softmax
// and gelu after differentiating, by their fused rules: core/autodiff.h),
// differentiated and recorded back on the same trace, so the gradients are
// pending tensors like any other op's results.
#include <fmt/format.h>

#include <algorithm>

#include "autodiff.h"
#include "module.h"
#include "pass_manager.h"
#include "pipeline.h"
#include "tensor_ops.h"

namespace lazylab {
namespace {

// `graph` through the pipeline `text` (decompose's two forms here).
Expected<Graph> rewritten(Graph graph, std::string_view text) {
  auto pipeline = parse_pipeline(text);
  if (!pipeline) return pipeline.error();
  Module module;
  module.graph = std::move(graph);
  if (auto ran = run_pipeline(*pipeline, module); !ran) return ran.error();
  return std::move(module.graph);
}

}  // namespace

Expected<ValueAndGrad> value_and_grad(const Tensor& loss, std::span<const Tensor> wrt) {
  if (!loss.ok()) return *loss.error();
  for (const Tensor& x : wrt)
    if (!x.ok()) return *x.error();
  if (!loss.pending())
    return make_error("grad: the loss is computed already (read, or synced): take its gradients before reading it");
  Context& ctx = loss.context();
  std::vector<Tensor> inputs;
  auto captured = ctx.capture(std::span<const Tensor>(&loss, 1), inputs);
  if (!captured) return captured.error();
  // Softmax and gelu stay whole for their fused gradients (core/autodiff.h),
  // decomposed with the joint graph: the trace holds primitives only, as
  // a pipeline without decompose runs them on every backend.
  auto forward = rewritten(std::move(*captured), "decompose{keep=fused-gradient}");
  if (!forward) return forward.error();
  // Each tensor asked for: an input of the loss's trace (by ordinal), or one
  // the loss does not read (a zero gradient); a pending result is no input.
  GradRequest request;
  std::vector<int64_t> slot(wrt.size(), -1);
  for (size_t i = 0; i < wrt.size(); ++i) {
    auto input = std::find_if(inputs.begin(), inputs.end(), [&](const Tensor& t) { return t.impl() == wrt[i].impl(); });
    if (input != inputs.end()) {
      slot[i] = static_cast<int64_t>(request.wrt.size());
      request.wrt.push_back(input - inputs.begin());
    } else if (wrt[i].pending()) {
      return make_error(
          fmt::format("grad: tensor {} of wrt ({}) is computed in this trace, not an input of it: gradients are taken "
                      "with respect to inputs (from_vector, from_buffer, or a result after sync)",
                      i, to_string(wrt[i].type())));
    }
  }
  if (request.wrt.empty()) {  // the loss reads none of them
    ValueAndGrad zeros{loss, {}};
    for (const Tensor& x : wrt) zeros.gradients.push_back(full_like(x, 0));
    return zeros;
  }
  auto differentiated = differentiate(*forward, request);
  if (!differentiated) return differentiated.error();
  auto joint = rewritten(std::move(*differentiated), "decompose");
  if (!joint) return joint.error();
  auto results = ctx.call(*joint, inputs);
  if (!results) return results.error();
  ValueAndGrad out{(*results)[0], {}};
  for (size_t i = 0; i < wrt.size(); ++i)
    out.gradients.push_back(slot[i] >= 0 ? (*results)[1 + slot[i]] : full_like(wrt[i], 0));
  return out;
}

Expected<std::vector<Tensor>> grad(const Tensor& loss, std::span<const Tensor> wrt) {
  auto both = value_and_grad(loss, wrt);
  if (!both) return both.error();
  return std::move(both->gradients);
}

}  // namespace lazylab
