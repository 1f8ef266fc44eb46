"""The Python package as a user drives it: lazy tensors, pipelines and
backends by name, .lzir in and out, errors as exceptions."""

import os
import subprocess
import sys

import numpy as np
import pytest

import lazylab
from lazylab import ops


@pytest.fixture(params=["interp", "cpu"])
def ctx(request):
    return lazylab.context(backend=request.param)


def test_ops_trace_lazily_and_a_host_read_runs_them(ctx):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = ctx.tensor(a)
    y = (x * 2.0 + 1.0) / 4.0 - x
    assert y.pending and y.shape == (3, 4) and y.dtype == lazylab.f32
    assert ctx.metrics["traces"] == 0
    np.testing.assert_allclose(y.numpy(), (a * 2 + 1) / 4 - a, rtol=1e-6)
    assert not y.pending and ctx.metrics["traces"] == 1


def test_a_loop_compiles_once_and_hits_the_cache(ctx):
    x = ctx.tensor(np.ones(64, dtype=np.float32))
    for _ in range(5):
        x = ops.relu((x + 1.0) * 0.5)
        ctx.mark_step()
    np.testing.assert_allclose(x.numpy(), np.ones(64), rtol=1e-6)
    m = ctx.metrics
    assert m["cache_misses"] == 1 and m["cache_hits"] == 4, m  # inputs hash by type and position, not by data


def test_every_op_of_the_table_is_a_function_of_ops_and_none_is_listed_twice():
    names = {row["name"] for row in lazylab.op_table() if row["category"] != "leaf"}
    assert names == set(ops.__all__)
    assert ops.reduce_sum.attributes == ["axes", "keepdim"]
    x = lazylab.capture_context().placeholder([2, 3])
    assert hasattr(x, "exp") and hasattr(x, "gelu") and not hasattr(x, "cast")


def test_ops_by_attribute_name_broadcast_and_reduce(ctx):
    a = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32)
    x = ctx.tensor(a)
    b = ctx.tensor(np.float32([1, 2, 3, 4, 5]))
    got = ops.reduce_sum(ops.mul(x, b), axes=[2], keepdim=True)
    np.testing.assert_allclose(got.numpy(), (a * [1, 2, 3, 4, 5]).sum(axis=2, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(x.softmax().numpy(), np.exp(a) / np.exp(a).sum(-1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(ops.cast(x, dtype=lazylab.f64).numpy(), a.astype(np.float64))
    np.testing.assert_allclose((x @ ctx.tensor(np.ones((5, 4), np.float32))).numpy(), a @ np.ones((5, 4)), rtol=1e-5)
    np.testing.assert_allclose(x.sum(axes=-1).numpy(), a.sum(-1), rtol=1e-5)
    np.testing.assert_allclose(x.permute(2, 0, 1).numpy(), a.transpose(2, 0, 1))
    np.testing.assert_allclose(x.reshape(-1, 5).numpy(), a.reshape(-1, 5))
    with pytest.raises(lazylab.Error, match=r"reshape: .* has a negative dimension"):
        x.reshape(-1, 7)


def test_integers_are_exact_past_a_doubles_53_bits(ctx):
    x = ctx.tensor(np.array([1, -1], dtype=np.int64))
    big = 2**62 + 1
    assert (x + big).tolist() == [big + 1, big - 1]
    assert (x * 0 + (-2**63)).tolist() == [-2**63, -2**63]
    assert ((x * 0 + (-2**63)) / -1).tolist() == [-2**63, -2**63]  # wraps to itself, as documented
    with pytest.raises(lazylab.Error, match="18446744073709551616 is no value of i64"):
        x + 2**64


def test_errors_are_exceptions_with_lazylab_messages(ctx):
    x = ctx.tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(lazylab.Error, match=r"cannot broadcast|broadcast"):
        x + ctx.tensor(np.zeros((4,), np.float32))
    with pytest.raises(lazylab.Error, match=r"no op 'ad' \(did you mean 'add'\?\)"):
        ops._core.apply("ad", [x], {})
    with pytest.raises(lazylab.Error, match="reduce_sum: needs attribute 'keepdim'"):
        ops.reduce_sum(x, axes=[0])
    with pytest.raises(lazylab.Error, match=r"no attribute 'axis' \(did you mean 'axes'\?\)"):
        ops.reduce_sum(x, axis=[0], axes=[0], keepdim=False)
    with pytest.raises(lazylab.Error, match="unknown pass 'fusee'"):
        lazylab.engine(pipeline="fusee,lower")
    with pytest.raises(lazylab.Error, match="no lazylab-backend-nope.so"):
        lazylab.Backend("nope")
    with pytest.raises(lazylab.Error, match="item\\(\\): the tensor has 6 elements"):
        x.item()
    with pytest.raises(TypeError):
        x + "a"


def test_a_failed_sync_raises_and_the_context_goes_on():
    ctx = lazylab.context(backend="interp", pipeline="lower")
    x = ctx.tensor(np.array([1, 2], np.int32))
    with pytest.raises(lazylab.Error, match="division by zero"):
        (x / 0).numpy()
    assert (x + 1).tolist() == [2, 3]


def test_a_tensor_keeps_its_context_and_engine_alive():
    x = lazylab.context(backend="cpu").tensor(np.arange(4, dtype=np.float32))
    y = x * 3.0
    np.testing.assert_array_equal(y.numpy(), [0, 3, 6, 9])
    assert y.context.engine.backend.name == "cpu"


def test_numpy_in_and_out_without_copies_where_memory_allows():
    ctx = lazylab.context(backend="cpu", pipeline="lower")
    a = np.arange(8, dtype=np.float32)
    shared = ctx.from_numpy(a)
    view = shared.numpy()
    assert np.shares_memory(view, a) and not view.flags.writeable  # host backend: the input's own memory
    copied = ctx.tensor(a)
    assert not np.shares_memory(copied.numpy(), a)
    y = shared + 1.0
    out = y.numpy()
    assert np.shares_memory(out, np.asarray(y))  # numpy() and __array__ view one buffer
    assert memoryview(out).readonly
    with pytest.raises(lazylab.Error, match="not C-contiguous"):
        ctx.from_numpy(np.zeros((4, 4), np.float32)[:, 1])


def test_dlpack_both_ways_shares_host_memory():
    ctx = lazylab.context(backend="cpu", pipeline="lower")
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    x = ctx.from_dlpack(a)  # NumPy's __dlpack__
    assert x.shape == (2, 3) and x.dtype == lazylab.f64
    y = x * 2.0
    assert y.__dlpack_device__() == (1, 0)
    back = np.from_dlpack(y)
    np.testing.assert_array_equal(back, a * 2)
    assert np.shares_memory(back, y.numpy())
    b = np.from_dlpack(x)
    assert np.shares_memory(b, a)


def test_dlpack_with_torch():
    torch = pytest.importorskip("torch")
    ctx = lazylab.context(backend="cpu", pipeline="lower")
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    x = lazylab.from_dlpack(t, ctx)
    y = (x + 1.0).sum(axes=1)
    got = torch.utils.dlpack.from_dlpack(y)
    assert torch.equal(got, (t + 1).sum(1))
    assert got.data_ptr() == y.numpy().__array_interface__["data"][0]


def test_the_narrow_dtypes_in_and_out_of_numpy_round_and_wrap_as_the_table_says(ctx):
    half = ctx.tensor(np.array([60000.0, 0.1, -2.5], dtype=np.float16))
    assert half.dtype == lazylab.f16
    doubled = (half * 2.0).numpy()
    assert doubled.dtype == np.float16
    with np.errstate(over="ignore"):  # 120000 is past f16's largest: infinity, in both
        want = np.array([60000.0, 0.1, -2.5], dtype=np.float16) * np.float16(2)
    np.testing.assert_array_equal(doubled, want)
    small = ctx.tensor(np.array([200, 7], dtype=np.uint8))
    assert small.dtype == lazylab.u8
    np.testing.assert_array_equal((small + small).numpy(), np.array([144, 14], dtype=np.uint8))
    signed = ctx.tensor(np.array([100, -100], dtype=np.int8))
    np.testing.assert_array_equal((signed + signed).numpy(), np.array([-56, 56], dtype=np.int8))


def test_bf16_goes_through_dlpack_and_numpy_says_it_has_none():
    torch = pytest.importorskip("torch")
    ctx = lazylab.context(backend="cpu", pipeline="decompose,lower")
    t = torch.tensor([[1.0, 2.5, -3.0], [0.1, 7.0, 30.0]], dtype=torch.bfloat16)
    x = lazylab.from_dlpack(t.clone(), ctx)
    assert x.dtype == lazylab.bf16
    y = (x * x).softmax(axis=1)
    got = torch.utils.dlpack.from_dlpack(y)
    assert got.dtype == torch.bfloat16
    want = torch.softmax((t * t).float(), dim=1).bfloat16()  # PyTorch's bf16 softmax also computes in f32
    assert torch.equal(got, want)
    with pytest.raises(lazylab.Error, match="Tensor.numpy: NumPy has no bf16"):
        y.numpy()
    with pytest.raises(lazylab.Error, match="Context.tensor: NumPy has no bf16"):
        ctx.tensor([1.0], dtype=lazylab.bf16)


def test_graphs_save_as_lzir_and_parse_back(tmp_path):
    ctx = lazylab.capture_context()
    x = ctx.placeholder([1024, 1024])  # 4 MiB never allocated
    y = ops.tanh(x * 0.5 + 1.0)
    graph = ctx.capture()
    assert graph.num_parameters == 1 and graph.num_outputs == 1
    path = tmp_path / "g.lzir"
    graph.save(str(path), "traced")
    name, read = lazylab.read_lzir(str(path))
    assert name == "traced" and read.hash == graph.hash and read.text("traced") == path.read_text()
    with pytest.raises(lazylab.Error, match=r"bad.lzir:2:\d+: unknown op 'nope'"):
        lazylab.parse_lzir("graph @g {\n  %0 = nope : f32[1]\n  return %0\n}", "bad.lzir")
    with pytest.raises(lazylab.Error, match="no data to run with"):
        lazylab.context(backend="interp", pipeline="lower").placeholder([2]).numpy()
    del y


def test_grad_gives_lazylabs_own_gradients_against_central_differences(ctx):
    rng = np.random.default_rng(3)
    x, w, b = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (4, 5)), rng.uniform(-1, 1, 5)

    def loss_of(context, w_value, b_value):
        xt, wt, bt = context.tensor(x), context.tensor(w_value), context.tensor(b_value)
        y = ops.matmul(xt, wt) + bt
        return ops.reduce_mean(y.gelu() * y, axes=[0, 1], keepdim=False), wt, bt

    loss, wt, bt = loss_of(ctx, w, b)
    dw, db = lazylab.grad(loss, [wt, bt])
    assert dw.pending and dw.shape == (4, 5) and db.shape == (5,)
    dw, db = dw.numpy(), db.numpy()
    h = 1e-6
    for i in range(4):
        for j in range(5):
            up, down = w.copy(), w.copy()
            up[i, j] += h
            down[i, j] -= h
            numeric = (loss_of(ctx, up, b)[0].item() - loss_of(ctx, down, b)[0].item()) / (2 * h)
            assert dw[i, j] == pytest.approx(numeric, rel=1e-6, abs=1e-9)
    for k in range(5):
        up, down = b.copy(), b.copy()
        up[k] += h
        down[k] -= h
        numeric = (loss_of(ctx, w, up)[0].item() - loss_of(ctx, w, down)[0].item()) / (2 * h)
        assert db[k] == pytest.approx(numeric, rel=1e-6, abs=1e-9)
    with pytest.raises(lazylab.Error, match="is computed in this trace, not an input of it"):
        fresh, wt, _ = loss_of(ctx, w, b)
        lazylab.grad(fresh, [wt * 2.0])


def test_pipelines_and_backends_are_listed_by_name():
    assert lazylab.Pipeline("dce,lower").lowers
    assert not lazylab.Pipeline("dce").lowers
    names = [name for name, _ in lazylab.backends()]
    assert "interp" in names and "cpu" in names
    assert lazylab.Backend("cpu", "threads=1").device.startswith("host CPU, 1 thread")


def test_the_interpreter_survives_a_crashing_use():
    """Nothing in the package aborts Python: a bad call in a child interpreter
    raises, and the child exits normally."""
    code = (
        "import lazylab, numpy as np\n"
        "ctx = lazylab.context(backend='cpu')\n"
        "x = ctx.tensor(np.zeros((2, 2), np.float32))\n"
        "for bad in (lambda: x.reshape(3, 3), lambda: x @ ctx.tensor(np.zeros((3, 3), np.float32)),\n"
        "            lambda: x.sum(axes=[5]), lambda: lazylab.Engine('lower', None)):\n"
        "    try:\n"
        "        bad()\n"
        "    except lazylab.Error as e:\n"
        "        print('raised:', e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("raised:") == 4, done.stdout


def torch_and_cuda_context():
    """torch and a context on the cuda backend, or the test is skipped where
    there is no CUDA device or no cuda backend."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    try:
        return torch, lazylab.context(backend="cuda")
    except lazylab.Error as error:
        pytest.skip(f"no cuda backend here: {error}")


def test_cuda_tensors_go_to_torch_on_the_gpu_without_a_host_copy():
    torch, ctx = torch_and_cuda_context()
    a = np.random.default_rng(1).standard_normal((256, 512)).astype(np.float32)
    y = (ctx.tensor(a) * 2.0).softmax()
    assert y.__dlpack_device__() == (2, 0)  # kDLCUDA
    before = ctx.metrics["device_to_host_transfers"]
    t = torch.from_dlpack(y)
    assert t.is_cuda and t.shape == (256, 512)
    assert ctx.metrics["device_to_host_transfers"] == before  # nothing crossed to the host
    want = torch.softmax(torch.from_numpy(a).cuda() * 2.0, dim=-1)
    assert torch.allclose(t, want, rtol=1e-5, atol=1e-6)
    del y  # torch's tensor keeps lazylab's buffer alive
    assert torch.allclose(t * 1.0, want, rtol=1e-5, atol=1e-6)


def test_cuda_tensors_come_from_torch_copied_on_the_gpu_after_its_stream():
    torch, ctx = torch_and_cuda_context()
    stream = torch.cuda.Stream()
    torch.manual_seed(0)
    with torch.cuda.stream(stream):  # the producer's work on a stream of its own, still running
        x = torch.randn(2048, 2048, device="cuda")
        x = x @ x + 1.0
        taken = ctx.from_dlpack(x, stream=stream.cuda_stream)
        x.mul_(0.0)  # queued after the copy on the producer's stream: the copy must not see it
    before = ctx.metrics["host_to_device_transfers"]
    got = torch.from_dlpack(taken * 1.0)
    assert ctx.metrics["host_to_device_transfers"] == before
    torch.cuda.synchronize()
    assert got.is_cuda and float(x.abs().max()) == 0.0
    torch.manual_seed(0)
    want = torch.randn(2048, 2048, device="cuda")
    want = want @ want + 1.0
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-3)


def test_a_host_backend_refuses_cuda_memory_with_a_message():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    with pytest.raises(lazylab.Error, match="keeps its data in host memory"):
        lazylab.context(backend="cpu").from_dlpack(torch.ones(3, device="cuda"))


def test_torch_reads_lazylab_cuda_outputs_on_its_own_stream_before_they_are_reused():
    """torch.from_dlpack hands lazylab its stream: that stream waits for the
    step (the host does not), and a buffer torch lets go is released after
    that stream's reads, not when lazylab's next step could reuse it."""
    torch, ctx = torch_and_cuda_context()
    a = np.random.default_rng(2).standard_normal((1024, 1024)).astype(np.float32)
    weights = torch.from_numpy(a).cuda()
    stream = torch.cuda.Stream()
    sums = []
    with torch.cuda.stream(stream):
        for k in range(1, 9):
            y = ctx.tensor(a) * float(k)
            t = torch.from_dlpack(y)
            sums.append((t @ weights @ weights).sum())  # long work on torch's stream, reading t
            del t, y  # released while that work may still run; the next step allocates
    torch.cuda.synchronize()
    base = float((weights @ weights @ weights).sum())
    for k, total in enumerate(sums, start=1):
        assert float(total) == pytest.approx(k * base, rel=1e-3)
