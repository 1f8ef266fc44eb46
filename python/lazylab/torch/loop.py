"""A training program in a file, run as a loop under one capture style, so
the styles compare on one program: the experiments' torch workloads, their
peers and the tests all run loops through here.

A program file defines PARAMS (its default sizes), model(params),
optimizer(model, params, steps) -> (optimizer, schedule or None),
batch(generator, params, size) -> (x, y) on the CPU, and
step(model, optimizer, schedule, x, y) -> loss, written as for eager PyTorch.

Captures: "eager" (PyTorch as written), "lazy" (lazylab.torch: the step
traced below autograd, cut at mark_step), "ltc" (PyTorch's own Lazy Tensor
Core with its TorchScript backend, device "lazy"), "dynamo" (torch 2.x: the
step function under torch.compile with lazylab's dynamo backend, its
tensors PyTorch's own on the CPU).
"""

import importlib.util
import os
import time

import numpy as np
import torch

CAPTURES = ("eager", "lazy", "ltc", "dynamo")


def load(path):
    """The program module in `path`."""
    name = "lazylab_program_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        raise FileNotFoundError(f"{path}: no such program")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for needed in ("PARAMS", "model", "optimizer", "batch", "step"):
        if not hasattr(module, needed):
            raise ValueError(f"{path}: a training program defines {needed} (see lazylab/torch/loop.py)")
    return module


class ParameterError(ValueError):
    """A parameter the program does not have: the caller's mistake, not the
    program's."""


def sizes(program, overrides):
    params = dict(program.PARAMS)
    for key, value in (overrides or {}).items():
        if key not in params:
            raise ParameterError(f"unknown parameter '{key}' (the program has {', '.join(sorted(params))})")
        params[key] = int(value)
    return params


class Result:
    """What a loop did: each step's loss (read after the step), its wall time
    and the part of it before the sync (the Python program, and with it the
    capture), the weights at the end, and the capture's counters."""

    def __init__(self):
        self.losses, self.step_ms, self.trace_ms, self.weights, self.metrics = [], [], [], [], {}


class Loop:
    """A program's model, optimizer, schedule and batches under one capture,
    seeded so that every capture starts from the same weights and sees the
    same batches. backend, pipeline and save_graphs are
    lazylab.torch.device's (the lazy capture's); backend, pipeline and
    call are fx.dynamo_backend's (the dynamo capture's, whose backend is
    then `dynamo`)."""

    def __init__(self, program, capture="eager", steps=20, params=None, seed=0, backend="cpu", pipeline=None,
                 save_graphs=None, call=None):
        if capture not in CAPTURES:
            raise ValueError(f"unknown capture '{capture}' (one of {', '.join(CAPTURES)})")
        if capture == "dynamo" and not hasattr(torch, "compile"):
            raise ValueError(f"the dynamo capture needs torch 2.x's TorchDynamo (this is torch {torch.__version__})")
        self.program, self.capture = program, capture
        self.params = sizes(program, params)
        torch.manual_seed(seed)
        model = program.model(self.params)
        self.move, self.sync = _capture(capture, backend, pipeline, save_graphs)
        self.model = self.move(model)
        self.optimizer, self.schedule = program.optimizer(self.model, self.params, steps)
        self.generator = torch.Generator().manual_seed(seed + 1)
        self._step = program.step
        if capture == "dynamo":
            from .fx import dynamo_backend

            self.dynamo = dynamo_backend(backend=backend, pipeline=pipeline, call=call)
            self._step = torch.compile(program.step, backend=self.dynamo)

    def batch(self, size=None):
        """The next batch, on the CPU (`size` rows, default the program's)."""
        return self.program.batch(self.generator, self.params, size or self.params["batch"])

    def step(self, x, y):
        """One step on the batch, not yet synchronized: its loss."""
        x, y = self.move(x), self.move(y)
        return self._step(self.model, self.optimizer, self.schedule, x, y)

    def state(self):
        """Every tensor a step reads and may write, each once, in an order
        alike under every capture: parameters with their gradients where
        they persist, buffers, then the optimizer's state."""
        seen, tensors = set(), []

        def add(value):
            if isinstance(value, torch.Tensor) and id(value) not in seen:
                seen.add(id(value))
                tensors.append(value)

        for parameter in self.model.parameters():
            add(parameter)
            add(parameter.grad)
        for buffer in self.model.buffers():
            add(buffer)
        for state in self.optimizer.state.values():
            for value in state.values():
                add(value)
        return tensors


def run(program, capture="eager", steps=20, params=None, seed=0, ragged_last=False, backend="cpu", pipeline=None,
        read_loss=True, save_graphs=None, before_sync=None):
    """Runs `steps` steps of `program` under `capture`; the model, data and
    optimizer are the same, seed for seed, under every capture. backend,
    pipeline and save_graphs are lazylab.torch.device's; before_sync(step,
    device) is called on the lazy device before each step runs."""
    loop = Loop(program, capture, steps, params, seed, backend, pipeline, save_graphs)
    result = Result()
    for index in range(steps):
        x, y = loop.batch(loop.params["batch"] // 2 + 1 if ragged_last and index == steps - 1 else None)
        start = time.perf_counter()
        loss = loop.step(x, y)
        result.trace_ms.append((time.perf_counter() - start) * 1e3)
        if before_sync is not None and capture == "lazy":
            from . import runtime

            before_sync(index, runtime.current())
        loop.sync()
        if read_loss:
            result.losses.append(loss.item())
        result.step_ms.append((time.perf_counter() - start) * 1e3)
    result.weights = [host(p) for p in loop.model.parameters()]
    result.metrics = metrics(capture)
    return result


def host(tensor):
    """A tensor's value as a NumPy array (a lazy one's after a sync)."""
    from .tensor import LazyTensor

    if isinstance(tensor, LazyTensor):
        return tensor.numpy()
    return tensor.detach().cpu().numpy()


def _capture(capture, backend, pipeline, save_graphs):
    if capture in ("eager", "dynamo"):
        return (lambda value: value), (lambda: None)
    if capture == "lazy":
        import lazylab.torch as lt

        lt.device(backend=backend, pipeline=pipeline, save_graphs=save_graphs)
        return lt.to_lazy, lt.mark_step
    import torch._lazy
    import torch._lazy.ts_backend

    torch._lazy.ts_backend.init()
    return (lambda value: value.to("lazy")), torch._lazy.mark_step


def metrics(capture):
    """The capture's counters (lazylab.torch's, or LTC's)."""
    if capture == "lazy":
        import lazylab.torch as lt

        return lt.metrics()
    if capture == "ltc":
        import torch._lazy.metrics

        return {"counters": {name: torch._lazy.metrics.counter_value(name) for name in torch._lazy.metrics.counter_names()}}
    return {}


def relative_error(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-30))) if want.size else 0.0
