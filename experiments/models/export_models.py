#!/usr/bin/env python3
"""Exports the reference models (reference_models.py) to ONNX for
experiments/models.yaml, each as a model folder ONNX's tools read:

  OUT/NAME/model.onnx                  opset 17, weights as initializers
  OUT/NAME/test_data_set_0/input_0.pb  the example input
  OUT/NAME/test_data_set_0/output_0.pb PyTorch's own output for it
  OUT/NAME/config.json                 name, size, seed (the PyTorch peer rebuilds the model from it)

so that `lazylab onnx-test --data OUT` checks lazylab against PyTorch and
`{onnx: OUT/NAME/model.onnx}` runs the model as a workload. A model whose
folder already holds this size and seed is not exported again. Needs
Debian's python3-torch, python3-torchvision and python3-onnx (bash
.ci/setup); run with /usr/bin/python3:

  /usr/bin/python3 experiments/models/export_models.py --out experiments/models/onnx --size full
"""
import argparse
import inspect
import json
import os
import sys
import time

import onnx
import torch
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_models import MODELS, SIZES, build  # noqa: E402


def export(name, size, seed, folder):
    config = {"name": name, "size": size, "seed": seed, "torch": torch.__version__, "exporter": "torchscript"}
    stamp = os.path.join(folder, "config.json")
    if os.path.exists(stamp) and os.path.exists(os.path.join(folder, "model.onnx")):
        with open(stamp) as f:
            if json.load(f) == config:
                print(f"{name}: up to date in {folder}")
                return
    started = time.perf_counter()
    model, inputs = build(name, size, seed)
    with torch.no_grad():
        output = model(*inputs)
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    partial = os.path.join(folder, "model.onnx.partial")
    # The TorchScript exporter: newer PyTorch defaults to torch.export, whose
    # models use opset 18 attributes (Split's num_outputs) and an IR version
    # that Debian's libonnx 1.12 does not read.
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, inputs, partial, opset_version=17, input_names=["input"], output_names=["output"],
                      do_constant_folding=True, **legacy)
    exported = onnx.load(partial)
    if exported.ir_version > 8:  # opset 17 needs no more; libonnx 1.12 reads up to 8
        exported.ir_version = 8
        onnx.save(exported, partial)
    onnx.checker.check_model(partial)
    for kind, tensor in (("input", inputs[0]), ("output", output)):
        proto = numpy_helper.from_array(tensor.numpy(), kind)
        with open(os.path.join(folder, "test_data_set_0", f"{kind}_0.pb"), "wb") as f:
            f.write(proto.SerializeToString())
    os.replace(partial, os.path.join(folder, "model.onnx"))  # the stamp last: a killed export is redone
    with open(stamp, "w") as f:
        json.dump(config, f)
    print(f"{name}: exported in {time.perf_counter() - started:.1f} s to {folder}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for one model folder per model")
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("models", nargs="*", default=list(MODELS))
    args = ap.parse_args()
    for name in args.models:
        if name not in MODELS:
            sys.exit(f"export_models.py: unknown model '{name}' (models: {', '.join(MODELS)})")
        export(name, args.size, args.seed, os.path.join(args.out, name))


if __name__ == "__main__":
    main()
