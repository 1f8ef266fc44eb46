"""lazylab.torch: unmodified PyTorch training loops on the lazy device,
checked against eager PyTorch step by step (torch 1.13 here, 2.x on the GPU
machine)."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import lazylab  # noqa: E402
import lazylab.torch as lt  # noqa: E402

OPTIMIZERS = {
    "SGD": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-4),
    "SGD-nesterov": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True),
    "Adam": lambda params: torch.optim.Adam(params, lr=0.01),
    "AdamW": lambda params: torch.optim.AdamW(params, lr=0.01, weight_decay=1e-2),
}


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 4))


def batches(steps, batch=16, ragged_last=False):
    generator = torch.Generator().manual_seed(1)
    for step in range(steps):
        size = batch // 2 + 1 if ragged_last and step == steps - 1 else batch
        yield torch.randn(size, 8, generator=generator), torch.randint(0, 4, (size,), generator=generator)


def train(model, optimizer, data, lazy, schedule=None, clip=None, every=None):
    losses = []
    for x, y in data:
        if lazy:
            x, y = lt.to_lazy(x), lt.to_lazy(y)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        if schedule is not None:
            schedule.step()
        if lazy:
            lt.mark_step()
        if every is not None:
            every()
        losses.append(loss.item())
    return losses


def weights(model):
    return [p.detach().numpy() if not isinstance(p, lt.LazyTensor) else p.numpy() for p in model.parameters()]


@pytest.fixture(autouse=True)
def fresh_device():
    lt.device(backend="cpu")
    yield


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_training_loop_matches_eager_and_compiles_once_steady(name):
    steps = 20
    eager = mlp()
    want = train(eager, OPTIMIZERS[name](eager.parameters()), batches(steps), lazy=False)
    model = lt.to_lazy(mlp())
    got = train(model, OPTIMIZERS[name](model.parameters()), batches(steps), lazy=True)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for w_lazy, w_eager in zip(weights(model), weights(eager)):
        np.testing.assert_allclose(w_lazy, w_eager, rtol=1e-4, atol=1e-6)
    m = lt.metrics()
    # The first step has no gradients or optimizer state yet, the second has
    # them: two graphs, then every step hits the cache.
    assert m["cache_misses"] <= 2 and m["cache_hits"] >= steps - 2, m
    assert "UncachedCompile" in lt.metrics_report()
    # Each steady step writes the new weights (and optimizer state) over the
    # old ones: their buffers are given up and taken, none allocated anew.
    parameters = len(list(model.parameters()))
    assert m["donated_buffers"] >= (steps - 2) * parameters, m["donated_buffers"]
    assert "DonatedBuffers" in lt.metrics_report()


def test_a_schedule_and_a_ragged_last_batch_compile_three_graphs_in_200_steps():
    steps = 200
    eager = mlp()
    optimizer = OPTIMIZERS["AdamW"](eager.parameters())
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    want = train(eager, optimizer, batches(steps, ragged_last=True), lazy=False, schedule=schedule, clip=1.0)
    model = lt.to_lazy(mlp())
    optimizer = OPTIMIZERS["AdamW"](model.parameters())
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    got = train(model, optimizer, batches(steps, ragged_last=True), lazy=True, schedule=schedule, clip=1.0)
    np.testing.assert_allclose(got, want, rtol=1e-4)
    m = lt.metrics()
    assert m["cache_misses"] <= 3, (m["cache_misses"], m["recompile_diagnoses"])
    assert m["LiftedScalars"] > 0  # the learning rate and Adam's corrections are inputs, not constants


def test_a_number_recurring_in_a_step_is_one_input_of_its_graph_and_new_values_reuse_it():
    lt.device(backend="cpu")
    a, b, c = (lt.to_lazy(torch.full((3,), float(i + 1))) for i in range(3))
    results = []
    for lr in (0.3, 0.25):
        out = a * lr + b * lr + c * 0.7  # lr twice, 0.7 once: two inputs, not three
        assert lt.runtime.current().context.capture().num_parameters == 3 + 2
        lt.mark_step()
        results.append(out.numpy())
    np.testing.assert_allclose(results[0], [0.3 + 0.6 + 2.1] * 3, rtol=1e-6)
    np.testing.assert_allclose(results[1], [0.25 + 0.5 + 2.1] * 3, rtol=1e-6)
    m = lt.metrics()
    assert m["cache_misses"] == 1 and m["cache_hits"] == 1 and m["LiftedScalars"] == 6


def test_in_place_ops_through_aliases_and_views_keep_pytorchs_meaning():
    def program(x):
        d = x.detach()
        d.mul_(2.0)  # an alias: x sees it
        v = x.view(3, 4)
        v.add_(1.0)  # a view: x and its other views see it
        t = x.t()
        row = x.sum(1)
        v.mul_(3.0)
        return x + 0.0, t + 0.0, row, v + 0.0

    base = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    want = program(base.clone())
    lazy = lt.to_lazy(base.clone())
    got = program(lazy)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy())
    np.testing.assert_allclose(lazy.numpy(), want[0].numpy())


def test_a_number_to_a_tensors_power_is_a_float_tensor_as_in_pytorch():
    """aten::pow.Scalar: Adam's bias corrections (beta ** step) as
    torch.compile's optimizer graph computes them."""
    for exponent in (torch.tensor([0.0, 1.0, 2.5, 7.0]), torch.tensor([0, 1, 3, 9])):
        want = 0.9 ** exponent
        got = 0.9 ** lt.to_lazy(exponent)
        assert got.dtype == want.dtype == torch.float32
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    integers = torch.tensor([1, 4, 9])
    for want, got in [(integers ** 0.5, lt.to_lazy(integers) ** 0.5),
                      (torch.full((3,), 2.0) ** integers, lt.to_lazy(torch.full((3,), 2.0)) ** lt.to_lazy(integers))]:
        assert got.dtype == want.dtype == torch.float32
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_prims_convert_element_type_casts_as_pytorch_does():
    """What AOTAutograd's graphs on torch 2.x call for a cast (AdamW's step
    under torch.compile)."""
    x = torch.tensor([1.5, -2.25, 3.0, -0.5])
    for dtype in (torch.float64, torch.int64, torch.int32, torch.bool):
        want = torch.ops.prims.convert_element_type(x, dtype)
        got = torch.ops.prims.convert_element_type(lt.to_lazy(x), dtype)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_a_view_whose_base_nothing_else_reaches_stands_alone_and_views_sharing_a_base_still_share_writes():
    """Autograd gives .grad a linear layer's weight gradient as a transposed
    view of its product: the step keeps that gradient alone, not its base
    beside it (one graph output per tensor the loop holds). Views that share
    a base still see each other's writes."""
    from lazylab.torch.cells import release_unreachable_bases

    model = lt.to_lazy(mlp())
    optimizer = OPTIMIZERS["SGD"](model.parameters())
    for x, y in batches(3):
        loss = torch.nn.functional.cross_entropy(model(lt.to_lazy(x)), lt.to_lazy(y))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        # The graph mark_step runs: its views stand alone first. (On torch
        # 1.x zero_grad() writes through last step's gradient view, which
        # stands alone then; on 2.x it sets .grad to None and backward hands
        # out a new view, alone only once the step ends.)
        release_unreachable_bases()
        outputs = lt.runtime.current().context.capture().num_outputs
        lt.mark_step()
    parameters = len(list(model.parameters()))
    assert outputs == 1 + 3 * parameters  # the loss; each weight, its gradient and its momentum
    base = lt.to_lazy(torch.arange(6.0).reshape(2, 3)) * 1.0
    transposed, flat = base.t(), base.view(6)
    del base
    transposed.add_(10.0)  # the base is shared: flat sees the write
    np.testing.assert_array_equal(flat.numpy(), np.arange(6.0) + 10.0)
    held = lt.to_lazy(torch.zeros(3, 4))
    column = held.t()[1]  # a view of a view of `held`: the middle one nothing else reaches, `held` is
    column.add_(1.0)
    np.testing.assert_array_equal(held.numpy(), [[0.0, 1.0, 0.0, 0.0]] * 3)
    alone = (lt.to_lazy(torch.arange(6.0).reshape(2, 3)) * 2.0).t()
    alone.mul_(0.5)
    alone.add_(1.0)
    np.testing.assert_array_equal(alone.numpy(), np.arange(6.0).reshape(2, 3).T + 1.0)


def test_a_write_through_a_view_without_an_inverse_is_an_error_not_a_wrong_answer():
    x = lt.to_lazy(torch.ones(1, 3))
    with pytest.raises(lazylab.Error, match=r"aten::add_.Tensor writes through a view made by aten::expand"):
        x.expand(4, 3).add_(1.0)


def test_an_op_without_a_lowering_names_itself_and_the_source_line():
    x = lt.to_lazy(torch.randn(5))
    with pytest.raises(lt.UnsupportedOp, match=r"aten::sort\.default has no lowering to lazylab \(.*test_torch_lazy\.py:\d+"):
        torch.sort(x)


def test_with_fallback_an_op_without_a_lowering_runs_eagerly_and_is_counted():
    lt.device(backend="cpu", fallback=True)
    data = torch.tensor([3.0, 1.0, 2.0])
    x = lt.to_lazy(data)
    values, _ = torch.sort(x * 2.0)
    np.testing.assert_allclose(values.numpy(), [2.0, 4.0, 6.0])
    assert lt.metrics()["aten::sort.default"] == 1
    assert "Counter: aten::sort.default" in lt.metrics_report()


def test_host_reads_run_what_they_need():
    x = lt.to_lazy(torch.tensor([1.0, 2.0, 3.0]))
    y = (x * x).sum()
    assert y.item() == 14.0
    assert float(y) == 14.0
    assert "14." in repr(y)
    assert bool(y > 10.0)
    assert (x + 1).tolist() == [2.0, 3.0, 4.0]


def test_tied_weights_stay_one_parameter():
    torch.manual_seed(0)
    embedding = torch.nn.Linear(4, 4, bias=False)
    model = torch.nn.Sequential(embedding, torch.nn.ReLU(), torch.nn.Linear(4, 4, bias=False))
    model[2].weight = embedding.weight
    lt.to_lazy(model)
    assert model[0].weight is model[2].weight
    assert len(list(model.parameters())) == 1


def test_the_step_graph_saves_as_lzir(tmp_path):
    model = lt.to_lazy(mlp())
    x = lt.to_lazy(torch.randn(4, 8))
    loss = model(x).sum()
    loss.backward()
    graph = lt.runtime.current().context.capture()
    path = tmp_path / "step.lzir"
    graph.save(str(path), "step")
    name, read = lazylab.read_lzir(str(path))
    assert name == "step" and read.hash == graph.hash and read.num_outputs >= 1
    assert math.isfinite(loss.item())


def test_a_bf16_model_runs_on_the_lazy_device_as_in_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).bfloat16()
    x = torch.randn(16, 8).bfloat16()
    want = model(x)
    got = lt.to_lazy(model)(lt.to_lazy(x))
    assert got.dtype == torch.bfloat16
    # Each product's sum rounds once into bf16 either way; PyTorch sums in
    # f32 and lazylab's reference in f64, so a result may differ by an ulp
    # (2^-8 of 0.5..1: 0.0039).
    torch.testing.assert_close(got.to_torch(), want.detach(), rtol=1.6e-2, atol=4e-3)
