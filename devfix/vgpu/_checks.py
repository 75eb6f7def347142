"""Device checks that reproduce the CUDA build's error texts.

Only reached when an op mixes devices, so nothing here is on the hot path. The facts per
overload (``device_check`` kind, CUDA kernel, structured, TensorIterator, composite kernel)
come from the ``native_functions.yaml`` shipped in the same wheel (``torchgen/packaged``) and
are cached as JSON next to the shim.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from devfix.vgpu import _shim, provenance

_TABLE: dict[str, dict[str, Any]] | None = None
_TABLE_VERSION = 3


def _yaml_path() -> Path:
    import torchgen  # type: ignore[import-untyped]

    return Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"


def _build_table() -> dict[str, dict[str, Any]]:
    import yaml  # type: ignore[import-untyped]

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(_yaml_path()) as f:
        entries = yaml.load(f, Loader=loader)
    raw: dict[str, dict[str, Any]] = {}
    for e in entries:
        func = e["func"]
        full = func.split("(", 1)[0]
        name = full if "." in full else full + ".default"
        dispatch = e.get("dispatch") or {}
        keys: set[str] = set()
        for k in dispatch:
            keys.update(x.strip() for x in str(k).split(","))
        raw[name] = {
            "func": func,
            "dc": str(e.get("device_check", "ExactSame")),
            "keys": sorted(keys),
            "structured": bool(e.get("structured", False)),
            "delegate": e.get("structured_delegate"),
            "inherits": e.get("structured_inherits"),
        }
    table: dict[str, dict[str, Any]] = {}
    for name, r in raw.items():
        keys = set(r["keys"])
        structured = r["structured"]
        inherits = r["inherits"]
        if r["delegate"]:
            dname = str(r["delegate"])
            d = raw.get(dname if "." in dname else dname + ".default")
            if d is not None:
                keys |= set(d["keys"])
                inherits = d["inherits"]
            structured = True
        table[name] = {
            "func": r["func"],
            "dc": r["dc"],
            "cuda": "CUDA" in keys,
            "cea": bool(
                keys & {"CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional"}
            ),
            "cia": (not keys and not r["delegate"]) or "CompositeImplicitAutograd" in keys,
            "structured": structured,
            "ti": inherits == "TensorIteratorBase",
        }
    return table


def table() -> dict[str, dict[str, Any]]:
    global _TABLE
    if _TABLE is None:
        path = _shim.cache_root() / f"optable-v{_TABLE_VERSION}.json"
        try:
            _TABLE = json.loads(path.read_text())
        except (OSError, ValueError):
            _TABLE = _build_table()
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".optable-")
                with os.fdopen(fd, "w") as f:
                    json.dump(_TABLE, f)
                os.replace(tmp, path)
            except OSError:
                pass
    return _TABLE


def entry(func: Any) -> dict[str, Any] | None:
    name = func._schema.name
    if not name.startswith("aten::"):
        return None
    ov = func._schema.overload_name or "default"
    return table().get(f"{name[6:]}.{ov}")


def scalar_exempt(func: Any) -> bool:
    e = entry(func)
    if e is None:
        return True
    return not (e["cuda"] and e["dc"] == "ExactSame")


def wrapper_name(e: dict[str, Any]) -> str:
    from torchgen.api import native  # type: ignore[import-untyped]
    from torchgen.model import FunctionSchema  # type: ignore[import-untyped]

    fs = FunctionSchema.parse(e["func"])
    base = str(native.name(fs))
    if e["structured"]:
        return "wrapper_CUDA_" + base
    return f"wrapper_CUDA_{fs.name.overload_name}_" + base


# --------------------------------------------------------------------------------------------


def _dev(t: Any) -> torch.device:
    from devfix.vgpu._core import VTensor

    return t._dev if isinstance(t, VTensor) else t.device


def _bound(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[Any, Any]]:
    """(schema argument, value) pairs in schema order."""
    out = []
    for i, a in enumerate(func._schema.arguments):
        if i < len(args):
            out.append((a, args[i]))
        elif a.name in kwargs:
            out.append((a, kwargs[a.name]))
    return out


def _tensors_of(v: Any) -> list[Any]:
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [x for x in v if isinstance(x, torch.Tensor)]
    return []


def codegen_error(
    func: Any, e: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> str | None:
    bound = _bound(func, args, kwargs)
    ordered = [p for p in bound if p[0].is_out] + [
        p for p in bound if not p[0].is_out and not p[0].kwarg_only
    ]
    common: torch.device | None = None
    for a, v in ordered:
        for t in _tensors_of(v):
            d = _dev(t)
            if common is None:
                common = d
            elif d != common:
                return (
                    f"Expected all tensors to be on the same device, but got {a.name} is on {d}, "
                    f"different from other tensors on {common} (when checking argument in "
                    f"method {wrapper_name(e)})"
                )
    return None


def ti_error(operands: list[tuple[Any, bool]]) -> str | None:
    """operands: (tensor, is_output) in TensorIterator order (outputs first).

    ``TensorIteratorBase::compute_types`` (aten/src/ATen/TensorIterator.cpp): the common device
    is the first non-CPU operand's; one 0-dim CPU *input* is exempt (``allow_cpu_scalars``), a
    second raises, and any other operand off the common device raises.
    """
    common: torch.device | None = None
    for t, _ in operands:
        d = _dev(t)
        if d.type != "cpu":
            common = d
            break
    if common is None:
        return None
    cpu_scalars = 0
    for t, is_out in operands:
        d = _dev(t)
        if d.type == "cpu" and t.dim() == 0 and not is_out:
            cpu_scalars += 1
            if cpu_scalars > 1:
                return "Trying to pass too many CPU scalars to non-CPU kernel!"
            continue
        if d != common:
            return (
                "Expected all tensors to be on the same device, but found at least two devices, "
                f"{common} and {d}!"
            )
    return None


def _ti_operands(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    bound = _bound(func, args, kwargs)
    outs: list[tuple[Any, bool]] = []
    ins: list[tuple[Any, bool]] = []
    for a, v in bound:
        written = a.is_out or (a.alias_info is not None and a.alias_info.is_write)
        for t in _tensors_of(v):
            (outs if written else ins).append((t, written))
    # an in-place self is an output; TensorIterator lists outputs first
    return outs + ins


def foreach_error(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    bound = _bound(func, args, kwargs)
    lists = [
        (a, v)
        for a, v in bound
        if isinstance(v, (list, tuple)) and v and isinstance(v[0], torch.Tensor)
    ]
    scalars = [(a, v) for a, v in bound if isinstance(v, torch.Tensor)]
    if not lists:
        return None
    n = len(lists[0][1])
    inplace = func._schema.name.endswith("_")
    for i in range(n):
        ops: list[tuple[Any, bool]] = []
        for j, (_, v) in enumerate(lists):
            if i < len(v):
                ops.append((v[i], inplace and j == 0))
        for _, s in scalars:
            ops.append((s, False))
        msg = ti_error(ops)
        if msg:
            return msg
    return None


NO_ERROR = object()


def on_mismatch(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Raise the CUDA build's error for an op mixing devices, or return the op's result
    (composite kernels), or NO_ERROR when the mix is allowed after all."""
    from devfix.vgpu import _battery_rules

    msg = _battery_rules.specific_error(func, args, kwargs)
    if msg is None:
        e = entry(func)
        name = func._schema.name
        if e is not None and e["cuda"] and e["dc"] == "ExactSame":
            msg = codegen_error(func, e, args, kwargs)
        elif e is not None and not e["cuda"] and e["cea"]:
            # No CUDA kernel: run the composite kernel on the wrappers; its inner ops raise
            # exactly what the CUDA build raises (or succeed, as they would there).
            return func._op_dk(torch._C.DispatchKey.CompositeExplicitAutograd, *args, **kwargs)
        elif e is not None and not e["cuda"] and e["cia"]:
            out = func.decompose(*args, **kwargs)
            if out is not NotImplemented:
                return out
            msg = ti_error(_ti_operands(func, args, kwargs))
        elif name.startswith("aten::_foreach_"):
            msg = foreach_error(func, args, kwargs)
        else:
            msg = ti_error(_ti_operands(func, args, kwargs))
    if msg is None:
        # only exempt operands (0-dim CPU tensors) differ: the op runs, as on a GPU
        return NO_ERROR
    provenance.record_failure(msg, tensor_operands(func, args, kwargs), func.name())
    raise RuntimeError(msg)


def tensor_operands(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[tuple[str, Any]]:
    """(schema name, tensor) for every tensor argument of the op, ``tensors[1]`` in lists."""
    out: list[tuple[str, Any]] = []
    for a, v in _bound(func, args, kwargs):
        if isinstance(v, torch.Tensor):
            out.append((a.name, v))
        elif isinstance(v, (list, tuple)):
            out.extend(
                (f"{a.name}[{i}]", t) for i, t in enumerate(v) if isinstance(t, torch.Tensor)
            )
    return out
