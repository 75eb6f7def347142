"""One rank of a multi-process launch, in one process, with peers that mirror it.

A script started as rank r of N (``RANK``/``LOCAL_RANK`` in its environment, as torchrun and
``accelerate launch`` set them) calls ``init_process_group("nccl")``. Under the virtual GPUs no
peer processes exist, so the group is a real c10d group of this one process that *claims* rank
r of N: c10d's own bookkeeping then answers ``get_rank``, ``get_world_size``, ``new_group``,
``ProcessGroup.size()`` and ``DistributedSampler`` as rank r sees them. Its backend is torch's
fake process group (no communication); the collectives of ``torch.distributed`` are answered
here instead, as if every peer held the same tensors as this rank: ``all_reduce`` with SUM
gives ``x * N``, ``all_gather`` N copies, ``broadcast`` and ``barrier`` nothing, and so on.

``DistributedDataParallel`` over such a group keeps DDP's own argument checks, moves the inputs
to ``device_ids[0]`` as DDP does, and leaves gradients as they are (the average of N equal
gradients). docs/vgpu.md, "One rank of a launch", is the user's account.
"""

from __future__ import annotations

import copy
import functools
import inspect
import os
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from torch._C._distributed_c10d import HashStore

from devfix.vgpu.errors import VGPUUnsupported

#: The c10d backend name of a mirrored group (registered for the CPU and CUDA devices).
BACKEND = "devfix_mirror"

#: What ``get_backend`` reports for a mirrored group, and whether CPU tensors are allowed
#: (a ``cpu:gloo,cuda:nccl`` group takes them; a ``nccl`` one raises NCCL's error).
_shown: dict[str, str] = {}
_cpu_ok: dict[Any, bool] = {}
_DEFAULT = "default"


def _create_backend(common_opts: Any, backend_opts: Any) -> Any:
    """torch's fake process group: no communication (the collectives are answered here)."""
    from torch._C._distributed_c10d import FakeProcessGroup

    fake: Any = FakeProcessGroup
    return fake._create_internal(common_opts.group_rank, common_opts.group_size, backend_opts)


# --- the mirrored world --------------------------------------------------------------------


def _wants_nccl(backend: Any) -> bool:
    b = str(backend or "")
    return "nccl" in b or b == "" or b.startswith("cuda")


def _unnamed_backend() -> str:
    """The backend torch gives a GPU host's `init_process_group()` that names none: NCCL
    alone since 2.6 (the detected accelerator's), NCCL with Gloo for CPU tensors before."""
    if torch.torch_version.TorchVersion(torch.__version__) >= "2.6":
        return "nccl"
    return "cpu:gloo,cuda:nccl"


def rank_in_environment() -> tuple[int, int] | None:
    """(rank, world size) that the environment names, or None when it names no rank.

    ``RANK`` defaults to ``LOCAL_RANK`` and ``WORLD_SIZE`` to the number of virtual GPUs."""
    env = os.environ
    rank = env.get("RANK") or env.get("LOCAL_RANK")
    if rank is None or not rank.strip().lstrip("-").isdigit() or int(rank) < 0:
        return None
    world = env.get("WORLD_SIZE", "")
    size = int(world) if world.strip().isdigit() else torch.cuda.device_count()
    return int(rank), size


def mirrored(group: Any = None) -> bool:
    """Whether ``group`` (None: the default group) is a mirrored one."""
    if not c10d.is_initialized():
        return False
    pg = group or c10d._get_default_group()
    entry = c10d._world.pg_map.get(pg)
    return entry is not None and str(entry[0]) == BACKEND


def _start(shown: str, timeout: Any, group_name: str, rank: int, size: int) -> None:
    if not 0 <= rank < size:
        raise ValueError(f"RANK {rank} must be smaller than WORLD_SIZE {size}")
    _orig["init_process_group"](
        BACKEND,
        timeout=timeout,
        world_size=size,
        rank=rank,
        store=HashStore(),
        group_name=group_name,
    )
    _shown[_DEFAULT] = "nccl" if shown in ("nccl", "cuda:nccl") else shown
    _cpu_ok[c10d._get_default_group()] = "gloo" in shown or shown == "cpu:gloo,cuda:nccl"


def init_process_group(*args: Any, **kwargs: Any) -> None:
    bound = _signature("init_process_group").bind(*args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    if not _wants_nccl(a["backend"]):
        return _orig["init_process_group"](*args, **kwargs)  # type: ignore[no-any-return]
    shown = str(a["backend"] or _unnamed_backend())
    where = rank_in_environment()
    if where is None:
        raise VGPUUnsupported(
            f"the nccl process-group backend (backend={str(a['backend'] or '') or None!r})"
        )
    rank = a["rank"] if a["rank"] >= 0 else where[0]
    size = a["world_size"] if a["world_size"] > 0 else where[1]
    _start(shown, a["timeout"], a["group_name"], rank, size)
    return None


def is_nccl_available() -> bool:
    """True where ``init_process_group("nccl")`` runs: the environment names a rank."""
    return rank_in_environment() is not None


def get_backend(group: Any = None) -> Any:
    backend = _orig["get_backend"](group)
    if str(backend) == BACKEND:
        return dist.Backend(_shown.get(_DEFAULT, "nccl"))
    return backend


def new_group(*args: Any, **kwargs: Any) -> Any:
    if not mirrored():
        return _orig["new_group"](*args, **kwargs)
    bound = _signature("new_group").bind(*args, **kwargs)
    backend = bound.arguments.pop("backend", None)
    bound.arguments.pop("device_id", None)
    group = _orig["new_group"](*bound.args, backend=BACKEND, **bound.kwargs)
    if group is not c10d.GroupMember.NON_GROUP_MEMBER and backend is not None:
        _cpu_ok[group] = "gloo" in str(backend)
    return group


def destroy_process_group(group: Any = None) -> None:
    _orig["destroy_process_group"](group)
    if group is None:
        _shown.clear()
        _cpu_ok.clear()
    else:
        _cpu_ok.pop(group, None)


# --- collectives, as if every peer held this rank's tensors ----------------------------------


class _Peers:
    """The mirrored group a collective runs on: its size, this rank in it, CPU tensors allowed."""

    def __init__(self, group: Any) -> None:
        self.group = group or c10d._get_default_group()
        self.n = self.group.size()
        self.rank = self.group.rank()
        self.cpu_ok = _cpu_ok.get(self.group, _cpu_ok.get(c10d._get_default_group(), False))

    def check(self, *tensors: torch.Tensor | None) -> None:
        """NCCL's own error for a tensor it has no backend for (a CPU tensor)."""
        for t in tensors:
            if t is not None and not t.is_cuda and not (self.cpu_ok and t.device.type == "cpu"):
                raise RuntimeError(f"No backend type associated with device type {t.device.type}")

    def is_root(self, args: dict[str, Any], key: str) -> bool:
        """Whether this rank is the collective's ``src``/``dst`` (given as a global rank or as
        ``group_src``/``group_dst``; rank 0 when neither is)."""
        root, group_root = args.get(key), args.get(f"group_{key}")
        if root is None and group_root is None:
            group_root = 0
        return bool(c10d._canonicalize_group_rank(self.group, root, group_root) == self.rank)


_OP: Any = dist.ReduceOp.RedOpType


def _reduced(t: torch.Tensor, op: Any, n: int) -> torch.Tensor:
    """The reduction over ``n`` peers that each hold ``t``."""
    kind: Any = op.op if type(op) is dist.ReduceOp else op  # type: ignore[attr-defined]
    if kind in (_OP.AVG, _OP.MAX, _OP.MIN, _OP.BAND, _OP.BOR) or t.dtype == torch.bool:
        return t
    if kind == _OP.SUM:
        return t * n
    if kind == _OP.PRODUCT:
        return t**n
    if kind == _OP.BXOR:
        return t if n % 2 else torch.zeros_like(t)
    raise VGPUUnsupported(f"the reduce op {kind} over mirrored ranks")


class _Done(dist.Work):
    """The work handle of a collective that has already completed (``async_op=True``)."""

    def __init__(self, result: Any) -> None:
        super().__init__()
        self._future: torch.futures.Future[Any] = torch.futures.Future()
        self._future.set_result(result)

    def wait(self, timeout: Any = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True

    def get_future(self) -> torch.futures.Future[Any]:
        return self._future


def _all_reduce(p: _Peers, a: dict[str, Any]) -> None:
    p.check(a["tensor"])
    a["tensor"].copy_(_reduced(a["tensor"], a["op"], p.n))


def _all_reduce_coalesced(p: _Peers, a: dict[str, Any]) -> None:
    for t in a["tensors"]:
        _all_reduce(p, {"tensor": t, "op": a["op"]})


def _all_gather(p: _Peers, a: dict[str, Any]) -> None:
    outputs = a["tensor_list"]
    p.check(a["tensor"], *outputs)
    if len(outputs) != p.n:
        raise ValueError(f"all_gather needs {p.n} output tensors (the group size): {len(outputs)}")
    for out in outputs:
        out.copy_(a["tensor"])


def _all_gather_into_tensor(p: _Peers, a: dict[str, Any]) -> None:
    out, inp = a["output_tensor"], a["input_tensor"]
    p.check(out, inp)
    if out.numel() != p.n * inp.numel():
        raise ValueError("output tensor size must be equal to world_size times input tensor size")
    out.copy_(torch.cat([inp.reshape(-1)] * p.n).reshape(out.shape))


def _all_gather_object(p: _Peers, a: dict[str, Any]) -> None:
    for i in range(p.n):
        a["object_list"][i] = copy.deepcopy(a["obj"])


def _broadcast(p: _Peers, a: dict[str, Any]) -> None:
    p.check(a["tensor"])


def _nothing(p: _Peers, a: dict[str, Any]) -> None:
    return None


def _monitored_barrier(p: _Peers, a: dict[str, Any]) -> None:
    if not p.cpu_ok:
        raise ValueError("monitored_barrier is only implemented for GLOO backend.")


def _reduce_scatter(p: _Peers, a: dict[str, Any]) -> None:
    inputs = a["input_list"]
    p.check(a["output"], *inputs)
    if len(inputs) != p.n:
        raise ValueError(
            f"reduce_scatter needs {p.n} input tensors (the group size): {len(inputs)}"
        )
    a["output"].copy_(_reduced(inputs[p.rank], a["op"], p.n))


def _reduce_scatter_tensor(p: _Peers, a: dict[str, Any]) -> None:
    out, inp = a["output"], a["input"]
    p.check(out, inp)
    if inp.numel() != p.n * out.numel():
        raise ValueError("input tensor must be the same size as output size times world size")
    mine = inp.reshape(-1)[p.rank * out.numel() : (p.rank + 1) * out.numel()]
    out.copy_(_reduced(mine, a["op"], p.n).reshape(out.shape))


def _gather(p: _Peers, a: dict[str, Any]) -> None:
    p.check(a["tensor"], *(a["gather_list"] or ()))
    root = p.is_root(a, "dst")
    # torch's own check of gather_list on the root and elsewhere (ranks 1 and 1: the root)
    c10d._validate_output_list_for_rank(int(root), 1, a["gather_list"])
    if root:
        for out in a["gather_list"]:
            out.copy_(a["tensor"])


def _gather_object(p: _Peers, a: dict[str, Any]) -> None:
    if p.is_root(a, "dst"):
        for i in range(p.n):
            a["object_gather_list"][i] = copy.deepcopy(a["obj"])


def _scatter(p: _Peers, a: dict[str, Any]) -> None:
    """The root sends this rank its own entry; elsewhere the root's list is not known here,
    and the tensor is left as it is."""
    p.check(a["tensor"], *(a["scatter_list"] or ()))
    if p.is_root(a, "src"):
        a["tensor"].copy_(a["scatter_list"][p.rank])


def _scatter_object_list(p: _Peers, a: dict[str, Any]) -> None:
    if p.is_root(a, "src"):
        a["scatter_object_output_list"][0] = copy.deepcopy(a["scatter_object_input_list"][p.rank])


def _reduce(p: _Peers, a: dict[str, Any]) -> None:
    p.check(a["tensor"])
    if p.is_root(a, "dst"):
        a["tensor"].copy_(_reduced(a["tensor"], a["op"], p.n))


def _all_to_all_single(p: _Peers, a: dict[str, Any]) -> None:
    out, inp = a["output"], a["input"]
    p.check(out, inp)
    splits = a["input_split_sizes"] or [inp.size(0) // p.n] * p.n
    mine = inp.split(list(splits))[p.rank]
    out.copy_(torch.cat([mine] * p.n).reshape(out.shape))


def _all_to_all(p: _Peers, a: dict[str, Any]) -> None:
    p.check(*a["output_tensor_list"], *a["input_tensor_list"])
    for out in a["output_tensor_list"]:
        out.copy_(a["input_tensor_list"][p.rank])


def _point_to_point(p: _Peers, a: dict[str, Any]) -> None:
    raise VGPUUnsupported("point-to-point send/recv between mirrored ranks (there is no peer)")


_COLLECTIVES: dict[str, Callable[[_Peers, dict[str, Any]], None]] = {
    "all_reduce": _all_reduce,
    "all_reduce_coalesced": _all_reduce_coalesced,
    "all_gather": _all_gather,
    "all_gather_into_tensor": _all_gather_into_tensor,
    "_all_gather_base": _all_gather_into_tensor,
    "all_gather_object": _all_gather_object,
    "broadcast": _broadcast,
    "broadcast_object_list": _nothing,
    "barrier": _nothing,
    "monitored_barrier": _monitored_barrier,
    "reduce_scatter": _reduce_scatter,
    "reduce_scatter_tensor": _reduce_scatter_tensor,
    "_reduce_scatter_base": _reduce_scatter_tensor,
    "gather": _gather,
    "gather_object": _gather_object,
    "scatter": _scatter,
    "scatter_object_list": _scatter_object_list,
    "reduce": _reduce,
    "all_to_all_single": _all_to_all_single,
    "all_to_all": _all_to_all,
    "send": _point_to_point,
    "recv": _point_to_point,
    "isend": _point_to_point,
    "irecv": _point_to_point,
    "send_object_list": _point_to_point,
    "recv_object_list": _point_to_point,
}


def _collective(name: str, emulate: Callable[[_Peers, dict[str, Any]], None]) -> Callable[..., Any]:
    orig = _orig[name]
    signature = _signature(name)

    @functools.wraps(orig)
    def collective(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        group = bound.arguments.get("group")
        if not mirrored(group):  # another backend, or a group this rank is not in
            return orig(*args, **kwargs)
        bound.apply_defaults()
        with torch.no_grad():
            emulate(_Peers(group), bound.arguments)
        return _Done(None) if bound.arguments.get("async_op") else None

    return collective


def _batch_isend_irecv(p2p_op_list: Any) -> Any:
    if mirrored():
        raise VGPUUnsupported("point-to-point send/recv between mirrored ranks (there is no peer)")
    return _orig["batch_isend_irecv"](p2p_op_list)


# --- installation --------------------------------------------------------------------------

_orig: dict[str, Any] = {}
_signatures: dict[str, inspect.Signature] = {}


def _signature(name: str) -> inspect.Signature:
    if name not in _signatures:
        _signatures[name] = inspect.signature(_orig[name])
    return _signatures[name]


def install() -> None:
    """Replace torch.distributed's entry points (in its namespace and in distributed_c10d)."""
    if BACKEND not in dist.Backend.backend_list:
        dist.Backend.register_backend(
            BACKEND, _create_backend, extended_api=True, devices=["cpu", "cuda"]
        )
    own: dict[str, Callable[..., Any]] = {
        "init_process_group": init_process_group,
        "is_nccl_available": is_nccl_available,
        "get_backend": get_backend,
        "new_group": new_group,
        "destroy_process_group": destroy_process_group,
        "batch_isend_irecv": _batch_isend_irecv,
    }
    for name in [*own, *_COLLECTIVES]:
        _orig.setdefault(name, getattr(c10d, name))
    for name, emulate in _COLLECTIVES.items():
        own[name] = _collective(name, emulate)
    for name, fn in own.items():
        setattr(c10d, name, fn)
        setattr(dist, name, fn)
    from devfix.vgpu import _ddp

    _ddp.install()
