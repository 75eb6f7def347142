"""Python kernels for what CUDA kernels do and the CPU kernels lack.

* The RNN cells in ``aten/src/ATen/native/RNN.cpp`` call the fused ``_thnn_fused_lstm_cell`` /
  ``_thnn_fused_gru_cell`` for CUDA inputs; those have no CPU kernel, so they are computed here
  (forward and backward) on the CPU tensors.
* ``_softmax`` / ``_log_softmax`` with ``half_to_float`` (what ``torch.autocast("cuda")`` asks
  for a float16 softmax, and ``F.softmax(half, dtype=torch.float32)``): the CUDA kernel reads
  half and computes and writes float; the CPU kernel refuses. The input is upcast exactly and
  the float kernel runs, so only the reduction order can differ from a GPU (last bits).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

aten = torch.ops.aten


def _unwrap(x: Any) -> tuple[Any, torch.device | None]:
    e = getattr(x, "_elem", None)
    if e is not None:
        return e, x._dev
    return x, None


def _wrap(dev: torch.device, *ts: Any) -> tuple[Any, ...]:
    from devfix.vgpu._core import VTensor

    return tuple(None if t is None else VTensor(t, dev) for t in ts)


def _lstm_cell(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    ig, dev = _unwrap(args[0])
    hg = _unwrap(args[1])[0]
    cx = _unwrap(args[2])[0]
    bi = _unwrap(args[3])[0] if len(args) > 3 else kwargs.get("input_bias")
    bh = _unwrap(args[4])[0] if len(args) > 4 else kwargs.get("hidden_bias")
    bi = _unwrap(bi)[0]
    bh = _unwrap(bh)[0]
    gates = ig + hg
    if bi is not None:
        gates = gates + bi
    if bh is not None:
        gates = gates + bh
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    ws = torch.cat([i, f, g, o], 1)
    assert dev is not None
    return _wrap(dev, hy, cy, ws)


def _lstm_cell_backward(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    # (grad_hy?, grad_cy?, cx, cy, workspace, has_bias)
    ghy, d1 = _unwrap(args[0])
    gcy, d2 = _unwrap(args[1])
    cx, d3 = _unwrap(args[2])
    cy = _unwrap(args[3])[0]
    ws = _unwrap(args[4])[0]
    has_bias = bool(args[5])
    dev = d1 or d2 or d3
    assert dev is not None
    i, f, g, o = ws.chunk(4, 1)
    tcy = cy.tanh()
    if ghy is None:
        ghy = torch.zeros_like(cy)
    if gcy is None:
        gcy = torch.zeros_like(cy)
    go = ghy * tcy * o * (1 - o)
    gc = gcy + ghy * o * (1 - tcy * tcy)
    gi = gc * g * i * (1 - i)
    gf = gc * cx * f * (1 - f)
    gg = gc * i * (1 - g * g)
    grad_gates = torch.cat([gi, gf, gg, go], 1)
    grad_cx = gc * f
    grad_bias = grad_gates.sum(0) if has_bias else None
    return _wrap(dev, grad_gates, grad_cx, grad_bias)


def _gru_cell(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    ig, dev = _unwrap(args[0])
    hg = _unwrap(args[1])[0]
    hx = _unwrap(args[2])[0]
    bi = _unwrap(args[3] if len(args) > 3 else kwargs.get("input_bias"))[0]
    bh = _unwrap(args[4] if len(args) > 4 else kwargs.get("hidden_bias"))[0]
    if bi is not None:
        ig = ig + bi
    if bh is not None:
        hg = hg + bh
    ri, zi, ni = ig.chunk(3, 1)
    rh, zh, nh = hg.chunk(3, 1)
    r = (ri + rh).sigmoid()
    z = (zi + zh).sigmoid()
    n = (ni + r * nh).tanh()
    hy = n + z * (hx - n)
    ws = torch.cat([r, z, n, hx, nh], 1)
    assert dev is not None
    return _wrap(dev, hy, ws)


def _gru_cell_backward(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    # (grad_hy, workspace, has_bias)
    ghy, dev = _unwrap(args[0])
    ws = _unwrap(args[1])[0]
    has_bias = bool(args[2])
    assert dev is not None
    r, z, n, hx, nh = ws.chunk(5, 1)
    gn = ghy * (1 - z)
    gz = ghy * (hx - n)
    ghx = ghy * z
    gn_pre = gn * (1 - n * n)
    gr_pre = gn_pre * nh * r * (1 - r)
    gz_pre = gz * z * (1 - z)
    g_in = torch.cat([gr_pre, gz_pre, gn_pre], 1)
    g_hid = torch.cat([gr_pre, gz_pre, gn_pre * r], 1)
    gbi = g_in.sum(0) if has_bias else None
    gbh = g_hid.sum(0) if has_bias else None
    return _wrap(dev, g_in, g_hid, ghx, gbi, gbh)


def _softmax_half_to_float(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    from devfix.vgpu._core import NOT_HANDLED, VTensor, set_alloc_device

    x, dim, half_to_float = args[0], args[1], args[2]
    if not half_to_float or type(x) is not VTensor:
        return NOT_HANDLED
    prev = set_alloc_device(x._dev.index)
    try:
        out = func(x._elem.float(), dim, False)
    finally:
        set_alloc_device(prev)
    return VTensor(out, x._dev)


def _softmax_backward_to_half(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    # (grad_output, output, dim, input_dtype): float grads of a half_to_float softmax
    from devfix.vgpu._core import NOT_HANDLED, VTensor, set_alloc_device

    grad, output, dim, input_dtype = args[0], args[1], args[2], args[3]
    if (
        type(grad) is not VTensor
        or type(output) is not VTensor
        or grad._dev is not output._dev
        or grad.dtype == input_dtype
    ):
        return NOT_HANDLED
    prev = set_alloc_device(grad._dev.index)
    try:
        out = func(grad._elem, output._elem, dim, grad.dtype).to(input_dtype)
    finally:
        set_alloc_device(prev)
    return VTensor(out, grad._dev)


def register(special: dict[Any, Callable[..., Any]]) -> None:
    special[aten._thnn_fused_lstm_cell.default] = _lstm_cell
    special[aten._thnn_fused_lstm_cell_backward_impl.default] = _lstm_cell_backward
    special[aten._thnn_fused_gru_cell.default] = _gru_cell
    special[aten._thnn_fused_gru_cell_backward.default] = _gru_cell_backward
    special[aten._softmax.default] = _softmax_half_to_float
    special[aten._log_softmax.default] = _softmax_half_to_float
    special[aten._softmax_backward_data.default] = _softmax_backward_to_half
    special[aten._log_softmax_backward_data.default] = _softmax_backward_to_half
