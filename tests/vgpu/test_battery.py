"""The table-driven battery of device-mixing ops, run once under the virtual GPUs."""

from __future__ import annotations

import json

import pytest

from devfix.vgpu.battery import CASES


@pytest.fixture(scope="module")
def results(vgpu_run) -> dict[str, dict[str, object]]:
    r = vgpu_run("run_battery.py")
    assert r.returncode == 0, r.stderr
    return {x["case"]["name"]: x for x in json.loads(r.stdout.strip().splitlines()[-1])}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_battery_case(results, case) -> None:
    res = results[case.name]
    if case.expect is None:
        assert res["got"] is None and res["passed"], res
    else:
        assert (res["exc"], res["got"]) == (case.exc, case.expect)
