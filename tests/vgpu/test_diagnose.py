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


class Finding:
    def __init__(self, line: int, *, fix: str = "", applicability: str = "unsafe") -> None:
        self.line, self.col, self.code = line, 8, "DF101"
        self.name, self.message = "tensor-factory-without-device", f"finding on line {line}"
        self.fix_title, self.applicability, self.has_fix = fix, applicability, bool(fix)


SOURCE = (
    "import torch\n"  # 1
    "\n"  # 2
    "def helper():\n"  # 3
    "    return torch.zeros(3)\n"  # 4
    "\n"  # 5
    "def f(x):\n"  # 6
    "    y = torch.ones(3)\n"  # 7
    "    z = torch.arange(3)\n"  # 8
    "    return x + y + helper()\n"  # 9
)
MISMATCH = (
    "RuntimeError: Expected all tensors to be on the same device, but found at least two "
    "devices, cuda:0 and cpu!"
)


def _report(tmp_path, monkeypatch, findings, frame_kw=None) -> str:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(SOURCE)
    (tmp_path / "sub").mkdir(exist_ok=True)
    engine = types.ModuleType("devfix.engine")
    engine.check_source = lambda text, path: findings  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "devfix.engine", engine)
    frame = diagnose.UserFrame(
        str(tmp_path / "sub" / ".." / "train.py"), 9, "return x + y + helper()", **(frame_kw or {})
    )
    return diagnose.report(MISMATCH, frame)


def test_findings_that_assign_a_name_of_the_failing_expression_come_first(
    tmp_path, monkeypatch
) -> None:
    text = _report(tmp_path, monkeypatch, [Finding(8, fix="Add device"), Finding(7, fix="Add")])
    assert "  at train.py:9\n    return x + y + helper()\n" in text
    assert "devices involved: cuda:0, cpu" in text
    assert "  devfix findings (tied to the failing expression):\n" in text
    assert "train.py:7:8: DF101 finding on line 7 [fix: Add]" in text
    assert "line 8" not in text  # `z` is not used where it failed
    assert text.rstrip().endswith("  to fix: devfix apply --unsafe-fixes train.py")


def test_the_failing_span_narrows_the_names(tmp_path, monkeypatch) -> None:
    # Python's positions say `x + y` failed (cols 11..16): only `x` and `y` count
    text = _report(tmp_path, monkeypatch, [Finding(7)], {"col": 11, "end_line": 9, "end_col": 16})
    assert "tied to the failing expression" in text and "line 7" in text


def test_callees_and_enclosing_function_are_later_tiers(tmp_path, monkeypatch) -> None:
    text = _report(tmp_path, monkeypatch, [Finding(4, fix="x", applicability="safe"), Finding(8)])
    assert "(tied to the names in the failing line and its callees)" in text
    assert "line 4" in text and "line 8" not in text
    assert text.rstrip().endswith("  to fix: devfix apply train.py")
    text = _report(tmp_path, monkeypatch, [Finding(8)])
    assert "(none tied to the failing line; in function f()):" in text
    assert "[no fix]" in text and "to fix:" not in text


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


def test_the_root_is_the_operand_the_error_names() -> None:
    """`got index is on cpu` and masked_fill's `got mask on cpu and self on cuda:0` name the
    operand to move; without a name, the one on the second device listed."""
    from devfix.vgpu.provenance import Operand

    def root(message: str, *ops: tuple[str, str]) -> str:
        operands = tuple(Operand(label, device, (2,), None) for label, device in ops)
        return operands[diagnose._root_index(message, operands)].label

    masked = (
        "expected self and mask to be on the same device, but got mask on cpu and self on cuda:0"
    )
    assert root(masked, ("self", "cuda:0"), ("mask", "cpu")) == "mask"
    index = (
        "Expected all tensors to be on the same device, but got index is on cpu, different "
        "from other tensors on cuda:0 (when checking argument in method wrapper_CUDA__index_select)"
    )
    assert root(index, ("self", "cuda:0"), ("index", "cpu")) == "index"
    two = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    assert root(two, ("self", "cuda:0"), ("other", "cpu")) == "other"


def _root(path: str, line: int, findings: list[Finding]) -> diagnose.Placement:
    from devfix.vgpu.provenance import CREATED, Operand, Site

    site = Site(1, path, line, "f", "aten::ones", CREATED, None, None)
    return diagnose.Placement(
        Operand("other", "cpu", (3,), site), f"train.py:{line}", "was created", findings, root=True
    )


def test_to_fix_is_printed_only_when_a_fix_covers_the_root(tmp_path, monkeypatch) -> None:
    """A fixable finding tied to the failing line is no fix of a root cause no rule covers."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(SOURCE)
    engine = types.ModuleType("devfix.engine")
    engine.check_source = lambda text, path: [Finding(7, fix="Add")]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "devfix.engine", engine)
    frame = diagnose.UserFrame(str(tmp_path / "train.py"), 9, "return x + y + helper()")
    uncovered = diagnose.findings_text(frame, [_root(str(tmp_path / "train.py"), 4, [])])
    assert uncovered is not None and "train.py:7:8: DF101" in uncovered
    assert "to fix:" not in uncovered
    covered = diagnose.findings_text(
        frame, [_root(str(tmp_path / "train.py"), 7, [Finding(7, fix="Add", applicability="safe")])]
    )
    assert covered is not None and covered.rstrip().endswith("  to fix: devfix apply train.py")
    # the root's finding has no fix: nothing to apply either
    no_fix = diagnose.findings_text(frame, [_root(str(tmp_path / "train.py"), 7, [Finding(7)])])
    assert no_fix is not None and "to fix:" not in no_fix
