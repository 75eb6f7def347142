"""codemods.amp_device_type_hard_coded.facts: AMP calls hard-coded to CUDA, the device type they
must use, and hand-made device types."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.amp_device_type_hard_coded.facts import AmpObjects
from devfix.codemods.analysis.names import code_of
from tests.analysis._parsed import parse


def test_amp_device_types() -> None:
    parsed = parse(
        """
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        model.to(device)
        scaler = torch.cuda.amp.GradScaler()
        """
    )
    scaler = parsed.one(cst.Call, "torch.cuda.amp.GradScaler()")
    amp = parsed.facts.own(AmpObjects).amp_device(scaler)
    assert amp is not None and amp.expression == "torch.device(device).type"

    parsed = parse(
        """
        import torch

        dev = torch.device(args.device)
        model.to(dev)
        kind = "cuda" if dev.type == "cuda" else "cpu"
        scaler = torch.cuda.amp.GradScaler()
        """
    )
    objects = parsed.facts.own(AmpObjects)
    scaler = parsed.one(cst.Call, "torch.cuda.amp.GradScaler()")
    amp = objects.amp_device(scaler)
    assert amp is not None and amp.expression == "kind"
    hand_made = parsed.all(cst.IfExp)[0]
    assert objects.hand_made_device_type(hand_made) == "dev"
    assert objects.device_type_of("dev", scaler) == "dev.type"

    parsed = parse("import torch\nmodel.cuda()\nscaler = torch.cuda.amp.GradScaler()\n")
    scaler = parsed.one(cst.Call, "torch.cuda.amp.GradScaler()")
    amp = parsed.facts.own(AmpObjects).amp_device(scaler)
    assert amp is not None and amp.cuda_only and amp.expression is None


def test_cuda_amp_calls_read_from_their_arguments() -> None:
    parsed = parse(
        """
        import torch
        a = torch.autocast("cuda")
        b = torch.autocast("cpu")
        c = torch.autocast(*spec)
        d = torch.cuda.amp.autocast(False, torch.float16)
        e = torch.cuda.amp.autocast(True, None, True, 4)
        f = torch.amp.GradScaler(enabled=use_amp)
        g = torch.cuda.amp.GradScaler(2.0**16, 2.0, 0.5, 2000, True)
        h = torch.cpu.amp.autocast()
        """
    )
    objects = parsed.facts.own(AmpObjects)

    def read(code: str) -> tuple[bool, bool, str | None, str | None, bool] | None:
        call = objects.cuda_amp_call(parsed.one(cst.Call, code))
        if call is None:
            return None
        device = code_of(call.device.value) if call.device else None
        enabled = code_of(call.enabled) if call.enabled is not None else None
        return call.scaler, call.deprecated, device, enabled, call.by_position

    assert read('torch.autocast("cuda")') == (False, False, '"cuda"', None, False)
    assert read('torch.autocast("cpu")') is None
    assert read("torch.autocast(*spec)") is None  # its device type is not in sight
    assert read("torch.cuda.amp.autocast(False, torch.float16)") == (
        False,
        True,
        None,
        "False",
        False,
    )
    assert read("torch.cuda.amp.autocast(True, None, True, 4)")[-1] is True  # type: ignore[index]
    assert read("torch.amp.GradScaler(enabled=use_amp)") == (True, False, None, "use_amp", False)
    scaler = read("torch.cuda.amp.GradScaler(2.0**16, 2.0, 0.5, 2000, True)")
    assert scaler is not None and scaler[-1] is True  # `enabled` by position
    assert read("torch.cpu.amp.autocast()") is None


def test_where_amp_objects_run_and_what_decides_their_device_type() -> None:
    parsed = parse(
        """
        import torch
        import torch.nn as nn
        from contextlib import nullcontext

        class Net(nn.Module):
            def forward(self, x):
                with torch.autocast("cuda", enabled=False):
                    return x

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        device_type = "cuda" if "cuda" in str(device) else "cpu"
        ctx = nullcontext() if device_type == "cpu" else torch.cuda.amp.autocast()
        if device.type == "cuda":
            scaler = torch.cuda.amp.GradScaler()
        if device.type != "cuda":
            other = torch.amp.GradScaler("cuda")
        model.to(device)
        """
    )
    objects = parsed.facts.own(AmpObjects)
    in_model = parsed.one(cst.Call, 'torch.autocast("cuda", enabled=False)')
    assert not objects.in_training_code(in_model)
    scaler = parsed.one(cst.Call, "torch.cuda.amp.GradScaler()")
    assert objects.in_training_code(scaler)
    assert objects.under_cuda_test(scaler)
    assert not objects.under_cuda_test(parsed.one(cst.Call, 'torch.amp.GradScaler("cuda")'))
    amp = objects.amp_device_for(scaler, None)
    assert amp is not None and amp.cuda_only  # it runs on CUDA only: the deprecation alone
    hand_made = parsed.one(cst.IfExp, '"cuda" if "cuda" in str(device) else "cpu"')
    assert objects.amp_uses_hand_made_type(hand_made)  # it chooses the autocast


def test_a_hand_made_device_type_that_no_amp_object_reads() -> None:
    parsed = parse(
        """
        import torch
        device_type = "cuda" if "cuda" in str(device) else "cpu"
        print(device_type)
        """
    )
    hand_made = parsed.one(cst.IfExp, '"cuda" if "cuda" in str(device) else "cpu"')
    assert not parsed.facts.own(AmpObjects).amp_uses_hand_made_type(hand_made)
