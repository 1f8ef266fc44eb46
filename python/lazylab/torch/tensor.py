"""LazyTensor: a torch.Tensor whose value is a lazylab tensor. It wraps no
storage: autograd runs in PyTorch above it, and every aten op below
autograd (forward, backward and the optimizer alike) reaches
__torch_dispatch__, which records it through the lowering table."""

import numpy as np
import torch

import lazylab

from . import lowering, runtime
from .cells import Cell


_CPU = torch.device("cpu")


class LazyTensor(torch.Tensor):
    @staticmethod
    def __new__(cls, cell, requires_grad=False):
        value = cell.value
        # Labelled a CPU tensor: the factories autograd calls inside
        # backward then make real CPU data (zeros, ones), which enter the
        # trace as host data, where a "meta" label would hand them no data.
        tensor = torch.Tensor._make_wrapper_subclass(
            cls, value.shape, dtype=runtime.TORCH_DTYPES[value.dtype], device=_CPU, requires_grad=requires_grad
        )
        tensor._cell = cell
        return tensor

    # No __torch_function__ handling of our own (it would rewrap outputs and
    # fight autograd).
    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return lowering.dispatch(func, args, kwargs or {})

    @classmethod
    def from_torch(cls, tensor, device=None):
        device = device or runtime.current()
        value = device.from_host(tensor)
        return cls(Cell(value), requires_grad=tensor.requires_grad)

    def to_torch(self):
        """The value as an eager CPU tensor (a sync)."""
        runtime.current().counters["SyncTensors"] += 1
        value = self._cell.value
        if value.dtype == lazylab.bf16:  # NumPy has none: through DLPack, copied (DLPack shares)
            return torch.from_dlpack(value).cpu().clone()
        return torch.from_numpy(np.array(value.numpy()))

    def numpy(self):
        return self.to_torch().numpy()

    def tolist(self):
        return self.to_torch().tolist()

    def __repr__(self, *, tensor_contents=None):
        return f"lazy:{self.to_torch()!r}"

    @property
    def lazylab_value(self):
        """The lazylab tensor this one holds now."""
        return self._cell.value
