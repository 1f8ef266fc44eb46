// The Python module lazylab._core: what its parts share. It binds
// liblazylab's own API (never a backend's internals, never libtorch): a
// Python object keeps alive what its C++ object refers to (a tensor its
// Context, a Context its Engine, an Engine its Backend), and every error
// becomes a lazylab.Error carrying lazylab's message.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "core/backend.h"
#include "core/engine.h"
#include "core/tensor.h"

namespace lazylab::python {

namespace py = pybind11;

// Raised as lazylab.Error (a RuntimeError).
class LazylabError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void raise(const Error& error) { throw LazylabError(error.message); }

template <class T>
T value_or_raise(Expected<T> expected) {
  if (!expected) raise(expected.error());
  return std::move(*expected);
}
inline void check(const Status& status) {
  if (!status) raise(status.error());
}

struct BackendHandle {
  std::unique_ptr<Backend> backend;
};

struct EngineHandle {
  std::shared_ptr<BackendHandle> backend;
  std::unique_ptr<Engine> engine;
};

// A Context and what it runs on; tensors hold it by shared_ptr, so one
// outlives none of its tensors.
struct ContextHandle {
  explicit ContextHandle(std::shared_ptr<EngineHandle> on) : engine(std::move(on)) {
    context = engine ? std::make_unique<Context>(*engine->engine) : std::make_unique<Context>();
  }
  ~ContextHandle() { context.reset(); }  // before the engine it refers to
  std::shared_ptr<EngineHandle> engine;  // null: captures only
  std::unique_ptr<Context> context;
};

// A lazy tensor as Python holds it.
struct PyTensor {
  std::shared_ptr<ContextHandle> owner;
  Tensor tensor;
};

// `tensor` as a PyTensor of `owner`, or lazylab.Error with its message.
PyTensor wrap(const std::shared_ptr<ContextHandle>& owner, Tensor tensor);

void bind_runtime(py::module_& m);   // dtypes, backends, pipelines, engines, graphs
void bind_tensors(py::module_& m);   // Context, Tensor, the op table and its ops
void bind_data(py::module_& m);      // NumPy, the buffer protocol, DLPack
void bind_training(py::module_& m);  // grad and the optimizer steps

}  // namespace lazylab::python
