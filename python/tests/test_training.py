"""lazylab's own training step from Python: grad() for the gradients and
adamw_step()/sgd_step() for the update, checked against PyTorch's autograd
and torch.optim on the same weights (f64): the suite's mlp and a small
pre-LN GPT-2 block (WORKLOADS.md's mlp-train and gpt2-block-train), one
step and a loop whose state stays on the backend."""

import numpy as np
import pytest

import lazylab
from lazylab import ops

torch = pytest.importorskip("torch")


@pytest.fixture(params=["interp", "cpu"])
def ctx(request):
    return lazylab.context(backend=request.param)


def mlp(lib, x, p):
    if lib is torch:
        h = torch.nn.functional.gelu(x @ p[0] + p[1], approximate="tanh")
    else:
        h = ops.gelu(ops.matmul(x, p[0]) + p[1])
    return (h @ p[2] + p[3]) if lib is torch else ops.matmul(h, p[2]) + p[3]


def gpt2_block(lib, x, p, heads):
    """WORKLOADS.md's gpt2-block: x + proj(attn(ln1(x))) with a causal mask, then x + mlp(ln2(x))."""
    B, T, C = x.shape
    D = C // heads
    if lib is torch:
        F = torch.nn.functional
        qkv = F.layer_norm(x, (C,), p[0], p[1], 1e-5) @ p[2] + p[3]
        q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, heads, D).permute(0, 2, 1, 3) for i in range(3))
        scores = (q @ k.transpose(-1, -2)) * (1.0 / np.sqrt(D))
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        scores = torch.where(causal, scores, torch.full_like(scores, -np.inf))
        attended = (scores.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(B, T, C)
        x = x + (attended @ p[4] + p[5])
        hidden = F.gelu(F.layer_norm(x, (C,), p[6], p[7], 1e-5) @ p[8] + p[9], approximate="tanh")
        return x + (hidden @ p[10] + p[11])
    ctx = x.context

    def linear(t, w, b):  # the op table's matmul takes equal ranks: [B, T, C] as [B * T, C]
        return ops.matmul(t.reshape(B * T, t.shape[-1]), w).reshape(B, T, w.shape[-1]) + b

    qkv = linear(ops.layernorm(x, p[0], p[1], eps=1e-5), p[2], p[3])

    def head(i):
        part = ops.slice(qkv, start=[0, 0, i * C], limit=[B, T, (i + 1) * C], stride=[1, 1, 1])
        return part.reshape(B, T, heads, D).permute(0, 2, 1, 3)

    q, k, v = head(0), head(1), head(2)
    scores = ops.matmul(q, k.transpose(2, 3)) * (1.0 / np.sqrt(D))
    causal = ops.ge(ctx.iota([T, T], 0), ctx.iota([T, T], 1)).broadcast_to(scores.shape)
    scores = ops.select(causal, scores, ctx.full(-np.inf, list(scores.shape), lazylab.f64))
    attended = ops.matmul(scores.softmax(-1), v).permute(0, 2, 1, 3).reshape(B, T, C)
    x = x + linear(attended, p[4], p[5])
    hidden = ops.gelu(linear(ops.layernorm(x, p[6], p[7], eps=1e-5), p[8], p[9]))
    return x + linear(hidden, p[10], p[11])


def mlp_case(rng):
    d, hidden = 12, 24
    x, target = rng.normal(size=(8, d)), rng.normal(size=(8, d))
    weights = [rng.normal(0, 0.2, (d, hidden)), rng.normal(0, 0.2, hidden), rng.normal(0, 0.2, (hidden, d)),
               rng.normal(0, 0.2, d)]
    return x, target, weights, lambda lib, xt, p: mlp(lib, xt, p)


def gpt2_case(rng):
    B, T, C, H = 2, 6, 16, 2
    x, target = rng.normal(size=(B, T, C)), rng.normal(size=(B, T, C))
    w = lambda *shape: rng.normal(0, 0.2, shape)  # noqa: E731
    ln = lambda: rng.normal(0, 1, C)  # noqa: E731
    weights = [ln(), ln(), w(C, 3 * C), w(3 * C), w(C, C), w(C), ln(), ln(), w(C, 4 * C), w(4 * C), w(4 * C, C), w(C)]
    return x, target, weights, lambda lib, xt, p: gpt2_block(lib, xt, p, H)


def torch_steps(x, target, weights, forward, steps, lr=1e-2):
    params = [torch.tensor(w, requires_grad=True) for w in weights]
    optimizer = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    xt, tt = torch.tensor(x), torch.tensor(target)
    grads, losses = None, []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = ((forward(torch, xt, params) - tt) ** 2).mean()
        loss.backward()
        if grads is None:
            grads = [p.grad.detach().clone().numpy() for p in params]
        losses.append(loss.item())
        optimizer.step()
    state = [optimizer.state[p] for p in params]
    return (losses, grads, [p.detach().numpy() for p in params], [s["exp_avg"].numpy() for s in state],
            [s["exp_avg_sq"].numpy() for s in state])


def lazylab_steps(ctx, x, target, weights, forward, steps, lr=1e-2):
    xt, tt = ctx.tensor(x), ctx.tensor(target)
    params = [ctx.tensor(w) for w in weights]
    m = [ctx.tensor(np.zeros_like(w)) for w in weights]
    v = [ctx.tensor(np.zeros_like(w)) for w in weights]
    rate = ctx.tensor(np.array(lr))
    grads, losses = None, []
    for step in range(1, steps + 1):
        diff = forward(lazylab, xt, params) - tt
        loss = (diff * diff).mean()
        g = lazylab.grad(loss, params)
        params, m, v = lazylab.adamw_step(params, g, m, v, rate, ctx.tensor(np.array(float(step))))
        ctx.mark_step()
        if grads is None:
            grads = [t.numpy() for t in g]
        losses.append(loss.item())
    return losses, grads, [p.numpy() for p in params], [t.numpy() for t in m], [t.numpy() for t in v]


@pytest.mark.parametrize("case", [mlp_case, gpt2_case], ids=["mlp", "gpt2-block"])
def test_a_training_step_matches_pytorch_autograd_and_adamw(ctx, case):
    x, target, weights, forward = case(np.random.default_rng(7))
    want = torch_steps(x, target, weights, forward, steps=3)
    got = lazylab_steps(ctx, x, target, weights, forward, steps=3)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-10)  # the losses, step by step
    for name, got_list, want_list in zip(["gradient", "parameter", "m", "v"], got[1:], want[1:]):
        for i, (g, w) in enumerate(zip(got_list, want_list)):
            scale = np.abs(w).max()
            np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-10 * scale, err_msg=f"{name} {i}")


def test_a_loop_compiles_its_step_once_and_writes_its_state_in_place():
    ctx = lazylab.context(backend="cpu")
    x, target, weights, forward = mlp_case(np.random.default_rng(8))
    lazylab_steps(ctx, x, target, weights, forward, steps=5)
    metrics = ctx.metrics
    # The first step reads host data the backend aliases (never taken); from
    # the second on, every parameter and moment is written over its old buffer.
    assert metrics["donated_buffers"] >= 3 * len(weights) * 4, metrics
    assert metrics["cache_misses"] <= 2, metrics  # the step, and at most the first sync's other graph


def test_sgd_step_matches_torch_optim_sgd(ctx):
    rng = np.random.default_rng(9)
    w, g, b = rng.normal(size=(4, 3)), rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    (new,), (buffer,) = lazylab.sgd_step([ctx.tensor(w)], [ctx.tensor(g)], [ctx.tensor(b)], ctx.tensor(np.array(0.1)),
                                         momentum=0.9, weight_decay=0.01, nesterov=True)
    p = torch.tensor(w, requires_grad=True)
    optimizer = torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)
    optimizer.state[p]["momentum_buffer"] = torch.tensor(b)
    p.grad = torch.tensor(g)
    optimizer.step()
    np.testing.assert_allclose(new.numpy(), p.detach().numpy(), rtol=1e-14)
    np.testing.assert_allclose(buffer.numpy(), optimizer.state[p]["momentum_buffer"].numpy(), rtol=1e-14)
    with pytest.raises(lazylab.Error, match="nesterov needs a momentum above 0"):
        lazylab.sgd_step([ctx.tensor(w)], [ctx.tensor(g)], [], ctx.tensor(np.array(0.1)), nesterov=True)
    with pytest.raises(lazylab.Error, match="adamw_step: 1 first moments"):
        one = ctx.tensor(np.array(1.0))
        lazylab.adamw_step([ctx.tensor(w), ctx.tensor(g)], [ctx.tensor(g), ctx.tensor(w)], [ctx.tensor(b)], [], one, one)
