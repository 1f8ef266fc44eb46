"""The peer protocol (experiments/runner/peers.h) for the Python peers: the
arguments lazylab passes and the report it reads back."""
import argparse
import json
import platform


def parse_args(doc, defaults, extra=None):
    """The protocol's arguments, and each workload's parameters: `defaults`
    overridden by --param WORKLOAD.NAME=INT. `extra` adds a peer's own."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=",".join(defaults), help="comma-separated names")
    ap.add_argument("--param", action="append", default=[], help="WORKLOAD.NAME=INT override")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--out", required=True)
    ap.add_argument("--flush-mib", type=int, default=0, help="MiB written before each timed step (cold caches)")
    if extra:
        extra(ap)
    args = ap.parse_args()
    params = {k: dict(v) for k, v in defaults.items()}
    for item in args.param:
        key, value = item.split("=")
        workload, name = key.rsplit(".", 1)
        params.setdefault(workload, {})[name] = int(value)
    return args, params


def write_report(path, description, cells, clock="host"):
    """`clock`: "device" when the cells' step_ms are GPU time by device
    events, "host" when they are wall time on the host."""
    report = {"schema_version": 1, "peer": description, "machine": platform.processor() or platform.machine(),
              "clock": clock, "cells": cells}
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
