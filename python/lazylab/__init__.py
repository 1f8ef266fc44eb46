"""lazylab from Python: lazy tensors traced into graphs, compiled by pass
pipelines and run on backends loaded at run time.

    import lazylab
    ctx = lazylab.context(backend="cpu", pipeline="decompose,fuse{strategy=producer-consumer},lower")
    x = ctx.tensor(numpy_array)
    y = (x * 2.0 + 1.0).softmax()
    y.numpy()            # syncs: the trace becomes a graph, compiled once, cached, run

The module binds lazylab's own C++ library (never libtorch); errors raise
lazylab.Error with lazylab's message.
"""

from . import _core
from ._core import (  # noqa: F401
    Backend,
    Context,
    DType,
    Engine,
    Error,
    Graph,
    Pipeline,
    Tensor,
    adamw_step,
    backends,
    from_dlpack,
    grad,
    op_table,
    parse_lzir,
    read_lzir,
    sgd_step,
)
from . import ops  # noqa: F401

# The dtypes by their .lzir names (lazylab.f32, ...; bool as lazylab.bool_).
for _name, _dtype in DType.__members__.items():
    globals()[_name if _name != "bool" else "bool_"] = _dtype

DEFAULT_PIPELINE = "canonicalize,cse,decompose,canonicalize,cse,dce,fuse{strategy=producer-consumer},lower"


def engine(backend="cpu", pipeline=DEFAULT_PIPELINE, options="", **engine_options):
    """An Engine: `pipeline` (pass pipeline text) on backend `backend`
    (a name or a .so path) created with `options` ('key=value,...')."""
    return Engine(pipeline, Backend(backend, options), **engine_options)


def context(backend="cpu", pipeline=DEFAULT_PIPELINE, options="", **engine_options):
    """A Context whose syncs run on engine(backend, pipeline, options)."""
    return Context(engine(backend, pipeline, options, **engine_options))


def capture_context():
    """A Context that only traces: capture() gives its graph, nothing runs."""
    return Context()
