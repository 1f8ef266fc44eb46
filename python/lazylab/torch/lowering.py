"""aten -> lazylab: one row per aten op (its name, or its overload's), a
function that builds the op's value from lazylab ops. A decomposition where
lazylab has no op; an op without a row is an error naming it and the user's
source line (or, with fallback=True, runs eagerly and is counted).

Every row reads its arguments by their names in the op's schema, so the
positional and keyword forms, and the defaults, are one.
"""

import time

import numpy as np
import torch

import lazylab
from lazylab import ops

from . import runtime
from . import tensor as lazy_tensor  # (tensor.py imports this module: its names are read at call time)
from .cells import Cell, ViewCell, WriteThroughView

TABLE = {}


def lowers(*names):
    def register(rule):
        for name in names:
            assert name not in TABLE, f"{name} lowered twice"
            TABLE[name] = rule
        return rule

    return register


def lowers_with_inplace(*names):
    """A value rule for each op `name` and its in-place form `name_` (the
    overload, if any, after the name: 'add.Tensor' and 'add_.Tensor')."""

    def register(value):
        lowers(*names)(lambda c: c.new(value(c)))
        lowers(*(name.replace(".", "_.", 1) if "." in name else name + "_" for name in names))(
            lambda c: c.inplace(value(c))
        )
        return value

    return register


class Op:
    """What dispatch needs of one aten overload, read from it once: its row
    of the table, its name, its arguments' names and defaults."""

    __slots__ = ("func", "rule", "name", "names", "defaults")

    def __init__(self, func):
        self.func = func  # held, so that its id (OPS's key) stays its own
        self.rule = TABLE.get(func.__name__) or TABLE.get(func.overloadpacket.__name__)
        self.name = f"{func._schema.name.split('::')[0]}::{func.__name__}"  # aten::, or prims:: (AOTAutograd's)
        arguments = func._schema.arguments
        self.names = [argument.name for argument in arguments]
        self.defaults = {a.name: a.default_value for a in arguments if a.has_default_value()}


OPS = {}  # by id(func): an OpOverload's own __hash__ is Python code, a cost on every call


def op_of(func):
    op = OPS.get(id(func))
    if op is None:
        op = OPS[id(func)] = Op(func)
    return op


class Call:
    """One dispatched aten call, its arguments by schema name."""

    __slots__ = ("device", "func", "args", "first")

    def __init__(self, device, func, op, args, kwargs):
        self.device, self.func = device, func
        self.args = dict(op.defaults)
        self.args.update(zip(op.names, args))
        self.args.update(kwargs)
        self.first = args[0] if args else None

    def __getitem__(self, name):
        return self.args[name]

    def get(self, name, default=None):
        value = self.args.get(name, default)
        return default if value is None else value

    def dtype_of(self, name):
        value = self.args[name]
        if isinstance(value, torch.Tensor):
            return runtime.DTYPES[value.dtype]
        return None

    def value(self, name, like=None):
        """An argument as a lazylab tensor: a lazy tensor's value, a CPU
        tensor copied in, a Python number as a scalar of `like`'s dtype (or
        the first tensor argument's)."""
        return self.lazylab(self.args[name], like)

    def lazylab(self, value, like=None):
        if isinstance(value, lazy_tensor.LazyTensor):
            return value._cell.value
        if isinstance(value, torch.Tensor):
            if value.dim() == 0 and not value.requires_grad:  # a 0-d CPU tensor: a scalar
                return self.device.scalar(value.item(), runtime.DTYPES[value.dtype])
            return self.device.from_host(value)
        dtype = self.result_dtype(like)
        return self.device.scalar(value, dtype)

    def result_dtype(self, like=None):
        if like is not None:
            return like if isinstance(like, lazylab.DType) else like.dtype
        for value in self.args.values():
            if isinstance(value, torch.Tensor):
                return runtime.DTYPES[value.dtype]
        return lazylab.f32

    # ---- results ----

    def new(self, value, requires_grad=False):
        return lazy_tensor.LazyTensor(Cell(value), requires_grad=requires_grad)

    def view(self, name, forward, inverse):
        """A view of argument `name`: forward(base) its value; inverse(view,
        base) the base after a write to it (None: no writes)."""
        base = self.args[name]
        return lazy_tensor.LazyTensor(ViewCell(base._cell, forward, inverse, f"aten::{self.func.__name__}"))

    def inplace(self, value):
        """Argument `self` takes `value` (an in-place op): rebinds its cell."""
        target = self.first
        if value.dtype != target._cell.value.dtype:
            value = value.astype(target._cell.value.dtype)
        if tuple(value.shape) != tuple(target.shape):
            value = value.broadcast_to(list(target.shape))
        target._cell.write(value)
        return target


def dispatch(func, args, kwargs):
    device = runtime.current()
    start = time.perf_counter_ns()
    op = op_of(func)
    if op.rule is None:
        return fallback(device, func, args, kwargs)
    try:
        result = op.rule(Call(device, func, op, args, kwargs))
    except WriteThroughView as view:
        raise lazylab.Error(
            f"{op.name} writes through a view made by {view.op}, which the lazy device cannot write back yet "
            f"({runtime.user_frame()})"
        ) from None
    except lazylab.Error as error:
        raise type(error)(f"{op.name}: {error} ({runtime.user_frame()})") from None
    device.trace_ns += time.perf_counter_ns() - start
    device.aten_ops += 1
    return result


def fallback(device, func, args, kwargs):
    name = f"aten::{func.__name__}"
    if not device.fallback:
        raise runtime.UnsupportedOp(
            f"{name} has no lowering to lazylab ({runtime.user_frame()}); "
            "lazylab.torch.device(fallback=True) runs such ops eagerly and counts them"
        )
    from torch.utils._pytree import tree_map

    LazyTensor = lazy_tensor.LazyTensor
    device.counters[name] += 1
    eager = tree_map(lambda v: v.to_torch() if isinstance(v, LazyTensor) else v, (args, kwargs))
    out = func(*eager[0], **eager[1])
    return tree_map(lambda v: LazyTensor.from_torch(v) if isinstance(v, torch.Tensor) else v, out)


# ---- shapes ----


def resolved_shape(shape, elements):
    """A view's shape with its one -1 filled in."""
    shape = [int(d) for d in shape]
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1])) if len(shape) > 1 else 1
        shape[shape.index(-1)] = elements // known if known else 0
    return shape


def normalized_dims(dims, rank):
    if dims is None:
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted(d + rank if d < 0 else d for d in dims)


def inverse_permutation(perm):
    inverse = [0] * len(perm)
    for position, axis in enumerate(perm):
        inverse[axis] = position
    return inverse


# ---- aliases and views ----


@lowers("detach", "alias", "lift_fresh")
def alias(c):
    return lazy_tensor.LazyTensor(c.first._cell)  # one cell: a write through either is seen by both


@lowers("detach_")
def detach_(c):
    return c.first


@lowers("view", "_unsafe_view", "reshape", "_reshape_alias")
def view(c):
    base_shape = list(c.first.shape)
    shape = resolved_shape(c.args["size"] if "size" in c.args else c.args["shape"], c.first.numel())
    return c.view("self", lambda base: base.reshape(shape), lambda v, base: v.reshape(base_shape))


@lowers("t")
def transpose_2d(c):
    if c.first.dim() < 2:
        return alias(c)
    return c.view("self", lambda base: base.transpose(0, 1), lambda v, base: v.transpose(0, 1))


@lowers("transpose.int")
def transpose(c):
    rank = c.first.dim()
    a, b = (d + rank if d < 0 else d for d in (c["dim0"], c["dim1"]))
    return c.view("self", lambda base: base.transpose(a, b), lambda v, base: v.transpose(a, b))


@lowers("permute")
def permute(c):
    perm = [d + c.first.dim() if d < 0 else d for d in c["dims"]]
    back = inverse_permutation(perm)
    return c.view("self", lambda base: base.permute(*perm), lambda v, base: v.permute(*back))


@lowers("expand")
def expand(c):
    shape = [s if want == -1 else want for s, want in zip([1] * (len(c["size"]) - c.first.dim()) + list(c.first.shape),
                                                           c["size"])]
    return c.view("self", lambda base: base.broadcast_to(shape), None)


@lowers("clone", "contiguous")
def clone(c):
    return c.new(c.value("self"))


@lowers("convert_element_type")
def convert_element_type(c):
    """prims::convert_element_type, in AOTAutograd's graphs on torch 2.x
    (AdamW's step under torch.compile)."""
    value, dtype = c.value("a"), runtime.DTYPES[c.get("dtype")]
    return c.new(value if value.dtype == dtype else value.astype(dtype))


@lowers("_to_copy")
def to_copy(c):
    value = c.value("self")
    dtype = c.get("dtype")
    if dtype is not None and runtime.DTYPES[dtype] != value.dtype:
        value = value.astype(runtime.DTYPES[dtype])
    return c.new(value)


# ---- factories of a tensor's shape ----


def filled(c, fill):
    dtype = c.get("dtype", c.first.dtype)
    return c.new(c.device.context.full(fill, list(c.first.shape), runtime.DTYPES[dtype]))


@lowers("ones_like")
def ones_like(c):
    return filled(c, 1)


@lowers("zeros_like", "empty_like")
def zeros_like(c):
    return filled(c, 0)


@lowers("full_like")
def full_like(c):
    dtype = runtime.DTYPES[c.get("dtype", c.first.dtype)]
    return c.new(c.value("fill_value", dtype).broadcast_to(list(c.first.shape)))


# ---- elementwise ----


def scaled(c, name, alpha_name="alpha"):
    other = c.value(name)
    alpha = c.get(alpha_name, 1)
    return other if alpha == 1 else other * c.lazylab(alpha, other)


def arithmetic(name, combine, alpha):
    """self op other (other scaled by alpha where the op has one), in its
    Tensor and Scalar forms, in place too."""

    @lowers_with_inplace(f"{name}.Tensor", f"{name}.Scalar")
    def value(c):
        return combine(c.value("self"), scaled(c, "other") if alpha else c.value("other"))


for _name, _combine, _alpha in [("add", lambda a, b: a + b, True), ("sub", lambda a, b: a - b, True),
                                ("mul", lambda a, b: a * b, False), ("div", lambda a, b: a / b, False)]:
    arithmetic(_name, _combine, _alpha)


@lowers("rsub.Scalar", "rsub.Tensor")
def rsub(c):
    return c.new(scaled(c, "other") - c.value("self"))


@lowers("zero_")
def zero_(c):
    return c.inplace(c.device.context.full(0, list(c.first.shape), c.value("self").dtype))


@lowers("fill_.Scalar", "fill_.Tensor")
def fill_(c):
    return c.inplace(c.value("value", c.value("self")))


@lowers("copy_")
def copy_(c):
    return c.inplace(c.value("src"))


@lowers("neg")
def neg(c):
    return c.new(-c.value("self"))


def unary(name, lazylab_op):
    @lowers(name)
    def rule(c):
        return c.new(lazylab_op(c.value("self")))

    return rule


for _aten, _op in {"relu": ops.relu, "exp": ops.exp, "log": ops.log, "sqrt": ops.sqrt, "rsqrt": ops.rsqrt,
                   "tanh": ops.tanh, "sigmoid": ops.sigmoid, "abs": ops.abs}.items():
    unary(_aten, _op)


@lowers("reciprocal")
def reciprocal(c):
    x = c.value("self")
    return c.new(c.device.context.full(1, [], x.dtype) / x)


FLOATS = (lazylab.f32, lazylab.f64)


@lowers("pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar")
def pow_(c):
    """self ** exponent, either of them a number (0.9 ** step: Adam's bias
    corrections in torch.compile's optimizer graph). A float with an
    integer is a float, as torch promotes them."""
    tensors = [value for value in c.args.values() if isinstance(value, torch.Tensor)]
    integral = not any(t.dtype.is_floating_point for t in tensors)
    like = lazylab.f32 if integral and any(isinstance(c.args[n], float) for n in ("self", "exponent")) else None
    base, exponent = c.value("self", like), c.value("exponent", like)
    if base.dtype != exponent.dtype:
        if base.dtype in FLOATS and exponent.dtype not in FLOATS:
            exponent = ops.cast(exponent, dtype=base.dtype)
        elif exponent.dtype in FLOATS and base.dtype not in FLOATS:
            base = ops.cast(base, dtype=exponent.dtype)
        else:
            raise lazylab.Error(f"a power of {base.dtype} and {exponent.dtype}: lazylab.torch does not promote them")
    return c.new(ops.pow(base, exponent))


@lowers("threshold_backward")
def threshold_backward(c):
    x, grad = c.value("self"), c.value("grad_output")
    keep = x > c.lazylab(c["threshold"], x)
    return c.new(ops.select(keep, grad, c.device.context.full(0, [], grad.dtype)))


@lowers("where.self")
def where(c):
    return c.new(ops.select(c.value("condition"), c.value("self"), c.value("other")))


# ---- products ----


@lowers("mm", "bmm", "matmul")
def mm(c):
    return c.new(c.value("self") @ c.value("mat2" if "mat2" in c.args else "other"))


@lowers("addmm")
def addmm(c):
    product = c.value("mat1") @ c.value("mat2")
    alpha, beta = c.get("alpha", 1), c.get("beta", 1)
    if alpha != 1:
        product = product * c.lazylab(alpha, product)
    bias = c.value("self")
    if beta != 1:
        bias = bias * c.lazylab(beta, bias)
    return c.new(bias + product)


# ---- reductions ----


@lowers("sum.dim_IntList", "sum.default")
def sum_(c):
    x = c.value("self")
    dims = normalized_dims(c.args.get("dim"), x.ndim)
    value = x.sum(axes=dims, keepdim=bool(c.get("keepdim", False))) if dims else x
    dtype = c.get("dtype")
    return c.new(value.astype(runtime.DTYPES[dtype]) if dtype is not None else value)


@lowers("mean.dim", "mean.default")
def mean(c):
    x = c.value("self")
    dims = normalized_dims(c.args.get("dim"), x.ndim)
    return c.new(x.mean(axes=dims, keepdim=bool(c.get("keepdim", False))) if dims else x)


# ---- losses and softmax (decompositions) ----


def log_softmax(x, dim):
    shifted = x - x.max(axes=[dim], keepdim=True)
    return shifted - shifted.exp().sum(axes=[dim], keepdim=True).log()


@lowers("_log_softmax")
def log_softmax_rule(c):
    x = c.value("self")
    return c.new(log_softmax(x, normalized_dims(c["dim"], x.ndim)[0]))


@lowers("_log_softmax_backward_data")
def log_softmax_backward(c):
    grad, output = c.value("grad_output"), c.value("output")
    dim = normalized_dims(c["dim"], grad.ndim)[0]
    return c.new(grad - output.exp() * grad.sum(axes=[dim], keepdim=True))


@lowers("_softmax")
def softmax_rule(c):
    x = c.value("self")
    return c.new(x.softmax(normalized_dims(c["dim"], x.ndim)[0]))


@lowers("_softmax_backward_data")
def softmax_backward(c):
    grad, output = c.value("grad_output"), c.value("output")
    dim = normalized_dims(c["dim"], grad.ndim)[0]
    return c.new(output * (grad - (grad * output).sum(axes=[dim], keepdim=True)))


REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def one_hot(c, numbers, classes):
    """[n, classes] rows, 1 at column numbers[i] and 0 elsewhere, from
    `numbers` ([n, 1], a float dtype, whole numbers below 2^24) by float
    arithmetic: 1 - min(|column - number|, 1). Kernels of one dtype are what
    the cpu backend's fused row loops hold; a compare would make a bool."""
    context = c.device.context
    one = context.full(1, [], numbers.dtype)
    column = context.iota([1, classes], 1, numbers.dtype)
    return one - ops.min((column - numbers).abs(), one)


def not_equal(c, numbers, value):
    """1 where whole `numbers` differ from `value`, else 0, as one_hot does."""
    one = c.device.context.full(1, [], numbers.dtype)
    return ops.min((numbers - c.device.context.full(float(value), [], numbers.dtype)).abs(), one)


def nll_parts(c, scores, target):
    """The one-hot rows of `target` over scores' classes, and which rows count
    (target != ignore_index), in scores' dtype."""
    if c.args.get("weight") is not None:
        raise lazylab.Error("class weights are not lowered yet")
    if scores.ndim != 2:
        raise lazylab.Error(f"only [N, C] scores are lowered, got {scores.ndim} dims")
    n, classes = scores.shape
    number = target.astype(scores.dtype).reshape(n, 1)
    counted = not_equal(c, number, c["ignore_index"])
    return one_hot(c, number, classes) * counted, counted.reshape(n)


@lowers("nll_loss_forward")
def nll_loss_forward(c):
    scores, target = c.value("self"), c.value("target")
    picked, counted = nll_parts(c, scores, target)
    losses = -(scores * picked).sum(axes=[1])
    total = counted.sum()
    reduction = REDUCTIONS[c["reduction"]]
    output = {"none": losses, "sum": losses.sum(), "mean": losses.sum() / total}[reduction]
    return c.new(output), c.new(total)


@lowers("nll_loss_backward")
def nll_loss_backward(c):
    scores, target, grad = c.value("self"), c.value("target"), c.value("grad_output")
    picked, _ = nll_parts(c, scores, target)
    reduction = REDUCTIONS[c["reduction"]]
    if reduction == "none":
        scale = grad.reshape(scores.shape[0], 1)
    elif reduction == "mean":
        scale = grad / c.value("total_weight")
    else:
        scale = grad
    return c.new(-picked * scale)


# ---- reads that need the value now ----


@lowers("_local_scalar_dense")
def local_scalar_dense(c):
    c.device.counters["SyncTensors"] += 1
    return c.value("self").item()


@lowers("is_nonzero")
def is_nonzero(c):
    c.device.counters["SyncTensors"] += 1
    return bool(c.value("self"))


# ---- what the optimizers add (Adam, AdamW; lerp on torch 2.x) ----


def addc(c, combine):
    value = c.get("value", 1)
    term = combine(c.value("tensor1"), c.value("tensor2"))
    return c.value("self") + (term if value == 1 else term * c.lazylab(value, term))


@lowers_with_inplace("addcmul")
def addcmul(c):
    return addc(c, lambda a, b: a * b)


@lowers_with_inplace("addcdiv")
def addcdiv(c):
    return addc(c, lambda a, b: a / b)


@lowers_with_inplace("lerp.Scalar", "lerp.Tensor")
def lerp(c):
    start = c.value("self")
    return start + c.value("weight", start) * (c.value("end") - start)


@lowers("maximum")
def maximum(c):
    return c.new(ops.max(c.value("self"), c.value("other")))


@lowers("minimum")
def minimum(c):
    return c.new(ops.min(c.value("self"), c.value("other")))


@lowers_with_inplace("clamp", "clamp.Tensor")
def clamp(c):
    x = c.value("self")
    low, high = c.args.get("min"), c.args.get("max")
    if low is not None:
        x = ops.max(x, c.lazylab(low, x))
    if high is not None:
        x = ops.min(x, c.lazylab(high, x))
    return x


# ---- what clip_grad_norm_ adds ----


@lowers("linalg_vector_norm", "norm.ScalarOpt_dim", "norm.Scalar", "norm.ScalarOpt_dtype")
def vector_norm(c):
    x = c.value("self")
    order = c.get("ord", c.get("p", 2))
    dims = normalized_dims(c.args.get("dim") or None, x.ndim)
    keepdim = bool(c.get("keepdim", False))
    if order == 2:
        return c.new((x * x).sum(axes=dims, keepdim=keepdim).sqrt())
    if order == 1:
        return c.new(x.abs().sum(axes=dims, keepdim=keepdim))
    if order == float("inf"):
        return c.new(x.abs().max(axes=dims, keepdim=keepdim))
    raise lazylab.Error(f"the {order}-norm is not lowered yet (1, 2 and inf are)")


@lowers("stack")
def stack(c):
    tensors = [c.lazylab(t) for t in c["tensors"]]
    rank = tensors[0].ndim + 1
    dim = c.get("dim", 0)
    dim = dim + rank if dim < 0 else dim
    expanded = [t.reshape(*(list(t.shape[:dim]) + [1] + list(t.shape[dim:]))) for t in tensors]
    return c.new(ops.concat(*expanded, axis=dim))


@lowers("cat")
def cat(c):
    tensors = [c.lazylab(t) for t in c["tensors"]]
    dim = c.get("dim", 0)
    return c.new(ops.concat(*tensors, axis=dim + tensors[0].ndim if dim < 0 else dim))


# ---- activations' backward ----


@lowers("tanh_backward")
def tanh_backward(c):
    grad, out = c.value("grad_output"), c.value("output")
    return c.new(grad * (1.0 - out * out))


@lowers("sigmoid_backward")
def sigmoid_backward(c):
    grad, out = c.value("grad_output"), c.value("output")
    return c.new(grad * out * (1.0 - out))


# ---- comparisons ----


def comparison(name, compare):
    @lowers(f"{name}.Tensor", f"{name}.Scalar")
    def rule(c):
        a = c.value("self")
        return c.new(compare(a, c.value("other", a)))

    return rule


for _name, _compare in {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
                        "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}.items():
    comparison(_name, _compare)


# The rest of the table, by topic (each module registers its rows).
from . import convolution, foreach, layers, slicing  # noqa: E402,F401
