// Context and Tensor, and the op table with one generic entry that the
// Python package turns into a function per op (lazylab/ops.py): the ops are
// listed once, in ops.def.
#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "binding.h"
#include "core/suggest.h"
#include "core/tensor_ops.h"

namespace lazylab::python {
namespace {

using ContextPtr = std::shared_ptr<ContextHandle>;

Dims dims_of(const std::vector<int64_t>& shape) { return Dims(shape.begin(), shape.end()); }

py::tuple shape_tuple(const Dims& dims) {
  py::tuple shape(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) shape[d] = dims[d];
  return shape;
}

const char* category_name(OpCategory category) {
  switch (category) {
    case OpCategory::Leaf: return "leaf";
    case OpCategory::Elementwise: return "elementwise";
    case OpCategory::Layout: return "layout";
    case OpCategory::Reduction: return "reduction";
    case OpCategory::Contraction: return "contraction";
    case OpCategory::Composite: return "composite";
    case OpCategory::Window: return "window";
  }
  return "?";
}

// The op table as Python sees it: a dict per op.
py::list op_table() {
  py::list rows;
  for (int id = 0; id < kNumOps; ++id) {
    const OpInfo& info = op_info(static_cast<OpId>(id));
    py::list attrs;
    for (int a = 0; a < info.num_attrs; ++a)
      attrs.append(py::make_tuple(std::string(info.attrs[a].name), std::string(attr_kind_name(info.attrs[a].kind))));
    py::dict row;
    row["id"] = id;
    row["name"] = std::string(info.name);
    row["category"] = category_name(info.category);
    row["arity"] = info.arity;
    row["declared_type"] = info.type_rule == TypeRule::Declared;
    row["attrs"] = attrs;
    rows.append(row);
  }
  return rows;
}

// A Python int as a value of integer `dtype` (past its range, as NumPy 2:
// an error, not a wrapped value).
int64_t integer_of(const py::handle& value, DType dtype) {
  auto refuse = [&] {
    return LazylabError(fmt::format("{} is no value of {}", std::string(py::str(value)), dtype_name(dtype)));
  };
  int64_t integer = 0;
  try {
    integer = value.cast<int64_t>();
  } catch (const py::cast_error&) {
    throw refuse();
  }
  if (integer_scalar_attr(dtype, integer).i != integer) throw refuse();
  return integer;
}

// One attribute from Python, as its schema kind says.
AttrValue attr_from(const py::handle& value, AttrKind kind, DType dtype, const std::string& where) {
  AttrValue attr;
  try {
    switch (kind) {
      case AttrKind::Int: attr.i = value.cast<int64_t>(); break;
      case AttrKind::Bool: attr.i = value.cast<bool>(); break;
      case AttrKind::Float: attr.f = value.cast<double>(); break;
      case AttrKind::Ints: attr.ints = value.cast<std::vector<int64_t>>(); break;
      case AttrKind::Scalar:
        attr = py::isinstance<py::int_>(value) && !is_float(dtype)
                   ? integer_scalar_attr(dtype, integer_of(value, dtype))
                   : scalar_attr(dtype, value.cast<double>());
        break;
    }
  } catch (const py::cast_error&) {
    throw LazylabError(fmt::format("{}: expected {}, got {}", where, attr_kind_name(kind),
                                   std::string(py::str(value.get_type().attr("__name__")))));
  }
  return attr;
}

const ContextPtr& context_of(const std::vector<PyTensor*>& operands, const std::string& op) {
  if (operands.empty()) throw LazylabError(op + ": needs at least one tensor operand");
  for (const PyTensor* t : operands)
    if (!t) throw LazylabError(op + ": an operand is None");
  for (const PyTensor* t : operands)
    if (t->owner != operands[0]->owner) throw LazylabError(op + ": operands belong to different Contexts");
  return operands[0]->owner;
}

// Any op of the table by name, its attributes by name; elementwise operands
// broadcast NumPy's way, as the C++ API's do.
OpId op_named(const std::string& name) {
  if (auto op = find_op(name)) return *op;
  std::vector<std::string> names;
  for (int id = 0; id < kNumOps; ++id) names.emplace_back(op_name(static_cast<OpId>(id)));
  throw LazylabError(fmt::format("no op '{}'{}", name, did_you_mean(name, names)));
}

// A unary op without attributes, as a Tensor method: one call into C++.
bool is_plain_unary(const OpInfo& info) {
  return info.arity == 1 && info.num_attrs == 0 && info.type_rule != TypeRule::Declared &&
         (info.category == OpCategory::Elementwise || info.category == OpCategory::Composite);
}

PyTensor apply(OpId op, const std::vector<PyTensor*>& operands, const py::dict& attrs, std::optional<DType> dtype) {
  const OpInfo& info = op_info(op);
  std::string name(info.name);
  const ContextPtr& owner = context_of(operands, name);
  if (info.arity >= 0 && static_cast<int>(operands.size()) != info.arity)
    throw LazylabError(fmt::format("{}: takes {} operands, got {}", name, info.arity, operands.size()));
  std::vector<Tensor> tensors;
  for (const PyTensor* t : operands) tensors.push_back(t->tensor);
  if (info.category == OpCategory::Elementwise && tensors.size() > 1) {
    Dims shape = tensors[0].shape();
    for (const Tensor& t : tensors) shape = value_or_raise(broadcast_shapes(shape, t.shape()));
    for (Tensor& t : tensors) t = broadcast_to(t, shape);
  }
  Attrs values;
  std::vector<std::string> known;
  for (int a = 0; a < info.num_attrs; ++a) {
    std::string attr_name(info.attrs[a].name);
    known.push_back(attr_name);
    if (!attrs.contains(attr_name)) throw LazylabError(fmt::format("{}: needs attribute '{}'", name, attr_name));
    values[a] = attr_from(attrs[attr_name.c_str()], info.attrs[a].kind, tensors[0].dtype(), name + "." + attr_name);
  }
  for (const auto& [key, value] : attrs) {
    std::string given = py::str(key);
    if (std::find(known.begin(), known.end(), given) == known.end())
      throw LazylabError(fmt::format("{}: no attribute '{}'{}", name, given, did_you_mean(given, known)));
  }
  std::optional<TensorType> declared;
  if (info.type_rule == TypeRule::Declared) {
    if (!dtype) throw LazylabError(name + ": needs dtype=");
    declared = TensorType{*dtype, tensors[0].shape()};
  }
  return wrap(owner,
              owner->context->record(op, std::span<const Tensor>(tensors), values, declared ? &*declared : nullptr));
}

// A Python number beside a tensor: a float through the C++ scalar ops; an
// int for an integer tensor as an exact splat (a double holds integers to
// 2^53 only).
bool exact_integer(const PyTensor& x, const py::object& value) {
  return py::isinstance<py::int_>(value) && !py::isinstance<py::bool_>(value) && !is_float(x.tensor.dtype());
}

using BinaryFn = Tensor (*)(Tensor, Tensor);
using ScalarFn = Tensor (*)(Tensor, double);

PyTensor binary_with(const PyTensor& x, const py::object& other, BinaryFn tensors, ScalarFn scalar, bool scalar_first) {
  if (scalar && PyFloat_CheckExact(other.ptr()))  // the common case first: no type lookup (about 800 instructions)
    return wrap(x.owner, scalar(x.tensor, PyFloat_AS_DOUBLE(other.ptr())));
  if (py::isinstance<PyTensor>(other)) {
    const PyTensor& y = other.cast<const PyTensor&>();
    if (y.owner != x.owner) throw LazylabError("operands belong to different Contexts");
    return wrap(x.owner, scalar_first ? tensors(y.tensor, x.tensor) : tensors(x.tensor, y.tensor));
  }
  if (exact_integer(x, other)) {
    Tensor splat =
        x.owner->context->full_integer(integer_of(other, x.tensor.dtype()), TensorType{x.tensor.dtype(), {}});
    return wrap(x.owner, scalar_first ? tensors(splat, x.tensor) : tensors(x.tensor, splat));
  }
  double value = 0;
  try {
    value = other.cast<double>();
  } catch (const py::cast_error&) {
    throw py::type_error("unsupported operand: " + std::string(py::str(other.get_type().attr("__name__"))));
  }
  if (!scalar) {  // no scalar form: a splat of x's type
    Tensor splat = x.owner->context->full(value, TensorType{x.tensor.dtype(), {}});
    return wrap(x.owner, scalar_first ? tensors(splat, x.tensor) : tensors(x.tensor, splat));
  }
  return wrap(x.owner, scalar(x.tensor, value));
}

Tensor rsub(Tensor x, double v) { return v - std::move(x); }
Tensor rdiv(Tensor x, double v) { return v / std::move(x); }
Tensor radd(Tensor x, double v) { return v + std::move(x); }
Tensor rmul(Tensor x, double v) { return v * std::move(x); }
Tensor plus(Tensor a, double b) { return std::move(a) + b; }
Tensor minus(Tensor a, double b) { return std::move(a) - b; }
Tensor times(Tensor a, double b) { return std::move(a) * b; }
Tensor over(Tensor a, double b) { return std::move(a) / b; }

std::vector<int64_t> axes_of(const py::object& axes) {
  if (axes.is_none()) return {};
  if (py::isinstance<py::int_>(axes)) return {axes.cast<int64_t>()};
  return axes.cast<std::vector<int64_t>>();
}

std::vector<int64_t> shape_args(const py::args& args) {  // reshape(2, 3) or reshape((2, 3))
  if (args.size() == 1 && !py::isinstance<py::int_>(args[0])) return args[0].cast<std::vector<int64_t>>();
  return args.cast<std::vector<int64_t>>();
}

// A reshape's shape with its one -1 (NumPy's "the rest") worked out; more
// than one, or one that leaves a remainder, is the reshape's own error.
Dims inferred_shape(std::vector<int64_t> shape, const Tensor& x) {
  auto unknown = std::find(shape.begin(), shape.end(), -1);
  if (unknown == shape.end() || std::count(shape.begin(), shape.end(), -1) > 1) return dims_of(shape);
  int64_t known = 1;
  for (int64_t d : shape)
    if (d != -1) known *= d;
  int64_t elements = x.type().num_elements();
  if (known > 0 && elements % known == 0) *unknown = elements / known;
  return dims_of(shape);
}

py::dict metrics_dict(const Metrics& m) {
  py::dict d;
  d["traces"] = m.traces;
  d["nodes_traced"] = m.nodes_traced;
  d["cache_hits"] = m.cache_hits;
  d["cache_misses"] = m.cache_misses;
  d["evictions"] = m.evictions;
  d["compile_ms"] = m.compile_ms;
  d["execute_ms"] = m.execute_ms;
  d["device_execute_ms"] = m.device_execute_ms;
  d["host_to_device_transfers"] = m.host_to_device_transfers;
  d["host_to_device_bytes"] = m.host_to_device_bytes;
  d["device_to_host_transfers"] = m.device_to_host_transfers;
  d["device_to_host_bytes"] = m.device_to_host_bytes;
  d["donated_buffers"] = m.donated_buffers;
  d["donated_bytes"] = m.donated_bytes;
  d["recompile_diagnoses"] = m.recompile_diagnoses;
  return d;
}

void bind_context(py::module_& m) {
  py::class_<ContextHandle, ContextPtr>(m, "Context",
                                        "Traces ops lazily; a sync cuts the trace into a graph and runs it on the "
                                        "engine (without one it only captures)")
      .def(py::init([](std::shared_ptr<EngineHandle> engine) { return std::make_shared<ContextHandle>(engine); }),
           py::arg("engine") = nullptr)
      .def(
          "full",
          [](const ContextPtr& c, const py::object& value, const std::vector<int64_t>& shape, DType dtype) {
            TensorType type{dtype, dims_of(shape)};
            if (py::isinstance<py::int_>(value) && !py::isinstance<py::bool_>(value) && !is_float(dtype))
              return wrap(c, c->context->full_integer(integer_of(value, dtype), type));
            return wrap(c, c->context->full(value.cast<double>(), type));
          },
          py::arg("value"), py::arg("shape"), py::arg("dtype") = DType::F32,
          "A splat of `value` (hashed by value: a constant of the graph)")
      .def(
          "dynamic_scalar",
          [](const ContextPtr& c, double value, DType dtype) {
            return wrap(c, c->context->dynamic_scalar(value, dtype));
          },
          py::arg("value"), py::arg("dtype") = DType::F32,
          "A scalar that changes between steps: an input of the graph, so the cache keeps hitting")
      .def(
          "iota",
          [](const ContextPtr& c, const std::vector<int64_t>& shape, int64_t axis, DType dtype) {
            return wrap(c, c->context->iota(TensorType{dtype, dims_of(shape)}, axis));
          },
          py::arg("shape"), py::arg("axis"), py::arg("dtype") = DType::I64)
      .def(
          "placeholder",
          [](const ContextPtr& c, const std::vector<int64_t>& shape, DType dtype) {
            return wrap(c, c->context->placeholder(TensorType{dtype, dims_of(shape)}));
          },
          py::arg("shape"), py::arg("dtype") = DType::F32, "An input with no data: it traces, and refuses to run")
      .def(
          "sync", [](const ContextPtr& c) { check(c->context->sync()); }, "Computes every live pending tensor")
      .def(
          "mark_step", [](const ContextPtr& c) { check(c->context->mark_step()); }, "sync(), by PyTorch/XLA's name")
      .def(
          "wait", [](const ContextPtr& c) { check(c->context->wait()); }, "Waits for the device to finish")
      .def("discard_pending", [](const ContextPtr& c) { c->context->discard_pending(); })
      .def(
          "capture", [](const ContextPtr& c) { return c->context->capture(); },
          "The graph sync() would run now, without running it")
      .def(
          "capture_with_inputs",
          [](const ContextPtr& c, std::optional<std::vector<PyTensor>> roots) {
            std::vector<Tensor> inputs;
            Graph graph;
            if (roots) {
              std::vector<Tensor> wanted;
              for (const PyTensor& root : *roots) wanted.push_back(root.tensor);
              graph = value_or_raise(c->context->capture(wanted, inputs));
            } else {
              graph = c->context->capture(inputs);
            }
            py::list wrapped;
            for (Tensor& input : inputs) wrapped.append(wrap(c, std::move(input)));
            return py::make_tuple(std::move(graph), std::move(wrapped));
          },
          py::arg("roots") = py::none(),
          "capture() (or the graph of `roots`, in order), and the tensor bound to each of its parameters, by ordinal")
      .def(
          "call",
          [](const ContextPtr& c, const Graph& graph, const std::vector<PyTensor>& inputs) {
            std::vector<Tensor> bound;
            for (const PyTensor& input : inputs) bound.push_back(input.tensor);
            py::list outputs;
            for (Tensor& output : value_or_raise(c->context->call(graph, bound)))
              outputs.append(wrap(c, std::move(output)));
            return outputs;
          },
          py::arg("graph"), py::arg("inputs"),
          "`graph` as a function: recorded on this trace with parameter N bound to inputs[N]; its outputs, pending")
      .def_property_readonly("pending_nodes", [](const ContextPtr& c) { return c->context->pending_nodes(); })
      .def_property(
          "max_trace_nodes", [](const ContextPtr& c) { return c->context->max_trace_nodes(); },
          [](const ContextPtr& c, uint64_t n) { c->context->set_max_trace_nodes(n); })
      .def_property_readonly("engine", [](const ContextPtr& c) { return c->engine; })
      .def_property_readonly("metrics", [](const ContextPtr& c) { return metrics_dict(c->context->metrics()); });
}

void bind_tensor(py::module_& m) {
  py::class_<PyTensor> tensor(m, "Tensor", "A lazy tensor: ops record; a host read (numpy(), item()) syncs");
  tensor.def_property_readonly("shape", [](const PyTensor& t) { return shape_tuple(t.tensor.shape()); })
      .def_property_readonly("dtype", [](const PyTensor& t) { return t.tensor.dtype(); })
      .def_property_readonly("ndim", [](const PyTensor& t) { return t.tensor.rank(); })
      .def_property_readonly("size", [](const PyTensor& t) { return t.tensor.type().num_elements(); })
      .def_property_readonly("pending", [](const PyTensor& t) { return t.tensor.pending(); })
      .def_property_readonly("context", [](const PyTensor& t) { return t.owner; })
      .def("__len__",
           [](const PyTensor& t) {
             if (t.tensor.rank() == 0) throw py::type_error("len() of a 0-d tensor");
             return t.tensor.shape()[0];
           })
      .def("__repr__",
           [](const PyTensor& t) {
             return fmt::format("<lazylab.Tensor {}{}>", to_string(t.tensor.type()),
                                t.tensor.pending() ? " pending" : "");
           })
      .def("__hash__", [](const PyTensor& t) { return reinterpret_cast<uintptr_t>(t.tensor.impl()); })
      .def("__add__", [](const PyTensor& x, const py::object& y) { return binary_with(x, y, add, plus, false); })
      .def("__radd__", [](const PyTensor& x, const py::object& y) { return binary_with(x, y, add, radd, true); })
      .def("__sub__", [](const PyTensor& x, const py::object& y) { return binary_with(x, y, sub, minus, false); })
      .def("__rsub__", [](const PyTensor& x, const py::object& y) { return binary_with(x, y, sub, rsub, true); })
      .def("__mul__", [](const PyTensor& x, const py::object& y) { return binary_with(x, y, mul, times, false); })
      .def("__rmul__", [](const PyTensor& x, const py::object& y) { return binary_with(x, y, mul, rmul, true); })
      .def("__truediv__", [](const PyTensor& x, const py::object& y) { return binary_with(x, y, div, over, false); })
      .def("__rtruediv__", [](const PyTensor& x, const py::object& y) { return binary_with(x, y, div, rdiv, true); })
      .def("__pow__", [](const PyTensor& x, const py::object& y) { return binary_with(x, y, pow, nullptr, false); })
      .def("__rpow__", [](const PyTensor& x, const py::object& y) { return binary_with(x, y, pow, nullptr, true); })
      .def("__lt__", [](const PyTensor& x, const py::object& y) { return binary_with(x, y, lt, nullptr, false); })
      .def("__le__", [](const PyTensor& x, const py::object& y) { return binary_with(x, y, le, nullptr, false); })
      .def("__gt__", [](const PyTensor& x, const py::object& y) { return binary_with(x, y, gt, nullptr, false); })
      .def("__ge__", [](const PyTensor& x, const py::object& y) { return binary_with(x, y, ge, nullptr, false); })
      .def("__eq__", [](const PyTensor& x, const py::object& y) { return binary_with(x, y, eq, nullptr, false); })
      .def("__ne__", [](const PyTensor& x, const py::object& y) { return binary_with(x, y, ne, nullptr, false); })
      .def("__neg__", [](const PyTensor& x) { return wrap(x.owner, neg(x.tensor)); })
      .def("__matmul__",
           [](const PyTensor& a, const PyTensor& b) {
             if (a.owner != b.owner) throw LazylabError("operands belong to different Contexts");
             return wrap(a.owner, matmul(a.tensor, b.tensor));
           })
      .def("reshape",
           [](const PyTensor& x, const py::args& shape) {
             return wrap(x.owner, reshape(x.tensor, inferred_shape(shape_args(shape), x.tensor)));
           })
      .def("broadcast_to",
           [](const PyTensor& x, const std::vector<int64_t>& shape) {
             return wrap(x.owner, broadcast_to(x.tensor, dims_of(shape)));
           })
      .def("permute",
           [](const PyTensor& x, const py::args& perm) { return wrap(x.owner, permute(x.tensor, shape_args(perm))); })
      .def(
          "transpose", [](const PyTensor& x, int64_t a, int64_t b) { return wrap(x.owner, transpose(x.tensor, a, b)); },
          py::arg("dim0") = -2, py::arg("dim1") = -1)
      .def("astype", [](const PyTensor& x, DType dtype) { return wrap(x.owner, cast(x.tensor, dtype)); })
      .def(
          "softmax", [](const PyTensor& x, int64_t axis) { return wrap(x.owner, softmax(x.tensor, axis)); },
          py::arg("axis") = -1);
  // The reductions over `axes` (all when None; negative counts from the end).
  using Reduce = Tensor (*)(const Tensor&, std::vector<int64_t>, bool);
  for (auto [name, reduce] : {std::pair<const char*, Reduce>{"sum", sum}, {"mean", mean}, {"max", max}, {"min", min}})
    tensor.def(
        name,
        [reduce](const PyTensor& x, const py::object& axes, bool keepdim) {
          return wrap(x.owner, reduce(x.tensor, axes_of(axes), keepdim));
        },
        py::arg("axes") = py::none(), py::arg("keepdim") = false);
  for (int id = 0; id < kNumOps; ++id) {
    const OpInfo& info = op_info(static_cast<OpId>(id));
    if (!is_plain_unary(info) || py::hasattr(tensor, std::string(info.name).c_str())) continue;
    auto op = static_cast<OpId>(id);
    tensor.def(
        std::string(info.name).c_str(),
        [op](const PyTensor& x) {
          const Tensor* operands[] = {&x.tensor};
          return wrap(x.owner, x.owner->context->record(op, operands));
        },
        (std::string(info.name) + ": the op of the op table").c_str());
  }
}

}  // namespace

void bind_tensors(py::module_& m) {
  bind_context(m);
  bind_tensor(m);
  m.def("op_table", &op_table, "Each op of the op table (ops.def): name, category, arity, attributes");
  m.def(
      "apply",
      [](int id, const std::vector<PyTensor*>& operands, const py::dict& attrs, std::optional<DType> dtype) {
        if (id < 0 || id >= kNumOps) throw LazylabError(fmt::format("no op with id {}", id));
        return apply(static_cast<OpId>(id), operands, attrs, dtype);
      },
      py::arg("op"), py::arg("operands"), py::arg("attrs") = py::dict(), py::arg("dtype") = std::nullopt,
      "Records op `op` (its id in the op table, or its name) on `operands`, its attributes by name (lazylab.ops "
      "wraps each op)");
  m.def(
      "apply",
      [](const std::string& name, const std::vector<PyTensor*>& operands, const py::dict& attrs,
         std::optional<DType> dtype) { return apply(op_named(name), operands, attrs, dtype); },
      py::arg("op"), py::arg("operands"), py::arg("attrs") = py::dict(), py::arg("dtype") = std::nullopt);
}

}  // namespace lazylab::python
