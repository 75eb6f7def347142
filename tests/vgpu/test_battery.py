"""The differential battery: run once under the virtual GPUs, each probe checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from devfix.vgpu.battery import CASES, GROUPS, sizes

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def results(vgpu_run) -> dict[str, dict[str, object]]:
    r = vgpu_run("run_battery.py")
    assert r.returncode == 0, r.stderr
    return {x["case"]["name"]: x for x in json.loads(r.stdout.strip().splitlines()[-1])}


def test_battery_shape() -> None:
    """At least 80 probes, in the named groups, each with its source and one outcome."""
    assert len(CASES) >= 80
    assert len({c.name for c in CASES}) == len(CASES)
    assert set(sizes()) == set(GROUPS)
    for case in CASES:
        assert "/" in case.source and ":" in case.source, case.name
        assert (case.expect is None) != (case.check is None), case.name


@pytest.mark.slow
@pytest.mark.xdist_group("battery")  # one worker runs the battery once
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_battery_case(results, case) -> None:
    res = results[case.name]
    if case.expect is None:
        assert res["got"] is None and res["passed"], res
    else:
        assert (res["exc"], res["got"]) == (case.exc, res["expect"])


@pytest.mark.slow
def test_crosscheck_runs_the_battery_and_reports_no_difference_under_vgpu() -> None:
    """bench/gpu_crosscheck.py, exercised on CPU through its --virtual mode."""
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_crosscheck.py"), "--virtual", "--battery-only"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"battery: {len(CASES)} probes run (0 need more GPUs), 0 differ" in r.stdout


def test_crosscheck_prints_a_differing_probe() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import gpu_crosscheck
    finally:
        sys.path.remove(str(ROOT / "bench"))
    case = next(c for c in CASES if c.name == "addcmul_two_cpu_scalars")
    from dataclasses import asdict

    row = {"case": asdict(case), "expect": case.expect, "got": None, "exc": None, "passed": False}
    ok = dict(row, passed=True)
    (text,) = gpu_crosscheck.battery_differences([row, ok])
    assert text.splitlines() == [
        "[battery] addcmul_two_cpu_scalars (scalar exemption rules)",
        "  expected: RuntimeError: Trying to pass too many CPU scalars to non-CPU kernel!",
        "  got:      ran, check false",
        f"  source:   {case.source}",
    ]
