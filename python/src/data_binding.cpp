// Data in and out: NumPy arrays (copied in by Context.tensor, shared by
// Context.from_numpy), the buffer protocol and numpy() over a computed
// tensor's host data without a copy, and DLPack both ways (host memory
// shared either way; a CUDA backend's buffers handed out as kDLCUDA
// tensors, so torch.from_dlpack takes them on the GPU, and CUDA tensors
// taken in by a copy on the GPU).
#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <tuple>

#include "binding.h"

namespace lazylab::python {
namespace {

using ContextPtr = std::shared_ptr<ContextHandle>;

// NumPy's dtype for each of the table's, by its .npy descr ('<f4', '|b1');
// none for bf16, which NumPy lacks.
std::optional<py::dtype> numpy_dtype(DType dtype) {
  const char* descr = dtypes::row(dtype_id(dtype)).npy_descr;
  if (!*descr) return std::nullopt;
  return py::dtype(std::string(descr));
}

py::dtype numpy_dtype_or_raise(DType dtype, const char* where) {
  if (auto numpy = numpy_dtype(dtype)) return *numpy;
  throw LazylabError(fmt::format("{}: NumPy has no {} (exchange it through DLPack: torch.from_dlpack, or cast it)",
                                 where, dtype_name(dtype)));
}

std::optional<DType> dtype_of_numpy(const py::dtype& numpy) {
  for (DType d : kAllDTypes)
    if (auto mine = numpy_dtype(d); mine && (mine->is(numpy) || mine->equal(numpy))) return d;
  return std::nullopt;
}

// The table's DLPack code (bool's is DLPack 0.8's kDLBool, 6: Debian's
// header is 0.6's, which has none).
DLDataType dlpack_dtype(DType dtype) {
  return {dtypes::row(dtype_id(dtype)).dlpack_code, static_cast<uint8_t>(dtype_size(dtype) * 8), 1};
}

std::optional<DType> dtype_of_dlpack(DLDataType type) {
  for (DType d : kAllDTypes) {
    DLDataType mine = dlpack_dtype(d);
    if (mine.code == type.code && mine.bits == type.bits && type.lanes == 1) return d;
  }
  return std::nullopt;
}

// Host memory a Python object owns, as a Buffer that keeps it alive (its
// last reference may go on any thread: the GIL is taken to drop it).
BufferPtr shared_buffer(void* data, size_t bytes, py::object owner) {
  auto keeper = std::shared_ptr<const void>(new py::object(std::move(owner)), [](const void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<const py::object*>(p);
  });
  return std::make_shared<Buffer>(static_cast<std::byte*>(data), bytes, std::move(keeper));
}

TensorType type_of_array(const py::array& array, DType dtype) {
  Dims shape;
  for (py::ssize_t d = 0; d < array.ndim(); ++d) shape.push_back(array.shape(d));
  return TensorType{dtype, shape};
}

DType dtype_or_raise(const py::array& array, const char* where) {
  auto dtype = dtype_of_numpy(array.dtype());
  if (!dtype)
    throw LazylabError(fmt::format("{}: no lazylab dtype for NumPy's {}", where, std::string(py::str(array.dtype()))));
  return *dtype;
}

PyTensor tensor_from(const ContextPtr& c, const py::object& data, const py::object& dtype_arg) {
  py::module_ numpy = py::module_::import("numpy");
  py::object target = py::none();
  if (!dtype_arg.is_none()) target = numpy_dtype_or_raise(dtype_arg.cast<DType>(), "Context.tensor");
  py::array array =
      numpy.attr("array")(data, py::arg("dtype") = target, py::arg("copy") = true, py::arg("order") = "C");
  DType dtype = dtype_or_raise(array, "Context.tensor");
  TensorType type = type_of_array(array, dtype);
  if (std::string problem = size_problem(type); !problem.empty()) throw LazylabError("Context.tensor: " + problem);
  return wrap(c, c->context->from_buffer(type, shared_buffer(array.mutable_data(), type.bytes(), array)));
}

PyTensor tensor_sharing(const ContextPtr& c, const py::array& array) {
  DType dtype = dtype_or_raise(array, "Context.from_numpy");
  bool contiguous = array.flags() & py::array::c_style;
  if (!contiguous)
    throw LazylabError(
        "Context.from_numpy: the array is not C-contiguous (numpy.ascontiguousarray copies it; "
        "Context.tensor copies any array)");
  TensorType type = type_of_array(array, dtype);
  return wrap(c, c->context->from_buffer(type, shared_buffer(const_cast<void*>(array.data()), type.bytes(), array)));
}

// ---- DLPack ----

struct Exported {  // a DLManagedTensor's manager_ctx: what keeps the data alive
  DLManagedTensor managed{};
  std::vector<int64_t> shape, strides;
  BufferPtr host;
  DeviceBufferPtr device;
  std::optional<uint64_t> consumer_stream;  // where the consumer reads device data
};

// The consumer is done with it: device memory is released after what the
// consumer's stream queued so far (its reads), not merely after ours.
void delete_exported(DLManagedTensor* managed) {
  auto* exported = static_cast<Exported*>(managed->manager_ctx);
  if (exported->device && exported->consumer_stream)
    (void)exported->device->wait_for_stream(*exported->consumer_stream);  // a failure leaves our order only
  delete exported;
}

void capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor")) {  // never consumed: ours to free
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (managed && managed->deleter) managed->deleter(managed);
  }
}

// Host data of a computed tensor (synced), or its backend buffer in device
// memory, with the DLPack device it lies on.
struct Located {
  BufferPtr host;
  DeviceBufferPtr device;
  DLDevice where{kDLCPU, 0};
  void* pointer = nullptr;
};

Located locate(const PyTensor& t) {
  if (t.tensor.pending()) check(t.owner->context->sync());
  TensorImpl* impl = t.tensor.impl();
  Located at;
  if (!impl->data && impl->device) {
    if (auto device = impl->device->device_data()) {
      at.device = impl->device;
      at.where = DLDevice{static_cast<DLDeviceType>(device->dlpack_device_type), impl->device->device()};
      at.pointer = device->pointer;
      return at;
    }
  }
  at.host = value_or_raise(t.tensor.data());
  at.pointer = at.host->data();
  return at;
}

py::tuple dlpack_device(const PyTensor& t) {
  Located at = locate(t);
  return py::make_tuple(static_cast<int>(at.where.device_type), at.where.device_id);
}

// The array API's __dlpack__(stream=, max_version=, dl_device=, copy=):
// device data is complete before the consumer's `stream` reads it (that
// stream waits for the work writing it; with no stream the host waits), and
// is released after that stream's reads; the capsule is DLPack 0.6's
// unversioned one, which a consumer asking for a later version accepts from
// a producer that has no other.
py::capsule to_dlpack(const PyTensor& t, const py::kwargs& options) {
  Located at = locate(t);
  if (options.contains("dl_device") && !options["dl_device"].is_none()) {
    auto wanted = options["dl_device"].cast<std::pair<int, int>>();
    if (wanted.first != static_cast<int>(at.where.device_type) || wanted.second != at.where.device_id)
      throw py::buffer_error("__dlpack__: the tensor lies on another device than dl_device; copy it there first");
  }
  if (options.contains("copy") && !options["copy"].is_none() && options["copy"].cast<bool>())
    throw py::buffer_error("__dlpack__(copy=True): lazylab shares its data; copy on the consumer's side");
  std::optional<uint64_t> consumer;
  if (at.device) {  // its data must be complete before the consumer's stream reads it
    EngineHandle* engine = t.owner->engine.get();
    if (!engine) throw LazylabError("__dlpack__: a device tensor with no engine");
    Backend& backend = *engine->backend->backend;
    py::object stream = options.contains("stream") ? py::object(options["stream"]) : py::none();
    if (!stream.is_none() && stream.cast<int64_t>() != -1) {  // the consumer's stream waits, not the host
      consumer = stream.cast<uint64_t>();
      check(backend.stream_wait_device(at.device->device(), *consumer));
    } else {
      check(backend.synchronize(at.device->device()));
    }
  }
  auto exported = std::make_unique<Exported>();
  exported->consumer_stream = consumer;
  const TensorType& type = t.tensor.type();
  exported->shape.assign(type.shape.begin(), type.shape.end());
  exported->host = at.host;
  exported->device = at.device;
  DLTensor& dl = exported->managed.dl_tensor;
  dl.data = at.pointer;
  dl.device = at.where;
  dl.ndim = static_cast<int32_t>(type.shape.size());
  dl.dtype = dlpack_dtype(type.dtype);
  dl.shape = exported->shape.data();
  dl.strides = nullptr;  // compact, row-major
  dl.byte_offset = 0;
  exported->managed.manager_ctx = exported.get();
  exported->managed.deleter = delete_exported;
  DLManagedTensor* managed = &exported.release()->managed;
  return py::capsule(managed, "dltensor", capsule_destructor);
}

// DLPack's kDLCUDA; the capsule's device id is the CUDA device ordinal.
constexpr int32_t kDLPackCuda = 2;

// `stream`: for CUDA memory, the producer's stream on which the data is
// ready (PyTorch's current stream; None: the legacy default stream). The
// producer is not asked to synchronize (__dlpack__() without a stream): the
// backend's copy waits for that stream, which then waits for the copy, so
// the producer may reuse the memory on that stream afterwards.
PyTensor from_dlpack(const ContextPtr& c, const py::object& source, const py::object& stream) {
  py::object capsule = py::hasattr(source, "__dlpack__") ? source.attr("__dlpack__")() : source;
  PyObject* raw = capsule.ptr();
  if (!PyCapsule_IsValid(raw, "dltensor"))
    throw LazylabError("from_dlpack: expected an object with __dlpack__ or an unconsumed 'dltensor' capsule");
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(raw, "dltensor"));
  const DLTensor& dl = managed->dl_tensor;
  bool on_cuda = dl.device.device_type == kDLPackCuda;
  if (dl.device.device_type != kDLCPU && dl.device.device_type != kDLCUDAHost && !on_cuda)
    throw LazylabError(
        fmt::format("from_dlpack: a tensor on DLPack device type {} (device {}) cannot be taken; "
                    "bring it to host memory first (.cpu())",
                    static_cast<int>(dl.device.device_type), dl.device.device_id));
  auto dtype = dtype_of_dlpack(dl.dtype);
  if (!dtype)
    throw LazylabError(fmt::format("from_dlpack: no lazylab dtype for DLPack type code {} of {} bits",
                                   static_cast<int>(dl.dtype.code), static_cast<int>(dl.dtype.bits)));
  Dims shape(dl.shape, dl.shape + dl.ndim);
  TensorType type{*dtype, shape};
  if (dl.strides) {  // compact row-major only
    int64_t expected = 1;
    for (int32_t d = dl.ndim; d-- > 0;) {
      if (shape[d] != 1 && dl.strides[d] != expected)
        throw LazylabError("from_dlpack: the tensor is not compact and row-major (.contiguous() copies it)");
      expected *= shape[d];
    }
  }
  if (on_cuda) {  // copied on the device; the capsule is done with once the copy is queued
    uint64_t producer = stream.is_none() ? 0 : stream.cast<uint64_t>();
    Tensor copied = c->context->from_device_memory(type, static_cast<const std::byte*>(dl.data) + dl.byte_offset,
                                                   kDLPackCuda, dl.device.device_id, producer);
    PyCapsule_SetName(raw, "used_dltensor");
    if (managed->deleter) managed->deleter(managed);
    return wrap(c, std::move(copied));
  }
  // Consumed: the capsule's deleter is now ours to call, when the buffer goes.
  PyCapsule_SetName(raw, "used_dltensor");
  auto keeper = std::shared_ptr<const void>(managed, [](const void* p) {
    auto* m = static_cast<DLManagedTensor*>(const_cast<void*>(p));
    py::gil_scoped_acquire gil;  // a producer's deleter may touch Python objects
    if (m->deleter) m->deleter(m);
  });
  auto buffer = std::make_shared<Buffer>(static_cast<std::byte*>(dl.data) + dl.byte_offset, type.bytes(), keeper);
  return wrap(c, c->context->from_buffer(type, std::move(buffer)));
}

// ---- NumPy out ----

py::array numpy_view(const PyTensor& t) {
  Located at = locate(t);
  if (at.device) at.host = value_or_raise(t.tensor.data());  // device memory: its copy on the host
  const TensorType& type = t.tensor.type();
  std::vector<py::ssize_t> shape(type.shape.begin(), type.shape.end());
  auto* keep = new BufferPtr(at.host);
  py::capsule base(keep, [](void* p) { delete static_cast<BufferPtr*>(p); });
  py::array array(numpy_dtype_or_raise(type.dtype, "Tensor.numpy"), shape, {}, at.host->data(), base);
  // lazylab's own data (an input to later steps, maybe): read-only.
  array.attr("setflags")(py::arg("write") = false);
  return array;
}

}  // namespace

void bind_data(py::module_& m) {
  auto context = py::reinterpret_borrow<py::class_<ContextHandle, ContextPtr>>(m.attr("Context"));
  context
      .def("tensor", &tensor_from, py::arg("data"), py::arg("dtype") = py::none(),
           "A copy of `data` (an array, a list, a scalar) as an input of the trace")
      .def("from_numpy", &tensor_sharing, py::arg("array"),
           "The array's memory as an input, not copied: do not write to it while the tensor lives")
      .def("from_dlpack", &from_dlpack, py::arg("tensor"), py::arg("stream") = py::none(),
           "A tensor of any DLPack producer (torch, NumPy, JAX): host memory shared, CUDA memory copied on the "
           "device (after the producer's `stream`: PyTorch's current one; None: the legacy default stream)");
  auto tensor = py::reinterpret_borrow<py::class_<PyTensor>>(m.attr("Tensor"));
  tensor.def("numpy", &numpy_view, "Computes it and returns its data: a read-only view of host memory, not a copy")
      .def(
          "__array__",
          [](const PyTensor& t, const py::object& dtype, const py::kwargs&) {  // NumPy 2 adds copy=
            py::array view = numpy_view(t);
            return dtype.is_none() ? view : py::array(view.attr("astype")(dtype));
          },
          py::arg("dtype") = py::none())
      .def("item",
           [](const PyTensor& t) {
             if (t.tensor.type().num_elements() != 1)
               throw LazylabError(
                   fmt::format("item(): the tensor has {} elements, not one", t.tensor.type().num_elements()));
             return numpy_view(t).attr("reshape")(py::tuple()).attr("item")();
           })
      .def("tolist", [](const PyTensor& t) { return numpy_view(t).attr("tolist")(); })
      .def("__bool__",
           [](const PyTensor& t) {
             if (t.tensor.type().num_elements() != 1)
               throw LazylabError("the truth value of a tensor of more than one element is ambiguous");
             return numpy_view(t).attr("reshape")(py::tuple()).attr("item")().cast<bool>();
           })
      .def("__float__",
           [](const PyTensor& t) { return numpy_view(t).attr("reshape")(py::tuple()).attr("item")().cast<double>(); })
      .def("__dlpack__", &to_dlpack,
           "A DLPack capsule of its data: host memory, or the device memory of a backend that shares it (CUDA)")
      .def("__dlpack_device__", &dlpack_device);
  m.def(
      "from_dlpack",
      [](const py::object& source, const ContextPtr& c, const py::object& stream) {
        return from_dlpack(c, source, stream);
      },
      py::arg("tensor"), py::arg("context"), py::arg("stream") = py::none(), "Context.from_dlpack, as a function");
}

}  // namespace lazylab::python
