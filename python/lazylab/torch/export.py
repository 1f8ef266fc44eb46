"""python3 -m lazylab.torch.export PROGRAM.py --out DIR [--capture lazy|fx|dynamo]
[--param NAME=INT]... [--steps N] [--backend B]: captures a training
program's (lazylab/torch/loop.py's protocol) steady-state step and saves it
as DIR/step.lzir with its inputs as DIR/step.weights/N.npy, and what the
capture cost and how it compared with eager PyTorch as DIR/capture.json.
`lazylab run` loads a `torch:` workload through it; any backend and
pipeline then run the saved step.

Captures: "lazy" runs the program on the lazy device for N steps and saves
the last (its capture is paid every step); "fx" runs N-1 steps eagerly and
traces step N once with torch.fx's make_fx (step_trace.py); "dynamo" (torch
2.x) runs N steps of the step function under torch.compile with lazylab's
dynamo backend and saves the last step's graphs stitched into one
(step_dynamo.py). Each step is checked against eager PyTorch's from the
same weights, optimizer state and batch: the lazy and dynamo steps against
eager PyTorch's step from their loop's state, the fx graph against the
eager step make_fx ran as it traced. A
capture that differs by more than the tolerances below is an error
(capture.json says by how much).
"""

import argparse
import json
import os
import statistics
import sys
import time
import traceback

import numpy as np

from . import loop, runtime

# How closely a capture's step must match eager PyTorch's on the same
# inputs: the loss relatively, every tensor the step leaves (weights,
# gradients, buffers, optimizer state) by its largest difference over its
# largest magnitude. The second is looser because Adam divides each
# gradient by its running root mean square: where a gradient is zero in
# exact arithmetic (attention's key bias: softmax ignores a shift), both
# sides hold rounding noise, which Adam's state carries at 1e-4 of its
# scale after one step (the small GPT, lazy and fx alike).
LOSS_TOLERANCE, STATE_TOLERANCE = 1e-4, 1e-3


def scaled_error(got, want):
    """max|got - want| / max|want| (the plain difference where want is 0)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if want.size == 0:
        return 0.0
    difference = float(np.max(np.abs(got - want)))
    scale = float(np.max(np.abs(want)))
    return difference / scale if scale > 0 else difference


def check(loss, want_loss, state, want_state):
    """The step's loss and the tensors it left against eager PyTorch's."""
    loss_error = scaled_error(loss, want_loss)
    state_error = max((scaled_error(g, w) for g, w in zip(state, want_state)), default=0.0)
    return {"loss_relative_error": loss_error, "state_scaled_error": state_error, "tensors": len(state),
            "loss_tolerance": LOSS_TOLERANCE, "state_tolerance": STATE_TOLERANCE,
            "pass": loss_error <= LOSS_TOLERANCE and state_error <= STATE_TOLERANCE}


def capture_lazy(program, params, steps, backend, out):
    """steps-1 lazy steps, then the saved one; eager PyTorch runs that last
    step too, from the lazy loop's weights and optimizer state."""
    import torch

    lazy, eager = loop.Loop(program, "lazy", steps, params, backend=backend), loop.Loop(program, "eager", steps, params)
    trace_ms = []

    def lazy_step(x, y):
        start = time.perf_counter()
        loss = lazy.step(x, y)
        trace_ms.append((time.perf_counter() - start) * 1e3)
        return loss

    for _ in range(steps - 1):
        x, y = lazy.batch()
        lazy_step(x, y)
        lazy.sync()
        eager.step(x, y)  # so that eager's optimizer holds state of the same kinds
    got_state, want_state = lazy.state(), eager.state()
    if [tuple(t.shape) for t in got_state] != [tuple(t.shape) for t in want_state]:
        raise runtime.lazylab.Error("the lazy and the eager loop hold different tensors (weights, gradients, buffers, "
                                    "optimizer state)")
    with torch.no_grad():
        for want, got in zip(want_state, got_state):
            want.copy_(torch.from_numpy(np.array(loop.host(got))))
    x, y = lazy.batch()
    ops_before = loop.metrics("lazy")["AtenOps"]
    loss = lazy_step(x, y)
    m = loop.metrics("lazy")
    graph_hash = runtime.current().save_step(out, "step")
    lazy.sync()
    want_loss = eager.step(x, y)
    capture_ms = statistics.median(trace_ms[1:])
    return {
        "graph_hash": graph_hash,
        "aten_ops_per_step": m["AtenOps"] - ops_before,
        "capture_ms": capture_ms,
        "capture_every_step": True,
        "host_ms_per_step": capture_ms,
        "dispatch_us_per_aten_op": m["CaptureNs"] / max(m["AtenOps"], 1) / 1e3,
        "compiles": loop.metrics("lazy")["cache_misses"],
        "baked_reads": 0,
        "eager_check": check(loop.host(loss), loop.host(want_loss), [loop.host(t) for t in got_state],
                             [loop.host(t) for t in want_state]),
    }


def capture_fx(program, params, steps, backend, out):
    """steps-1 eager steps, then the last traced once (step_trace.py); the
    graph's step against the eager one make_fx ran."""
    from . import step_trace

    traced = step_trace.trace(program, steps=steps, params=params, backend=backend)
    compiled = traced.compiled
    graph_hash = runtime.save_graph(out, "step", compiled.graph, compiled.graph_inputs(*traced.inputs))
    got = traced.run()
    return {
        "graph_hash": graph_hash,
        "aten_ops_per_step": traced.aten_ops,
        "capture_ms": traced.trace_ms + traced.lower_ms,
        "capture_every_step": False,
        "host_ms_per_step": traced.call_overhead_ms(state_on_device=True),
        "host_ms_per_step_torch_state": traced.call_overhead_ms(),
        "trace_ms": traced.trace_ms,
        "lower_ms": traced.lower_ms,
        "baked_reads": traced.baked_reads,
        "eager_check": check(got[0].numpy(), traced.eager[0].numpy(), [t.numpy() for t in got[1:]],
                             [t.numpy() for t in traced.eager[1:]]),
    }


def capture_dynamo(program, params, steps, backend, out):
    """steps-1 steps under torch.compile, then the last recorded and its
    graphs stitched into one (step_dynamo.py); that graph's step against
    eager PyTorch's from the same state and batch."""
    from . import step_dynamo

    step, record = step_dynamo.capture(program, steps=steps, params=params, backend=backend)
    graph_hash = runtime.save_graph(out, "step", step.graph, step.inputs)
    got = step.run()
    return {"graph_hash": graph_hash, "baked_reads": 0, **record,
            "eager_check": check(got[0], step.eager[0], got[1:], step.eager[1:])}


CAPTURES = {"lazy": capture_lazy, "fx": capture_fx, "dynamo": capture_dynamo}  # --capture's styles


def program_line(error, path):
    """' at FILE:LINE in FUNCTION': the innermost frame of the program's own
    file in `error`'s traceback, or '' where it has none."""
    path = os.path.realpath(path)
    frames = [f for f in traceback.extract_tb(error.__traceback__) if os.path.realpath(f.filename) == path]
    return f" at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m lazylab.torch.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("program")
    parser.add_argument("--out", required=True)
    parser.add_argument("--capture", default="lazy", help=f"how the step is captured: {', '.join(CAPTURES)}")
    parser.add_argument("--param", action="append", default=[], help="NAME=INT, overriding the program's PARAMS")
    parser.add_argument("--steps", type=int, default=3, help="steps run; the last one is saved (default 3)")
    parser.add_argument("--backend", default="cpu", help="where the lazy steps run (default cpu)")
    args = parser.parse_args(argv)
    # Exit 2 where the request is wrong (as argparse's own), 1 where the
    # program's capture failed: `lazylab run` stops on the first and fails
    # the workload's cells on the second.
    say = lambda why: print(f"lazylab.torch.export: {args.program}: {why}", file=sys.stderr)  # noqa: E731
    usage = lambda why: say(why) or 2  # noqa: E731
    fail = lambda why: say(why) or 1  # noqa: E731
    if args.capture not in CAPTURES:
        return usage(f"unknown capture '{args.capture}' (one of {', '.join(CAPTURES)})")
    if args.steps < 2:
        return usage("--steps must be at least 2 (the saved step is a steady one: the optimizer has its state)")
    if not os.path.isfile(args.program):
        return usage("no such program")
    try:
        program = loop.load(args.program)
        params = dict(item.split("=", 1) for item in args.param)
        capture = CAPTURES[args.capture]
        record = capture(program, params, args.steps, args.backend, args.out)
    except loop.ParameterError as error:
        return usage(error)
    except (ValueError, FileNotFoundError, runtime.lazylab.Error) as error:
        return fail(error)
    except RuntimeError as error:  # PyTorch's own, from the program's eager steps or make_fx
        return fail(f"PyTorch stopped the program{program_line(error, args.program)}: {error}")
    record = {"program": args.program, "capture": args.capture, "params": loop.sizes(program, params), **record}
    with open(os.path.join(args.out, "capture.json"), "w") as f:
        json.dump(record, f, indent=2)
    checked = record["eager_check"]
    if not checked["pass"]:
        return fail(f"the {args.capture} capture's step differs from eager PyTorch's on the same inputs: the loss by "
                    f"{checked['loss_relative_error']:.3g} (tolerance {LOSS_TOLERANCE}), the tensors it leaves by "
                    f"{checked['state_scaled_error']:.3g} of their scale (tolerance {STATE_TOLERANCE}); see "
                    f"{os.path.join(args.out, 'capture.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
