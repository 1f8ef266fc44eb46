"""Capture once: lt.compile (torch.fx's make_fx, torch 1.13 and 2.x) and
torch.compile(backend="lazylab") (TorchDynamo and AOTAutograd, torch 2.x),
both through the lazy device's lowering table, checked against eager."""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import lazylab  # noqa: E402
import lazylab.torch as lt  # noqa: E402

F = torch.nn.functional


def weights():
    torch.manual_seed(0)
    return [torch.randn(8, 32) * 0.3, torch.zeros(32), torch.randn(32, 4) * 0.3]


def sgd_step(w1, b1, w2, x, y, lr):
    """A whole training step, written functionally: the gradients by
    torch.autograd.grad, which make_fx traces into the graph."""
    loss = F.cross_entropy(torch.tanh(x @ w1 + b1) @ w2, y)
    grads = torch.autograd.grad(loss, [w1, b1, w2])
    return loss.detach(), [(p - lr * g).detach() for p, g in zip((w1, b1, w2), grads)]


def batch(step):
    g = torch.Generator().manual_seed(step)
    return torch.randn(16, 8, generator=g), torch.randint(0, 4, (16,), generator=g)


def eager_steps(steps, lr):
    params, losses = weights(), []
    for step in range(steps):
        loss, params = sgd_step(*[p.requires_grad_() for p in params], *batch(step), lr)
        losses.append(float(loss))
    return losses, params


@pytest.mark.parametrize("outputs", ["torch", "lazy"])
def test_a_functional_training_step_compiles_once_and_matches_eager(outputs):
    lr = torch.tensor(0.1)
    examples = [p.requires_grad_() for p in weights()] + list(batch(0)) + [lr]
    step = lt.compile(sgd_step, examples, outputs=outputs)
    traced_ops = step.metrics()["AtenOps"]
    params = [p.detach() for p in weights()]
    if outputs == "lazy":
        params = [step.lazy(p) for p in params]  # the weights stay on the device between calls
    losses = []
    for i in range(6):
        loss, params = step(*params, *batch(i), lr)
        losses.append(float(loss))
    want_losses, want_params = eager_steps(6, lr)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    for got, want in zip(params, want_params):
        np.testing.assert_allclose(np.asarray(got.numpy()), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    m = step.metrics()
    assert m["cache_misses"] == 1 and m["cache_hits"] == 5
    assert m["AtenOps"] == traced_ops > 30  # traced once: no Python per aten op in the calls


def test_a_compiled_forward_keeps_held_tensors_and_passes_inputs_and_numbers_through():
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.GELU(), torch.nn.LayerNorm(7))

    def forward(x, mask):
        return model(x), mask, 3

    x, mask = torch.randn(4, 5), torch.ones(4, dtype=torch.bool)
    compiled = lt.compile(forward, (x, mask))
    for seed in range(2):
        x = torch.randn(4, 5, generator=torch.Generator().manual_seed(seed))
        out, passed, number = compiled(x, mask)
        np.testing.assert_allclose(out.numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
        assert passed is mask and number == 3


def test_a_call_with_other_shapes_is_an_error_naming_the_input():
    compiled = lt.compile(lambda x: x * 2.0 + 1.0, (torch.ones(3),))
    with pytest.raises(lazylab.Error, match=r"call: input \d+ is f32\[4\], the graph.s parameter \d+ is f32\[3\]"):
        compiled(torch.ones(4))


def test_torch_compile_with_the_lazylab_backend_trains_like_eager():  # torch 2.x: 1.13 has no TorchDynamo
    dynamo = pytest.importorskip("torch._dynamo")
    del dynamo

    def train(model, steps):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        losses = []
        for i in range(steps):
            x, y = batch(i)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
        return losses

    def mlp():
        torch.manual_seed(3)
        return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

    want = train(mlp(), 5)
    assert lt.register_dynamo_backend()
    got = train(torch.compile(mlp(), backend="lazylab"), 5)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    got = train(torch.compile(mlp(), backend=lt.dynamo_backend(backend="cpu")), 5)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_torch_compile_trains_a_convolutional_net_with_batch_norm_like_eager():
    """AOTAutograd's functional batch norm (its running statistics as
    outputs), convolutions and max pooling, through the dynamo backend."""
    pytest.importorskip("torch._dynamo")

    def net():
        torch.manual_seed(4)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                   torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 4 * 4, 5))

    def train(model, plain, steps=4):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        generator = torch.Generator().manual_seed(5)
        losses = []
        for _ in range(steps):
            x, y = torch.randn(6, 3, 8, 8, generator=generator), torch.randint(0, 5, (6,), generator=generator)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
        return losses, plain[1].running_mean.detach().clone()

    eager = net()
    want, want_mean = train(eager, eager)
    compiled = net()
    got, got_mean = train(torch.compile(compiled, backend=lt.dynamo_backend(backend="cpu")), compiled)
    np.testing.assert_allclose(got, want, rtol=1e-4)
    np.testing.assert_allclose(got_mean.numpy(), want_mean.numpy(), rtol=1e-4, atol=1e-6)


def test_an_output_passed_back_unchanged_is_the_value_it_was_and_a_changed_one_is_read_again():
    step = lt.compile(lambda x: x * 2.0 + 1.0, (torch.ones(3),))
    y = step(torch.ones(3))
    z = step(y)  # y as it was handed out: its lazylab value, no copy
    assert step.metrics()["ReturnedTensors"] == 1
    np.testing.assert_array_equal(z.numpy(), [7.0, 7.0, 7.0])
    y.add_(1.0)  # written in place: its data is read again
    w = step(y)
    assert step.metrics()["ReturnedTensors"] == 1
    np.testing.assert_array_equal(w.numpy(), [9.0, 9.0, 9.0])


def test_the_dynamo_backend_reports_graph_breaks_with_their_reasons():
    dynamo = pytest.importorskip("torch._dynamo")

    class Broken(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first, self.second = torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)

        def forward(self, x):
            x = torch.relu(self.first(x))
            dynamo.graph_break()
            return self.second(x)

    torch.manual_seed(6)
    eager = Broken()
    x = torch.randn(3, 4)
    want = eager(x).sum()
    backend = lt.dynamo_backend(backend="cpu")
    got = torch.compile(eager, backend=backend)(x).sum()
    np.testing.assert_allclose(float(got.detach()), float(want.detach()), rtol=1e-6)
    report = backend.metrics_report()
    assert len(backend.graphs) >= 2, report  # a graph each side of the break (their backwards maybe too)
    assert f"DynamoGraphs (forward and backward, handed to lazylab)\n  Value: {len(backend.graphs)}" in report
    breaks = [line for line in report.splitlines() if line.startswith("GraphBreak:")]
    assert breaks, report


def test_what_a_compiled_function_writes_in_place_is_written_back_into_its_arguments():
    def momentum_step(weight, velocity, grad):
        velocity.mul_(0.9).add_(grad)
        weight.sub_(0.1 * velocity)
        return (weight * weight).sum()

    shapes = [(5, 3), (5, 3), (5, 3)]
    compiled = lt.compile(momentum_step, [torch.zeros(s) for s in shapes])
    torch.manual_seed(7)
    weight, velocity, grad = (torch.randn(s) for s in shapes)
    want = [t.clone() for t in (weight, velocity, grad)]
    want_result = momentum_step(*want)
    got_result = compiled(weight, velocity, grad)
    np.testing.assert_allclose(float(got_result), float(want_result), rtol=1e-6)
    for got, expected in zip((weight, velocity, grad), want):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6, atol=1e-7)
    assert compiled.metrics()["WrittenBackInputs"] == 2  # the weight and the velocity; grad was only read
    # torch sees the writes: their version counters moved (autograd checks
    # them, and so does a graph's output passed back in), grad's did not.
    versions = [t._version for t in (weight, velocity, grad)]
    compiled(weight, velocity, grad)
    assert [t._version for t in (weight, velocity, grad)] == [versions[0] + 1, versions[1] + 1, versions[2]]


def test_many_arguments_written_in_place_each_bind_their_own_input():
    """Placeholders are matched to graph inputs as made: one an in-place op
    replaced must not lend its address to a tensor made later."""
    count = 40

    def step(*tensors):
        for t in tensors:
            t.mul_(2.0).add_(1.0)
        return tensors[0] * 3.0

    examples = [torch.zeros(i + 1) for i in range(count)]
    compiled = lt.compile(step, examples)
    args = [torch.full((i + 1,), float(i)) for i in range(count)]
    compiled(*args)
    for i, t in enumerate(args):
        np.testing.assert_array_equal(t.numpy(), np.full(i + 1, 2.0 * i + 1.0, dtype=np.float32))


def training_program(name):
    from lazylab.torch import loop

    return loop.load(os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "training", name + ".py"))


@pytest.mark.parametrize("name, sizes", [
    ("mlp_sgd", {"batch": 8, "features": 16, "hidden": 32}),
    ("gpt_adamw", {"batch": 2, "tokens": 8, "vocab": 32, "channels": 16, "layers": 1}),
])
def test_an_unmodified_training_step_traced_by_fx_matches_the_eager_step_it_ran(name, sizes):
    from lazylab.torch import export, step_trace

    traced = step_trace.trace(training_program(name), steps=3, params=sizes)
    got = traced.run()
    check = export.check(got[0].numpy(), traced.eager[0].numpy(), [t.numpy() for t in got[1:]],
                         [t.numpy() for t in traced.eager[1:]])
    assert check["pass"], check
    assert check["tensors"] == len(traced.inputs)
    # AdamW on torch 1.13 reads each parameter's step count with .item():
    # constants of this step's graph, counted. SGD reads none.
    if name == "gpt_adamw" and torch.__version__.startswith("1."):
        assert traced.baked_reads > 0
    if name == "mlp_sgd":
        assert traced.baked_reads == 0
    again = traced.run()  # the graph is reused: the same step again
    np.testing.assert_array_equal(again[0].numpy(), got[0].numpy())
    assert traced.compiled.metrics()["cache_misses"] == 1


def test_the_exporter_saves_an_fx_step_with_its_capture_record(tmp_path):
    import json

    from lazylab.torch import export

    program = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "training", "mlp_sgd.py")
    assert export.main([program, "--out", str(tmp_path), "--capture", "fx", "--param", "batch=8",
                        "--param", "hidden=16"]) == 0
    record = json.load(open(tmp_path / "capture.json"))
    assert record["capture"] == "fx" and not record["capture_every_step"] and record["eager_check"]["pass"]
    # What a call costs the host: the state kept on the device, or bound as
    # torch tensors and copied back (both measured; compared in benchmarks).
    assert record["host_ms_per_step"] > 0 and record["host_ms_per_step_torch_state"] > 0
    name, graph = lazylab.read_lzir(str(tmp_path / "step.lzir"))
    assert len(os.listdir(tmp_path / "step.weights")) == graph.num_parameters
    # A wrong request is a usage error (2), which stops `lazylab run`; a
    # capture that fails (1) fails only its workload's cells.
    assert export.main([program, "--out", str(tmp_path), "--capture", "dynamite"]) == 2
    assert export.main([program, "--out", str(tmp_path), "--param", "batches=8"]) == 2
    assert export.main([program + ".missing", "--out", str(tmp_path)]) == 2


@pytest.mark.parametrize("name, sizes", [
    ("mlp_sgd", {"batch": 8, "features": 16, "hidden": 32}),
    ("gpt_adamw", {"batch": 2, "tokens": 8, "vocab": 32, "channels": 16, "layers": 1}),
    ("resnet_sgd", {"batch": 2, "image": 16, "width": 4}),
])
def test_a_step_under_torch_compile_stitched_into_one_graph_matches_the_eager_step(name, sizes):
    """The dynamo capture (torch 2.x): the graphs one step called (forward,
    backward, the optimizer's), stitched where one's output is another's
    input, give eager PyTorch's loss, gradients, weights, buffers and
    optimizer state from the same state and batch."""
    pytest.importorskip("torch._dynamo")
    from lazylab.torch import export, step_dynamo

    step, record = step_dynamo.capture(training_program(name), steps=3, params=sizes)
    got = step.run()
    check = export.check(got[0], step.eager[0], got[1:], step.eager[1:])
    assert check["pass"], (check, record)
    assert record["graphs"] >= 2, record  # the graph break at backward(): forward and backward apart at least
    assert record["aten_ops_per_step"] > 20 and record["host_ms_per_step"] > 0, record
    if name != "gpt_adamw":  # autograd's seed gradient of the loss at most (the GPT's AdamW step runs partly
        assert record["constants"] <= 1, record  # eagerly between graph breaks: values of this step's own)
    changed = [index for index, output in enumerate(step.state) if output is not None]
    assert len(changed) >= len(step.state) // 2, step.state  # weights, gradients and optimizer state
    again = step.run()  # the stitched graph is a graph: the same step again
    np.testing.assert_array_equal(again[0], got[0])


def test_the_exporter_saves_a_dynamo_step_or_says_what_it_needs(tmp_path, capsys):
    import json

    from lazylab.torch import export

    program = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "training", "mlp_sgd.py")
    status = export.main([program, "--out", str(tmp_path), "--capture", "dynamo", "--param", "batch=8",
                          "--param", "hidden=16"])
    if not hasattr(torch, "compile"):
        assert status == 1 and "needs torch 2.x's TorchDynamo" in capsys.readouterr().err
        return
    assert status == 0, capsys.readouterr().err
    record = json.load(open(tmp_path / "capture.json"))
    assert record["capture"] == "dynamo" and record["graphs"] >= 2 and record["eager_check"]["pass"], record
    name, graph = lazylab.read_lzir(str(tmp_path / "step.lzir"))
    assert len(os.listdir(tmp_path / "step.weights")) == graph.num_parameters


def test_foreach_ops_lower_as_their_per_tensor_op_on_each_tensor():
    """What torch 2.x's clip_grad_norm_ calls on plain tensors (so what make_fx
    records there): a norm per tensor, then each scaled in place."""

    def clip(a, b, c):
        grads = [a, b, c]
        norms = torch._foreach_norm(grads, 2)
        total = torch.linalg.vector_norm(torch.stack(norms), 2)
        torch._foreach_mul_(grads, 0.5)
        torch._foreach_add_(grads, [a * 0 + 1.0, b * 0 + 2.0, c * 0 + 3.0], alpha=0.25)
        return total, torch._foreach_sqrt([g * g for g in grads])

    torch.manual_seed(9)
    shapes = [(4, 3), (7,), (2, 2, 2)]
    compiled = lt.compile(clip, [torch.zeros(s) for s in shapes])
    args = [torch.randn(s) for s in shapes]
    want_args = [t.clone() for t in args]
    want_total, want_roots = clip(*want_args)
    got_total, got_roots = compiled(*args)
    np.testing.assert_allclose(float(got_total), float(want_total), rtol=1e-6)
    for got, want in zip(list(got_roots) + args, list(want_roots) + want_args):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("capture", ["lazy", "fx"])
def test_a_program_that_pytorch_refuses_is_an_error_naming_its_line(tmp_path, capsys, capture):
    from lazylab.torch import export

    program = tmp_path / "wrong_shapes.py"
    program.write_text(
        "import torch\n"
        "from torch.nn import functional as F\n"
        "PARAMS = {'batch': 4}\n"
        "def model(params): return torch.nn.Linear(4, 2)\n"
        "def optimizer(model, params, steps): return torch.optim.SGD(model.parameters(), lr=0.1), None\n"
        "def batch(generator, params, size): return torch.randn(size, 3), torch.zeros(size, dtype=torch.long)\n"
        "def step(model, optimizer, schedule, x, y):\n"
        "    loss = F.cross_entropy(model(x), y)\n"
        "    optimizer.zero_grad(); loss.backward(); optimizer.step()\n"
        "    return loss\n")
    assert export.main([str(program), "--out", str(tmp_path), "--capture", capture]) == 1
    message = capsys.readouterr().err
    assert "wrong_shapes.py:8 in step" in message, message
