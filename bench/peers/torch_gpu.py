#!/usr/bin/env python3
"""PyTorch on a CUDA GPU, eager or torch.compile (inductor), on the reference
workloads of WORKLOADS.md: a lazylab peer (experiments/runner/peers.h has the
protocol) for experiments/gpu-suite.yaml.

Timed as PEERS.md times its GPU figures: fp32 with TF32 off, GPU time by
CUDA events around each step, the L2 cache flushed between steps. With
--mode=compile the first call (the compile) is reported apart. The workload
definitions are torch_eager.py's. By hand, on a GPU machine:

  python3 bench/peers/torch_gpu.py --mode=compile --workloads softmax \\
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


def main():
    args, params = parse_args(__doc__, DEFAULTS,
                              lambda ap: ap.add_argument("--mode", choices=["eager", "compile"], default="eager"))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    cells = []
    for i, name in enumerate(n for n in args.workloads.split(",") if n):
        if name not in DEFAULTS:
            print(f"{name:12s} not defined for torch: left out")
            continue
        g = torch.Generator().manual_seed(args.seed + i)
        step, ops = make(name, params[name], g, "cuda")
        if args.mode == "compile":
            torch._dynamo.reset()
            step = torch.compile(step)
        step_ms, first_ms = measure(step, args.warmup, args.runs)
        cell = {"workload": name, "pipeline": f"torch-{args.mode}", "backend": "torch-cuda", "params": params[name],
                "step_ms": step_ms, "first_call_ms": first_ms}
        if ops:
            cell["step_us_per_op"] = step_ms["median"] * 1e3 / ops
        cells.append(cell)
        print(f"{name:12s} torch {args.mode} {step_ms['median']:9.4f} ms GPU (first call {first_ms:.0f} ms)")
    write_report(args.out, f"torch {torch.__version__} {args.mode} on {torch.cuda.get_device_name()}: fp32, TF32 off, "
                           f"GPU time by CUDA events, L2 flushed between steps", cells, clock="device")


if __name__ == "__main__":
    main()
