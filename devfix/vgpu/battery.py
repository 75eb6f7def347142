"""A table-driven battery of device-mixing ops and the exact text CUDA raises for each.

Run under the virtual GPUs by the unit tests, and on a real GPU by
``bench/gpu_crosscheck.py`` (``python bench/gpu_crosscheck.py --battery``), which prints any
message that differs. Each case is a snippet run with ``torch``, ``nn``, ``F`` and ``d0``/``d1``
(``cuda:0``/``cuda:1``) in scope; it either raises (``expect`` is the exception text, compared
exactly up to the first newline) or evaluates ``check`` to True.
"""

from __future__ import annotations

import json
import traceback
from dataclasses import asdict, dataclass
from typing import Any

_TI = "Expected all tensors to be on the same device, but found at least two devices, "
_CG = "Expected all tensors to be on the same device, but got "


def _cg(arg: str, dev: str, common: str, method: str) -> str:
    return (
        f"{_CG}{arg} is on {dev}, different from other tensors on {common} "
        f"(when checking argument in method {method})"
    )


@dataclass(frozen=True)
class Case:
    name: str
    code: str
    expect: str | None = None  # the exception's first line, or None: must not raise
    exc: str = "RuntimeError"
    check: str | None = None  # an expression that must be True after `code`
    gpus: int = 1


CASES: list[Case] = [
    Case("ti_cpu_second", "torch.ones(2, device=d0) + torch.ones(2)", _TI + "cuda:0 and cpu!"),
    Case("ti_cpu_first", "torch.ones(2) + torch.ones(2, device=d0)", _TI + "cuda:0 and cpu!"),
    Case(
        "ti_cpu_scalar_ok",
        "r = torch.ones(2, device=d0) * torch.tensor(2.)",
        check="r.device == torch.device(d0) and r.tolist() == [2.0, 2.0]",
    ),
    Case(
        "ti_cpu_scalar_first_ok",
        "r = torch.tensor(3.) - torch.ones(2, device=d0)",
        check="r.device == torch.device(d0)",
    ),
    Case(
        "ti_two_gpus",
        "torch.ones(2, device=d1) + torch.ones(2, device=d0)",
        _TI + "cuda:1 and cuda:0!",
        gpus=2,
    ),
    Case(
        "ti_inplace_cpu_self",
        "torch.zeros(2).add_(torch.ones(2, device=d0))",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "ti_mul_out_of_place_1dim_cpu",
        "torch.ones(3, device=d0) * torch.ones(1)",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "mm",
        "torch.ones(2, 2, device=d0) @ torch.ones(2, 2)",
        _cg("mat2", "cpu", "cuda:0", "wrapper_CUDA_mm"),
    ),
    Case(
        "mm_cpu_first",
        "torch.ones(2, 2) @ torch.ones(2, 2, device=d0)",
        _cg("mat2", "cuda:0", "cpu", "wrapper_CUDA_mm"),
    ),
    Case(
        "bmm",
        "torch.ones(1, 2, 2, device=d0).bmm(torch.ones(1, 2, 2))",
        _cg("mat2", "cpu", "cuda:0", "wrapper_CUDA_bmm"),
    ),
    Case(
        "linear_cpu_input",
        "nn.Linear(4, 3).to(d0)(torch.randn(2, 4))",
        _cg("mat1", "cpu", "cuda:0", "wrapper_CUDA_addmm"),
    ),
    Case(
        "linear_0_scalar_is_not_exempt",
        "torch.mm(torch.ones(1, 1, device=d0), torch.ones(1, 1))",
        _cg("mat2", "cpu", "cuda:0", "wrapper_CUDA_mm"),
    ),
    Case(
        "embedding_cpu_ids",
        "nn.Embedding(10, 4).to(d0)(torch.tensor([1, 2]))",
        _cg("index", "cpu", "cuda:0", "wrapper_CUDA__index_select"),
    ),
    Case(
        "index_select",
        "torch.ones(3, device=d0).index_select(0, torch.tensor([0]))",
        _cg("index", "cpu", "cuda:0", "wrapper_CUDA__index_select"),
    ),
    Case(
        "cat",
        "torch.cat([torch.ones(2, device=d0), torch.ones(2)])",
        _cg("tensors", "cpu", "cuda:0", "wrapper_CUDA_cat"),
    ),
    Case(
        "stack",
        "torch.stack([torch.ones(2, device=d0), torch.ones(2)])",
        _cg("tensors", "cpu", "cuda:0", "wrapper_CUDA_cat"),
    ),
    Case(
        "cross_entropy_cpu_target",
        "F.cross_entropy(torch.randn(4, 3, device=d0), torch.tensor([0, 1, 2, 0]))",
        _cg("target", "cpu", "cuda:0", "wrapper_CUDA_nll_loss_forward"),
    ),
    Case(
        "mse_loss_cpu_target",
        "F.mse_loss(torch.randn(4, device=d0), torch.randn(4))",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "bce_logits_cpu_labels",
        "F.binary_cross_entropy_with_logits(torch.randn(4, device=d0), torch.ones(4))",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "bce_logits_cpu_pos_weight",
        "nn.BCEWithLogitsLoss(pos_weight=torch.tensor([3.]))(torch.randn(4, 1, device=d0), "
        "torch.ones(4, 1, device=d0))",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "masked_fill__cpu_mask",
        "torch.zeros(3, device=d0).masked_fill_(torch.tensor([True, False, True]), 1.0)",
        "expected self and mask to be on the same device, but got mask on cpu and self on cuda:0",
    ),
    Case(
        "masked_fill_Scalar_functional_cpu_mask",
        "torch.zeros(3, device=d0).masked_fill(torch.tensor([True, False, True]), 1.0)",
        "expected self and mask to be on the same device, but got mask on cpu and self on cuda:0",
    ),
    Case(
        "masked_fill_0dim_cpu_value_ok",
        "r = torch.zeros(3, device=d0).masked_fill("
        "torch.tensor([True, False, True], device=d0), torch.tensor(2.))",
        check="r.tolist() == [2.0, 0.0, 2.0] and r.is_cuda",
    ),
    Case(
        "lstm_cpu_h0",
        "nn.LSTM(4, 5).to(d0)(torch.randn(3, 2, 4, device=d0), "
        "(torch.zeros(1, 2, 5), torch.zeros(1, 2, 5)))",
        "Input and hidden tensors are not at the same device, found input tensor at cuda:0 "
        "and hidden tensor at cpu",
    ),
    Case(
        "gru_cpu_input",
        "nn.GRU(4, 5).to(d0)(torch.randn(3, 2, 4))",
        "Input and parameter tensors are not at the same device, found input tensor at cpu "
        "and parameter tensor at cuda:0",
    ),
    Case(
        "pack_padded_batch_sizes_on_cpu",
        "p = nn.utils.rnn.pack_padded_sequence(torch.randn(5, 3, 2, device=d0), "
        "torch.tensor([5, 3, 2]))",
        check="p.batch_sizes.device.type == 'cpu' and p.data.is_cuda",
    ),
    Case(
        "lstm_packed_runs",
        "p = nn.utils.rnn.pack_padded_sequence(torch.randn(5, 3, 2, device=d0), [5, 3, 2]); "
        "o, _ = nn.LSTM(2, 4).to(d0)(p); "
        "y, n = nn.utils.rnn.pad_packed_sequence(o)",
        check="y.is_cuda and n.device.type == 'cpu'",
    ),
    Case(
        "conv2d_cpu_input_slow2d",
        "nn.Conv2d(3, 4, 3).to(d0)(torch.randn(1, 3, 8, 8))",
        _cg("weight", "cuda:0", "cpu", "wrapper_CUDA___slow_conv2d_forward"),
    ),
    Case(
        "conv2d_cpu_input_mkldnn",
        "nn.Conv2d(3, 4, 3).to(d0)(torch.randn(2, 3, 8, 8))",
        "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the "
        "same or input should be a MKLDNN tensor and weight is a dense tensor",
    ),
    Case(
        "index_cpu_indices_ok",
        "r = torch.arange(4., device=d0)[torch.tensor([1, 3])]",
        check="r.is_cuda and r.tolist() == [1.0, 3.0]",
    ),
    Case(
        "index_other_gpu_indices",
        "torch.arange(4., device=d0)[torch.tensor([1, 3], device=d1)]",
        "indices should be either on cpu or on the same device as the indexed tensor (cuda:0)",
        gpus=2,
    ),
    Case(
        "where_cpu_scalar_ok",
        "x = torch.arange(3., device=d0); r = torch.where(x > 0, x, torch.tensor(0.))",
        check="r.is_cuda",
    ),
    Case(
        "adam_foreach_cpu_state",
        "m = nn.Linear(2, 2); o = torch.optim.Adam(m.parameters()); "
        "m(torch.randn(1, 2)).sum().backward(); o.step(); sd = o.state_dict(); "
        "o2 = torch.optim.Adam(m.parameters()); o2.load_state_dict(sd); m.to(d0); "
        "m(torch.randn(1, 2, device=d0)).sum().backward(); o2.step()",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "numpy_of_cuda_tensor",
        "torch.ones(2, device=d0).numpy()",
        "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
        "tensor to host memory first.",
        exc="TypeError",
    ),
    Case(
        "device_out_of_range",
        "torch.zeros(2, device='cuda:5')",
        "CUDA error: invalid device ordinal",
    ),
    Case("to_out_of_range", "torch.zeros(2).to('cuda:7')", "CUDA error: invalid device ordinal"),
    Case(
        "dataparallel_cpu_module",
        "nn.DataParallel(nn.Linear(2, 2))(torch.randn(4, 2, device=d0))",
        "module must have its parameters and buffers on device cuda:0 (device_ids[0]) but "
        "found one of them on device: cpu",
    ),
]


def run_case(case: Case, d0: str = "cuda:0", d1: str = "cuda:1") -> dict[str, Any]:
    """Run one case in this process (torch must already see the GPUs)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    ns: dict[str, Any] = {"torch": torch, "nn": nn, "F": F, "d0": d0, "d1": d1}
    got: str | None = None
    exc: str | None = None
    ok = True
    try:
        exec(compile(case.code, f"<battery {case.name}>", "exec"), ns)
        if case.check is not None:
            ok = bool(eval(case.check, ns))
    except Exception as e:
        got = str(e).split("\n", 1)[0]
        exc = type(e).__name__
        if case.expect is None:
            got += " | " + traceback.format_exc(limit=-3).replace("\n", " / ")
    passed = got is None and ok if case.expect is None else got == case.expect and exc == case.exc
    return {"case": asdict(case), "got": got, "exc": exc, "passed": passed}


def run_all(max_gpus: int = 8) -> list[dict[str, Any]]:
    return [run_case(c) for c in CASES if c.gpus <= max_gpus]


if __name__ == "__main__":
    print(json.dumps(run_all()))
