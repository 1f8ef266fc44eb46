#!/usr/bin/env python3
"""A peer for the CLI tests: speaks the peer protocol (experiments/runner/peers.h)
and reports the time of a Python loop over each workload's `n` elements, or
exits with the status given by --fail, or never finishes (--hang); --clock sets the report's clock; --inputs DTYPE
marks its cells as run on inputs stored in DTYPE; --log FILE
appends what each run was given. Records its arguments and
OPENBLAS_CORETYPE in the report so the tests can check what it was given."""
import argparse
import json
import os
import statistics
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--workloads", required=True)
ap.add_argument("--param", action="append", default=[])
ap.add_argument("--warmup", type=int, required=True)
ap.add_argument("--runs", type=int, required=True)
ap.add_argument("--threads", type=int, required=True)
ap.add_argument("--seed", type=int, required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--fail", type=int, default=0)
ap.add_argument("--hang", action="store_true")
ap.add_argument("--clock", help="the report's clock field, when given")
ap.add_argument("--inputs", help="each cell's inputs field, when given")
ap.add_argument("--log", help="a file to append '--workloads --runs' to, a line a run")
args = ap.parse_args()
if args.log:
    with open(args.log, "a") as log:
        print(args.workloads, args.runs, file=log)
while args.hang:
    time.sleep(1)
if args.fail:
    # As a real peer fails: a traceback-like stderr whose last line says why.
    print("Traceback (most recent call last):\n  File fake_peer.py\n" + "noise line\n" * 50
          + "RuntimeError: the fake peer was told to fail", file=sys.stderr)
    sys.exit(args.fail)
params = dict(item.split("=") for item in args.param)
cells = []
for name in args.workloads.split(","):
    n = int(params.get(f"{name}.n", 64))
    samples = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        sum(i * 0.5 for i in range(n))
        samples.append((time.perf_counter() - t0) * 1e3)
    cells.append({"workload": name, "step_ms": {"median": statistics.median(samples), "min": min(samples),
                                                 "max": max(samples)}})
    if args.inputs:
        cells[-1]["inputs"] = args.inputs
report = {"peer": f"fake peer, cwd {os.path.basename(os.getcwd())}, core "
          f"{os.environ.get('OPENBLAS_CORETYPE', 'unset')}, params {sorted(params)}", "cells": cells}
if args.clock:
    report["clock"] = args.clock
with open(args.out, "w") as f:
    json.dump(report, f)
