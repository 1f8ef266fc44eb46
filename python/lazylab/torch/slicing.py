"""aten's slicing views (slice, select, narrow, split, chunk, unbind) as
lazylab slices. A write through a unit-step slice writes its base: the new
rows padded into place and chosen by a mask of the sliced range; a write
through a strided slice is refused (cells.py), never wrong."""

import lazylab
from lazylab import ops

from .lowering import lowers, normalized_dims


def bounds(start, end, size):
    """PyTorch's clamping of a slice's ends (negative counts from the end)."""
    start = 0 if start is None else start
    end = size if end is None else end
    start = max(0, min(size, start + size if start < 0 else start))
    end = max(start, min(size, end + size if end < 0 else end))
    return start, end


def sliced(c, base_name, dim, start, end, step=1, drop_dim=False):
    """A view of argument `base_name`: [start, end) by `step` along `dim`
    (that dim dropped when `drop_dim`, as select does)."""
    shape = list(c.args[base_name].shape)
    rank = len(shape)
    starts, limits, strides = [0] * rank, list(shape), [1] * rank
    starts[dim], limits[dim], strides[dim] = start, end, step
    kept = [size for d, size in enumerate(shape) if d != dim]

    def forward(base):
        value = ops.slice(base, start=starts, limit=limits, stride=strides)
        return value.reshape(*kept) if drop_dim else value

    def inverse(value, base):
        if drop_dim:
            value = value.reshape(*[1 if d == dim else size for d, size in enumerate(shape)])
        low, high = [0] * rank, [0] * rank
        low[dim], high[dim] = start, shape[dim] - end
        placed = ops.pad(value, low=low, high=high, value=0)
        context = base.context
        index = context.iota([shape[dim]], 0, lazylab.i64)
        inside = ops.select(index >= context.full(start, [], lazylab.i64), index < context.full(end, [], lazylab.i64),
                            context.full(False, [], lazylab.bool_))
        return ops.select(inside.reshape(*[shape[dim] if d == dim else 1 for d in range(rank)]), placed, base)

    return c.view(base_name, forward, inverse if step == 1 else None)


def dim_of(c, name="dim"):
    return normalized_dims(c.get(name, 0), c.first.dim())[0]


@lowers("slice.Tensor")
def slice_(c):
    dim = dim_of(c)
    start, end = bounds(c.args.get("start"), c.args.get("end"), c.first.shape[dim])
    return sliced(c, "self", dim, start, end, c.get("step", 1))


@lowers("narrow")
def narrow(c):
    dim = dim_of(c)
    start, _ = bounds(c["start"], None, c.first.shape[dim])
    return sliced(c, "self", dim, start, start + c["length"])


@lowers("select.int")
def select_int(c):
    dim = dim_of(c)
    index = c["index"] + c.first.shape[dim] if c["index"] < 0 else c["index"]
    return sliced(c, "self", dim, index, index + 1, drop_dim=True)


def pieces(c, dim, sizes):
    out, start = [], 0
    for size in sizes:
        out.append(sliced(c, "self", dim, start, start + size))
        start += size
    return out


@lowers("split.Tensor", "split_with_sizes", "split_with_sizes_copy", "split_copy.Tensor")
def split(c):
    dim = dim_of(c)
    size = c.first.shape[dim]
    if "split_sizes" in c.args:
        return pieces(c, dim, list(c["split_sizes"]))
    step = c["split_size"]
    return pieces(c, dim, [min(step, size - start) for start in range(0, max(size, 1), step)])


@lowers("chunk")
def chunk(c):
    dim = dim_of(c)
    size = c.first.shape[dim]
    step = -(-size // c["chunks"])
    return pieces(c, dim, [min(step, size - start) for start in range(0, size, step)])


@lowers("unbind.int")
def unbind(c):
    dim = dim_of(c)
    return [sliced(c, "self", dim, i, i + 1, drop_dim=True) for i in range(c.first.shape[dim])]
