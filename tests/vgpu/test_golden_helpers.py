"""Golden-tier header parsing and failure checking (no subprocess)."""

from __future__ import annotations

import subprocess

import pytest

from devfix.vgpu.golden import (
    GoldenExpectation,
    GoldenHeaderError,
    check_failure,
    parse_golden_header,
)

HEADER = (
    '# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" '
    'devices="cuda:1,cuda:0"'
)
TI = (
    "RuntimeError: Expected all tensors to be on the same device, but found at least two "
    "devices, cuda:1 and cuda:0!"
)
CG = (
    "RuntimeError: Expected all tensors to be on the same device, but got index is on cpu, "
    "different from other tensors on cuda:1 (when checking argument in method "
    "wrapper_CUDA__index_select)"
)


def done(rc: int, stderr: str) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(["x"], rc, "", stderr)


def test_parse_header() -> None:
    exp = parse_golden_header("import torch\n" + HEADER + "\n")
    assert exp == GoldenExpectation(
        2, "Expected all tensors to be on the same device", frozenset({"cuda:0", "cuda:1"}), {}
    )


def test_parse_header_env_and_braces() -> None:
    exp = parse_golden_header(
        '# devfix-golden: gpus=1 fails-with="expected self and mask" devices="{cuda:0, cpu}" '
        'env="A=1 B=x=y"'
    )
    assert exp is not None
    assert exp.gpus == 1 and exp.devices == frozenset({"cuda:0", "cpu"})
    assert exp.env == {"A": "1", "B": "x=y"}


def test_no_header_and_bad_header() -> None:
    assert parse_golden_header("print(1)\n") is None
    with pytest.raises(GoldenHeaderError):
        parse_golden_header("# devfix-golden: gpus=two")
    with pytest.raises(GoldenHeaderError):
        parse_golden_header("# devfix-golden: colour=blue")


def test_check_failure_accepts_either_format_with_the_declared_set() -> None:
    exp = parse_golden_header(HEADER)
    assert exp is not None
    assert check_failure(exp, done(1, "Traceback...\n" + TI + "\n")) is None
    wrapped = (
        "RuntimeError: Caught RuntimeError in replica 1 on device 1.\nOriginal Traceback"
        " (most recent call last):\n  ...\n" + TI + "\n"
    )
    assert check_failure(exp, done(1, wrapped)) is None
    cg = parse_golden_header(HEADER.replace("cuda:1,cuda:0", "cpu,cuda:1"))
    assert cg is not None and check_failure(cg, done(1, CG)) is None


def test_check_failure_reasons() -> None:
    exp = parse_golden_header(HEADER)
    assert exp is not None
    assert "exited 0" in (check_failure(exp, done(0, "")) or "")
    why = check_failure(exp, done(1, "ValueError: nope\n"))
    assert why is not None and "last line: ValueError: nope" in why and "\n" not in why
    why = check_failure(exp, done(1, CG))
    assert why == ("devices {cpu, cuda:1} named instead of {cuda:0, cuda:1} in: " + CG)


def test_gpus_zero_is_the_machine_without_cuda() -> None:
    exp = parse_golden_header(
        '# devfix-golden: gpus=0 fails-with="CUDA is not available" '
        'env="PYTHONWARNINGS=error::UserWarning"'
    )
    assert exp is not None and exp.gpus == 0
    assert exp.env == {"PYTHONWARNINGS": "error::UserWarning"}
