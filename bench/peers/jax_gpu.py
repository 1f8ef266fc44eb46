#!/usr/bin/env python3
"""JAX jit on a GPU on the reference workloads of WORKLOADS.md: a lazylab
peer (experiments/runner/peers.h has the protocol) for
experiments/gpu-suite.yaml.

Timed as PEERS.md times JAX: fp32 at 'highest' matmul precision (TF32 off),
host wall time around a call that blocks until the result is ready (so each
figure includes JAX's dispatch); the first call (trace and compile) is
reported apart. With --dtype=bf16 every input is bf16 and the program
computes in bf16 as JAX does (products accumulating in f32 on the GPU).
"""
import math
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from peer_protocol import parse_args, write_report

jax.config.update("jax_default_matmul_precision", "highest")

DEFAULTS = {
    "chain": {"n": 67108864, "iters": 100},
    "chain-tiny": {"n": 64, "iters": 100},
    "softmax": {"rows": 8192, "cols": 8192},
    "layernorm": {"rows": 32768, "cols": 1024},
    "mlp": {"batch": 8192, "d": 1024, "hidden": 4096},
    "attention": {"batch": 16, "heads": 16, "seq": 1024, "head_dim": 64},
    "gpt2-block": {"batch": 16, "seq": 1024, "channels": 768, "heads": 12},
}


def gelu_tanh(x):
    return 0.5 * x * (1 + jnp.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def layer_norm(x, w, b):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * w + b


def make(name, p, rng, dtype=jnp.float32):
    u = lambda *shape: jnp.asarray(rng.uniform(-1, 1, shape).astype(np.float32), dtype=dtype)
    n = lambda *shape, s=1.0: jnp.asarray((rng.standard_normal(shape) * s).astype(np.float32), dtype=dtype)
    if name.startswith("chain"):
        iters = p["iters"]

        def chain(x):
            for _ in range(iters):
                x = jax.nn.relu((x + 1) * 0.99)
            return x
        return jax.jit(chain), (u(p["n"]),), 3 * iters
    if name == "softmax":
        return jax.jit(lambda x: jax.nn.softmax(x, -1)), (u(p["rows"], p["cols"]),), 0
    if name == "layernorm":
        return jax.jit(layer_norm), (u(p["rows"], p["cols"]), u(p["cols"]), u(p["cols"])), 0
    if name == "mlp":
        d, h = p["d"], p["hidden"]
        args = (u(p["batch"], d), n(d, h, s=0.02), n(h, s=0.02), n(h, d, s=0.02), n(d, s=0.02))
        return jax.jit(lambda x, w1, b1, w2, b2: gelu_tanh(x @ w1 + b1) @ w2 + b2), args, 0
    if name == "attention":
        shape = (p["batch"], p["heads"], p["seq"], p["head_dim"])
        step = lambda q, k, v: jax.nn.softmax(q @ jnp.swapaxes(k, -1, -2) * 0.125, -1) @ v
        return jax.jit(step), (u(*shape), u(*shape), u(*shape)), 0
    if name == "gpt2-block":
        B, T, C, H = p["batch"], p["seq"], p["channels"], p["heads"]
        D = C // H
        mask = jnp.tril(jnp.ones((T, T), dtype=bool))

        def block(x, ln1w, ln1b, wqkv, bqkv, wp, bp, ln2w, ln2b, wf, bf, wo, bo):
            qkv = layer_norm(x, ln1w, ln1b) @ wqkv + bqkv
            q, k, v = (t.reshape(B, T, H, D).transpose(0, 2, 1, 3) for t in jnp.split(qkv, 3, -1))
            s = (q @ jnp.swapaxes(k, -1, -2)) * (1 / math.sqrt(D))
            s = jnp.where(mask, s, -jnp.inf)
            y = (jax.nn.softmax(s, -1) @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
            h = x + (y @ wp + bp)
            return h + (gelu_tanh(layer_norm(h, ln2w, ln2b) @ wf + bf) @ wo + bo)
        args = (n(B, T, C), n(C), n(C), n(C, 3 * C, s=0.02), n(3 * C, s=0.02), n(C, C, s=0.02), n(C, s=0.02),
                n(C), n(C), n(C, 4 * C, s=0.02), n(4 * C, s=0.02), n(4 * C, C, s=0.02), n(C, s=0.02))
        return jax.jit(block), args, 0
    return None, None, 0


def measure(fn, args, warmup, runs):
    t0 = time.perf_counter()
    fn(*args).block_until_ready()
    first_ms = (time.perf_counter() - t0) * 1e3
    for _ in range(warmup):
        fn(*args).block_until_ready()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(*args).block_until_ready()
        samples.append((time.perf_counter() - t0) * 1e3)
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}, first_ms


def main():
    args, params = parse_args(__doc__, DEFAULTS, lambda ap: ap.add_argument("--dtype", choices=["f32", "bf16"],
                                                                           default="f32"))
    dtype = jnp.bfloat16 if args.dtype == "bf16" else jnp.float32
    pipeline = "jax-jit-bf16" if args.dtype == "bf16" else "jax-jit"
    cells = []
    for i, name in enumerate(n for n in args.workloads.split(",") if n):
        fn, inputs, ops = make(name, params.get(name, {}), np.random.default_rng(args.seed + i), dtype)
        if fn is None:
            print(f"{name:12s} not defined for jax: left out")
            continue
        step_ms, first_ms = measure(fn, inputs, args.warmup, args.runs)
        cell = {"workload": name, "pipeline": pipeline, "backend": "jax-gpu", "params": params[name],
                "step_ms": step_ms, "first_call_ms": first_ms}
        if ops:
            cell["step_us_per_op"] = step_ms["median"] * 1e3 / ops
        if args.dtype == "bf16":
            cell["inputs"] = "bf16"  # compared with lazylab's `inputs: bf16` entry where there is one
        cells.append(cell)
        print(f"{name:12s} {pipeline} {step_ms['median']:9.4f} ms host (first call {first_ms:.0f} ms)")
    precision = "bf16 inputs and compute" if args.dtype == "bf16" else "fp32"
    write_report(args.out, f"jax {jax.__version__} jit on {jax.devices()[0].device_kind}: {precision}, matmul "
                           f"precision highest, host time around a blocking call", cells, clock="host")


if __name__ == "__main__":
    main()
