#!/usr/bin/env python3
"""PyTorch eager on the reference models of experiments/models.yaml.

A lazylab peer (experiments/runner/peers.h has the protocol): it is given
each ONNX workload by its path, reads the config.json that
experiments/models/export_models.py wrote beside the model (name, size,
seed), rebuilds the very same network in PyTorch (same constructor, same
seed, so the same weights) and times its forward pass under no_grad; other
workloads are left out. Needs Debian's python3-torch and python3-torchvision;
run with /usr/bin/python3. --device cuda times on the GPU with CUDA events.
--dtype=bf16 runs each forward pass under torch.autocast in bf16 (weights
and inputs stay f32, as an f32 model under lazylab's autocast pass): its
pipeline is torch-eager-bf16; with --inputs=bf16 the weights and float
inputs are bf16 (model.to(torch.bfloat16), as lazylab's `inputs: bf16`).
--mode=compile|reduce-overhead times
torch.compile's model instead (torch 2; its pipeline torch-compile[-bf16]
or torch-reduce-overhead[-bf16]), compiled in the warm-up steps.
--train MODEL=LOSS/OPTIMIZER (repeatable) times MODEL's training step
instead, as lazylab's `train: {loss: LOSS, optimizer: OPTIMIZER}` makes it
(experiments/runner/training_step.h): the model in eval mode (the function
that was exported), the loss of its output (cross-entropy against class
indices along the last axis, or mse against a target of its shape),
backward, and one step of torch.optim.SGD (momentum 0.9, lr 1e-2) or AdamW
(lr 1e-3, its defaults); the cell says which step it timed ("train").
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import torch_blas
from peer_protocol import parse_args, write_report

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "experiments", "models"))
from reference_models import build  # noqa: E402


def training_step(model, inputs, spec, generator):
    """A step that trains `model` by `spec` ("LOSS/OPTIMIZER")."""
    loss_name, optimizer_name = spec.split("/")
    with torch.no_grad():
        out = model(*inputs)
    if loss_name == "cross-entropy":
        target = torch.randint(0, out.shape[-1], out.shape[:-1], generator=generator).to(out.device)
        loss_of = lambda y: F.cross_entropy(y.reshape(-1, y.shape[-1]), target.reshape(-1))  # noqa: E731
    elif loss_name == "mse":
        target = torch.randn(out.shape, generator=generator).to(out.device)
        loss_of = lambda y: F.mse_loss(y, target)  # noqa: E731
    else:
        sys.exit(f"torch_models.py: unknown loss '{loss_name}'")
    params = [p for p in model.parameters()]
    if optimizer_name == "sgd":
        optimizer = torch.optim.SGD(params, lr=1e-2, momentum=0.9)
    elif optimizer_name == "adamw":
        optimizer = torch.optim.AdamW(params, lr=1e-3)
    else:
        sys.exit(f"torch_models.py: unknown optimizer '{optimizer_name}'")

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(model(*inputs))
        loss.backward()
        optimizer.step()
        return loss
    return step


def measure(step, warmup, runs, device, flush_mib=0, grad=False):
    flush = torch.empty(flush_mib << 20, dtype=torch.uint8, device=device) if flush_mib else None
    with torch.enable_grad() if grad else torch.no_grad():
        for _ in range(warmup):
            step()
        samples = []
        for _ in range(runs):
            if flush is not None:  # cold caches, as lazylab's repeat.flush
                flush.fill_(1)
            if device == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                step()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                step()
                samples.append((time.perf_counter() - t0) * 1e3)
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def main():
    def extra(ap):
        ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
        ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32", help="bf16: each step under torch.autocast")
        ap.add_argument("--mode", choices=["eager", "compile", "reduce-overhead"], default="eager")
        ap.add_argument("--inputs", choices=["f32", "bf16"], default="f32", help="the dtype weights and inputs are in")
        ap.add_argument("--train", action="append", default=[], metavar="MODEL=LOSS/OPTIMIZER",
                        help="time MODEL's training step (repeatable)")
        torch_blas.add_argument(ap)

    args, _ = parse_args(__doc__, {}, extra)
    torch.set_num_threads(args.threads)
    blas_threads = torch_blas.limit_threads(args.blas_threads) if args.device == "cpu" else ""
    pipeline = "-".join(["torch", args.mode] + (["bf16"] if args.dtype == "bf16" else []) +
                        (["bf16-inputs"] if args.inputs == "bf16" else []))
    if args.device == "cuda":  # the f32 cells in full f32, as lazylab's
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    cells = []
    for path in (w for w in args.workloads.split(",") if w):
        config_file = os.path.join(os.path.dirname(path), "config.json")
        if not path.endswith(".onnx") or not os.path.exists(config_file):
            print(f"{path}: not an exported reference model: left out")
            continue
        with open(config_file) as f:
            config = json.load(f)
        model, inputs = build(config["name"], config["size"], config["seed"])
        model, inputs = model.to(args.device).eval(), tuple(x.to(args.device) for x in inputs)
        train = dict(item.split("=", 1) for item in args.train).get(config["name"], "")
        if args.inputs == "bf16":
            model = model.to(torch.bfloat16)
            inputs = tuple(x.to(torch.bfloat16) if x.is_floating_point() else x for x in inputs)
        if args.mode != "eager":
            torch._dynamo.reset()
            model = torch.compile(model, mode="reduce-overhead" if args.mode == "reduce-overhead" else "default")
        def step(model=model, inputs=inputs):
            if args.dtype == "f32":
                return model(*inputs)
            with torch.autocast(args.device, dtype=torch.bfloat16):
                return model(*inputs)

        if train:
            step = training_step(model, inputs, train, torch.Generator().manual_seed(args.seed))
        step_ms = measure(step, args.warmup, args.runs, args.device, args.flush_mib, grad=bool(train))
        cell = {"workload": path, "pipeline": pipeline, "backend": "torch", "params": {}, "step_ms": step_ms}
        if args.inputs != "f32":
            cell["inputs"] = args.inputs  # compared with lazylab's entry of the same `inputs`
        if train:
            cell["train"] = train  # compared with lazylab's entry of the same `train`
        cells.append(cell)
        what = f"{pipeline} train {train}" if train else pipeline
        print(f"{config['name']:12s} {what} ({args.device}) {step_ms['median']:9.3f} ms (min {step_ms['min']:.3f})")
    blas = os.environ.get("OPENBLAS_CORETYPE", "detected by OpenBLAS")
    where = f"{args.threads} threads, OpenBLAS core {blas}" if args.device == "cpu" else torch.cuda.get_device_name()
    if blas_threads:
        where += f", {blas_threads}"
    stored = f"{args.inputs} weights and inputs"
    precision = (f", bf16 autocast ({stored})" if args.dtype == "bf16" else
                 "" if args.inputs == "f32" else f", {stored}")
    write_report(args.out, f"torch {torch.__version__} {args.mode}{precision} on {args.device}, {where}", cells,
                 clock="device" if args.device == "cuda" else "host")


if __name__ == "__main__":
    main()
