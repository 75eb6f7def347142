"""Provenance: where each tensor's device was decided, in the user's code.

Every tensor, on a virtual GPU or on the CPU, carries the *site* that put it where it is: the
innermost frame of the user's code (file, line, function) of

* the op that created it with no placed input (a factory: ``torch.arange(...)``,
  ``torch.tensor(...)``, a layer's parameters at module construction), or that moved it to a
  device none of its inputs is on (``.to()``, ``.cuda()``, ``.cpu()``, ``model.to(...)``,
  DataParallel's scatter and broadcast) — both recorded by the shim (C++), which observes
  every aten op;
* ``torch.load`` (each loaded tensor), ``register_buffer`` or assigning a tensor to a module
  attribute, a DataLoader handing out a batch, and ``optimizer.load_state_dict`` restoring an
  optimizer's state (the site also names the line that built the optimizer, its *owner*) —
  recorded here.

Ops propagate it: an op's output takes the site of its first input on the same device, so the
CPU tensor in ``x + pos`` names the ``torch.arange`` that made ``pos`` even after
``.unsqueeze(0)``, and a parameter's gradient names the ``model.to(...)`` that moved it. A site
recorded here keeps the one it replaced as its ``parent`` (a buffer remembers the factory that
built it). The site id lives in the tensor's C++ metadata, so views, ``detach`` and shallow
copies keep it, and propagation costs no Python.

Off with ``DEVFIX_VGPU_PROVENANCE=0`` (to measure its cost).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

#: site kinds (the shim's 0 and 1; the others are marked from Python)
CREATED, MOVED, LOADED, ATTRIBUTE, BUFFER, BATCH, STATE = range(7)
KIND_NAMES = {
    CREATED: "created",
    MOVED: "moved",
    LOADED: "loaded",
    ATTRIBUTE: "attribute",
    BUFFER: "buffer",
    BATCH: "batch",
    STATE: "state",
}

ENV = "DEVFIX_VGPU_PROVENANCE"
_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


@dataclass(frozen=True)
class Site:
    """Where a tensor's placement was decided."""

    id: int
    path: str
    line: int
    function: str
    #: the aten op that created or moved it (``aten::arange``), or what marked it
    #: (``torch.load``, ``Model.pe`` for an attribute, ``DataLoader``)
    op: str
    kind: int
    #: the site this one replaced (a buffer's factory, a moved tensor's previous site)
    parent: Site | None
    #: the library function the user's line called (``Module.to``, ``DataParallel.forward``)
    via: str | None
    #: for an optimizer's restored state: where that optimizer was built
    owner: Location | None = None

    @property
    def kind_name(self) -> str:
        return KIND_NAMES.get(self.kind, str(self.kind))

    def chain(self) -> list[Site]:
        """This site and its parents, newest first."""
        out: list[Site] = []
        site: Site | None = self
        while site is not None and len(out) < 16:
            out.append(site)
            site = site.parent
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "path": shown_path(self.path),
            "line": self.line,
            "function": self.function,
            "kind": self.kind_name,
            "op": self.op,
            "via": self.via,
            "parent": self.parent.to_json() if self.parent is not None else None,
        } | ({"owner": self.owner.to_json()} if self.owner is not None else {})


@dataclass(frozen=True)
class Location:
    """A line of the user's code (the innermost user frame of a call)."""

    path: str
    line: int
    function: str

    def to_json(self) -> dict[str, Any]:
        return {"path": shown_path(self.path), "line": self.line, "function": self.function}


def caller_location(built: object = None) -> Location | None:
    """The innermost frame of the user's code on this thread's stack; with ``built``, the
    innermost one that is not a method of that object (a class's own ``__init__`` calling
    ``super().__init__``)."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if classify(code.co_filename) == 1 and not (
            built is not None
            and code.co_argcount > 0
            and frame.f_locals.get(code.co_varnames[0]) is built
        ):
            return Location(code.co_filename, frame.f_lineno, code.co_name)
        frame = frame.f_back
    return None


def shown_path(path: str) -> str:
    """``path`` normalised and relative to the current folder (absolute on another drive)."""
    absolute = os.path.normpath(os.path.abspath(path))
    try:
        return os.path.relpath(absolute)
    except ValueError:
        return absolute


_fns: dict[str, Callable[..., Any]] | None = None
_sites: dict[int, Site] = {}
#: state sites (``optimizer.load_state_dict``) -> where the optimizer was built
_owners: dict[int, Location] = {}
_tls = threading.local()


def classify(filename: str) -> int:
    """0 library, 1 user code, 2 the runtime itself (asked once per file name by the shim)."""
    if not isinstance(filename, str) or filename.startswith("<"):
        return 0
    if os.path.abspath(filename).startswith(_RUNTIME_DIR):
        return 2
    from devfix.vgpu.diagnose import is_user_file

    return 1 if is_user_file(filename) else 0


def enabled() -> bool:
    return _fns is not None


def install() -> None:
    """Observe every op (the shim) and mark the sites ops cannot see (this module's patches)."""
    global _fns
    if _fns is not None or os.environ.get(ENV, "1") == "0":
        return
    from devfix.vgpu import _shim

    fns = _shim.provenance_functions()
    fns["prov_install"](classify)
    _fns = fns
    _install_patches()


def site_id(tensor: Any) -> int:
    if _fns is None:
        return -1
    try:
        return int(_fns["prov_of"](tensor._cdata))
    except (AttributeError, TypeError, RuntimeError):
        return -1


def site(site_id: int) -> Site | None:
    """The site with this id (with its parents), or None."""
    if _fns is None or site_id < 0:
        return None
    found = _sites.get(site_id)
    if found is None:
        path, line, function, op, kind, parent, via = _fns["prov_site"](site_id)
        found = _sites[site_id] = Site(
            site_id,
            str(path),
            int(line),
            str(function),
            str(op),
            int(kind),
            site(int(parent)),
            None if via is None else str(via),
            _owners.get(site_id),
        )
    return found


def site_of(tensor: Any) -> Site | None:
    """Where ``tensor``'s placement was decided, or None when it is not known."""
    return site(site_id(tensor))


def mark(tensor: Any, kind: int, op: str) -> None:
    """Record the caller's innermost user frame as ``tensor``'s site (the old one its parent)."""
    if _fns is None:
        return
    with contextlib.suppress(AttributeError, TypeError):  # not a tensor of this build
        _fns["prov_mark"](tensor._cdata, kind, op)


def _mark_tree(value: Any, kind: int, op: str, depth: int = 0) -> None:
    import torch

    if isinstance(value, torch.Tensor):
        mark(value, kind, op)
    elif depth < 3 and isinstance(value, (list, tuple)):
        for item in value[:64]:
            _mark_tree(item, kind, op, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for item in list(value.values())[:64]:
            _mark_tree(item, kind, op, depth + 1)


def loading() -> bool:
    """Whether this thread is inside ``torch.load`` (the runtime's wrapper)."""
    return bool(getattr(_tls, "loading", 0))


class LoadScope:
    """``with LoadScope():`` around ``torch.load``: rebuilt tensors are marked as loaded."""

    def __enter__(self) -> None:
        _tls.loading = getattr(_tls, "loading", 0) + 1

    def __exit__(self, *exc: Any) -> None:
        _tls.loading -= 1


def _install_patches() -> None:
    import torch
    import torch.nn as nn
    from torch.utils.data import dataloader

    module_setattr = nn.Module.__setattr__

    def __setattr__(self: nn.Module, name: str, value: Any) -> None:
        module_setattr(self, name, value)
        if (
            isinstance(value, torch.Tensor)
            and not isinstance(value, nn.Parameter)
            # DataParallel's replicas hold their broadcast parameters as plain attributes:
            # their site is the broadcast's
            and not self.__dict__.get("_is_replica", False)
        ):
            buffers = self.__dict__.get("_buffers")
            kind = BUFFER if buffers is not None and name in buffers else ATTRIBUTE
            mark(value, kind, f"{type(self).__name__}.{name}")

    register_buffer = nn.Module.register_buffer

    def _register_buffer(self: nn.Module, name: str, tensor: Any, persistent: bool = True) -> None:
        register_buffer(self, name, tensor, persistent)
        if isinstance(tensor, torch.Tensor):
            mark(tensor, BUFFER, f"{type(self).__name__}.{name}")

    next_batch = dataloader._BaseDataLoaderIter.__next__

    def __next__(self: Any) -> Any:
        batch = next_batch(self)
        _mark_tree(batch, BATCH, "DataLoader")
        return batch

    nn.Module.__setattr__ = __setattr__  # type: ignore[method-assign]
    nn.Module.register_buffer = _register_buffer  # type: ignore[method-assign]
    dataloader._BaseDataLoaderIter.__next__ = __next__  # type: ignore[method-assign]
    _patch_optimizers()


#: optimizer -> the line that built it
_built_at: weakref.WeakKeyDictionary[Any, Location] = weakref.WeakKeyDictionary()


def _patch_optimizers() -> None:
    """Mark an optimizer's restored state: ``Optimizer.load_state_dict`` casts each saved
    tensor to its parameter's device *then*, and nothing moves it later."""
    from torch.optim import Optimizer

    init = Optimizer.__init__
    load_state_dict = Optimizer.load_state_dict

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        with contextlib.suppress(TypeError):
            location = caller_location(self)
            if location is not None:
                _built_at.setdefault(self, location)

    def _load_state_dict(self: Any, state_dict: Any) -> None:
        load_state_dict(self, state_dict)
        try:
            owner = _built_at.get(self)
            op = f"{type(self).__name__}.load_state_dict"
            for per_param in list(self.state.values())[:4096]:
                if isinstance(per_param, dict):
                    _mark_state(list(per_param.values()), op, owner)
        except Exception:  # a diagnosis aid must never change what the script sees
            return

    Optimizer.__init__ = __init__  # type: ignore[method-assign]
    Optimizer.load_state_dict = _load_state_dict  # type: ignore[method-assign]


def _mark_state(values: list[Any], op: str, owner: Location | None) -> None:
    import torch

    for value in values:
        if isinstance(value, torch.Tensor):
            mark(value, STATE, op)
            if owner is not None:
                found = site_id(value)
                if found >= 0:
                    _owners.setdefault(found, owner)


# --------------------------------------------------------------------------------------------
# The operands of a device error, recorded where the runtime raises it.


@dataclass(frozen=True)
class Operand:
    """A tensor involved in a device error, described when the error was raised."""

    #: how the op names it (``other``, ``index``, ``tensors[1]``) or the local variable
    label: str
    device: str
    shape: tuple[int, ...]
    site: Site | None
    #: the op that raised (``aten::add.Tensor``), or the function whose locals held it
    where: str = ""
    #: a weak reference to the tensor itself, while it lives (never serialised)
    ref: Any = field(default=None, compare=False, repr=False)

    def tensor(self) -> Any:
        """The tensor, if it is still alive (an op's temporaries are gone after the error)."""
        return self.ref() if self.ref is not None else None

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "device": self.device,
            "shape": list(self.shape),
            "where": self.where,
            "site": self.site.to_json() if self.site is not None else None,
        }


def describe(label: str, tensor: Any, where: str = "") -> Operand:
    try:
        ref = weakref.ref(tensor)
    except TypeError:
        ref = None
    return Operand(
        label, str(tensor.device), tuple(int(n) for n in tensor.shape), site_of(tensor), where, ref
    )


_FAILURES: deque[tuple[str, tuple[Operand, ...]]] = deque(maxlen=32)
_failures_lock = threading.Lock()


def record_failure(message: str, operands: list[tuple[str, Any]], where: str = "") -> None:
    """Remember the tensors of a device error about to be raised with ``message``.

    Called on any thread (DataParallel replicas raise in theirs); the diagnosis finds them by
    the error's text. Never raises.
    """
    try:
        described = tuple(describe(label, t, where) for label, t in operands)
    except Exception:  # a diagnosis aid must never change the error the script sees
        return
    first = message.strip().splitlines()[0] if message.strip() else message
    with _failures_lock:
        _FAILURES.append((first, described))


def failure_for(text: str) -> tuple[Operand, ...] | None:
    """The operands recorded for the newest device error whose message occurs in ``text``."""
    with _failures_lock:
        entries = list(_FAILURES)
    for first, operands in reversed(entries):
        if first and first in text:
            return operands
    return None
