"""lazylab.torch on the training programs of experiments/training/ (a small
GPT with AdamW, ResNet-18 with SGD) and on the ops they add: convolutions
and pooling with their gradients, layer and batch norm, embeddings,
slicing, dropout. Checked against eager PyTorch on the same weights and
data."""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import lazylab  # noqa: E402
import lazylab.torch as lt  # noqa: E402
from lazylab.torch import loop  # noqa: E402

PROGRAMS = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "training")
F = torch.nn.functional


def program(name):
    return loop.load(os.path.join(PROGRAMS, name + ".py"))


@pytest.fixture(autouse=True)
def fresh_device():
    lt.device(backend="cpu")
    yield


def test_the_small_gpt_loop_matches_eager_and_compiles_three_graphs():
    gpt = program("gpt_adamw")
    sizes = {"batch": 4, "tokens": 16, "vocab": 64, "channels": 32, "layers": 2}
    want = loop.run(gpt, "eager", steps=12, params=sizes, ragged_last=True)
    got = loop.run(gpt, "lazy", steps=12, params=sizes, ragged_last=True)
    np.testing.assert_allclose(got.losses, want.losses, rtol=1e-5)
    # Adam divides by the root of each gradient's square: where a gradient is
    # zero in exact arithmetic (the key bias: softmax ignores a shift), each
    # implementation's rounding noise becomes a step of the learning rate.
    # Eager PyTorch with 1 and 2 threads differs by as much (4e-4 of scale).
    for w_got, w_want in zip(got.weights, want.weights):
        np.testing.assert_allclose(w_got, w_want, atol=2e-3 * np.abs(w_want).max() + 1e-6)
    # first step (no optimizer state), steady state, the ragged last batch
    assert got.metrics["cache_misses"] == 3, got.metrics["recompile_diagnoses"]


def test_resnet_steps_match_eager_while_no_max_or_relu_decision_flips():
    # A ReLU network's gradient jumps where a max or a ReLU changes its
    # choice: a 1e-7 change of the initial weights moves eager PyTorch's own
    # loss by 1e-2 within a few steps at small batches. At these sizes eager
    # stays within 3e-7 of itself for 5 steps under that perturbation.
    resnet = program("resnet_sgd")
    sizes = {"batch": 8, "image": 32, "width": 8}
    want = loop.run(resnet, "eager", steps=4, params=sizes)
    got = loop.run(resnet, "lazy", steps=4, params=sizes)
    np.testing.assert_allclose(got.losses, want.losses, rtol=1e-5)
    for w_got, w_want in zip(got.weights, want.weights):
        np.testing.assert_allclose(w_got, w_want, atol=1e-4 * np.abs(w_want).max() + 1e-7)


@pytest.mark.parametrize("name, steps, sizes", [
    ("mlp_sgd", 200, {}),
    ("gpt_adamw", 50, {"batch": 4, "tokens": 16, "vocab": 64, "channels": 32, "layers": 2}),
    ("resnet_sgd", 10, {"batch": 8, "image": 32, "width": 8}),
])
def test_in_f64_the_training_programs_follow_eager_to_rounding_over_many_steps(name, steps, sizes):
    # In f32 the runs part where a ReLU, a max or Adam's division meets a
    # tie (above); in f64 such ties are a billion times rarer, so any gap
    # here is the captured math, not its rounding. (The full-size loops of
    # experiments/training.yaml agree to 1e-12 over 200 steps in f64.)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        want = loop.run(program(name), "eager", steps=steps, params=sizes)
        got = loop.run(program(name), "lazy", steps=steps, params=sizes)
    finally:
        torch.set_default_dtype(previous)
    assert all(w.dtype == np.float64 for w in got.weights)
    np.testing.assert_allclose(got.losses, want.losses, rtol=1e-12)
    for w_got, w_want in zip(got.weights, want.weights):
        np.testing.assert_allclose(w_got, w_want, atol=1e-11 * np.abs(w_want).max() + 1e-300)


def test_batch_norm_updates_its_running_statistics_in_place_and_evaluates_with_them():
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    torch.manual_seed(0)
    lazy = lt.to_lazy(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)))
    x = torch.randn(2, 3, 6, 6)
    for _ in range(2):
        eager(x), lazy(lt.to_lazy(x))
    lt.mark_step()
    np.testing.assert_allclose(lazy[1].running_mean.numpy(), eager[1].running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lazy[1].running_var.numpy(), eager[1].running_var.numpy(), rtol=1e-5)
    eager.eval(), lazy.eval()
    np.testing.assert_allclose(lazy(lt.to_lazy(x)).numpy(), eager(x).detach().numpy(), rtol=1e-4, atol=1e-5)


CONVOLUTIONS = [  # in, out, kernel, stride, padding, dilation, groups, image
    (3, 4, 3, 1, 1, 1, 1, 8), (4, 6, 3, 2, 1, 1, 1, 9), (4, 4, 1, 2, 0, 1, 1, 8), (4, 8, 3, 2, 1, 1, 2, 8),
    (2, 3, 5, 3, 2, 2, 1, 13), (4, 4, 3, 1, 0, 1, 4, 6),
    # strided, taken phase by phase: a kernel longer than the stride, pads 0,
    # and pads past a 1x1 kernel (phases cut from the gradient)
    (3, 5, 4, 3, 1, 1, 1, 11), (2, 2, 5, 2, 0, 1, 1, 10), (4, 4, 1, 2, 1, 1, 1, 7),
]


@pytest.mark.parametrize("shape", CONVOLUTIONS, ids=lambda s: "c{}-o{}-k{}-s{}-p{}-d{}-g{}-i{}".format(*s))
def test_convolution_and_max_pool_gradients_match_eager(shape):
    cin, cout, k, s, p, d, g, image = shape
    torch.manual_seed(1)
    x, w, b = torch.randn(2, cin, image, image), torch.randn(cout, cin // g, k, k), torch.randn(cout)

    def loss(x, w, b):
        y = F.conv2d(x, w, b, stride=s, padding=p, dilation=d, groups=g)
        y = F.max_pool2d(F.relu(y), 3, 2, 1) if y.shape[-1] >= 3 else y
        return (y * y).sum()

    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    want = torch.autograd.grad(loss(*leaves), leaves)
    lazy = [lt.to_lazy(t).requires_grad_() for t in (x, w, b)]
    got = torch.autograd.grad(loss(*lazy), lazy)
    for g_got, g_want in zip(got, want):
        np.testing.assert_allclose(g_got.numpy(), g_want.numpy(), atol=1e-5 * np.abs(g_want.numpy()).max())


def test_max_pool_indices_are_the_first_maximum_of_each_window_as_pytorchs():
    x = torch.tensor([[[[1.0, 3.0, 3.0, 0.0], [3.0, 2.0, 0.0, 0.0], [0.0, 0.0, 5.0, 5.0], [0.0, 0.0, 5.0, 5.0]]]])
    want_values, want_indices = F.max_pool2d(x, 2, 2, return_indices=True)
    got_values, got_indices = F.max_pool2d(lt.to_lazy(x), 2, 2, return_indices=True)
    np.testing.assert_array_equal(got_indices.numpy(), want_indices.numpy())
    np.testing.assert_array_equal(got_values.numpy(), want_values.numpy())


POOLS = [  # kernel, stride, padding, dilation, image (height, width)
    (3, 2, 1, 1, (9, 8)), (2, 2, 0, 1, (8, 8)), (3, 1, 1, 1, (5, 6)), (3, 3, 1, 2, (11, 10)), (2, 3, 0, 1, (7, 9)),
]


@pytest.mark.parametrize("pool", POOLS, ids=lambda p: "k{}-s{}-p{}-d{}-{}x{}".format(*p[:4], *p[4]))
def test_max_pool_gradients_reach_each_windows_first_maximum_as_eagers(pool):
    k, s, p, d, (h, w) = pool
    torch.manual_seed(3)
    x = torch.randint(0, 4, (2, 3, h, w)).float()  # many ties
    weights = torch.randn(2, 3, *F.max_pool2d(x, k, s, p, d).shape[2:])
    leaf = x.clone().requires_grad_()
    want = torch.autograd.grad((F.max_pool2d(leaf, k, s, p, d) * weights).sum(), leaf)[0]
    lazy = lt.to_lazy(x).requires_grad_()
    got = torch.autograd.grad((F.max_pool2d(lazy, k, s, p, d) * lt.to_lazy(weights)).sum(), lazy)[0]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


def test_layer_norm_gelu_and_embedding_gradients_match_eager():
    torch.manual_seed(2)
    table, norm = torch.nn.Embedding(10, 6, padding_idx=0), torch.nn.LayerNorm(6)
    tokens = torch.tensor([[1, 0, 3, 3], [9, 2, 0, 1]])

    def loss(tokens, table_weight, w, b, approximate):
        h = F.layer_norm(F.embedding(tokens, table_weight, padding_idx=0), (6,), w, b)
        return (F.gelu(h, approximate=approximate) ** 2).sum()

    for approximate in ("none", "tanh"):
        leaves = [p.detach().clone().requires_grad_() for p in (table.weight, norm.weight, norm.bias)]
        want = torch.autograd.grad(loss(tokens, *leaves, approximate), leaves)
        lazy = [lt.to_lazy(p.detach()).requires_grad_() for p in (table.weight, norm.weight, norm.bias)]
        got = torch.autograd.grad(loss(lt.to_lazy(tokens), *lazy, approximate), lazy)
        for g_got, g_want in zip(got, want):
            np.testing.assert_allclose(g_got.numpy(), g_want.numpy(), rtol=1e-4, atol=1e-5)


def test_writes_through_slices_reach_the_base_and_its_other_views():
    def program(x):
        x[:, 1:3] += 1.0
        row = x[2]
        row.mul_(2.0)
        first, rest = x.split([1, 3], dim=0)
        rest.sub_(0.5)
        return x + 0.0, first + 0.0, x.narrow(1, 2, 2) + 0.0, torch.stack(x.unbind(1), 0) + 0.0

    base = torch.arange(16, dtype=torch.float32).reshape(4, 4)
    want = program(base.clone())
    got = program(lt.to_lazy(base.clone()))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_a_write_through_a_strided_slice_is_an_error_not_a_wrong_answer():
    x = lt.to_lazy(torch.zeros(6))
    with pytest.raises(lazylab.Error, match=r"aten::add_.Tensor writes through a view made by aten::slice"):
        x[::2] += 1.0


def test_dropout_draws_lazylabs_own_stream_from_torchs_seed_as_a_graph_input():
    x = lt.to_lazy(torch.ones(200, 100))

    def draw(seed):
        torch.manual_seed(seed)
        return F.dropout(x, p=0.3, training=True).numpy()

    a, b, c = draw(5), draw(5), draw(6)
    np.testing.assert_array_equal(a, b)  # reproducible under torch.manual_seed
    assert (a != c).mean() > 0.3  # another seed, another mask
    kept = a != 0
    assert abs(kept.mean() - 0.7) < 0.01  # 20,000 draws: 0.01 is 3.1 standard deviations
    np.testing.assert_allclose(a[kept], 1 / 0.7, rtol=1e-6)
    # no pattern along rows or columns (a lattice would show one)
    assert np.abs(kept.mean(0) - 0.7).max() < 0.2 and np.abs(kept.mean(1) - 0.7).max() < 0.2
    m = lt.metrics()
    assert m["cache_misses"] == 1 and m["RngSeeds"] == 3  # the seed is an input: one graph


def test_dropout_gradients_follow_the_kept_mask_and_a_dropout_gpt_trains_on_cached_graphs():
    x = lt.to_lazy(torch.randn(50, 40)).requires_grad_()
    y = F.dropout(x, p=0.5, training=True)
    (grad,) = torch.autograd.grad((y * 3.0).sum(), [x])
    np.testing.assert_allclose(grad.numpy(), np.where(y.numpy() != 0, 6.0, 0.0))
    gpt = program("gpt_adamw")
    sizes = {"batch": 4, "tokens": 16, "vocab": 64, "channels": 32, "layers": 1, "dropout_pct": 10}
    got = loop.run(gpt, "lazy", steps=8, params=sizes)
    assert all(np.isfinite(got.losses)) and got.metrics["cache_misses"] <= 2


def test_each_new_step_graph_is_saved_with_its_inputs_for_lazylab_run(tmp_path):
    loop.run(program("mlp_sgd"), "lazy", steps=3, params={"batch": 8, "hidden": 16}, save_graphs=str(tmp_path))
    graphs = sorted(p for p in os.listdir(tmp_path) if p.endswith(".lzir"))
    assert len(graphs) == 2, graphs  # the first step, then the steady one
    name, graph = lazylab.read_lzir(str(tmp_path / graphs[1]))
    weights = tmp_path / (name + ".weights")
    assert len(os.listdir(weights)) == graph.num_parameters > 6  # weights, momenta, data, learning rate
    lazylab_cli = os.path.join(os.path.dirname(lazylab.__file__), "..", "..", "experiments", "lazylab")
    if os.path.exists(lazylab_cli):  # the build tree's CLI replays it, checked against the interpreter
        experiment = tmp_path / "replay.yaml"
        experiment.write_text(f"name: replay\nworkloads: [{{file: {graphs[1]}, weights: {name}.weights}}]\n"
                              "pipelines: {fused: 'canonicalize,cse,decompose,dce,fuse{strategy=producer-consumer},lower'}\n"
                              "backends: [cpu]\nrepeat: {warmup: 1, runs: 2}\n"
                              "reference: {backend: interp, pipeline: lower, rtol: 1.0e-4, atol: 1.0e-5}\n")
        import subprocess

        run = subprocess.run([lazylab_cli, "run", str(experiment), "-o", str(tmp_path / "report")], capture_output=True,
                             text=True)
        assert run.returncode == 0 and " ok " in run.stdout, run.stdout + run.stderr
