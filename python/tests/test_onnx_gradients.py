"""Whole-model gradients against PyTorch's for the same weights: the four
reference networks (experiments/models, CI size: ResNet-18 and MobileNetV2
on a 64x64 image, BERT and GPT-2 with 2 layers and 16 tokens) exported to
ONNX, imported by `lazylab import`, and differentiated by lazylab's reverse
mode on the cpu backend, against torch.autograd on the PyTorch model the
export came from. The loss is sum(output * c), c a fixed random cotangent,
so every output element's backward path counts.

The exporter folds some weights (batch norm into convolutions, a Linear's
weight into its transpose, GPT-2's tied embedding into a second,
transposed copy): each imported weight is matched to a PyTorch parameter
by name, or where its name is the exporter's own by equal values (as it
is, or transposed), and the gradients of the copies of one parameter add
up. Weights matching nothing (folded convolutions) are not compared one by
one; for the image models the gradient with respect to the image is, and
it runs through every one of them."""

import os
import subprocess
import sys

import numpy as np
import pytest

import lazylab

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("torchvision")
from onnx import numpy_helper  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "experiments", "models"))
from export_models import export  # noqa: E402
from reference_models import build  # noqa: E402

# The CLI built beside the package (PYTHONPATH=build/python): build/experiments/lazylab.
LAZYLAB = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(lazylab.__file__))), "experiments", "lazylab")

# Per model: the smallest share of PyTorch's parameter elements whose
# gradients are compared one by one (the rest are folded away).
COVERAGE = {"resnet18": 0.0, "mobilenetv2": 0.0, "bert": 0.99, "gpt2": 0.99}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    if not os.access(LAZYLAB, os.X_OK):
        pytest.skip(f"needs the lazylab CLI beside the package ({LAZYLAB})")
    folder = tmp_path_factory.mktemp("models")
    return folder


def imported(folder, name):
    """(graph, input arrays, weight arrays by ordinal, initializer names by ordinal)"""
    model_folder = folder / name
    export(name, "small", 0, str(model_folder))
    out = folder / (name + "-lzir")
    subprocess.run([LAZYLAB, "import", str(model_folder / "model.onnx"), "-o", str(out)], check=True,
                   capture_output=True)
    _, graph = lazylab.read_lzir(str(out / "model.lzir"))
    image = numpy_helper.to_array(onnx.load_tensor(str(model_folder / "test_data_set_0" / "input_0.pb")))
    weights = {n: np.load(out / "model.weights" / f"{n}.npy") for n in range(1, graph.num_parameters)}
    initializers = [(i.name, numpy_helper.to_array(i))
                    for i in onnx.load(str(model_folder / "model.onnx")).graph.initializer]
    names = {}
    for n, w in weights.items():
        hits = {name for name, a in initializers if a.shape == w.shape and np.array_equal(a, w)}
        if len(hits) == 1:
            names[n] = hits.pop()
    return graph, image, weights, names


def match(weights, names, params):
    """PyTorch parameter name -> [(ordinal, transposed)], each imported float
    weight by its initializer's name, else by values equal to one parameter's
    alone (as it is or transposed)."""
    matched = {}
    for n, w in weights.items():
        if w.dtype != np.float32:
            continue
        if names.get(n) in params and params[names[n]].shape == w.shape:
            matched.setdefault(names[n], []).append((n, False))
            continue
        same = [k for k, p in params.items() if p.shape == w.shape and np.array_equal(p, w)]
        turned = [k for k, p in params.items() if p.ndim == 2 and p.T.shape == w.shape and np.array_equal(p.T, w)]
        if len(same) + len(turned) == 1:
            matched.setdefault((same + turned)[0], []).append((n, bool(turned)))
    return matched


def close(got, want, what, floor=0.0):
    """Within 2e-3 of the largest element, or of `floor` where that is larger:
    a gradient that is zero but for rounding (BERT's key biases: softmax does
    not see a shift of all scores) is held to the model's scale."""
    scale = max(np.abs(want).max(), floor)
    error = np.abs(got - want).max() / scale if scale > 0 else np.abs(got).max()
    assert error <= 2e-3, f"{what}: largest difference {error:.2e} of {scale:.3e}"


@pytest.mark.parametrize("name", ["resnet18", "mobilenetv2", "bert", "gpt2"])
def test_onnx_model_gradients_match_pytorch(exported, name):
    graph, image, weights, names = imported(exported, name)
    model, _ = build(name, "small", 0)
    params = {k: p.detach().numpy() for k, p in model.named_parameters()}
    matched = match(weights, names, params)

    # PyTorch: the model the export came from, eval mode, as exported.
    torch_input = torch.tensor(image, requires_grad=image.dtype == np.float32)
    out = model(torch_input)
    cotangent = np.random.default_rng(3).normal(size=tuple(out.shape)).astype(np.float32)
    (out * torch.tensor(cotangent)).sum().backward()

    ctx = lazylab.context(backend="cpu")
    inputs = [ctx.tensor(image)] + [ctx.tensor(weights[n]) for n in range(1, graph.num_parameters)]
    lz_out = ctx.call(graph, inputs)[0]
    loss = (lz_out * ctx.tensor(cotangent)).sum()
    floats = [n for n in range(1, graph.num_parameters) if weights[n].dtype == np.float32]
    wrt = [inputs[n] for n in floats] + ([inputs[0]] if torch_input.requires_grad else [])
    grads = [g.numpy() for g in lazylab.grad(loss, wrt)]
    by_ordinal = dict(zip(floats, grads))

    close(lz_out.numpy(), out.detach().numpy(), f"{name}: the output")
    pairs = {key: (sum(by_ordinal[n].T if turned else by_ordinal[n] for n, turned in copies),
                   dict(model.named_parameters())[key].grad.numpy()) for key, copies in matched.items()}
    floor = 1e-4 * max(np.abs(want).max() for _, want in pairs.values())
    compared = 0
    for key, (got, want) in pairs.items():
        close(got, want, f"{name}: d/d {key}", floor)
        compared += params[key].size
    if torch_input.requires_grad:
        close(grads[-1], torch_input.grad.numpy(), f"{name}: d/d the image")
    share = compared / sum(p.size for p in params.values())
    assert share >= COVERAGE[name], f"{name}: gradients of {share:.1%} of the parameters compared"
    assert matched, f"{name}: no weight matched a PyTorch parameter"
