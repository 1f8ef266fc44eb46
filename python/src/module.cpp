#include "binding.h"

namespace lazylab::python {

PyTensor wrap(const std::shared_ptr<ContextHandle>& owner, Tensor tensor) {
  if (!tensor.ok()) throw LazylabError(tensor.error()->message);
  return PyTensor{owner, std::move(tensor)};
}

}  // namespace lazylab::python

PYBIND11_MODULE(_core, m) {
  using namespace lazylab::python;
  m.doc() = "lazylab's C++ library: lazy tensors, pass pipelines, backends loaded at run time";
  py::register_exception<LazylabError>(m, "Error", PyExc_RuntimeError);
  bind_runtime(m);
  bind_tensors(m);
  bind_data(m);
  bind_training(m);
}
