"""The layers' aten ops: layer and batch norm (forward and backward), GELU,
embeddings, masking, dropout. Each is a decomposition into lazylab ops that
fusion puts back together (a layer norm's forward is one kernel under
producer-consumer)."""

import math

import lazylab
from lazylab import ops

from .lowering import lowers, lowers_with_inplace, not_equal


def summed(x, axes, keepdim=False):
    return x.sum(axes=axes, keepdim=keepdim) if axes else x


# ---- layer norm ----


def normalized_axes(c):
    rank, count = c.first.dim(), len(c["normalized_shape"])
    return list(range(rank - count, rank))


@lowers("native_layer_norm")
def native_layer_norm(c):
    x = c.value("input")
    axes = normalized_axes(c)
    mean = x.mean(axes=axes, keepdim=True)
    centered = x - mean
    rstd = ((centered * centered).mean(axes=axes, keepdim=True) + c.lazylab(c["eps"], x)).rsqrt()
    out = centered * rstd
    if c.args.get("weight") is not None:
        out = out * c.value("weight")
    if c.args.get("bias") is not None:
        out = out + c.value("bias")
    return c.new(out), c.new(mean), c.new(rstd)


@lowers("native_layer_norm_backward")
def native_layer_norm_backward(c):
    grad, x = c.value("grad_out"), c.value("input")
    axes = normalized_axes(c)
    leading = list(range(x.ndim - len(axes)))
    xhat = (x - c.value("mean")) * c.value("rstd")
    weighted = grad * c.value("weight") if c.args.get("weight") is not None else grad
    count = c.lazylab(float(math.prod(x.shape[a] for a in axes)), x)
    grad_input = c.value("rstd") / count * (
        weighted * count - weighted.sum(axes=axes, keepdim=True) - xhat * (weighted * xhat).sum(axes=axes, keepdim=True))
    mask = c["output_mask"]
    return (c.new(grad_input) if mask[0] else None,
            c.new(summed(grad * xhat, leading)) if mask[1] and c.args.get("weight") is not None else None,
            c.new(summed(grad, leading)) if mask[2] and c.args.get("bias") is not None else None)


# ---- batch norm ----


def channel_shape(x):
    return [1, x.shape[1]] + [1] * (x.ndim - 2)


def reduce_axes(x):
    return [0] + list(range(2, x.ndim))


def batch_norm(c):
    """The normalized output, the batch statistics PyTorch saves for the
    backward (empty in evaluation), and in training the batch's mean and
    unbiased variance for the running statistics."""
    x = c.value("input")
    shape, axes = channel_shape(x), reduce_axes(x)
    training = c.get("training", False)
    eps = c.lazylab(c["eps"], x)
    batch = None
    if training:
        mean = x.mean(axes=axes)
        centered = x - mean.reshape(*shape)
        variance = (centered * centered).mean(axes=axes)
        invstd = (variance + eps).rsqrt()
        count = math.prod(x.shape) // x.shape[1]
        batch = (mean, variance * c.lazylab(count / max(count - 1, 1), variance))
    else:
        mean, invstd = c.value("running_mean"), (c.value("running_var") + eps).rsqrt()
        centered = x - mean.reshape(*shape)
    out = centered * invstd.reshape(*shape)
    if c.args.get("weight") is not None:
        out = out * c.value("weight").reshape(*shape)
    if c.args.get("bias") is not None:
        out = out + c.value("bias").reshape(*shape)
    if not training:  # PyTorch returns empty statistics in evaluation
        mean = invstd = c.device.context.full(0, [0], x.dtype)
    return out, mean, invstd, batch


def running_stats(c, batch):
    """The running mean and variance after this batch: (1 - momentum) old +
    momentum batch."""
    momentum = c.get("momentum", 0.1)
    updated = []
    for name, value in zip(("running_mean", "running_var"), batch):
        old = c.value(name)
        updated.append(old * c.lazylab(1 - momentum, old) + value * c.lazylab(momentum, old))
    return updated


@lowers("native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit.no_stats",
        "_native_batch_norm_legit_no_training")
def native_batch_norm(c):
    """The running statistics are updated in place (the schema's alias
    annotations say so)."""
    from .tensor import LazyTensor

    out, mean, invstd, batch = batch_norm(c)
    if batch is not None:
        names = ("running_mean", "running_var")
        if all(isinstance(c.args.get(name), LazyTensor) for name in names):
            for name, value in zip(names, running_stats(c, batch)):
                c.args[name]._cell.write(value)
    return c.new(out), c.new(mean), c.new(invstd)


@lowers("_native_batch_norm_legit_functional")
def native_batch_norm_functional(c):
    """AOTAutograd's functional form: the new running statistics are outputs."""
    out, mean, invstd, batch = batch_norm(c)
    running = running_stats(c, batch) if batch is not None else [c.value("running_mean"), c.value("running_var")]
    return c.new(out), c.new(mean), c.new(invstd), c.new(running[0]), c.new(running[1])


@lowers("native_batch_norm_backward")
def native_batch_norm_backward(c):
    grad, x = c.value("grad_out"), c.value("input")
    shape, axes = channel_shape(x), reduce_axes(x)
    if c["train"]:
        mean, invstd = c.value("save_mean"), c.value("save_invstd")
    else:
        mean, invstd = c.value("running_mean"), (c.value("running_var") + c.lazylab(c["eps"], x)).rsqrt()
    weight = c.value("weight") if c.args.get("weight") is not None else None
    xhat = (x - mean.reshape(*shape)) * invstd.reshape(*shape)
    grad_bias = grad.sum(axes=axes)
    grad_weight = (grad * xhat).sum(axes=axes)
    scale = invstd if weight is None else invstd * weight
    if c["train"]:
        count = c.lazylab(float(math.prod(x.shape) // x.shape[1]), x)
        grad_input = scale.reshape(*shape) / count * (
            grad * count - grad_bias.reshape(*shape) - xhat * grad_weight.reshape(*shape))
    else:
        grad_input = grad * scale.reshape(*shape)
    mask = c["output_mask"]
    return (c.new(grad_input) if mask[0] else None, c.new(grad_weight) if mask[1] else None,
            c.new(grad_bias) if mask[2] else None)


# ---- GELU ----

SQRT_HALF, INV_SQRT_2PI = math.sqrt(0.5), 1.0 / math.sqrt(2.0 * math.pi)


@lowers("gelu")
def gelu(c):
    x = c.value("self")
    if c.get("approximate", "none") == "tanh":
        return c.new(x.gelu())  # lazylab's gelu is the tanh form
    return c.new(x * (ops.erf(x * c.lazylab(SQRT_HALF, x)) + 1.0) * 0.5)


@lowers("gelu_backward")
def gelu_backward(c):
    grad, x = c.value("grad_output"), c.value("self")
    k = lambda value: c.lazylab(value, x)  # noqa: E731
    if c.get("approximate", "none") == "tanh":
        inner = (x + x * x * x * k(0.044715)) * k(math.sqrt(2.0 / math.pi))
        t = inner.tanh()
        d_inner = (x * x * k(3 * 0.044715) + 1.0) * k(math.sqrt(2.0 / math.pi))
        return c.new(grad * ((t + 1.0) * 0.5 + x * 0.5 * (1.0 - t * t) * d_inner))
    cdf = (ops.erf(x * k(SQRT_HALF)) + 1.0) * 0.5
    pdf = (x * x * k(-0.5)).exp() * k(INV_SQRT_2PI)
    return c.new(grad * (cdf + x * pdf))


# ---- embeddings ----


@lowers("embedding")
def embedding(c):
    return c.new(ops.gather(c.value("weight"), c.value("indices"), axis=0))


@lowers("embedding_dense_backward")
def embedding_dense_backward(c):
    """Each row's gradient added into its token's row of a zero table:
    scatter_add, gather's adjoint (linear in the tokens, where a one-hot
    product was quadratic in the vocabulary). Rows of padding_idx add
    nothing."""
    if c.get("scale_grad_by_freq", False):
        raise lazylab.Error("scale_grad_by_freq is not lowered yet")
    grad, indices = c.value("grad_output"), c.value("indices")
    rows = math.prod(indices.shape)
    width = grad.shape[-1]
    updates = grad.reshape(rows, width)
    if c.get("padding_idx", -1) >= 0:
        updates = updates * not_equal(c, indices.astype(grad.dtype).reshape(rows, 1), c["padding_idx"])
    table = c.device.context.full(0, [c["num_weights"], width], grad.dtype)
    return c.new(ops.scatter_add(table, indices.reshape(rows), updates, axis=0))


# ---- masks ----


@lowers_with_inplace("masked_fill.Scalar", "masked_fill.Tensor")
def masked_fill(c):
    x = c.value("self")
    return ops.select(c.value("mask"), c.value("value", x), x)


@lowers("bitwise_not", "logical_not")
def logical_not(c):
    x = c.value("self")
    zero = c.device.context.full(0, [], x.dtype)
    if x.dtype == lazylab.bool_ or c.func.__name__.startswith("logical_not"):
        return c.new(x == zero)
    return c.new(-x - c.device.context.full(1, [], x.dtype))  # two's complement: ~x = -x - 1


# ---- dropout: lazylab's own random stream, seeded from an input ----

MODULUS = 2147483647  # 2^31 - 1: products of two residues fit in i64


def uniform(c, shape, like):
    """Uniform [0, 1) numbers of `shape` from a counter-based hash of each
    element's index and a seed drawn from torch's generator on the host. The
    seed enters as a graph input (a new one each step, the same graph), so
    the random stream is lazylab's own, reproducible under torch.manual_seed."""
    import torch

    context = c.device.context
    count = math.prod(shape)
    seed = int(torch.randint(1, MODULUS - 1, (1,)).item())
    c.device.counters["RngSeeds"] += 1
    i64 = lazylab.i64
    modulus = context.full(MODULUS, [], i64)

    def residue(value):
        return value - value / modulus * modulus

    h = residue(context.iota([count], 0, i64) * context.full(48271, [], i64) + c.device.scalar(seed, i64))
    for multiplier, offset in ((16807, 12345), (69621, 99991), (48271, 271828)):
        h = residue(h * h + context.full(offset, [], i64))  # a quadratic round: no lattice between neighbours
        h = residue(h * context.full(multiplier, [], i64))
    return (h.astype(lazylab.f64) * (1.0 / MODULUS)).astype(like.dtype).reshape(*shape)


@lowers("native_dropout")
def native_dropout(c):
    x = c.value("input")
    p = c["p"]
    if not c.get("train", True) or p == 0:
        return c.new(x), c.new(c.device.context.full(True, list(x.shape), lazylab.bool_))
    keep = uniform(c, list(x.shape), x) >= c.lazylab(p, x)
    scale = c.lazylab(1.0 / (1.0 - p), x) if p < 1 else c.lazylab(0.0, x)
    return c.new(ops.select(keep, x * scale, c.device.context.full(0, [], x.dtype))), c.new(keep)


@lowers("native_dropout_backward")
def native_dropout_backward(c):
    grad = c.value("grad_output")
    keep = c.value("mask")
    return c.new(ops.select(keep, grad * c.lazylab(c["scale"], grad), c.device.context.full(0, [], grad.dtype)))


@lowers("bernoulli_.float")
def bernoulli_(c):
    x = c.value("self")
    draws = uniform(c, list(x.shape), x) < c.lazylab(c.get("p", 0.5), x)
    return c.inplace(draws.astype(x.dtype))


