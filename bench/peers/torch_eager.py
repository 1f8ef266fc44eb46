#!/usr/bin/env python3
"""PyTorch eager on the reference workloads of WORKLOADS.md.

A lazylab peer (experiments/runner/peers.h has the protocol): an experiment
that names it under `peers:` runs it after its own cells and places its times
beside lazylab's pipelines in the report. It writes a JSON report with the
same cell shape as `lazylab run` reports (workload, pipeline, backend,
step_ms {median, min, max}); workloads it does not define are left out.
Needs Debian's python3-torch (`bash .ci/setup`); run it with
/usr/bin/python3. By hand:

  /usr/bin/python3 bench/peers/torch_eager.py --workloads chain-tiny --out reports/torch.json

--dtype=bf16 runs each step under torch.autocast("cpu") in bf16 (the inputs
stay f32, as an f32 program under lazylab's autocast pass): its pipeline is
torch-eager-bf16. --inputs=bf16 makes the inputs and weights bf16 (as
lazylab's `inputs: bf16`); its cells say so.
"""
import math
import os
import statistics
import time

import torch

import torch_blas
from peer_protocol import parse_args, write_report

DEFAULTS = {
    "chain": {"n": 1048576, "iters": 100},
    "chain-small": {"n": 4096, "iters": 100},
    "chain-tiny": {"n": 64, "iters": 100},
    "softmax": {"rows": 1024, "cols": 4096},
    "layernorm": {"rows": 8192, "cols": 768},
    "mlp": {"batch": 256, "d": 768, "hidden": 3072},
    "attention": {"batch": 4, "heads": 12, "seq": 256, "head_dim": 64},
    "gpt2-block": {"batch": 4, "seq": 256, "channels": 768, "heads": 12},
}
DEFAULTS["mlp-train"] = DEFAULTS["mlp"]
DEFAULTS["gpt2-block-train"] = DEFAULTS["gpt2-block"]


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def mlp_inputs(p, u, n):
    d, h = p["d"], p["hidden"]
    return u(p["batch"], d), [n(d, h, s=0.02), n(h, s=0.02), n(h, d, s=0.02), n(d, s=0.02)]


def mlp(x, w):
    return gelu_tanh(x @ w[0] + w[1]) @ w[2] + w[3]


def gpt2_inputs(p, n):
    C = p["channels"]
    x = n(p["batch"], p["seq"], C)
    ln1w, ln1b, ln2w, ln2b = n(C), n(C), n(C), n(C)
    wqkv, bqkv, wp, bp = n(C, 3 * C, s=0.02), n(3 * C, s=0.02), n(C, C, s=0.02), n(C, s=0.02)
    wf, bf, wo, bo = n(C, 4 * C, s=0.02), n(4 * C, s=0.02), n(4 * C, C, s=0.02), n(C, s=0.02)
    return x, [ln1w, ln1b, wqkv, bqkv, wp, bp, ln2w, ln2b, wf, bf, wo, bo]


def gpt2_block(p, x, w, mask, attend=None):
    """Pre-LN GPT-2 block (lazylab's gpt2-block: weights in its input order)."""
    B, T, C, H = p["batch"], p["seq"], p["channels"], p["heads"]
    D = C // H
    ln = torch.nn.functional.layer_norm
    qkv = ln(x, (C,), w[0], w[1], 1e-5) @ w[2] + w[3]
    q, k, v = (t.reshape(B, T, H, D).permute(0, 2, 1, 3) for t in qkv.split(C, -1))
    if attend:
        y = attend(q, k, v, is_causal=True)
    else:
        s = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(D))
        s = s.masked_fill(~mask, float("-inf"))
        y = torch.softmax(s, -1) @ v
    y = y.permute(0, 2, 1, 3).reshape(B, T, C)
    h = x + (y @ w[4] + w[5])
    return h + (gelu_tanh(ln(h, (C,), w[6], w[7], 1e-5) @ w[8] + w[9]) @ w[10] + w[11])


def make_training(name, p, g, device="cpu", dtype=torch.float32, compile_mode=None):
    """WORKLOADS.md's training step: the forward, mean((out - t)^2), backward
    and torch.optim.AdamW (lr 1e-3, weight decay 0.01) from a mid-training
    state like lazylab's (m ~ N(0, 1e-4), v in [0.5e-8, 1.5e-8), step 10).
    With `compile_mode` the forward is torch.compile'd in that mode (the
    optimizer eager, as PEERS.md's training peers)."""
    u = lambda *shape: (torch.rand(*shape, generator=g) * 2 - 1).to(device, dtype)
    n = lambda *shape, s=1.0: (torch.randn(*shape, generator=g) * s).to(device, dtype)
    if name == "mlp-train":
        x, weights = mlp_inputs(p, u, n)
        forward = lambda w: mlp(x, w)  # noqa: E731
    else:
        x, weights = gpt2_inputs(p, n)
        mask = torch.tril(torch.ones(p["seq"], p["seq"], dtype=torch.bool)).to(device)
        forward = lambda w: gpt2_block(p, x, w, mask)  # noqa: E731
    if compile_mode:
        forward = torch.compile(forward, mode=compile_mode)
    target = n(*x.shape)
    params = [w.clone().requires_grad_(True) for w in weights]
    optimizer = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    for w in params:
        optimizer.state[w] = {"step": torch.tensor(10.0), "exp_avg": n(*w.shape, s=1e-4),
                              "exp_avg_sq": (torch.rand(*w.shape, generator=g) + 0.5).to(device, dtype) * 1e-8}

    def step():
        with torch.enable_grad():
            optimizer.zero_grad()
            loss = ((forward(params) - target) ** 2).mean()
            loss.backward()
            optimizer.step()
            return loss
    return step


def make(name, p, g, device="cpu", sdpa=False, dtype=torch.float32, compile_mode=None):
    """One step of workload `name` with params `p`, inputs drawn from `g` on
    the host and placed on `device` in `dtype` (bf16: the f32 draws rounded,
    as lazylab's `inputs: bf16`); and the ops a step records (chain).
    With `sdpa`, attention (and gpt2-block's) is one
    F.scaled_dot_product_attention call, PyTorch's fused kernels (torch 2).
    A training step (`*-train`) compiles its forward in `compile_mode`."""
    attend = lambda *a, **k: torch.nn.functional.scaled_dot_product_attention(*a, **k)
    u = lambda *shape: (torch.rand(*shape, generator=g) * 2 - 1).to(device, dtype)
    n = lambda *shape, s=1.0: (torch.randn(*shape, generator=g) * s).to(device, dtype)
    if name.startswith("chain"):
        x = u(p["n"])

        def step():
            y = x
            for _ in range(p["iters"]):
                y = y + 1
                y = y * 0.99
                y = torch.relu(y)
            return y
        return step, 3 * p["iters"]
    if name == "softmax":
        x = u(p["rows"], p["cols"])
        return lambda: torch.softmax(x, -1), 0
    if name == "layernorm":
        x, w, b = u(p["rows"], p["cols"]), u(p["cols"]), u(p["cols"])
        return lambda: torch.nn.functional.layer_norm(x, (p["cols"],), w, b, 1e-5), 0
    if name.endswith("-train"):
        return make_training(name, p, g, device, dtype, compile_mode), 0
    if name == "mlp":
        x, weights = mlp_inputs(p, u, n)
        return lambda: mlp(x, weights), 0
    if name == "attention":
        shape = (p["batch"], p["heads"], p["seq"], p["head_dim"])
        q, k, v = u(*shape), u(*shape), u(*shape)
        if sdpa:
            return lambda: attend(q, k, v, scale=0.125), 0
        return lambda: torch.softmax(q @ k.transpose(-1, -2) * 0.125, -1) @ v, 0
    if name == "gpt2-block":
        x, weights = gpt2_inputs(p, n)
        mask = torch.tril(torch.ones(p["seq"], p["seq"], dtype=torch.bool)).to(device)
        return lambda: gpt2_block(p, x, weights, mask, attend if sdpa else None), 0
    raise SystemExit(f"unknown workload {name}")


def measure(step, warmup, runs, flush_mib=0):
    """Medians of `runs` steps; with flush_mib, each after that many MiB are
    written (outside the timing), so the step starts with cold caches."""
    flush = torch.empty(flush_mib << 20, dtype=torch.uint8) if flush_mib else None
    with torch.no_grad():
        for _ in range(warmup):
            step()
        samples = []
        for _ in range(runs):
            if flush is not None:
                flush.fill_(1)
            t0 = time.perf_counter()
            step()
            samples.append((time.perf_counter() - t0) * 1e3)
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def add_arguments(ap):
    torch_blas.add_argument(ap)
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32", help="bf16: each step under torch.autocast")
    ap.add_argument("--inputs", choices=["f32", "bf16"], default="f32", help="the dtype inputs and weights are in")


def autocast(step):
    def step_in_bf16():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return step()
    return step_in_bf16


def main():
    args, params = parse_args(__doc__, DEFAULTS, add_arguments)
    pipeline = "-".join(["torch-eager"] + (["bf16"] if args.dtype == "bf16" else []) +
                        (["bf16-inputs"] if args.inputs == "bf16" else []))
    torch.set_num_threads(args.threads)
    blas_threads = torch_blas.limit_threads(args.blas_threads)
    cells = []
    for i, name in enumerate(n for n in args.workloads.split(",") if n):
        if name not in DEFAULTS:
            print(f"{name:12s} not defined for torch: left out")
            continue
        g = torch.Generator().manual_seed(args.seed + i)
        step, ops = make(name, params[name], g, dtype=torch.bfloat16 if args.inputs == "bf16" else torch.float32)
        if args.dtype == "bf16":
            step = autocast(step)
        step_ms = measure(step, args.warmup, args.runs, args.flush_mib)
        cell = {"workload": name, "pipeline": pipeline, "backend": "torch", "params": params[name], "step_ms": step_ms}
        if ops:
            cell["step_us_per_op"] = step_ms["median"] * 1e3 / ops
        if args.inputs != "f32":
            cell["inputs"] = args.inputs  # compared with lazylab's entry of the same `inputs`
        cells.append(cell)
        print(f"{name:12s} {pipeline} {step_ms['median']:9.4f} ms (min {step_ms['min']:.4f})")
    blas = os.environ.get("OPENBLAS_CORETYPE", "detected by OpenBLAS")
    caches = f", {args.flush_mib} MiB written before each step" if args.flush_mib else ""
    threads = f", {blas_threads}" if blas_threads else ""
    precision = (f", bf16 autocast ({args.inputs} inputs)" if args.dtype == "bf16" else
                 "" if args.inputs == "f32" else f", {args.inputs} inputs")
    write_report(args.out, f"torch {torch.__version__} eager{precision}, {args.threads} threads, OpenBLAS core {blas}"
                           f"{threads}{caches}",
                 cells)


if __name__ == "__main__":
    main()
