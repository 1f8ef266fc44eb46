#!/usr/bin/env python3
"""PyTorch on a CUDA GPU, eager or torch.compile (inductor, default mode or
reduce-overhead's CUDA graphs), on the reference workloads of WORKLOADS.md:
a lazylab peer (experiments/runner/peers.h has the protocol) for
experiments/gpu-suite.yaml and gpu-suite-bf16.yaml.

Timed as PEERS.md times its GPU figures: fp32 with TF32 off, GPU time by
CUDA events around each step, the L2 cache flushed between steps. With
--dtype=bf16 each step runs under torch.autocast in bf16 (the inputs stay
f32, as an f32 program under lazylab's autocast pass; with --inputs=bf16
they are bf16, weights too, as lazylab's `inputs: bf16`); with
--attention=sdpa attention is F.scaled_dot_product_attention (the flash
kernel in bf16), and only the workloads with attention run. With a compile
mode the first call (the compile) is reported apart. The workload
definitions are torch_eager.py's. By hand, on a GPU machine:

  python3 bench/peers/torch_gpu.py --mode=compile --dtype=bf16 --workloads softmax \\
      --param softmax.rows=8192 --param softmax.cols=8192 --out /tmp/torch.json
"""
import statistics
import time

import torch

from peer_protocol import parse_args, write_report
from torch_eager import DEFAULTS, make


def measure(step, warmup, runs):
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")  # larger than any L2 so far
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.no_grad():
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        first_ms = (time.perf_counter() - t0) * 1e3
        for _ in range(warmup):
            step()
        samples = []
        for _ in range(runs):
            flush.zero_()
            start.record()
            step()
            stop.record()
            stop.synchronize()
            samples.append(start.elapsed_time(stop))
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}, first_ms


ATTENTION_WORKLOADS = {"attention", "gpt2-block"}


def add_arguments(ap):
    ap.add_argument("--mode", choices=["eager", "compile", "reduce-overhead", "compile-step"], default="eager",
                    help="compile, reduce-overhead: a training step's forward compiled, its optimizer eager; "
                         "compile-step: the whole step function compiled (where TorchDynamo captures it)")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32", help="bf16: each step under torch.autocast")
    ap.add_argument("--attention", choices=["matmul", "sdpa"], default="matmul")
    ap.add_argument("--inputs", choices=["f32", "bf16"], default="f32", help="the dtype inputs and weights are in")


def autocast(step):
    def step_in_bf16():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return step()
    return step_in_bf16


def main():
    args, params = parse_args(__doc__, DEFAULTS, add_arguments)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    pipeline = "-".join(["torch", args.mode] + (["sdpa"] if args.attention == "sdpa" else []) +
                        (["bf16"] if args.dtype == "bf16" else []) +
                        (["bf16-inputs"] if args.inputs == "bf16" else []))
    cells = []
    for i, name in enumerate(n for n in args.workloads.split(",") if n):
        if name not in DEFAULTS or (args.attention == "sdpa" and name not in ATTENTION_WORKLOADS):
            print(f"{name:12s} not defined for torch {pipeline}: left out")
            continue
        training = name.endswith("-train")
        if args.mode == "compile-step" and not training:
            print(f"{name:12s} compile-step is a training step's mode: left out")
            continue
        torch._dynamo.reset()
        g = torch.Generator().manual_seed(args.seed + i)
        forward_mode = {"compile": "default", "reduce-overhead": "reduce-overhead"}.get(args.mode) if training else None
        step, ops = make(name, params[name], g, "cuda", sdpa=args.attention == "sdpa",
                         dtype=torch.bfloat16 if args.inputs == "bf16" else torch.float32, compile_mode=forward_mode)
        if args.dtype == "bf16":
            step = autocast(step)
        if args.mode == "compile-step" or not training and args.mode != "eager":
            step = torch.compile(step, mode="reduce-overhead" if args.mode == "reduce-overhead" else "default")
        step_ms, first_ms = measure(step, args.warmup, args.runs)
        cell = {"workload": name, "pipeline": pipeline, "backend": "torch-cuda", "params": params[name],
                "step_ms": step_ms, "first_call_ms": first_ms}
        if ops:
            cell["step_us_per_op"] = step_ms["median"] * 1e3 / ops
        if args.inputs != "f32":
            cell["inputs"] = args.inputs  # compared with lazylab's entry of the same `inputs`
        cells.append(cell)
        print(f"{name:12s} {pipeline} {step_ms['median']:9.4f} ms GPU (first call {first_ms:.0f} ms)")
    precision = (f"bf16 autocast ({args.inputs} inputs)" if args.dtype == "bf16" else
                 "fp32" if args.inputs == "f32" else "bf16 inputs")
    attention = ", attention by F.scaled_dot_product_attention" if args.attention == "sdpa" else ""
    write_report(args.out, f"torch {torch.__version__} {args.mode} on {torch.cuda.get_device_name()}: {precision}"
                           f"{attention}, TF32 off, GPU time by CUDA events, L2 flushed between steps", cells,
                 clock="device")


if __name__ == "__main__":
    main()
