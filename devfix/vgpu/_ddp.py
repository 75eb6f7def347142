"""``DistributedDataParallel`` over a mirrored process group (devfix/vgpu/_dist.py).

The wrapper is torch's own class: its ``__init__`` runs as written (every argument check, with
its texts, and the attributes it sets: ``module``, ``device_ids``, ``output_device``,
``find_unused_parameters``, ``require_backward_grad_sync`` for ``no_sync()``) up to the point
where it would build the C++ reducer, which buckets gradients and all-reduces them through the
process group. Over a mirrored group that reducer is not built: the average of N equal
gradients is this rank's own, so gradients are left as they are, and the start-up broadcast of
rank 0's parameters and the check that every rank's shapes agree have nothing to do either.
``forward`` moves the inputs to ``device_ids[0]`` as DDP's ``_pre_forward`` does (torch's
``_to_kwargs``) and calls the module. Over any other group DDP is torch's, unchanged.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
import torch.nn.parallel.distributed as ddp_mod
from torch.distributed.utils import _to_kwargs

from devfix.vgpu import _dist
from devfix.vgpu.errors import VGPUUnsupported

DDP = torch.nn.parallel.DistributedDataParallel


class _ReducerBuilt(Exception):
    """Raised where DDP's ``__init__`` would build its reducer over a mirrored group."""

    def __init__(self, static_graph: bool) -> None:
        super().__init__()
        self.static_graph = static_graph


class _NoReducer:
    """Stands in for the reducer: every method of it (``prepare_for_backward`` as accelerate's
    ``trigger_sync_in_backward`` calls it) does nothing."""

    def __getattr__(self, name: str) -> Any:
        return _nothing


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


_orig: dict[str, Any] = {}


def _ddp_init_helper(self: Any, parameters: Any, *args: Any, **kwargs: Any) -> Any:
    if not _dist.mirrored(self.process_group):
        return _orig["_ddp_init_helper"](self, parameters, *args, **kwargs)
    static_graph = kwargs.get("static_graph", args[-1] if args else False)
    raise _ReducerBuilt(bool(static_graph))


def _init(self: Any, module: Any, *args: Any, **kwargs: Any) -> None:
    try:
        _orig["__init__"](self, module, *args, **kwargs)
    except _ReducerBuilt as built:
        _mirror(self, built.static_graph)


def _mirror(self: Any, static_graph: bool) -> None:
    if self.mixed_precision is not None:
        raise VGPUUnsupported("DistributedDataParallel's mixed_precision over mirrored ranks")
    self.static_graph = static_graph
    self.reducer = _NoReducer()
    self._comm_hooks = []
    self._has_rebuilt_buckets = False
    self._lazy_init_ran = True
    self._devfix_mirrored = True


def forward(self: Any, *inputs: Any, **kwargs: Any) -> Any:
    if not getattr(self, "_devfix_mirrored", False):
        return _orig["forward"](self, *inputs, **kwargs)
    with torch.autograd.profiler.record_function("DistributedDataParallel.forward"):
        if self.device_ids:
            target = torch.device(self.device_type, self.device_ids[0])
            moved, moved_kwargs = _to_kwargs(inputs, kwargs, target, False)
            inputs, kwargs = moved[0], moved_kwargs[0]
        return self.module(*inputs, **kwargs)


def _verify_param_shape_across_processes(process_group: Any, tensors: Any, *args: Any) -> Any:
    """Every peer holds this rank's parameters; a CPU one still meets NCCL's device check."""
    if not _dist.mirrored(process_group):
        return _orig["_verify_param_shape_across_processes"](process_group, tensors, *args)
    _dist._Peers(process_group).check(*tensors)
    return None


def _sync_module_states(module: Any, process_group: Any, *args: Any, **kwargs: Any) -> None:
    """Rank 0's parameters and buffers, broadcast to every rank, are this rank's."""
    if not _dist.mirrored(process_group):
        _orig["_sync_module_states"](module, process_group, *args, **kwargs)


def install() -> None:
    methods: dict[str, Callable[..., Any]] = {
        "__init__": _init,
        "_ddp_init_helper": _ddp_init_helper,
        "forward": forward,
    }
    helpers: dict[str, Callable[..., Any]] = {
        "_verify_param_shape_across_processes": _verify_param_shape_across_processes,
        "_sync_module_states": _sync_module_states,
    }
    for name, fn in methods.items():
        _orig.setdefault(name, DDP.__dict__[name])
        setattr(DDP, name, functools.wraps(_orig[name])(fn))
    for name, fn in helpers.items():  # distributed.py's own names for torch.distributed.utils'
        _orig.setdefault(name, getattr(ddp_mod, name))
        setattr(ddp_mod, name, fn)
