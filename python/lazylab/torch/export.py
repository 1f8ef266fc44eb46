"""python3 -m lazylab.torch.export PROGRAM.py --out DIR [--param NAME=INT]...
[--steps N] [--backend B]: runs a training program (lazylab/torch/loop.py's
protocol) lazily for a few steps and saves its steady-state step graph as
DIR/step.lzir with its inputs as DIR/step.weights/N.npy, and what capturing
it cost as DIR/capture.json. `lazylab run` loads a `torch:` workload through
it; any backend and pipeline then run the saved step."""

import argparse
import json
import os
import sys

from . import loop, runtime


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m lazylab.torch.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("program")
    parser.add_argument("--out", required=True)
    parser.add_argument("--param", action="append", default=[], help="NAME=INT, overriding the program's PARAMS")
    parser.add_argument("--steps", type=int, default=3, help="steps run; the last one is saved (default 3)")
    parser.add_argument("--backend", default="cpu", help="where the steps before it run (default cpu)")
    args = parser.parse_args(argv)
    try:
        program = loop.load(args.program)
        params = dict(item.split("=", 1) for item in args.param)
        saved = {}

        def save_last(step, device):
            if step == args.steps - 1:
                saved["hash"] = device.save_step(args.out, "step")

        result = loop.run(program, "lazy", steps=args.steps, params=params, backend=args.backend, before_sync=save_last)
    except (ValueError, FileNotFoundError, runtime.lazylab.Error) as error:
        print(f"lazylab.torch.export: {args.program}: {error}", file=sys.stderr)
        return 1
    m = result.metrics
    with open(os.path.join(args.out, "capture.json"), "w") as f:
        json.dump({"program": args.program, "params": loop.sizes(program, params), "graph_hash": saved["hash"],
                   "aten_ops_per_step": m["AtenOps"] / args.steps, "capture_us_per_aten_op": m["CaptureNs"] / max(m["AtenOps"], 1) / 1e3,
                   "compiles": m["cache_misses"], "losses": result.losses}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
