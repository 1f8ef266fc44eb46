"""Convolutions and pooling, forward and backward, on lazylab's conv2d,
max_pool2d and avg_pool2d. The backward passes are convolutions too:

    grad_input  = conv2d(grad dilated by the stride, the weight flipped and
                  its in/out channels swapped per group, pads d(k-1)-p)
    grad_weight = conv2d(input with batch and channels swapped, grad with
                  batch and channels swapped as the weight: stride and
                  dilation trade places, groups by their images), cut to the
                  kernel's size

and a max pool's gradient goes to the index max_pool2d_with_indices chose
(the first maximum of each window, as PyTorch)."""

import lazylab
from lazylab import ops

from .lowering import lowers


def pair(value, rank=2):
    value = list(value) if isinstance(value, (list, tuple)) else [value]
    return value * rank if len(value) == 1 else value


def shifted(x, axis, low, length):
    """x along `axis` moved by `low` (pad when >= 0, cut when < 0), then cut
    or padded with zeros at the end to `length`."""
    rank = x.ndim
    if low > 0:
        x = ops.pad(x, low=[low if d == axis else 0 for d in range(rank)], high=[0] * rank, value=0)
    elif low < 0:
        x = ops.slice(x, start=[-low if d == axis else 0 for d in range(rank)], limit=list(x.shape), stride=[1] * rank)
    size = x.shape[axis]
    if size > length:
        x = ops.slice(x, start=[0] * rank, limit=[length if d == axis else s for d, s in enumerate(x.shape)],
                      stride=[1] * rank)
    elif size < length:
        x = ops.pad(x, low=[0] * rank, high=[length - size if d == axis else 0 for d in range(rank)], value=0)
    return x


def dilated(x, stride):
    """[N, C, H, W] with stride-1 zeros after each element of H and W."""
    sh, sw = stride
    if sh == 1 and sw == 1:
        return x
    n, ch, h, w = x.shape
    spread = ops.pad(x.reshape(n, ch, h, 1, w, 1), low=[0] * 6, high=[0, 0, 0, sh - 1, 0, sw - 1], value=0)
    return spread.reshape(n, ch, h * sh, w * sw)


def placed(x, stride, offset, size):
    """Element (i, j) of x at (i*s + offset) of a zero [N, C, *size]."""
    x = dilated(x, stride)
    x = shifted(x, 2, offset[0], size[0])
    return shifted(x, 3, offset[1], size[1])


def flipped(w):
    """The kernel's spatial dims reversed: reversing both is reversing the
    taps in row-major order, one gather of reversed indices over them."""
    out_channels, channels, kh, kw = w.shape
    taps = kh * kw
    reverse = w.context.iota([taps], 0, lazylab.i64) * -1 + (taps - 1)
    return ops.gather(w.reshape(out_channels, channels, taps), reverse, axis=2).reshape(out_channels, channels, kh, kw)


def conv_args(c):
    if c.get("transposed", False):
        raise lazylab.Error("transposed convolutions are not lowered yet")
    stride, padding, dilation = pair(c["stride"]), pair(c["padding"]), pair(c["dilation"])
    return stride, padding, dilation, c.get("groups", 1)


def check_2d(x):
    if x.ndim != 4:
        raise lazylab.Error(f"only 2-d convolutions and pools ([N, C, H, W]) are lowered, got {x.ndim} dims")


@lowers("convolution", "_convolution")
def convolution(c):
    x, w = c.value("input"), c.value("weight")
    check_2d(x)
    stride, padding, dilation, groups = conv_args(c)
    out = ops.conv2d(x, w, strides=stride, pads=padding + padding, dilations=dilation, groups=groups)
    if c.args.get("bias") is not None:
        out = out + c.value("bias").reshape(1, w.shape[0], 1, 1)
    return c.new(out)


def grad_input(grad, w, x_shape, stride, padding, dilation, groups):
    out_channels, group_channels, kh, kw = w.shape
    channels = group_channels * groups
    # [O, C/g, kh, kw] -> [C, O/g, kh, kw], group by group
    swapped = w.reshape(groups, out_channels // groups, group_channels, kh, kw).transpose(1, 2)
    swapped = flipped(swapped.reshape(channels, out_channels // groups, kh, kw))
    if list(stride) != [1, 1] and list(dilation) == [1, 1]:
        return grad_input_by_phases(grad, swapped, x_shape, stride, padding, groups)
    grown = dilated(grad, stride)
    for axis in (0, 1):  # no zeros after the last row and column
        grown = shifted(grown, 2 + axis, 0, (grad.shape[2 + axis] - 1) * stride[axis] + 1)
    lows, highs = [], []
    for axis, k in ((0, kh), (1, kw)):
        low = dilation[axis] * (k - 1) - padding[axis]
        size = x_shape[2 + axis]
        high = size - (grad.shape[2 + axis] - 1) * stride[axis] - 1 + padding[axis]
        lows.append(low), highs.append(high)
    # Negative pads cut instead: conv2d's pads are >= 0.
    for axis in (0, 1):
        if lows[axis] < 0:
            grown = shifted(grown, 2 + axis, lows[axis], grown.shape[2 + axis] + lows[axis])
            lows[axis] = 0
        if highs[axis] < 0:
            grown = shifted(grown, 2 + axis, 0, grown.shape[2 + axis] + highs[axis])
            highs[axis] = 0
    return ops.conv2d(grown, swapped, strides=[1, 1], pads=lows + highs, dilations=dilation, groups=groups)


def grad_input_by_phases(grad, swapped, x_shape, stride, padding, groups):
    """A strided convolution's input gradient, phase by phase: the input's
    rows y = g * stride + r (and columns) each take the kernel taps of one
    class, so each phase is a convolution of the undilated gradient with
    those taps, and the phases are interleaved once. The gradient dilated
    by zeros did stride^2 the work (ResNet-18's three 3x3 stride-2 ones:
    0.47 ms each on cpu)."""
    n, _, oh, ow = grad.shape
    channels, _, kh, kw = swapped.shape
    h, w = x_shape[2:]
    grid = (-(-h // stride[0]), -(-w // stride[1]))
    classes = {}
    for ry in range(stride[0]):
        for rx in range(stride[1]):
            phase = [phase_taps(k, s, p, r, g, o)
                     for k, s, p, r, g, o in zip((kh, kw), stride, padding, (ry, rx), grid, grad.shape[2:])]
            if any(taps is None for taps in phase):
                continue  # no tap reaches these rows or columns: zeros
            (first_y, count_y, low_y, high_y), (first_x, count_x, low_x, high_x) = phase
            taps = ops.slice(swapped, start=[0, 0, first_y, first_x],
                             limit=[channels, swapped.shape[1], first_y + (count_y - 1) * stride[0] + 1,
                                    first_x + (count_x - 1) * stride[1] + 1], stride=[1, 1] + list(stride))
            g = grad
            if low_y < 0 or high_y < 0:  # conv2d's pads are >= 0: cut instead
                g = shifted(g, 2, min(low_y, 0), g.shape[2] + min(low_y, 0) + min(high_y, 0))
            if low_x < 0 or high_x < 0:
                g = shifted(g, 3, min(low_x, 0), g.shape[3] + min(low_x, 0) + min(high_x, 0))
            pads = [max(low_y, 0), max(low_x, 0), max(high_y, 0), max(high_x, 0)]
            classes[ry, rx] = ops.conv2d(g, taps, strides=[1, 1], pads=pads, dilations=[1, 1], groups=groups)
    return interleaved(classes, stride, grid, (n, channels), (h, w), grad.context, grad.dtype)


def phase_taps(k, s, p, r, grid, size):
    """Along one dim, rows g * s + r of the input gradient: the flipped
    kernel's taps a0, a0 + s, ... (first and count) that reach them, and the
    gradient's pads (low, high; negative: cut) for `grid` outputs; None
    where no tap does."""
    low = k - 1 - p  # the dilated form's low pad
    first = (low - r) % s
    if first >= k:
        return None
    count = -(-(k - first) // s)
    offset = (r + first - low) // s  # exact: r + first - low is a multiple of s
    return first, count, -offset, (grid - 1) + (count - 1) + offset - (size - 1)


def grad_weight(grad, x, w_shape, stride, padding, dilation, groups):
    """One convolution whose kernel is the output's gradient: an image-sized
    kernel and a 3x3 output, which the backends run as such (cpu: windows
    packed as rows of one product; it replaced a product per kernel tap,
    each over a window copied out, and their concat: ResNet-18's training
    step 1.03-1.07x faster on cpu, 1.38x on an H100, same runs)."""
    n, channels, h, w = x.shape
    _, group_channels, kh, kw = w_shape
    # Batch and channels trade places: [C/g, g*N, H, W] (group-major), and
    # grad as a kernel [O, N, OH, OW] whose groups read their own images.
    inputs = x.reshape(n, groups, group_channels, h, w).permute(2, 1, 0, 3, 4).reshape(group_channels, groups * n, h, w)
    kernel = grad.transpose(0, 1)
    # Bottom and right pads no larger than the kernel's last tap needs: a
    # larger one only adds positions past it (a strided convolution's
    # gradient at 16x16 had 4x4, cut to 3x3).
    ends = [max(0, (k - 1) * d + s * (o - 1) + 1 - size - p)
            for k, d, s, o, size, p in zip((kh, kw), dilation, stride, grad.shape[2:], (h, w), padding)]
    ends = [min(e, p) for e, p in zip(ends, padding)]
    out = ops.conv2d(inputs, kernel, strides=dilation, pads=padding + ends, dilations=stride, groups=groups)
    if out.shape[2] != kh or out.shape[3] != kw:
        out = ops.slice(out, start=[0, 0, 0, 0], limit=[out.shape[0], out.shape[1], kh, kw], stride=[1, 1, 1, 1])
    return out.transpose(0, 1)  # [O, C/g, kh, kw]


@lowers("convolution_backward")
def convolution_backward(c):
    grad, x, w = c.value("grad_output"), c.value("input"), c.value("weight")
    check_2d(x)
    stride, padding, dilation, groups = conv_args(c)
    mask = c["output_mask"]
    return (c.new(grad_input(grad, w, x.shape, stride, padding, dilation, groups)) if mask[0] else None,
            c.new(grad_weight(grad, x, w.shape, stride, padding, dilation, groups)) if mask[1] else None,
            c.new(grad.sum(axes=[0, 2, 3])) if mask[2] else None)


# ---- max pooling ----


def pool_args(c):
    kernel = pair(c["kernel_size"])
    stride = pair(c.get("stride") or kernel)
    padding, dilation = pair(c.get("padding", 0)), pair(c.get("dilation", 1))
    if c.get("ceil_mode", False):
        raise lazylab.Error("ceil_mode pooling is not lowered yet")
    return kernel, stride, padding, dilation


def window_offsets(kernel, dilation, padding):
    """Each kernel position's offset from a window's corner in the input, first
    to last (the order PyTorch breaks ties in)."""
    return [(p * dilation[0] - padding[0], q * dilation[1] - padding[1]) for p in range(kernel[0])
            for q in range(kernel[1])]


def position_dtype(h, w):
    """Where an image's flat indices are whole numbers a float holds
    exactly, they are computed in f32 and cast to PyTorch's i64 once: the
    backends' fused loops compute in floats (on cpu a pool's backward in i64
    ran on the reference kernels, 20 ms of ResNet-18's step)."""
    return lazylab.f32 if h * w <= 1 << 24 else lazylab.i64


def flat_positions(context, out_shape, stride, offset, width, dtype):
    """The flat input index (row * W + column) of each output's element at
    `offset` in its window, [OH, OW]."""
    oh, ow = out_shape
    rows = context.iota([oh, ow], 0, dtype) * stride[0] + offset[0]
    cols = context.iota([oh, ow], 1, dtype) * stride[1] + offset[1]
    return rows * width + cols


@lowers("max_pool2d_with_indices")
def max_pool2d_with_indices(c):
    x = c.value("self")
    check_2d(x)
    kernel, stride, padding, dilation = pool_args(c)
    out = ops.max_pool2d(x, kernel=kernel, strides=stride, pads=padding + padding, dilations=dilation)
    n, ch, h, w = x.shape
    oh, ow = out.shape[2:]
    context = x.context
    floor = float("-inf")
    padded = ops.pad(x, low=[0, 0] + padding, high=[0, 0] + padding, value=floor)
    indices = None
    for offset in reversed(window_offsets(kernel, dilation, padding)):  # the first maximum wins
        start = [0, 0, offset[0] + padding[0], offset[1] + padding[1]]
        limit = [n, ch, start[2] + (oh - 1) * stride[0] + 1, start[3] + (ow - 1) * stride[1] + 1]
        candidate = ops.slice(padded, start=start, limit=limit, stride=[1, 1] + stride)
        position = flat_positions(context, (oh, ow), stride, offset, w, position_dtype(h, w))
        indices = position.broadcast_to([n, ch, oh, ow]) if indices is None else ops.select(candidate == out, position,
                                                                                            indices)
    return c.new(out), c.new(indices if indices.dtype == lazylab.i64 else ops.cast(indices, dtype=lazylab.i64))


@lowers("max_pool2d_with_indices_backward")
def max_pool2d_with_indices_backward(c):
    """Each window's gradient goes to the position its index names. The
    input's rows (and columns) fall into stride classes, y = g * stride + r:
    a window offset moves a whole class by whole grid steps, so each class
    sums its offsets' shares on its own dense grid, and the classes are
    interleaved once at the end (rather than a zero-spread copy of the
    image per offset)."""
    grad, x, indices = c.value("grad_output"), c.value("self"), c.value("indices")
    kernel, stride, padding, dilation = pool_args(c)
    n, ch, h, w = x.shape
    context = x.context
    zero = context.full(0, [], grad.dtype)
    dtype = position_dtype(h, w)
    indices = indices if indices.dtype == dtype else ops.cast(indices, dtype=dtype)
    grid = (-(-h // stride[0]), -(-w // stride[1]))
    classes = {}
    for offset in window_offsets(kernel, dilation, padding):
        position = flat_positions(context, grad.shape[2:], stride, offset, w, dtype)
        share = ops.select(indices == position, grad, zero)
        (steps_y, ry), (steps_x, rx) = divmod(offset[0], stride[0]), divmod(offset[1], stride[1])
        moved = shifted(shifted(share, 2, steps_y, grid[0]), 3, steps_x, grid[1])
        classes[ry, rx] = moved if (ry, rx) not in classes else classes[ry, rx] + moved
    return c.new(interleaved(classes, stride, grid, (n, ch), (h, w), context, grad.dtype))


def interleaved(classes, stride, grid, leading, size, context, dtype):
    """out[.., g * sy + ry, k * sx + rx] = classes[ry, rx][.., g, k], cut to
    `size`; a class no window reaches is zero."""
    gh, gw = grid
    rows = []
    for ry in range(stride[0]):
        columns = []
        for rx in range(stride[1]):
            part = classes.get((ry, rx))
            if part is None:
                part = context.full(0, [*leading, gh, gw], dtype)
            columns.append(part.reshape(*leading, gh, 1, gw, 1))
        rows.append(columns[0] if len(columns) == 1 else ops.concat(*columns, axis=5))
    out = rows[0] if len(rows) == 1 else ops.concat(*rows, axis=3)
    out = out.reshape(*leading, gh * stride[0], gw * stride[1])
    if list(out.shape[2:]) != list(size):
        out = ops.slice(out, start=[0, 0, 0, 0], limit=list(leading) + list(size), stride=[1, 1, 1, 1])
    return out


# ---- average pooling (adaptive to 1x1 is a mean; the rest as avg_pool2d) ----


@lowers("_adaptive_avg_pool2d", "adaptive_avg_pool2d")
def adaptive_avg_pool2d(c):
    x = c.value("self")
    size = pair(c["output_size"])
    h, w = x.shape[2:]
    if h % size[0] or w % size[1]:
        raise lazylab.Error(f"adaptive pooling of {h}x{w} to {size[0]}x{size[1]} (not a divisor) is not lowered yet")
    kernel = [h // size[0], w // size[1]]
    return c.new(ops.avg_pool2d(x, kernel=kernel, strides=kernel, pads=[0, 0, 0, 0], count_include_pad=True))


@lowers("_adaptive_avg_pool2d_backward")
def adaptive_avg_pool2d_backward(c):
    grad, x = c.value("grad_output"), c.value("self")
    h, w = x.shape[2:]
    oh, ow = grad.shape[2:]
    kh, kw = h // oh, w // ow
    n, ch = grad.shape[:2]
    spread = grad.reshape(n, ch, oh, 1, ow, 1).broadcast_to([n, ch, oh, kh, ow, kw]).reshape(n, ch, h, w)
    return c.new(spread * c.lazylab(1.0 / (kh * kw), grad))
