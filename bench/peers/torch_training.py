#!/usr/bin/env python3
"""PyTorch training programs (experiments/training/*.py), each a whole step
(forward, backward, optimizer), under one capture style, as a lazylab peer
(experiments/runner/peers.h has the protocol): `torch:` workloads are passed
as their paths.

  --mode eager     PyTorch as written (on --device, cpu or cuda)
  --mode ltc       PyTorch's Lazy Tensor Core, TorchScript backend (device lazy)
  --mode lazylab   lazylab.torch: the step traced below autograd and run by
                   lazylab on --backend; its step time includes the capture
  --mode compile   torch.compile of the model (torch 2.x), the optimizer eager
  --mode dynamo    torch.compile of the model with lazylab's dynamo backend
                   (its forward and backward graphs on --backend), the
                   optimizer eager (torch 2.x)
  --mode compile-step  the model and the optimizer's step compiled (torch
                   2.x's compiled optimizer); backward is the compiled
                   model's AOTAutograd backward

Each timed step is the wall time from the batch entering to the step's
results being computed (mark_step, or the GPU synchronized). By hand:

  PYTHONPATH=build/python /usr/bin/python3 bench/peers/torch_training.py --mode lazylab \\
      --workloads experiments/training/mlp_sgd.py --out /tmp/peer.json
"""
import os
import statistics
import sys
import time

import torch

import torch_blas
from peer_protocol import parse_args, write_report


def extra(ap):
    ap.add_argument("--mode", choices=("eager", "ltc", "lazylab", "compile", "compile-step", "dynamo"), default="eager")
    ap.add_argument("--device", default="cpu", help="eager and compile: cpu or cuda")
    ap.add_argument("--backend", default="cpu", help="lazylab: its backend")
    ap.add_argument("--pipeline", default=None, help="lazylab: its pipeline (default: the package's)")
    torch_blas.add_argument(ap)


def timed_steps(program, params, args):
    from lazylab.torch import loop

    if args.mode in ("eager", "ltc", "lazylab"):
        capture = {"eager": "eager", "ltc": "ltc", "lazylab": "lazy"}[args.mode]
        if capture == "eager" and args.device != "cpu":
            return cuda_steps(program, params, args, compiled=False)
        result = loop.run(program, capture, steps=args.warmup + args.runs, params=params, backend=args.backend,
                          pipeline=args.pipeline, read_loss=False)
        return result.step_ms[args.warmup:], result.metrics
    return cuda_steps(program, params, args, compiled=True)


def cuda_steps(program, params, args, compiled):
    """Eager or torch.compile'd on args.device, each step synchronized; with
    compile-step the optimizer's step is compiled too."""
    from lazylab.torch import loop

    params = loop.sizes(program, params)
    torch.manual_seed(args.seed)
    model = program.model(params).to(args.device)
    backend = None
    if args.mode == "dynamo":
        import lazylab.torch as lt

        backend = lt.dynamo_backend(backend=args.backend, pipeline=args.pipeline)
        model = torch.compile(model, backend=backend)
    elif compiled:
        model = torch.compile(model)
    optimizer, schedule = program.optimizer(model, params, args.warmup + args.runs)
    if args.mode == "compile-step":
        optimizer.step = torch.compile(optimizer.step)
    generator = torch.Generator().manual_seed(args.seed + 1)
    times = []
    for _ in range(args.warmup + args.runs):
        x, y = program.batch(generator, params, params["batch"])
        if args.device != "cpu":
            torch.cuda.synchronize()
        start = time.perf_counter()
        x, y = x.to(args.device, non_blocking=True), y.to(args.device, non_blocking=True)
        program.step(model, optimizer, schedule, x, y)
        if args.device != "cpu":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return times[args.warmup:], call_split(backend, args.warmup + args.runs)


def call_split(backend, steps):
    """Where a step's calls of the dynamo backend's graphs spend their time,
    ms a step: binding the inputs, running, handing out the outputs."""
    if backend is None:
        return {}
    total = {"Calls": 0, "CallInputsNs": 0, "CallRunNs": 0, "CallOutputsNs": 0}
    for graph in {id(graph.device): graph for graph in backend.graphs}.values():  # graphs may share a device
        m = graph.metrics()
        for key in total:
            total[key] += m.get(key, 0)
    return {"graphs": len(backend.graphs), "calls_per_step": total["Calls"] / steps,
            **{key[4:-2].lower() + "_ms_per_step": total[key] / steps / 1e6 for key in total if key.endswith("Ns")}}


CHILD = "LAZYLAB_TRAINING_PEER_CHILD"  # set in the children each_in_its_own_process starts


def each_in_its_own_process(programs):
    """Runs this peer once per program, so one that kills its process (LTC
    aborts on some programs with a failed check) costs only its own cell."""
    import json
    import subprocess
    import tempfile

    cells = []
    for path in programs:
        argv, skip = [], False
        for arg in sys.argv[1:]:  # all but --workloads and --out, in either spelling
            if skip or arg.startswith(("--workloads=", "--out=")):
                skip = False
                continue
            skip = arg in ("--workloads", "--out")
            if not skip:
                argv.append(arg)
        with tempfile.TemporaryDirectory() as folder:
            out = os.path.join(folder, "cells.json")
            child = subprocess.run([sys.executable, __file__, *argv, f"--workloads={path}", f"--out={out}"],
                                   stderr=subprocess.PIPE, text=True, env={**os.environ, CHILD: "1"})
            if child.returncode == 0:
                cells += json.load(open(out))["cells"]
            else:
                last = " | ".join(line for line in child.stderr.splitlines()[-3:] if line.strip())
                print(f"{os.path.basename(path)}: exited with status {child.returncode}: {last}", file=sys.stderr)
    return cells


def main():
    args, params = parse_args(__doc__, {}, extra)
    torch.set_num_threads(args.threads)
    on_cpu = args.mode in ("eager", "ltc") and args.device == "cpu"  # the modes whose products PyTorch computes
    blas = torch_blas.limit_threads(args.blas_threads) if on_cpu else ""
    from lazylab.torch import loop

    programs = [w for w in args.workloads.split(",") if w.endswith(".py")]
    # LTC's abort kills the process even for one program (peer-rounds gives
    # a peer one workload at a time): its child dies, the report stands.
    apart = len(programs) > 1 or (args.mode == "ltc" and not os.environ.get(CHILD))
    cells = each_in_its_own_process(programs) if apart else []
    for path in programs if not apart else []:
        program = loop.load(path)
        try:
            times, metrics = timed_steps(program, params.get(path, {}), args)
        except Exception as error:  # a capture that cannot run the program (LTC aborts some) is reported, not fatal
            print(f"{os.path.basename(path)}: {args.mode}: {type(error).__name__}: {str(error)[:300]}", file=sys.stderr)
            continue
        cell = {"workload": path,
                "step_ms": {"median": statistics.median(times), "min": min(times), "max": max(times)}}
        if "calls_per_step" in metrics:
            cell["dynamo_calls"] = metrics
        if "CaptureNs" in metrics and metrics.get("AtenOps"):
            cell["capture_us_per_aten_op"] = metrics["CaptureNs"] / metrics["AtenOps"] / 1e3
            cell["compiles"] = metrics["cache_misses"]
        cells.append(cell)
    label = {"eager": f"PyTorch {torch.__version__} eager ({args.device})",
             "ltc": f"PyTorch {torch.__version__} Lazy Tensor Core, TorchScript backend",
             "lazylab": f"lazylab.torch on {args.backend} (whole step: capture below autograd + run)",
             "compile": f"PyTorch {torch.__version__} torch.compile model ({args.device})",
             "dynamo": f"torch.compile with lazylab's dynamo backend on {args.backend} ({args.device})",
             "compile-step": f"PyTorch {torch.__version__} torch.compile model and optimizer step ({args.device})"}[args.mode]
    write_report(args.out, label + (f", {blas}" if blas else ""), cells)


if __name__ == "__main__":
    main()
