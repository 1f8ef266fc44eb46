"""What a call into lazylab costs from Python: tracing `x = relu((x + 1) *
0.99)` (as chain-tiny does) through the binding, against the same trace in
C++ (bench/core_bench.cpp: BM_TraceScalarChain). Prints ns per op.

    PYTHONPATH=build/python python3 python/tests/bench_call_cost.py
"""

import statistics
import sys
import time

import numpy as np

import lazylab
from lazylab import ops


def per_op_ns(ctx, x, iterations, repeats=7):
    times = []
    for _ in range(repeats):
        y = x
        start = time.perf_counter_ns()
        for _ in range(iterations):
            y = ops.relu((y + 1.0) * 0.99)
        times.append((time.perf_counter_ns() - start) / (3 * iterations))
        del y
        ctx.discard_pending()
    return statistics.median(times), min(times), max(times)


def python_floor_ns(iterations, repeats=7):
    """The same loop over a trivial Python object: the interpreter's share."""

    class Nothing:
        def __add__(self, other):
            return self

        __mul__ = __add__

    def relu(v):
        return v

    times = []
    for _ in range(repeats):
        y = Nothing()
        start = time.perf_counter_ns()
        for _ in range(iterations):
            y = relu((y + 1.0) * 0.99)
        times.append((time.perf_counter_ns() - start) / (3 * iterations))
    return statistics.median(times), min(times), max(times)


def main():
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    ctx = lazylab.Context()  # traces only
    x = ctx.tensor(np.full(64, 0.5, np.float32))
    per_op_ns(ctx, x, iterations)  # warm: the second and later traces repeat the first
    lazy = per_op_ns(ctx, x, iterations)
    floor = python_floor_ns(iterations)
    print(f"python {sys.version.split()[0]}, {iterations * 3} ops a trace, median [min, max] of 7")
    print(f"  lazylab trace through the binding: {lazy[0]:.0f} ns/op [{lazy[1]:.0f}, {lazy[2]:.0f}]")
    print(f"  the same calls on a do-nothing Python object: {floor[0]:.0f} ns/op [{floor[1]:.0f}, {floor[2]:.0f}]")


if __name__ == "__main__":
    main()
