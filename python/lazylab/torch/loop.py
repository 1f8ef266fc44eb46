"""A training program in a file, run as a loop under one capture style, so
the styles compare on one program: the experiments' torch workloads, their
peers and the tests all run loops through here.

A program file defines PARAMS (its default sizes), model(params),
optimizer(model, params, steps) -> (optimizer, schedule or None),
batch(generator, params, size) -> (x, y) on the CPU, and
step(model, optimizer, schedule, x, y) -> loss, written as for eager PyTorch.

Captures: "eager" (PyTorch as written), "lazy" (lazylab.torch: the step
traced below autograd, cut at mark_step), "ltc" (PyTorch's own Lazy Tensor
Core with its TorchScript backend, device "lazy").
"""

import importlib.util
import os
import time

import numpy as np
import torch

CAPTURES = ("eager", "lazy", "ltc")


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


def sizes(program, overrides):
    params = dict(program.PARAMS)
    for key, value in (overrides or {}).items():
        if key not in params:
            raise ValueError(f"unknown parameter '{key}' (the program has {', '.join(sorted(params))})")
        params[key] = int(value)
    return params


class Result:
    """What a loop did: each step's loss (read after the step), its wall time,
    the weights at the end, and the capture's counters."""

    def __init__(self):
        self.losses, self.step_ms, self.weights, self.metrics = [], [], [], {}


def run(program, capture="eager", steps=20, params=None, seed=0, ragged_last=False, backend="cpu", pipeline=None,
        read_loss=True, save_graphs=None, before_sync=None):
    """Runs `steps` steps of `program` under `capture`; the model, data and
    optimizer are the same, seed for seed, under every capture. backend,
    pipeline and save_graphs are lazylab.torch.device's; before_sync(step,
    device) is called on the lazy device before each step runs."""
    if capture not in CAPTURES:
        raise ValueError(f"unknown capture '{capture}' (one of {', '.join(CAPTURES)})")
    params = sizes(program, params)
    torch.manual_seed(seed)
    model = program.model(params)
    move, sync = _capture(capture, backend, pipeline, save_graphs)
    model = move(model)
    optimizer, schedule = program.optimizer(model, params, steps)
    generator = torch.Generator().manual_seed(seed + 1)
    result = Result()
    for index in range(steps):
        size = params["batch"] // 2 + 1 if ragged_last and index == steps - 1 else params["batch"]
        x, y = program.batch(generator, params, size)
        start = time.perf_counter()
        x, y = move(x), move(y)
        loss = program.step(model, optimizer, schedule, x, y)
        if before_sync is not None and capture == "lazy":
            from . import runtime

            before_sync(index, runtime.current())
        sync()
        if read_loss:
            result.losses.append(loss.item())
        result.step_ms.append((time.perf_counter() - start) * 1e3)
    result.weights = [_host(p) for p in model.parameters()]
    result.metrics = _metrics(capture)
    return result


def _host(tensor):
    from .tensor import LazyTensor

    if isinstance(tensor, LazyTensor):
        return tensor.numpy()
    return tensor.detach().cpu().numpy()


def _capture(capture, backend, pipeline, save_graphs):
    if capture == "eager":
        return (lambda value: value), (lambda: None)
    if capture == "lazy":
        import lazylab.torch as lt

        lt.device(backend=backend, pipeline=pipeline, save_graphs=save_graphs)
        return lt.to_lazy, lt.mark_step
    import torch._lazy
    import torch._lazy.ts_backend

    torch._lazy.ts_backend.init()
    return (lambda value: value.to("lazy")), torch._lazy.mark_step


def _metrics(capture):
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
