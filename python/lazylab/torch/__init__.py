"""A lazy PyTorch device on lazylab (works on torch 1.13 and 2.x; it binds no
libtorch, only Python):

    import lazylab.torch as lt
    lt.device(backend="cpu")                 # where steps run (optional: cpu is the default)
    model = lt.to_lazy(model)                # parameters and buffers move
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in batches:
        x, y = lt.to_lazy(x), lt.to_lazy(y)
        loss = loss_fn(model(x), y); opt.zero_grad(); loss.backward(); opt.step()
        lt.mark_step()                       # the step: one graph, compiled once, cached
    print(lt.metrics_report())

Forward, backward and the optimizer's ops all arrive as aten ops below
autograd and are recorded into one trace; mark_step() (or a host read:
.item(), print) cuts and runs it. Python scalars other than 0 and +-1
(learning rates, momentum) enter the graph as inputs, so a schedule reuses
the compiled graph. An aten op with no lowering is an error naming it and
the source line.
"""

from . import lowering, runtime  # noqa: F401
from .fx import compile, dynamo_backend, register_dynamo_backend  # noqa: F401,A004
from .runtime import Device, UnsupportedOp  # noqa: F401
from .tensor import LazyTensor


def device(backend="cpu", pipeline=None, options="", fallback=False, save_graphs=None):
    """Makes (and returns) the lazy device the next to_lazy calls use.
    fallback: ops without a lowering run eagerly (counted); save_graphs: a
    folder where each new step graph is saved with its inputs (save_step)."""
    import lazylab

    return runtime.set_current(
        Device(backend=backend, pipeline=pipeline or lazylab.DEFAULT_PIPELINE, options=options, fallback=fallback,
               save_graphs=save_graphs))


def to_lazy(value):
    """A tensor, or a module with its parameters and buffers (in place; tied
    weights stay tied), on the lazy device."""
    import torch

    if isinstance(value, torch.nn.Module):
        moved = {}
        for module in value.modules():
            for name, parameter in list(module._parameters.items()):
                if parameter is None or isinstance(parameter, LazyTensor):
                    continue
                if id(parameter) not in moved:
                    lazy = LazyTensor.from_torch(parameter.detach())
                    moved[id(parameter)] = torch.nn.Parameter(lazy, requires_grad=parameter.requires_grad)
                module._parameters[name] = moved[id(parameter)]
            for name, buffer in list(module._buffers.items()):
                if buffer is not None and not isinstance(buffer, LazyTensor):
                    module._buffers[name] = LazyTensor.from_torch(buffer)
        return value
    if isinstance(value, LazyTensor):
        return value
    return LazyTensor.from_torch(value)


def mark_step():
    """Runs the pending step: every live lazy tensor is computed."""
    runtime.current().mark_step()


def save_step(folder, name="step"):
    """The pending step as FOLDER/NAME.lzir with its inputs as
    FOLDER/NAME.weights/N.npy: `lazylab run` replays it as a file workload."""
    return runtime.current().save_step(folder, name)


def metrics():
    return runtime.current().metrics()


def metrics_report():
    """Counters and timers, named as PyTorch/XLA's metrics_report() names them."""
    return runtime.current().metrics_report()
