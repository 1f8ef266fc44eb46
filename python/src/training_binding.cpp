// lazylab's own training steps from Python: grad() and the optimizer steps
// (core/tensor_ops.h, core/optimizers.h), each giving pending tensors of
// the same context.
#include <pybind11/stl.h>

#include "binding.h"
#include "core/optimizers.h"
#include "core/tensor_ops.h"

namespace lazylab::python {
namespace {

// The tensors of `list`, each of `owner`'s context; `what` names the list in errors.
std::vector<Tensor> tensors_of(const std::vector<PyTensor*>& list, const std::shared_ptr<ContextHandle>& owner,
                               const char* step, const char* what) {
  std::vector<Tensor> tensors;
  for (const PyTensor* x : list) {
    if (!x) throw LazylabError(std::string(step) + ": " + what + " holds None, not a tensor");
    if (x->owner != owner)
      throw LazylabError(std::string(step) + ": a tensor of " + what + " belongs to another context");
    tensors.push_back(x->tensor);
  }
  return tensors;
}

std::vector<PyTensor> wrap_all(const std::shared_ptr<ContextHandle>& owner, std::vector<Tensor> tensors) {
  std::vector<PyTensor> wrapped;
  for (Tensor& t : tensors) wrapped.push_back(wrap(owner, std::move(t)));
  return wrapped;
}

}  // namespace

void bind_training(py::module_& m) {
  m.def(
      "grad",
      [](const PyTensor& loss, const std::vector<PyTensor*>& wrt) {
        return wrap_all(loss.owner, value_or_raise(grad(loss.tensor, tensors_of(wrt, loss.owner, "grad", "wrt"))));
      },
      py::arg("loss"), py::arg("wrt"),
      "The gradients of `loss` (a float scalar, pending) with respect to each tensor of `wrt` (inputs of its "
      "trace), reverse mode, pending on the same context: lazylab's own backward (core/autodiff.h)");
  m.def(
      "sgd_step",
      [](const std::vector<PyTensor*>& params, const std::vector<PyTensor*>& grads,
         const std::vector<PyTensor*>& buffers, const PyTensor& lr, double momentum, double weight_decay,
         bool nesterov) {
        const char* step = "sgd_step";
        auto out = value_or_raise(sgd_step(tensors_of(params, lr.owner, step, "params"),
                                           tensors_of(grads, lr.owner, step, "grads"),
                                           tensors_of(buffers, lr.owner, step, "momentum_buffers"), lr.tensor,
                                           SgdOptions{momentum, weight_decay, nesterov}));
        return py::make_tuple(wrap_all(lr.owner, std::move(out.params)), wrap_all(lr.owner, std::move(out.momentum)));
      },
      py::arg("params"), py::arg("grads"), py::arg("momentum_buffers"), py::arg("lr"), py::kw_only(),
      py::arg("momentum") = 0.0, py::arg("weight_decay") = 0.0, py::arg("nesterov") = false,
      "One SGD step as graph code (torch.optim.SGD's update): returns (params, momentum_buffers), pending. `lr` "
      "is a rank-0 tensor; made with ctx.tensor it is an input, so one compiled step serves every value");
  m.def(
      "adamw_step",
      [](const std::vector<PyTensor*>& params, const std::vector<PyTensor*>& grads, const std::vector<PyTensor*>& m1,
         const std::vector<PyTensor*>& v1, const PyTensor& lr, const PyTensor& count, double beta1, double beta2,
         double eps, double weight_decay) {
        const char* step = "adamw_step";
        auto out = value_or_raise(adamw_step(tensors_of(params, lr.owner, step, "params"),
                                             tensors_of(grads, lr.owner, step, "grads"),
                                             tensors_of(m1, lr.owner, step, "m"), tensors_of(v1, lr.owner, step, "v"),
                                             lr.tensor, count.tensor, AdamWOptions{beta1, beta2, eps, weight_decay}));
        return py::make_tuple(wrap_all(lr.owner, std::move(out.params)), wrap_all(lr.owner, std::move(out.m)),
                              wrap_all(lr.owner, std::move(out.v)));
      },
      py::arg("params"), py::arg("grads"), py::arg("m"), py::arg("v"), py::arg("lr"), py::arg("step"), py::kw_only(),
      py::arg("beta1") = 0.9, py::arg("beta2") = 0.999, py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.01,
      "One AdamW step as graph code (torch.optim.AdamW's update, bias correction included): returns (params, m, "
      "v), pending. `lr` and `step` (the step count, 1 first) are rank-0 tensors; made with ctx.tensor they are "
      "inputs, so one compiled step serves every value");
}

}  // namespace lazylab::python
