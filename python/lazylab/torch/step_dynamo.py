"""A training program's whole step compiled by torch.compile with lazylab's
dynamo backend (torch 2.x), saved as one lazylab graph: the "dynamo"
capture of the experiments' torch workloads, beside the lazy device's and
torch.fx's.

TorchDynamo cuts the step into graphs at its graph breaks (loss.backward()
is one), AOTAutograd splits the model's part into a forward and a backward
graph, and each becomes a lazylab graph (fx.Compiled) called on its own.
To save the step, one step's calls are recorded and stitched in order:
where a graph's argument is a tensor an earlier graph returned or wrote
(the same memory, shape, strides, dtype and version), the stitched graph
passes that value on; any other argument is an input. Its inputs are then
the batch, the state the step reads and any constants; its outputs the
loss and every state tensor the step changed.

What runs between the graphs (autograd's engine handing each gradient to
.grad, the step's own Python) is in no graph. Where it only passes tensors
on, the stitch follows them; where it changes the loss or a tensor the
step leaves, the stitch cannot, and that is an error naming the tensor,
never a graph that differs from the step. An argument that is neither the
batch, the state nor a graph's output (autograd's seed gradient of the
loss) becomes an input holding the value this step saw: counted as a
constant.
"""

import time

import numpy as np
import torch
from torch.utils import _pytree as pytree

import lazylab

from . import loop
from .fx import graph_breaks


def _key(tensor):
    """What makes a tensor passed between graphs the same one (its version
    is checked beside it)."""
    return (tensor.device.type, tensor.device.index, tensor.data_ptr(), tensor.dtype, tuple(tensor.shape),
            tuple(tensor.stride()))


class Recorder:
    """The dynamo backend's calls of one step, each argument and result named
    by a symbol: a step input (a copy of its value as the call saw it) or a
    graph's result. A pass-through while not `active`."""

    def __init__(self):
        self.active = False
        self.symbols = {}  # _key -> (version, symbol)
        self.inputs = {}  # symbol -> a copy of the tensor's value as first passed
        self.input_keys = {}  # symbol -> its tensor's _key
        self.calls = []  # (compiled, the arguments' symbols, {root: symbol})
        self.held = []  # what keeps each symbol's memory from being reused within the step
        self.count = 0

    def __call__(self, compiled, args):
        if not self.active:
            return compiled(*args)
        arguments = [self.symbol(a) if isinstance(a, torch.Tensor) else None for a in args]
        result = compiled(*args)
        produced = {}
        flat, _ = pytree.tree_flatten(result)
        for (kind, what), value in zip(compiled.outputs, flat):
            if kind == "root":
                produced[what] = self._new(value, compiled.exports.value_of(value))
        for argument, root in compiled.mutations:
            produced[root] = self._new(args[argument], args[argument])
        self.calls.append((compiled, arguments, produced))
        return result

    def symbol(self, tensor):
        """The symbol of a tensor passed to a graph: a graph's result, or an
        input (its value copied now)."""
        found = self.found(tensor)
        if found is not None:
            return found
        symbol = self._new(tensor, tensor)
        self.inputs[symbol] = tensor.detach().clone()
        self.input_keys[symbol] = _key(tensor)
        return symbol

    def constants(self, known):
        """How many inputs are none of the `known` tensors (the batch and the
        state before the step): values this step saw, constants of its graph."""
        keys = {_key(t) for t in known}
        return sum(1 for key in self.input_keys.values() if key not in keys)

    def found(self, tensor):
        entry = self.symbols.get(_key(tensor))
        return entry[1] if entry is not None and entry[0] == tensor._version else None

    def _new(self, tensor, keep):
        # A graph's output is held by its lazylab value, not the torch tensor:
        # autograd hands a gradient to .grad without a copy only while nothing
        # else holds it.
        symbol, self.count = self.count, self.count + 1
        self.symbols[_key(tensor)] = (tensor._version, symbol)
        self.held.append(keep)
        return symbol

    def stitch(self, roots):
        """The recorded calls as one graph whose outputs are `roots`
        (symbols), and the lazylab tensors bound to its parameters."""
        if not self.calls:
            raise lazylab.Error("the step called no graph: TorchDynamo compiled none of it")
        first = self.calls[0][0]
        context = first.device.context
        values = {symbol: first._value(copy) for symbol, copy in self.inputs.items()}
        for compiled, arguments, produced in self.calls:
            inputs = [values[arguments[i]] if i is not None else kept for i, kept in compiled.bindings]
            results = context.call(compiled.graph, inputs) if compiled.graph is not None else []
            for root, symbol in produced.items():
                values[symbol] = results[root]
        graph, bound = context.capture_with_inputs([values[symbol] for symbol in roots])
        context.discard_pending()
        return graph, bound


class DynamoStep:
    """One step of a program under torch.compile, stitched: `graph` taking
    `inputs` (lazylab tensors) gives the loss, then each tensor the step
    changed; `eager` holds eager PyTorch's loss and state after the same step
    from the same state and batch; `state` says, for each state tensor,
    which output holds it after the step (None: the step left it as it was,
    `unchanged` has its value)."""

    def __init__(self, device, graph, inputs, eager, state, unchanged):
        self.device, self.graph, self.inputs, self.eager = device, graph, inputs, eager
        self.state, self.unchanged = state, unchanged

    def run(self):
        """The stitched graph on its inputs: the loss, then every state tensor
        as the step left it (NumPy arrays, in `eager`'s order)."""
        context = self.device.context
        results = context.call(self.graph, self.inputs)
        context.mark_step()
        got = [np.asarray(r.numpy()) for r in results]
        return [got[0]] + [got[o] if o is not None else u for o, u in zip(self.state, self.unchanged)]


def capture(program, steps=3, params=None, seed=0, backend="cpu", pipeline=None):
    """Runs steps-1 steps of `program` under torch.compile with lazylab's
    dynamo backend (and eagerly beside it, so that both optimizers hold
    state), then records step `steps`, stitches it and runs eager PyTorch's
    step from the same state and batch; then one more step, not recorded,
    says what a loop's step costs the host. Returns (DynamoStep, record)."""
    recorder = Recorder()
    compiled = loop.Loop(program, "dynamo", steps, params, seed, backend=backend, pipeline=pipeline, call=recorder)
    eager = loop.Loop(program, "eager", steps, params, seed)
    walls, runs, compiles = [], [], []  # each step's wall time, time running graphs (ms), graphs compiled

    def running_ns():  # the graphs share one device
        return compiled.dynamo.graphs[0].device.counters["CallRunNs"] if compiled.dynamo.graphs else 0

    def timed(x, y):
        graphs, run_ns, start = len(compiled.dynamo.graphs), running_ns(), time.perf_counter()
        loss = compiled.step(x, y)
        compiled.sync()
        walls.append((time.perf_counter() - start) * 1e3)
        runs.append((running_ns() - run_ns) / 1e6)
        compiles.append(len(compiled.dynamo.graphs) - graphs)
        return loss

    for _ in range(steps - 1):
        x, y = compiled.batch()
        timed(x, y)
        eager.step(x, y)
    before, want_state = compiled.state(), eager.state()
    if [tuple(t.shape) for t in before] != [tuple(t.shape) for t in want_state]:
        raise lazylab.Error("the compiled and the eager loop hold different tensors (weights, gradients, buffers, "
                            "optimizer state)")
    with torch.no_grad():
        for want, got in zip(want_state, before):
            want.copy_(got)
    versions = {id(t): t._version for t in before}
    x, y = compiled.batch()
    recorder.active = True
    loss = timed(x, y)
    recorder.active = False
    want_loss = eager.step(x, y)
    after = compiled.state()
    roots, state, unchanged = [_left(recorder, loss, "the loss")], [], []
    for index, tensor in enumerate(after):
        symbol = recorder.found(tensor)
        if symbol is None and versions.get(id(tensor)) != tensor._version:
            raise lazylab.Error(f"state tensor {index} {tuple(tensor.shape)} was changed outside the graphs TorchDynamo "
                                f"handed lazylab (by PyTorch between them): the step cannot be saved as one graph")
        if symbol is None or symbol in recorder.inputs:
            state.append(None)
            unchanged.append(loop.host(tensor).copy())
        else:
            state.append(len(roots))
            unchanged.append(None)
            roots.append(symbol)
    graph, inputs = recorder.stitch(roots)
    step = DynamoStep(compiled.dynamo.graphs[0].device, graph, inputs,
                      [loop.host(want_loss)] + [loop.host(t) for t in eager.state()], state, unchanged)
    timed(*compiled.batch())  # a step not recorded: what a loop's step costs the host
    steady = walls[-1] - runs[-1]  # guards, AOTAutograd's wrappers, binding, the Python between graphs, recompiles
    record = {
        "graphs": len(recorder.calls),
        "steps": len(walls),
        "aten_ops_per_step": sum(c.aten_ops for c, _, _ in recorder.calls),
        "capture_ms": walls[0] - runs[0] - (steady if compiles[-1] == 0 else 0),
        "capture_every_step": compiles[-1] > 0,
        "host_ms_per_step": steady,
        "compiles_per_step": compiles,
        "constants": recorder.constants([x, y] + before),
        "graph_breaks": {str(reason): count for reason, count in graph_breaks().items()},
    }
    return step, record


def _left(recorder, tensor, what):
    symbol = recorder.found(tensor)
    if symbol is None:
        raise lazylab.Error(f"{what} was changed outside the graphs TorchDynamo handed lazylab: the step cannot be "
                            "saved as one graph")
    return symbol

