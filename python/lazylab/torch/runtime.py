"""The lazy device's state: its lazylab Context, the scalars and host data
entering its traces, and its counters (PyTorch/XLA's metric names)."""

import collections
import os
import sys
import time
import traceback

import numpy as np
import torch

import lazylab

# torch dtype <-> lazylab dtype, for the dtypes both have.
DTYPES = {
    torch.float32: lazylab.f32,
    torch.float64: lazylab.f64,
    torch.int32: lazylab.i32,
    torch.int64: lazylab.i64,
    torch.bool: lazylab.bool_,
    torch.bfloat16: lazylab.bf16,
    torch.float16: lazylab.f16,
    torch.int8: lazylab.i8,
    torch.uint8: lazylab.u8,
}
TORCH_DTYPES = {value: key for key, value in DTYPES.items()}

# Python scalars that stay constants of the graph (PyTorch/XLA's special
# scalars); every other one enters as an input, so a learning rate that
# changes each step, or Adam's bias corrections, reuse the compiled graph.
CONSTANT_SCALARS = (0, 1, -1)

_PACKAGE_DIRS = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(__file__)))


def user_frame():
    """'file:line in function' of the innermost frame outside torch and
    lazylab: where the user's program asked for the op."""
    for frame in reversed(traceback.extract_stack()):
        if not frame.filename.startswith(_PACKAGE_DIRS) and "<frozen" not in frame.filename:
            return f"{frame.filename}:{frame.lineno} in {frame.name}"
    return "an unknown frame"


class UnsupportedOp(lazylab.Error):
    """An aten op the lazy device has no lowering for (the message names the
    op and the user's source line)."""


class Device:
    """One lazy device: traces go to `context`, run by its engine."""

    def __init__(self, backend="cpu", pipeline=lazylab.DEFAULT_PIPELINE, options="", fallback=False, save_graphs=None):
        self.context = lazylab.context(backend=backend, pipeline=pipeline, options=options)
        self.backend, self.pipeline = backend, pipeline
        self.fallback = fallback
        self.save_graphs = save_graphs  # a folder: each step graph not seen before is saved there
        self.saved = set()
        self.counters = collections.Counter()
        self.trace_ns = 0  # in dispatch: the capture's own cost
        self.step_scalars = {}  # (value, dtype) -> its lifted tensor, this step
        self.aten_ops = 0

    # ---- values entering the trace ----

    def scalar(self, value, dtype):
        """A Python number as a 0-d lazylab tensor of `dtype`: a constant for
        0 and +-1, else an input of the graph, one per value a step (an
        optimizer's learning rate, betas and bias corrections recur for every
        parameter: the small GPT's step lifts 249 numbers of 16 values)."""
        if isinstance(value, bool):
            value = int(value)
        if value in CONSTANT_SCALARS or dtype == lazylab.bool_:
            return self.context.full(value, [], dtype)
        self.counters["LiftedScalars"] += 1
        lifted = self.step_scalars.get((value, dtype))
        if lifted is None:
            if isinstance(value, int) and dtype in (lazylab.i32, lazylab.i64):
                lifted = self.context.tensor(np.array(value, dtype=np.int64 if dtype == lazylab.i64 else np.int32))
            else:
                lifted = self.context.dynamic_scalar(float(value), dtype)
            self.step_scalars[(value, dtype)] = lifted
        return lifted

    def from_host(self, tensor):
        """A torch tensor entering the trace: a CUDA tensor copied on the GPU
        where the backend keeps its data there (device_copy), else copied
        from host memory once per use."""
        if tensor.dtype not in DTYPES:
            raise lazylab.Error(f"the lazy device has no dtype for {tensor.dtype} ({user_frame()})")
        tensor = tensor.detach()
        if tensor.is_cuda:
            copied = self.device_copy(tensor)
            if copied is not None:
                return copied
            tensor = tensor.cpu()
        self.counters["TransferToDevice"] += 1
        if tensor.dtype == torch.bfloat16:  # NumPy has none: through DLPack, copied (DLPack shares)
            return self.context.from_dlpack(tensor.contiguous().clone())
        return self.context.tensor(tensor.contiguous().numpy())

    def device_copy(self, tensor):
        """A CUDA tensor copied on the GPU into the backend (DLPack), after
        the work PyTorch queued on its current stream; None where the backend
        keeps its data in host memory (the caller copies through the host,
        counted as a transfer)."""
        import torch

        stream = torch.cuda.current_stream(tensor.device).cuda_stream
        try:
            value = self.context.from_dlpack(tensor.contiguous(), stream=stream)
        except lazylab.Error as error:
            if "cannot take device memory" not in str(error):
                raise
            return None
        self.counters["DeviceToDeviceCopies"] += 1
        return value

    # ---- running ----

    def save_step(self, folder, name="step"):
        """The pending step as FOLDER/NAME.lzir and its inputs (weights,
        optimizer state, data, lifted scalars) as FOLDER/NAME.weights/N.npy,
        so `lazylab run` replays it: {file: NAME.lzir, weights: NAME.weights}.
        Returns the graph's hash."""
        graph, inputs = self.context.capture_with_inputs()
        return save_graph(folder, name, graph, inputs)

    def mark_step(self):
        from .cells import release_unreachable_bases

        release_unreachable_bases()
        if self.save_graphs is not None and self.context.pending_nodes:
            graph_hash = self.context.capture().hash
            if graph_hash not in self.saved:
                self.saved.add(graph_hash)
                self.save_step(self.save_graphs, f"step{len(self.saved)}-{graph_hash:016x}")
        start = time.perf_counter_ns()
        self.step_scalars.clear()
        self.context.mark_step()
        self.counters["MarkStep"] += 1
        self.counters["MarkStepNs"] += time.perf_counter_ns() - start

    def metrics(self):
        m = dict(self.context.metrics)
        m.update(self.counters)
        m["AtenOps"] = self.aten_ops
        m["CaptureNs"] = self.trace_ns
        return m

    def metrics_report(self):
        m = self.metrics()
        lines = [
            f"Metric: CompileTime\n  TotalSamples: {m['cache_misses']}\n  Accumulator: {m['compile_ms']:.3f}ms",
            f"Metric: ExecuteTime\n  Accumulator: {m['execute_ms']:.3f}ms",
            f"Metric: TransferToDeviceTime\n  TotalSamples: {m['host_to_device_transfers']}\n"
            f"  Accumulator: {m['host_to_device_bytes']}B",
            f"Metric: TransferFromDeviceTime\n  TotalSamples: {m['device_to_host_transfers']}\n"
            f"  Accumulator: {m['device_to_host_bytes']}B",
            f"Metric: DonatedBuffers (old values an output was written over)\n  TotalSamples: {m['donated_buffers']}\n"
            f"  Accumulator: {m['donated_bytes']}B",
            f"Counter: CachedCompile\n  Value: {m['cache_hits']}",
            f"Counter: UncachedCompile\n  Value: {m['cache_misses']}",
            f"Counter: MarkStep\n  Value: {m.get('MarkStep', 0)}",
            f"Counter: SyncTensors\n  Value: {m.get('SyncTensors', 0)}",
            f"Counter: LiftedScalars\n  Value: {m.get('LiftedScalars', 0)}",
            f"Counter: TransferToDevice\n  Value: {m.get('TransferToDevice', 0)}",
            f"Metric: CaptureTime (aten ops recorded: {m['AtenOps']})\n  Accumulator: {m['CaptureNs'] / 1e6:.3f}ms",
        ]
        for name, value in sorted(self.counters.items()):
            if name.startswith("aten::"):
                lines.append(f"Counter: {name}\n  Value: {value}")
        for diagnosis in m["recompile_diagnoses"]:
            lines.append(f"Recompile: {diagnosis}")
        return "\n".join(lines) + "\n"


def save_graph(folder, name, graph, inputs):
    """`graph` as FOLDER/NAME.lzir and its inputs (lazylab tensors, in its
    parameters' order) as FOLDER/NAME.weights/N.npy, a file workload of
    `lazylab run`. Returns the graph's hash."""
    weights = os.path.join(folder, f"{name}.weights")
    os.makedirs(weights, exist_ok=True)
    for ordinal, value in enumerate(inputs):
        np.save(os.path.join(weights, f"{ordinal}.npy"), value.numpy())
    graph.save(os.path.join(folder, f"{name}.lzir"), name)
    return graph.hash


_current = None


def current():
    global _current
    if _current is None:
        _current = Device()
    return _current


def set_current(device):
    global _current
    _current = device
    return device


def eprint(*args):
    print(*args, file=sys.stderr)
