"""Op-specific device checks of CUDA kernels that do not use the two generic texts.

Keyed by full overload name (``aten::masked_fill_.Scalar``), since overloads of one op can have
different kernels. Functional overloads without a CUDA kernel (``masked_fill.Scalar``) reach
these through their CompositeExplicitAutograd kernel, as on a real GPU.
"""

from __future__ import annotations

from typing import Any, Callable

import torch


def _dev(t: Any) -> torch.device:
    d = getattr(t, "_dev", None)
    return d if d is not None else t.device  # type: ignore[no-any-return]


def _masked_fill_(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    self, mask = args[0], args[1] if len(args) > 1 else kwargs["mask"]
    if _dev(self) != _dev(mask):
        return (
            "expected self and mask to be on the same device, but got mask on "
            f"{_dev(mask)} and self on {_dev(self)}"
        )
    return None


def _masked_scatter_(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    self, mask = args[0], args[1]
    if _dev(self) != _dev(mask):
        return (
            "expected self and mask to be on the same device, but got mask on "
            f"{_dev(mask)} and self on {_dev(self)}"
        )
    return None


RULES: dict[str, Callable[[tuple[Any, ...], dict[str, Any]], str | None]] = {
    "aten::masked_fill_.Scalar": _masked_fill_,
    "aten::masked_fill_.Tensor": _masked_fill_,
    "aten::masked_scatter_": _masked_scatter_,
}


def specific_error(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    name = func._schema.name
    if func._schema.overload_name:
        name += "." + func._schema.overload_name
    rule = RULES.get(name)
    return rule(args, kwargs) if rule is not None else None
