"""The post-mortem printed after a device-mismatch death."""

from __future__ import annotations

import sys
import types

from devfix.vgpu import diagnose


def test_devices_in_both_formats() -> None:
    assert diagnose.devices_in("... found at least two devices, cuda:1 and cpu!") == [
        "cuda:1",
        "cpu",
    ]
    assert diagnose.devices_in(
        "Expected all tensors to be on the same device, but got mat1 is on cpu, different from "
        "other tensors on cuda:1 (when checking argument in method wrapper_CUDA_addmm)"
    ) == ["cpu", "cuda:1"]


def test_user_frames_skip_libraries(tmp_path) -> None:
    import json

    assert not diagnose.is_user_file(json.__file__)
    assert not diagnose.is_user_file(diagnose.__file__)
    assert diagnose.is_user_file(str(tmp_path / "train.py"))
    assert not diagnose.is_user_file("<string>")


def test_report_with_findings(tmp_path, monkeypatch) -> None:
    src = tmp_path / "train.py"
    src.write_text("import torch\n\ndef f(x):\n    y = torch.ones(3)\n    return x + y\n")

    class Finding:
        def __init__(self, line: int) -> None:
            self.line, self.col, self.code = line, 8, "DF101"
            self.name, self.message = "tensor-factory-without-device", "no device"
            self.fix_title, self.applicability = "Add device=x.device", "unsafe"

    engine = types.ModuleType("devfix.engine")
    engine.check_source = lambda text, path: [Finding(4), Finding(1)]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "devfix.engine", engine)
    frame = diagnose.UserFrame(str(src), 5, "return x + y")
    text = diagnose.report(
        "RuntimeError: Expected all tensors to be on the same device, but "
        "found at least two devices, cuda:0 and cpu!",
        frame,
    )
    assert f"  at {src}:5\n    return x + y\n" in text
    assert "devices involved: cuda:0, cpu" in text
    assert "devfix findings in function f():" in text
    assert f"{src}:4:8: DF101 no device [fix: Add device=x.device]" in text
    assert f"{src}:1:8" not in text  # outside the function
    assert text.rstrip().endswith(f"to fix: devfix apply --unsafe-fixes {src}")


def test_report_without_engine(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "devfix.engine", None)
    frame = diagnose.UserFrame(str(tmp_path / "t.py"), 1, "x")
    text = diagnose.report(
        "Expected all tensors to be on the same device, but found at least "
        "two devices, cuda:0 and cpu!",
        frame,
    )
    assert "devices involved" in text and "devfix findings" not in text


def test_no_report_for_other_errors() -> None:
    assert diagnose.report_for_exception(ValueError("boom"), "x.py") == ""
