"""Capture once, ahead of time: a function traced by torch.fx into aten ops
(make_fx: forward, or a whole training step written functionally), or the
forward and backward graphs TorchDynamo and AOTAutograd hand a backend, each
lowered through the same table as the lazy device (lowering.py) into one
lazylab graph. A call binds its tensors to that graph's inputs and runs it
(Context.call): no Python per aten op after the first call, and the graph is
compiled once and cached.

    step = lt.compile(fn, example_inputs)          # torch 1.13 and 2.x
    outputs = step(*inputs)                        # torch tensors in and out

    model = torch.compile(model, backend=lt.dynamo_backend(backend="cuda"))  # torch 2.x
    lt.register_dynamo_backend(); model = torch.compile(model, backend="lazylab")

(Registering imports TorchDynamo, which takes seconds: import lazylab.torch
does not do it.)
"""

import time
import weakref

import numpy as np
import torch
from torch.utils import _pytree as pytree

import lazylab

from . import runtime
from .cells import Cell
from .tensor import LazyTensor


class Compiled:
    """One aten graph (a torch.fx GraphModule) as a lazylab graph on its own
    device: called with torch tensors, returns torch tensors."""

    def __init__(self, module, example_inputs, backend="cpu", pipeline=None, options="", outputs="torch", device=None):
        if outputs not in ("torch", "lazy"):
            raise ValueError(f"outputs='{outputs}': 'torch' (tensors out) or 'lazy' (LazyTensors that stay on the device)")
        self.lazy_outputs = outputs == "lazy"
        # Graphs that pass tensors to each other (AOTAutograd's forward saves
        # what its backward reads) share one device, so those come back as
        # they went out (Exports).
        self.device = device or runtime.Device(backend=backend, pipeline=pipeline or lazylab.DEFAULT_PIPELINE,
                                               options=options)
        self.exports = Exports.of(self.device)
        start = time.perf_counter_ns()
        previous = runtime.current()
        runtime.set_current(self.device)
        try:
            lazy = [self._placeholder(value) for value in example_inputs]
            # Each argument's placeholder as made: an in-place op on an
            # argument rebinds its cell, not the graph input it started as.
            # (Held in `made` until bound: a hash is an address, which a
            # freed placeholder would hand to a later tensor.)
            made = [(i, value._cell.value) for i, value in enumerate(lazy) if isinstance(value, LazyTensor)]
            argument_of = {hash(placeholder): i for i, placeholder in made}
            flat, self.spec = pytree.tree_flatten(module(*lazy))
        finally:
            runtime.set_current(previous)
        self.outputs, roots = [], []  # each output: ("root", k), ("input", i) or ("constant", value)
        positions = {id(value._cell): i for i, value in enumerate(lazy) if isinstance(value, LazyTensor)}
        for value in flat:
            if not isinstance(value, LazyTensor):
                self.outputs.append(("constant", value))
            elif id(value._cell) in positions and value._cell.version == 0:
                self.outputs.append(("input", positions[id(value._cell)]))
            else:
                self.outputs.append(("root", len(roots)))
                roots.append(value._cell.value)
        # Arguments the function wrote in place (an optimizer's weights and
        # state, a batch norm's running statistics): their new values are
        # roots too, written back into the arguments after each call, as the
        # function would have left them.
        self.mutations = []  # (argument, root)
        for i, value in enumerate(lazy):
            if isinstance(value, LazyTensor) and value._cell.version > 0:
                self.mutations.append((i, len(roots)))
                roots.append(value._cell.value)
        context = self.device.context
        self.graph, captured = context.capture_with_inputs(roots) if roots else (None, [])
        # Each graph input is an argument (matched by identity) or a tensor the
        # function made or held (a constant of the traced graph): kept.
        self.bindings = [(argument_of[hash(t)], None) if hash(t) in argument_of else (None, t) for t in captured]
        del made
        context.discard_pending()
        self.device.counters["TraceNs"] += time.perf_counter_ns() - start

    def _placeholder(self, value):
        """An example input as a graph input of its shape and dtype, its data
        never read (AOTAutograd's examples are fake tensors)."""
        if not isinstance(value, torch.Tensor):
            return value
        if value.dtype not in runtime.DTYPES:
            raise lazylab.Error(f"lazylab has no dtype for {value.dtype} (an input of the traced graph)")
        shape = [int(d) for d in value.shape]
        return LazyTensor(Cell(self.device.context.placeholder(shape, runtime.DTYPES[value.dtype])))

    def lazy(self, tensor):
        """`tensor` on this graph's device, to pass to calls without a copy
        (weights and optimizer state that stay there between steps)."""
        return tensor if isinstance(tensor, LazyTensor) else LazyTensor(Cell(self._value(tensor)))

    def _value(self, tensor):
        """A torch tensor as a lazylab tensor: a LazyTensor's own value; host
        data shared through DLPack where the backend takes the memory (host
        backends), a CUDA tensor copied on the GPU (device backends), else
        copied through the host (Device.from_host)."""
        if isinstance(tensor, LazyTensor):
            return tensor._cell.value
        returned = self.exports.value_of(tensor)
        if returned is not None:
            self.device.counters["ReturnedTensors"] += 1
            return returned
        tensor = tensor.detach()
        if tensor.device.type == "cpu" and tensor.dtype in runtime.DTYPES:
            try:
                return self.device.context.from_dlpack(tensor.contiguous())
            except (lazylab.Error, TypeError, RuntimeError):
                pass
        return self.device.from_host(tensor)

    def graph_inputs(self, *args):
        """The lazylab tensors a call with `args` binds to the graph's
        parameters, in their order (the arguments', and those it keeps)."""
        return [self._value(args[i]) if i is not None else kept for i, kept in self.bindings]

    def __call__(self, *args):
        counters = self.device.counters
        start = time.perf_counter_ns()
        inputs = self.graph_inputs(*args)
        bound = time.perf_counter_ns()
        context = self.device.context
        results = context.call(self.graph, inputs) if self.graph is not None else []
        if results:
            context.mark_step()
        ran = time.perf_counter_ns()
        for argument, root in self.mutations:
            self._write_back(args[argument], results[root])
        out = []
        for kind, what in self.outputs:
            if kind == "root":
                out.append(LazyTensor(Cell(results[what])) if self.lazy_outputs else self.exports.out(results[what]))
            elif kind == "input":
                out.append(args[what])
            else:
                out.append(what)
        counters["Calls"] += 1
        counters["CallInputsNs"] += bound - start
        counters["CallRunNs"] += ran - bound
        counters["CallOutputsNs"] += time.perf_counter_ns() - ran
        return pytree.tree_unflatten(out, self.spec)

    def _write_back(self, argument, value):
        """An argument the function wrote in place takes its new value: a
        LazyTensor rebinds its cell; a torch tensor is copied into (a
        parameter's too: the write is not part of autograd's graph). A CPU
        tensor is copied by NumPy: torch's copy_ opens an OpenMP parallel
        region for a large tensor, and right after the cpu backend's TBB
        workers ran, those cost 0.5 ms a tensor on the 16-core GPU host
        (against 20 us with OMP_NUM_THREADS=1)."""
        if isinstance(argument, LazyTensor):
            argument._cell.write(value)
            return
        if argument.device.type == "cpu" and argument.dtype in runtime.DTYPES:
            np.copyto(argument.detach().numpy(), np.asarray(value.numpy()), casting="no")
            # A write torch sees, as copy_'s would be: the version counter
            # (autograd's and Exports') moves, by an in-place op on no elements.
            argument.detach().unsqueeze(0).narrow(0, 0, 0).zero_()
        else:
            with torch.no_grad():
                argument.copy_(torch.from_dlpack(value))
        self.device.counters["WrittenBackInputs"] += 1

    def metrics(self):
        return self.device.metrics()


class Exports:
    """The torch tensors a device's graphs handed out (DLPack views of its
    buffers), so that one passed back unchanged is the lazylab value it came
    from: no copy, where a CUDA tensor would otherwise be copied on the GPU
    again. "Unchanged": the same address, shape and dtype, contiguous, and
    the version counter (which aliases share: AOTAutograd's saved tensors
    come back as detached aliases) as it was handed out."""

    def __init__(self):
        self.by_address = {}  # data_ptr -> (weakref to the torch tensor, its _version then, lazylab value)

    @staticmethod
    def of(device):
        if not hasattr(device, "exports"):
            device.exports = Exports()
        return device.exports

    def out(self, value):
        tensor = torch.from_dlpack(value)
        address = tensor.data_ptr()

        def forget(dead, address=address):
            entry = self.by_address.get(address)
            if entry is not None and entry[0] is dead:
                del self.by_address[address]

        self.by_address[address] = (weakref.ref(tensor, forget), tensor._version, value)
        return tensor

    def value_of(self, tensor):
        entry = self.by_address.get(tensor.data_ptr())
        if entry is None:
            return None
        original = entry[0]()
        if original is None or original._version != entry[1] or tensor._version != entry[1]:
            return None
        same = tensor.shape == original.shape and tensor.dtype == original.dtype and tensor.is_contiguous()
        return entry[2] if same and tensor.device == original.device else None


def compile(fn, example_inputs, backend="cpu", pipeline=None, options="", outputs="torch"):  # noqa: A001 - torch's name
    """fn traced once by torch.fx's make_fx into aten ops on `example_inputs`
    and lowered into one lazylab graph; returns a callable taking tensors of
    the same shapes (torch tensors, or its own .lazy(t) tensors, which stay
    on the device). fn may call torch.autograd.grad (the gradients are in the
    graph). outputs="lazy" returns LazyTensors on the device (a training
    step's new weights, fed to the next call without a copy)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    traced = make_fx(fn)(*example_inputs)
    compiled = Compiled(traced, example_inputs, backend=backend, pipeline=pipeline, options=options, outputs=outputs)
    compiled.fx_graph = traced
    return compiled


def dynamo_backend(backend="cpu", pipeline=None, options="", call=None):
    """A TorchDynamo backend (torch 2.x): AOTAutograd's forward and backward
    aten graphs each become a Compiled lazylab graph on `backend`. An input
    a graph writes (an optimizer's weights and state, batch norm's running
    statistics) is written in the graph, so Compiled writes it back (not
    AOTAutograd's wrapper after the call). call(compiled, args), where
    given, makes each call in its place (step_dynamo.py records them)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    graphs, shared = [], []

    def compiler(module, example_inputs):
        device = shared[0] if shared else None
        compiled = Compiled(module, example_inputs, backend=backend, pipeline=pipeline, options=options, device=device)
        compiled.aten_ops = sum(1 for node in module.graph.nodes if isinstance(node.target, torch._ops.OpOverload))
        graphs.append(compiled)
        shared[:] = [compiled.device]
        return make_boxed_func(compiled if call is None else (lambda *args: call(compiled, args)))

    aot = aot_autograd(fw_compiler=compiler, bw_compiler=compiler, keep_inference_input_mutations=True)
    aot.graphs = graphs  # each Compiled graph (forward, backward) as dynamo hands them over: their metrics()
    aot.metrics_report = lambda: dynamo_report(graphs)
    return aot


def dynamo_report(graphs):
    """The lazy device's report (PyTorch/XLA's names) for the graphs a dynamo
    backend was handed, then what TorchDynamo did in this process: its graph
    breaks with their reasons, and each recompile with the guard that
    failed."""
    from torch._dynamo import utils

    lines = [f"Metric: DynamoGraphs (forward and backward, handed to lazylab)\n  Value: {len(graphs)}"]
    breaks = graph_breaks()
    lines.append(f"Counter: GraphBreaks\n  Value: {sum(breaks.values())}")
    for reason, count in breaks.most_common():
        lines.append(f"GraphBreak: {count}x {reason}")
    for code, failures in getattr(utils, "guard_failures", {}).items():
        where = f"{getattr(code, 'co_name', code)} ({getattr(code, 'co_filename', '?')}:{getattr(code, 'co_firstlineno', '?')})"
        for failure in failures:
            lines.append(f"Recompile: {where}: guard failed: {failure}")
    devices = {id(graph.device): graph.device for graph in graphs}.values()
    # Each graph is compiled once by design: the device's own recompile
    # diagnoses would only compare one graph with the next.
    device_lines = [line for device in devices for line in device.metrics_report().splitlines()
                    if not line.startswith("Recompile: ")]
    return "\n".join(lines + device_lines) + "\n"


def graph_breaks():
    """TorchDynamo's graph breaks in this process: a Counter by reason."""
    from torch._dynamo import utils

    return utils.counters["graph_break"]


def register_dynamo_backend():
    """torch.compile(..., backend="lazylab") on torch 2.x (the cpu backend and
    the package's pipeline; dynamo_backend() chooses others)."""
    try:
        from torch._dynamo import register_backend
    except ImportError:  # torch 1.x has no TorchDynamo
        return False

    def lazylab_backend(module, example_inputs, **options):
        return dynamo_backend(**options)(module, example_inputs)

    try:
        register_backend(name="lazylab")(lazylab_backend)
    except Exception:  # already registered (a second import)
        pass
    return True
