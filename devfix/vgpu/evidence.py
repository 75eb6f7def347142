"""What a repair needs to know from the run itself, recorded in the process that died.

When a device error is diagnosed, the frames of the user's code are still alive in the
traceback. For each of them (innermost first) this module records where it was (its line and
the span of the expression it was running, from Python's own traceback positions) and which
of its names hold something a fix could name:

* a tensor: its device, and whether it *is* the root operand (``"root"``: the very object) or
  shares its provenance site and device (``"root-site"``: a view or a result computed from it),
  or likewise for the operand on the device the root must go to (``"other"``,
  ``"other-site"``);
* a ``torch.device`` (or a device string): the device it means (``cuda`` is the current one);
* a module: for each device, the first parameter or buffer on it (``model.second.weight``),
  and the paths of the parameters or buffers that are the operands themselves;
* a dict, list or tuple whose values hold the root (``model(**inputs)``).

:func:`collect` gives it as JSON-ready data (the ``evidence`` key of the diagnosis);
:mod:`devfix.vgpu.synthesis` builds the edit from it and the source, in the parent.
Nothing here changes what the script sees, and nothing here may raise.
"""

from __future__ import annotations

import linecache
import re
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from devfix.vgpu import provenance
from devfix.vgpu.provenance import Operand, shown_path

#: at most this many frames, names per frame, and values looked into per container or module
MAX_FRAMES = 16
MAX_NAMES = 256
MAX_ITEMS = 64
MAX_MEMBERS = 10_000

_DEVICE_TEXT = re.compile(r"^(cpu|cuda(:\d+)?|mps)$")


class _Roles:
    """Which tensors are the root operand and the operand on the device it must go to."""

    def __init__(self, root: Operand, other: Operand) -> None:
        self.root = root.tensor()
        self.root_site = root.site.id if root.site is not None else None
        self.root_device = root.device
        self.other = other.tensor()
        self.other_site = other.site.id if other.site is not None else None
        self.needed = other.device

    def of(self, tensor: Any) -> str | None:
        if self.root is not None and tensor is self.root:
            return "root"
        if self.other is not None and tensor is self.other:
            return "other"
        device = str(tensor.device)
        site = provenance.site_id(tensor)
        if site >= 0 and site == self.root_site and device == self.root_device:
            return "root-site"
        if site >= 0 and site == self.other_site and device == self.needed:
            return "other-site"
        return None


def _device_of(value: Any) -> str | None:
    """The device a ``torch.device`` or a device string means; ``cuda`` is the current GPU."""
    import torch

    try:
        if isinstance(value, str):
            if not _DEVICE_TEXT.match(value):
                return None
            value = torch.device(value)
        if not isinstance(value, torch.device):
            return None
        if value.type == "cuda" and value.index is None:
            return f"cuda:{torch.cuda.current_device()}"
        return str(value)
    except Exception:
        return None


def _module(value: Any, roles: _Roles) -> dict[str, Any]:
    devices: dict[str, str] = {}
    holds: dict[str, str] = {}
    members = 0
    for getter in (value.named_parameters, value.named_buffers):
        for path, tensor in getter():
            members += 1
            if members > MAX_MEMBERS:
                break
            if tensor is None:
                continue
            devices.setdefault(str(tensor.device), path)
            role = roles.of(tensor)
            if role is not None:
                holds.setdefault(role, path)
    return {"kind": "module", "devices": devices, "holds": holds}


def _container(value: Any, roles: _Roles) -> dict[str, Any] | None:
    import torch

    items = list(value.values()) if isinstance(value, dict) else list(value)
    tensors = 0
    held: str | None = None
    for item in items[:MAX_ITEMS]:
        if isinstance(item, torch.Tensor):
            tensors += 1
            role = roles.of(item)
            if role in ("root", "root-site") and held != "root":
                held = role
    if held is None:
        return None
    return {
        "kind": "dict" if isinstance(value, dict) else "sequence",
        "holds": held,
        "all_tensors": tensors == len(items) and len(items) <= MAX_ITEMS,
        "string_keys": isinstance(value, dict) and all(isinstance(k, str) for k in value),
    }


def describe_value(value: Any, roles: _Roles) -> dict[str, Any] | None:
    """What a fix could use of one value, or None (nothing of interest)."""
    import torch
    from torch import nn

    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "device": str(value.device), "holds": roles.of(value)}
    if isinstance(value, (torch.device, str)):
        device = _device_of(value)
        return {"kind": "device", "device": device} if device is not None else None
    if isinstance(value, nn.Module):
        return _module(value, roles)
    if isinstance(value, (dict, list, tuple)):
        return _container(value, roles)
    return None


def _char_col(path: str, line: int | None, col: int | None) -> int | None:
    """A traceback column (UTF-8 bytes) as characters of the line."""
    if line is None or col is None:
        return None
    text = linecache.getline(path, line)
    return len(text.encode("utf-8")[:col].decode("utf-8", errors="replace"))


def _last_line(code: Any) -> int:
    lines = [line for _, _, line in code.co_lines() if line] if hasattr(code, "co_lines") else []
    return int(max(lines, default=code.co_firstlineno))


def _frame(frame: Any, summary: traceback.FrameSummary, roles: _Roles) -> dict[str, Any]:
    from torch import nn

    code = frame.f_code
    path = code.co_filename
    count = code.co_argcount + code.co_kwonlyargcount
    params = list(code.co_varnames[:count])
    module_level = code.co_name == "<module>"
    names: dict[str, Any] = {}
    scope: list[tuple[str, Any, bool]] = [(n, v, module_level) for n, v in frame.f_locals.items()]
    if not module_level:
        scope += [(n, frame.f_globals[n], True) for n in code.co_names if n in frame.f_globals]
    for name, value, is_global in scope:
        if len(names) >= MAX_NAMES or name in names or name.startswith("__"):
            continue
        try:
            described = describe_value(value, roles)
        except Exception:
            described = None
        if described is not None:
            described["global"] = is_global
            names[name] = described
    first = params[0] if params else None
    qualname = getattr(code, "co_qualname", None)
    if qualname is not None:  # a method: defined in a class (``Model.forward``)
        method = "." in qualname and qualname.rsplit(".", 2)[-2] != "<locals>"
    else:
        method = first == "self"
    end_line = getattr(summary, "end_lineno", None)
    return {
        "path": shown_path(path),
        "line": frame.f_lineno if summary.lineno is None else summary.lineno,
        "col": _char_col(path, summary.lineno, getattr(summary, "colno", None)),
        "end_line": end_line,
        "end_col": _char_col(path, end_line, getattr(summary, "end_colno", None)),
        "function": code.co_name,
        "qualname": qualname or code.co_name,
        "first_line": code.co_firstlineno,
        "last_line": _last_line(code),
        "params": params,
        "module_method": method
        and first is not None
        and isinstance(frame.f_locals.get(first), nn.Module),
        "names": names,
    }


def collect(exc: BaseException, operands: Sequence[tuple[Operand, bool]]) -> dict[str, Any] | None:
    """The evidence for the diagnosed error, or None when there is none to give: no root, no
    operand on another device, or frames that are not alive (a DataParallel replica's error
    comes back as text)."""
    try:
        return _collect(exc, operands)
    except Exception:  # a diagnosis aid must never change the error the script sees
        return None


def _collect(exc: BaseException, operands: Sequence[tuple[Operand, bool]]) -> dict[str, Any] | None:
    from devfix.vgpu.diagnose import _FILE_RE, is_user_file

    root = next((op for op, is_root in operands if is_root), None)
    if root is None:
        return None
    other = next((op for op, _ in operands if op.device != root.device), None)
    if other is None:
        return None
    if any(is_user_file(m.group(1)) for m in _FILE_RE.finditer(str(exc))):
        return None  # the frames that raised ran in another thread and are gone
    roles = _Roles(root, other)
    tracebacks = []
    tb = exc.__traceback__
    while tb is not None:
        tracebacks.append(tb)
        tb = tb.tb_next
    summaries = traceback.extract_tb(exc.__traceback__)
    frames: list[dict[str, Any]] = []
    for tb, summary in reversed(list(zip(tracebacks, summaries))):
        if not is_user_file(tb.tb_frame.f_code.co_filename):
            continue
        frames.append(_frame(tb.tb_frame, summary, roles))
        if len(frames) >= MAX_FRAMES:
            break
    if not frames:
        return None
    return {
        "root_device": root.device,
        "needed": other.device,
        "python": list(sys.version_info[:2]),
        "frames": frames,
    }
