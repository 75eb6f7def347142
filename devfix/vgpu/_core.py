"""The virtual-GPU tensor: a wrapper subclass whose C++ TensorImpl is on ``cuda:k``.

A :class:`VTensor` holds a plain CPU tensor ``_elem``; every aten op reaching the wrapper runs
on the CPU tensors and the results are wrapped again on the same virtual device. When an op
mixes devices, :mod:`devfix.vgpu._checks` raises the text the CUDA build raises.

This module imports torch, so it may only be imported after the shim is loaded.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import torch

from devfix.vgpu import provenance
from devfix.vgpu.errors import VGPUUnsupported

aten = torch.ops.aten

#: one torch.device per virtual GPU, so devices can be compared by identity on the hot path.
DEVICES: list[torch.device] = []
_CPU = torch.device("cpu")
_Tensor = torch.Tensor
_Generator = torch._C.Generator
_STRIDED = torch.strided
_make_wrapper = torch.Tensor._make_wrapper_subclass


def _no_counting(device: int) -> int:
    return -1


#: ``set_alloc_device(k) -> previous``: CPU allocations count against cuda:k until reset (-1).
#: Replaced by the shim's function at install; the default keeps this module importable alone.
set_alloc_device: Callable[[int], int] = _no_counting


class _Copying(threading.local):
    active = False


_copying = _Copying()


def _excluded_python() -> Any:
    return torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Python))


class VTensor(torch.Tensor):
    """A tensor on a virtual GPU: reports ``cuda:k``, computes on the CPU tensor ``_elem``."""

    _elem: torch.Tensor
    _dev: torch.device

    @staticmethod
    def __new__(cls, elem: Any = None, dev: Any = None, **kwargs: Any) -> Any:
        if isinstance(dev, torch.device):
            return _mk(elem, dev)
        return _as_parameter_class(elem, dev, kwargs)

    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        return dispatch(func, args, kwargs)

    # No __tensor_flatten__: a traceable subclass would make Module._apply use swap_tensors,
    # which refuses parameters still referenced by an autograd graph. `.data =` (patched) is
    # what a real GPU goes through.

    def __repr__(self, *, tensor_contents: Any = None) -> Any:  # type: ignore[override]
        # torch prints subclasses as `VTensor(...)`; a CUDA tensor prints as `tensor(...)`.
        text: str = torch._tensor_str._str(  # type: ignore[no-untyped-call]
            self, tensor_contents=tensor_contents
        )
        if text.startswith("Parameter(VTensor(") and text.endswith(")"):
            text = text[len("Parameter(") : -1]
        if text.startswith("VTensor("):
            lines = text.split("\n")
            lines[0] = "tensor(" + lines[0][len("VTensor(") :]
            lines[1:] = [ln[1:] if ln.startswith(" ") else ln for ln in lines[1:]]
            text = "\n".join(lines)
        if getattr(self, "_is_param", False):
            return "Parameter containing:\n" + text
        return text

    def numpy(self, *, force: bool = False) -> Any:
        if force:
            return self._elem.detach().numpy()
        msg = (
            f"can't convert {self._dev} device type tensor to numpy. Use Tensor.cpu() to copy "
            "the tensor to host memory first."
        )
        provenance.record_failure(msg, [("self", self)], "Tensor.numpy")
        raise TypeError(msg)

    def tolist(self) -> Any:
        return self._elem.tolist()

    # A wrapper has no storage of its own (its data pointer reads 0 for every tensor). Libraries
    # tell tensors apart by their memory: accelerate's dispatch_model keeps tied parameters in a
    # map keyed by `data_ptr()`, safetensors and `save_pretrained` find shared tensors by their
    # storage's pointer. The CPU tensor's memory is the virtual GPU's, so it answers.

    def data_ptr(self) -> int:
        if _copying.active:
            return 0
        return self._elem.data_ptr()

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        # torch's Tensor.__deepcopy__ recognises a wrapper subclass by its null data pointer
        # (and then copies it with clone()); during the copy, the pointer reads as torch's own
        previous, _copying.active = _copying.active, True
        try:
            return torch.Tensor.__deepcopy__(self, memo)  # type: ignore[no-untyped-call]
        finally:
            _copying.active = previous

    def untyped_storage(self) -> torch.UntypedStorage:
        return self._elem.untyped_storage()

    def __format__(self, spec: str) -> str:
        if self.dim() == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, proto: Any) -> Any:
        from devfix.vgpu import _serial

        return _serial.reduce_vtensor(self)


#: attributes every VTensor carries in its ``__dict__`` (a real Parameter's is empty)
OWN_ATTRIBUTES = ("_elem", "_dev", "_is_param")


def _as_parameter_class(data: Any, requires_grad: Any, kwargs: dict[str, Any]) -> Any:
    """``type(param)(data, requires_grad=...)`` for a parameter on a virtual GPU.

    A parameter on a GPU is an ``nn.Parameter``; on a virtual GPU its class is VTensor (with
    ``_is_param``, so ``isinstance(p, nn.Parameter)`` holds). Libraries rebuild a parameter
    from its class (accelerate's ``set_module_tensor_to_device`` and ``init_on_device``:
    ``param_cls = type(old); param_cls(new_value, requires_grad=old.requires_grad)``), so
    the class answers as ``nn.Parameter`` does. Some pass the old parameter's ``__dict__`` as
    keyword arguments: the runtime's own attributes there are not the caller's.
    """
    for name in OWN_ATTRIBUTES:
        kwargs.pop(name, None)
    if "requires_grad" in kwargs:
        if requires_grad is not None:
            raise TypeError("Parameter.__new__() got multiple values for argument 'requires_grad'")
        requires_grad = kwargs.pop("requires_grad")
    if kwargs:
        name = next(iter(kwargs))
        raise TypeError(f"Parameter.__new__() got an unexpected keyword argument {name!r}")
    return torch.nn.Parameter(data, True if requires_grad is None else requires_grad)


def _mk(elem: torch.Tensor, dev: torch.device) -> VTensor:
    """A VTensor on ``dev`` holding ``elem`` (the hot path's constructor).

    ``make_vtensor`` in shim.cpp builds the common case the same way for the fast path and
    calls this function for the rest: a change here belongs there too."""
    offset = elem.storage_offset()
    if offset or elem.layout is not _STRIDED:
        r: VTensor = _make_wrapper(
            VTensor,
            elem.size(),
            strides=elem.stride(),
            storage_offset=offset,
            dtype=elem.dtype,
            layout=elem.layout,
            device=dev,
        )
    else:  # the common case: fewer keyword arguments for torch to parse
        r = _make_wrapper(VTensor, elem.size(), strides=elem.stride(), dtype=elem.dtype, device=dev)
    r._elem = elem
    r._dev = dev
    return r


# --------------------------------------------------------------------------------------------
# Per-op facts, computed once per OpOverload.


class OpInfo:
    __slots__ = (
        "handler",
        "inplace_ret",
        "mix_ok",
        "op",
        "out_names",
        "random",
        "returns_self",
        "scalar_ok",
        "scalars_moved",
        "view_inplace",
        "writes_self",
    )

    def __init__(self, func: Any) -> None:
        schema = func._schema
        self.handler: Callable[..., Any] | None = SPECIAL.get(func)
        if self.handler is None and any(
            a.name == "device" and a.kwarg_only for a in schema.arguments
        ):
            # `zeros_like(x, device="cpu")`, `x.new_zeros(n, device=...)`: the argument, not
            # the input's device, decides where the result lives
            self.handler = _explicit_device
        self.mix_ok = func in MIX_OK
        # `where` moves every 0-dim CPU operand to the device first (TensorCompare.cpp)
        self.scalars_moved = func in SCALARS_MOVED
        # draws random numbers: on a virtual GPU, from that device's generator
        self.random = torch.Tag.nondeterministic_seeded in func.tags
        # Returns that alias a written argument: return the caller's wrapper, not a new one.
        rets = []
        write_sets: dict[str, tuple[int, str]] = {}
        for i, a in enumerate(schema.arguments):
            ai = a.alias_info
            if ai is not None and ai.is_write:
                for s in ai.before_set:
                    write_sets[s] = (i, a.name)
        for r in schema.returns:
            ai = r.alias_info
            hit = None
            if ai is not None and ai.is_write:
                for s in ai.before_set:
                    if s in write_sets:
                        hit = write_sets[s]
            rets.append(hit)
        self.inplace_ret: list[tuple[int, str] | None] | None = (
            rets if any(h is not None for h in rets) else None
        )
        self.out_names = tuple(a.name for a in schema.arguments if a.is_out)
        # the first argument is written (`add_`, `out=` first): a plain 0-dim CPU tensor there
        # is an output, which TensorIterator never exempts
        first = schema.arguments[0] if schema.arguments else None
        self.writes_self = bool(
            first is not None and first.alias_info is not None and first.alias_info.is_write
        )
        self.view_inplace = func in VIEW_INPLACE
        self.op: Callable[..., Any] = getattr(func, "_op", func)  # skips OpOverload.__call__
        # a plain in-place op (`add_`): return the caller's `self`, nothing can have resized
        self.returns_self = (
            self.inplace_ret == [(0, schema.arguments[0].name)]
            and not schema.arguments[0].is_out
            and not self.out_names
            and not self.view_inplace
        )
        self.scalar_ok: bool | None = None  # filled on the first 0-dim CPU operand

    def fast_path_name(self, func: Any) -> str | None:
        """The op's name for the shim's fast path (``add.Tensor``), or None when its Python
        path decides more than "one device in, the same device out"."""
        if (
            self.handler is not None
            or self.random
            or self.mix_ok
            or self.scalars_moved
            or self.view_inplace
            or self.out_names
            or (self.inplace_ret is not None and not self.returns_self)
        ):
            return None
        schema = func._schema
        namespace, _, name = schema.name.partition("::")
        if namespace != "aten":
            return None
        full = f"{name}.{schema.overload_name}" if schema.overload_name else name
        if torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{full}", "Python"):
            return None  # torch's own kernel there; leave it
        return full


_INFO: dict[Any, OpInfo] = {}
SPECIAL: dict[Any, Callable[..., Any]] = {}
#: a SPECIAL handler returns this to let the generic path run the op
NOT_HANDLED: Any = object()
MIX_OK: set[Any] = set()
SCALARS_MOVED: set[Any] = set()
VIEW_INPLACE: set[Any] = set()


#: ``fast_add(name, returns_self)``: the shim's C++ kernel takes the op's common case (every
#: tensor on one virtual GPU) off this Python path; None while the fast path is off.
fast_add: Callable[[str, bool], None] | None = None


def offer_to_fast_path(func: Any, info: OpInfo) -> None:
    """Hand ``func`` to the shim's fast path when it is on and the op qualifies."""
    if fast_add is not None:
        name = info.fast_path_name(func)
        if name is not None:
            fast_add(name, info.returns_self)


def _info(func: Any) -> OpInfo:
    info = _INFO.get(func)
    if info is None:
        info = _INFO[func] = OpInfo(func)
        # read back as an attribute on the hot path: a dict keyed by OpOverload would call
        # its Python-level __hash__ on every op
        func._devfix_vgpu_info = info
        offer_to_fast_path(func, info)
    return info


# --------------------------------------------------------------------------------------------
# The hot path.


def dispatch(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> Any:
    """Run ``func`` on VTensor arguments (the runtime's own entry; see _torch_dispatch)."""
    return _torch_dispatch(VTensor, func, (), args, kwargs)


def _torch_dispatch(
    cls: Any,
    func: Any,
    types: Any,
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
) -> Any:
    # VTensor.__torch_dispatch__ itself: one Python frame per op on the hot path
    try:
        info = func._devfix_vgpu_info
    except AttributeError:
        info = _info(func)
    if info.handler is not None:
        res = info.handler(func, args, kwargs or {})
        if res is not NOT_HANDLED:
            return res
    dev: torch.device | None = None
    bad = False
    cpu_scalars = 0
    uargs = []
    for a in args:
        t = type(a)
        if t is VTensor:
            d = a._dev
            if dev is None:
                dev = d
            elif d is not dev:
                bad = True
            uargs.append(a._elem)
        elif t is list or t is tuple:
            if (a and isinstance(a[0], _Tensor)) or (a and a[0] is None):
                lst = []
                for x in a:
                    if type(x) is VTensor:
                        d = x._dev
                        if dev is None:
                            dev = d
                        elif d is not dev:
                            bad = True
                        lst.append(x._elem)
                    else:
                        if x is not None and isinstance(x, _Tensor):
                            bad = True  # plain CPU tensor in a list: no scalar exemption
                        lst.append(x)
                uargs.append(lst)
            else:
                uargs.append(a)
        elif isinstance(a, _Tensor):
            if a.dim() != 0:
                bad = True
            elif not info.mix_ok:
                cpu_scalars += 1
                if info.scalar_ok is None:
                    info.scalar_ok = _scalar_exempt(func)
                if not info.scalar_ok:
                    bad = True
            if isinstance(a, VTensor):  # a subclass of VTensor (rare)
                uargs.append(a._elem)
            else:
                uargs.append(a)
        else:
            uargs.append(a)
    ukwargs = kwargs
    generator = None
    if kwargs:
        ukwargs = {}
        for k, v in kwargs.items():
            t = type(v)
            if t is VTensor:
                d = v._dev
                if dev is None:
                    dev = d
                elif d is not dev:
                    bad = True
                ukwargs[k] = v._elem
            elif isinstance(v, _Tensor):
                if v.dim() != 0 or k in info.out_names:
                    bad = True
                else:
                    cpu_scalars += 1
                ukwargs[k] = v
            elif (t is list or t is tuple) and v and isinstance(v[0], _Tensor):
                lst = []
                for x in v:
                    if type(x) is VTensor:
                        if dev is None:
                            dev = x._dev
                        elif x._dev is not dev:
                            bad = True
                        lst.append(x._elem)
                    else:
                        bad = True
                        lst.append(x)
                ukwargs[k] = lst
            elif t is _Generator:
                generator = v
                ukwargs[k] = v
            else:
                ukwargs[k] = v
    if (
        cpu_scalars
        and not info.scalars_moved
        and (cpu_scalars > 1 or (info.writes_self and args and type(args[0]) is not VTensor))
    ):
        bad = True  # TensorIterator exempts one CPU scalar, and never an output
    if bad and not info.mix_ok:
        from devfix.vgpu import _checks

        res = _checks.on_mismatch(func, args, kwargs or {})
        if res is not _checks.NO_ERROR:
            return res
    if dev is None:  # only reachable for odd ops (all tensors plain); keep them plain
        return func(*args, **(kwargs or {}))
    if generator is not None or info.random:
        return _random(info, func, args, kwargs or {}, uargs, ukwargs or {}, dev)
    prev = set_alloc_device(dev.index)
    try:
        out = info.op(*uargs, **(ukwargs or {}))
    finally:
        set_alloc_device(prev)
    if info.returns_self:
        return args[0]
    if info.inplace_ret is not None:
        return _inplace_result(info, func, args, kwargs or {}, out, dev)
    if info.out_names:
        _check_out_sizes(info, kwargs or {})
    return wrap(out, dev)


def generator_error(expected: str, generator: Any) -> RuntimeError:
    """``check_generator`` in aten/src/ATen/core/Generator.h."""
    return RuntimeError(
        f"Expected a '{expected}' device type for generator but found '{generator.device.type}'"
    )


def cpu_twin(generator: Any) -> Any:
    """A CPU generator in the state of a virtual GPU's ``generator`` (which reports cuda)."""
    twin = torch.Generator()
    twin.set_state(generator.get_state())
    return twin


#: the default generator of each virtual GPU (``torch.cuda.default_generators``)
DEFAULT_GENERATORS: list[Any] = []
_rng_lock = threading.Lock()


def call_with_generator(op: Any, args: Any, kwargs: dict[str, Any], dev: torch.device) -> Any:
    """Run the CPU ``op`` drawing from the virtual GPU's generator (explicit or default).

    An explicit generator must be a CUDA one (``check_generator``); a CPU twin of its state
    samples and the state is written back. Without one (``dropout`` takes none), the CPU
    default generator is loaded with the device's state for the call, so each virtual GPU
    has its own stream, seeded by ``torch.manual_seed`` / ``torch.cuda.manual_seed``.
    """
    generator = kwargs.get("generator")
    if generator is not None:
        if generator.device.type != "cuda":
            raise generator_error("cuda", generator)
        twin = cpu_twin(generator)
        prev = set_alloc_device(dev.index)
        try:
            return op(*args, **{**kwargs, "generator": twin})
        finally:
            set_alloc_device(prev)
            generator.set_state(twin.get_state())
    own = DEFAULT_GENERATORS[dev.index] if dev.index < len(DEFAULT_GENERATORS) else None
    if own is None:
        return op(*args, **kwargs)
    cpu = torch.default_generator
    with _rng_lock:
        saved = cpu.get_state()
        cpu.set_state(own.get_state())
        prev = set_alloc_device(dev.index)
        try:
            return op(*args, **kwargs)
        finally:
            set_alloc_device(prev)
            own.set_state(cpu.get_state())
            cpu.set_state(saved)


def _random(
    info: OpInfo,
    func: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    uargs: list[Any],
    ukwargs: dict[str, Any],
    dev: torch.device,
) -> Any:
    out = call_with_generator(info.op, uargs, ukwargs, dev)
    if info.returns_self:
        return args[0]
    if info.inplace_ret is not None:
        return _inplace_result(info, func, args, kwargs, out, dev)
    return wrap(out, dev)


def _scalar_exempt(func: Any) -> bool:
    # A 0-dim CPU tensor next to a CUDA tensor is fine for TensorIterator ops only.
    from devfix.vgpu import _checks

    return _checks.scalar_exempt(func)


def wrap(out: Any, dev: torch.device) -> Any:
    t = type(out)
    if t is _Tensor:
        return _mk(out, dev)
    if t is tuple or t is list:
        return t(wrap(x, dev) for x in out)
    if isinstance(out, _Tensor) and not isinstance(out, VTensor):
        return VTensor(out, dev)
    return out


def _inplace_result(
    info: OpInfo, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any, dev: Any
) -> Any:
    assert info.inplace_ret is not None
    res = []
    for i, hit in enumerate(info.inplace_ret):
        o = out[i] if isinstance(out, (tuple, list)) else out
        if hit is None:
            res.append(wrap(o, dev))
            continue
        pos, name = hit
        w = args[pos] if pos < len(args) else kwargs.get(name)
        if isinstance(w, VTensor):
            if info.view_inplace:
                _restride(w)
            elif w.shape != w._elem.shape:
                if func is aten.resize_.default or func is aten.resize_as_.default:
                    raise VGPUUnsupported(
                        "resizing a tensor on a virtual GPU to a new size "
                        f"({tuple(w.shape)} -> {tuple(w._elem.shape)})"
                    )
                raise VGPUUnsupported(
                    f"an out= tensor that must grow ({func}: {tuple(w.shape)} -> "
                    f"{tuple(w._elem.shape)})"
                )
        res.append(w)
    if len(res) == 1 and not isinstance(out, (tuple, list)):
        return res[0]
    return tuple(res)


def _check_out_sizes(info: OpInfo, kwargs: dict[str, Any]) -> None:
    for n in info.out_names:
        w = kwargs.get(n)
        if isinstance(w, VTensor) and w.shape != w._elem.shape:
            raise VGPUUnsupported(f"an out= tensor that must grow ({n} of {tuple(w.shape)})")


def _restride(w: VTensor) -> None:
    e = w._elem
    with _excluded_python():
        torch.ops.aten.as_strided_.default(w, e.size(), e.stride(), e.storage_offset())


# --------------------------------------------------------------------------------------------
# Ops with their own device rules.


def _device_of(x: Any) -> torch.device:
    return x._dev if type(x) is VTensor else x.device


def _elem(x: Any) -> Any:
    return x._elem if isinstance(x, VTensor) else x


def _target(device: Any, default: torch.device) -> torch.device:
    if device is None:
        return default
    d = torch.device(device)
    if d.type == "cuda":
        return vdevice(d.index)
    return d


def vdevice(index: int | None) -> torch.device:
    if index is None:
        from devfix.vgpu import _cuda_api

        index = _cuda_api.current_device()
    if not 0 <= index < len(DEVICES):
        raise RuntimeError(
            "CUDA error: invalid device ordinal\nCUDA kernel errors might be asynchronously "
            "reported at some other API call, so the stacktrace below might be incorrect.\n"
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
        )
    return DEVICES[index]


def _to_copy(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x = args[0]
    src = _device_of(x)
    dst = _target(kwargs.get("device"), src)
    kw = dict(kwargs)
    # A virtual GPU's data is on the CPU; any other target (the CPU, `meta`) is taken as asked.
    kw["device"] = _CPU if dst.type == "cuda" else dst
    if kw.get("pin_memory"):
        kw["pin_memory"] = False
    out = func(_elem(x), *args[1:], **kw)
    if dst.type == "cuda":
        return VTensor(out, dst)
    return out


def _explicit_device(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    device = kwargs.get("device")
    source = next((a._dev for a in args if type(a) is VTensor), None)
    if device is None or source is None:
        return NOT_HANDLED
    target = _target(device, source)
    if target is source:
        return NOT_HANDLED
    if target.type == "cuda":
        from devfix.vgpu._factories import run_on_cpu

        return run_on_cpu(func, args, kwargs)  # as a factory on that GPU (its generator too)
    return func(*(_elem(a) for a in args), **kwargs)


def _copy_(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    dst, src = args[0], args[1]
    _elem(dst).copy_(_elem(src), *args[2:], **kwargs)
    if isinstance(dst, VTensor) and dst.shape != dst._elem.shape:
        raise VGPUUnsupported("copy_ into a tensor that must grow")
    return dst


def _indices_check(x: Any, indices: Any) -> None:
    self_dev = _device_of(x)
    for i, ix in enumerate(indices):
        if ix is None:
            continue
        d = _device_of(ix)
        if d.type != "cpu" and d != self_dev:
            msg = (
                "indices should be either on cpu or on the same device as the indexed tensor "
                f"({self_dev})"
            )
            provenance.record_failure(msg, [("self", x), (f"indices[{i}]", ix)], "aten::index")
            raise RuntimeError(msg)


def _index(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x, indices = args[0], args[1]
    if not isinstance(x, VTensor):
        # plain self with virtual indices: real CUDA refuses the same way
        _indices_check(x, indices)
        return func(x, [_elem(i) for i in indices])
    _indices_check(x, indices)
    return VTensor(func(x._elem, [None if i is None else _elem(i) for i in indices]), x._dev)


def _index_put(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x, indices, values = args[0], args[1], args[2]
    sdev = _device_of(x)
    _indices_check(x, indices)
    vdev = _device_of(values)
    if vdev != sdev and not (values.dim() == 0 and vdev.type == "cpu"):
        raise RuntimeError(
            f"Index put requires the source and destination dtypes match, got {x.dtype} for the "
            f"destination and {values.dtype} for the source."
            if values.dtype != x.dtype
            else f"expected device {sdev} but got device {vdev} for value tensor"
        )
    out = func(
        _elem(x),
        [None if i is None else _elem(i) for i in indices],
        _elem(values),
        *args[3:],
        **kwargs,
    )
    if func._schema.name.endswith("_"):
        return x
    return VTensor(out, sdev) if sdev.type == "cuda" else out


def _local_scalar(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return func(args[0]._elem)


def _resize(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x = args[0]
    size = tuple(args[1]) if func is aten.resize_.default else tuple(args[1].shape)
    if tuple(x.shape) != size:
        raise VGPUUnsupported(
            f"resizing a tensor on a virtual GPU ({tuple(x.shape)} -> {size}); "
            "this usually means an out= tensor that must grow"
        )
    return x


def _set_source(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    raise VGPUUnsupported(f"{func} on a tensor on a virtual GPU")


def _pin(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    # Memory.cpp pin_memory: only CPU tensors can be pinned
    raise RuntimeError(f"cannot pin '{args[0].type()}' only dense CPU tensors can be pinned")


def _record_stream(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return None  # work on a virtual GPU is synchronous: nothing to keep alive for a stream


def _is_pinned(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return False


def _composite(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return func._op_dk(torch._C.DispatchKey.CompositeExplicitAutograd, *args, **kwargs)


def _register_specials() -> None:
    SPECIAL[aten._to_copy.default] = _to_copy
    SPECIAL[aten.copy_.default] = _copy_
    SPECIAL[aten.index.Tensor] = _index
    for f in (aten.index_put_.default, aten.index_put.default, aten._index_put_impl_.default):
        SPECIAL[f] = _index_put
    SPECIAL[aten._local_scalar_dense.default] = _local_scalar
    SPECIAL[aten.resize_.default] = _resize
    SPECIAL[aten.resize_as_.default] = _resize
    for ov in aten.set_.overloads():  # type: ignore[no-untyped-call]
        SPECIAL[getattr(aten.set_, ov)] = _set_source
    SPECIAL[aten._pin_memory.default] = _pin
    for ov in aten.where.overloads():  # type: ignore[no-untyped-call]
        SCALARS_MOVED.add(getattr(aten.where, ov))
    SPECIAL[aten.is_pinned.default] = _is_pinned
    SPECIAL[aten.record_stream.default] = _record_stream
    # Ops whose CompositeExplicitAutograd kernel decides output placement (CPU batch_sizes).
    SPECIAL[aten._pack_padded_sequence.default] = _composite
    SPECIAL[aten._pad_packed_sequence.default] = _composite
    for f in (aten.copy_.default, aten._to_copy.default):
        MIX_OK.add(f)
    for name in (
        "t_",
        "transpose_",
        "unsqueeze_",
        "squeeze_",
        "as_strided_",
        "swapdims_",
        "swapaxes_",
        "detach_",
    ):
        pk = getattr(aten, name)
        for ov in pk.overloads():
            VIEW_INPLACE.add(getattr(pk, ov))
    from devfix.vgpu import _kernels

    _kernels.register(SPECIAL)


_register_specials()
VTensor.__torch_dispatch__ = classmethod(_torch_dispatch)  # type: ignore[assignment]
