"""A training program's whole step (forward, backward and the optimizer, as
written for eager PyTorch) traced once by torch.fx's make_fx and lowered
into one lazylab graph (fx.Compiled): the "fx" capture of the experiments'
torch workloads, beside the lazy device's.

The step's tensors (weights, their gradients where they persist, buffers,
the optimizer's state, the batch) are the graph's inputs; what the step
writes in place are its outputs (fx.Compiled writes them back). make_fx
runs the step eagerly as it traces, so the same call gives eager PyTorch's
results for the very inputs the graph takes.

What fx cannot do, said rather than hidden: a step's Python numbers (the
learning rate, momentum, Adam's bias corrections, read from its step count
by .item()) become constants of the trace, so the graph is this step's
only; a loop would trace again whenever one changes. `baked_reads` counts
the host reads of tensors that did so.
"""

import statistics
import time

import torch
from torch.utils import _python_dispatch as python_dispatch
from torch.utils._mode_utils import no_dispatch

from . import loop
from .fx import Compiled


class _ReadsOnTheHost(python_dispatch.TorchDispatchMode):
    """Innermost under make_fx: a tensor read into a Python number (.item(),
    aten::_local_scalar_dense) is read from its real value, which make_fx
    (tracing real tensors) holds, instead of make_fx's refusal of a
    data-dependent read. Counted: each is a constant of the graph."""

    def __init__(self):
        super().__init__()
        self.reads = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._local_scalar_dense.default:
            self.reads += 1
            with no_dispatch():  # past every mode (make_fx's too), to the CPU kernel
                return func(*args, **kwargs)
        return func(*args, **kwargs)


class TracedStep:
    """One step of a program, traced: `compiled` (an fx.Compiled graph
    taking `inputs`: the batch, then loop.Loop.state()), eager PyTorch's
    results of the same step on those inputs (`eager`: the loss, then each
    input as the step left it), and what the capture cost."""

    def __init__(self, compiled, inputs, eager, trace_ms, lower_ms, aten_ops, baked_reads):
        self.compiled, self.inputs, self.eager = compiled, inputs, eager
        self.trace_ms, self.lower_ms, self.aten_ops, self.baked_reads = trace_ms, lower_ms, aten_ops, baked_reads

    def run(self):
        """The graph on copies of the inputs: the loss, then each input as the
        step left it (the same order as `eager`)."""
        inputs = [tensor.clone() for tensor in self.inputs]
        loss = self.compiled(*inputs)
        return [loss] + inputs

    def call_overhead_ms(self, calls=5, state_on_device=False):
        """What a call costs the host beyond running the graph: binding its
        inputs, handing out its results and writing the step's in-place
        updates back (the median of `calls` calls). The batch is a torch
        tensor each call; the state (weights, optimizer state) too, or with
        `state_on_device` the device's own tensors (Compiled.lazy), as a
        loop keeps them between steps: their updates rebind, nothing is
        copied."""
        inputs = [tensor.clone() for tensor in self.inputs]
        if state_on_device:
            inputs[2:] = [self.compiled.lazy(tensor) for tensor in inputs[2:]]
        counters, samples = self.compiled.device.counters, []
        for _ in range(calls):
            before = counters["CallInputsNs"] + counters["CallOutputsNs"]
            self.compiled(*inputs)
            samples.append((counters["CallInputsNs"] + counters["CallOutputsNs"] - before) / 1e6)
        return statistics.median(samples)


def trace(program, steps=3, params=None, seed=0, backend="cpu", pipeline=None):
    """Runs steps-1 steps of `program` eagerly (so the optimizer's state
    exists), as loop.run would with this seed, then traces step `steps`."""
    from torch.fx.experimental.proxy_tensor import make_fx

    eager_loop = loop.Loop(program, "eager", steps, params, seed)
    for _ in range(steps - 1):
        eager_loop.step(*eager_loop.batch())
    x, y = eager_loop.batch()
    state = eager_loop.state()
    inputs = [tensor.detach().clone() for tensor in [x, y] + state]
    reads, eager = _ReadsOnTheHost(), []

    def whole_step(x, y, *state):
        with reads:
            loss = eager_loop.step(x, y)
        eager.append(loss.detach().clone())
        eager.extend(tensor.detach().clone() for tensor in (x, y) + state)
        return loss.detach()

    start = time.perf_counter()
    fx_graph = make_fx(whole_step)(x, y, *state)
    traced = time.perf_counter()
    compiled = Compiled(fx_graph, inputs, backend=backend, pipeline=pipeline)
    lowered = time.perf_counter()
    aten_ops = sum(1 for node in fx_graph.graph.nodes if isinstance(node.target, torch._ops.OpOverload))
    return TracedStep(compiled, inputs, eager, (traced - start) * 1e3, (lowered - traced) * 1e3, aten_ops, reads.reads)
