"""`bench/realworld_verify.py`: reading what `devfix verify --fix` said about a corpus file.

The outputs here are written for the test in the shapes `verify --fix` prints; no corpus file
is used and nothing is run.
"""

from __future__ import annotations

from types import ModuleType

TRACEBACK = 'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'


def outcome(rwv: ModuleType, stdout: str, stderr: str, code: int) -> object:
    return rwv.read_outcome("x__train", "script", stdout, stderr, code, 1.0)


def test_a_repaired_script_counts_its_rounds_and_fixes(realworld_verify: ModuleType) -> None:
    stdout = (
        "--- a/train.py\n+++ b/train.py\n"
        "devfix verify --fix: round 1: Expected all tensors ... -> applied DF101 at train.py:9 "
        "(safe)\n"
        "devfix verify --fix: round 2: Expected all tensors ... -> applied DF103 at m.py:4 "
        "(unsafe)\n"
        "done\n"
        "devfix verify --fix: round 3: the script runs (changed: m.py, train.py)\n"
    )
    result = outcome(realworld_verify, stdout, "", 0)
    assert (result.status, result.rounds, result.fixes) == ("runs", 3, ("DF101", "DF103"))


def test_a_script_that_runs_as_it_is(realworld_verify: ModuleType) -> None:
    stdout = "epoch 1\ndevfix verify --fix: round 1: the script runs (changed: nothing)\n"
    result = outcome(realworld_verify, stdout, "", 0)
    assert (result.status, result.rounds, result.fixes) == ("runs", 1, ())


def test_a_device_error_left_unrepaired_gives_the_loops_reason(
    realworld_verify: ModuleType,
) -> None:
    stderr = (
        TRACEBACK + "RuntimeError: Expected all tensors to be on the same device\n"
        "devfix verify --fix: round 1: Expected all tensors to be on the same device\n"
        "  no devfix finding with a fix covers the root's line: stop\n"
        "  the cpu tensor `other` (shape [3]) was created at train.py:3 by torch.zeros(...)\n"
    )
    result = outcome(realworld_verify, "", stderr, 1)
    assert (result.status, result.category) == ("stopped", "device-error")
    assert result.detail == "no devfix finding with a fix covers the root's line: stop"


def test_failures_that_are_not_device_errors_are_sorted_by_cause(
    realworld_verify: ModuleType,
) -> None:
    def cause(last_line: str, code: int = 1) -> tuple[str, str]:
        stderr = (
            TRACEBACK + last_line + "\n"
            "devfix verify --fix: round 1: the script failed (exit 1), not of a device error: "
            "stop\n"
        )
        result = outcome(realworld_verify, "", stderr, code)
        assert result.status == "cannot-run"
        return result.category, result.detail

    assert cause("ModuleNotFoundError: No module named 'torchvision.models'") == (
        "missing-module",
        "torchvision",
    )
    assert cause("ImportError: attempted relative import with no known parent package") == (
        "relative-import",
        "part of a package (relative import)",
    )
    assert (
        cause("FileNotFoundError: [Errno 2] No such file or directory: 'data/train.csv'")[0]
        == "data"
    )
    assert cause("KeyError: 'LOCAL_RANK'")[0] == "launcher"
    assert cause("ValueError: bad shape") == ("error", "ValueError: bad shape")
    usage = outcome(
        realworld_verify,
        "",
        "usage: train.py [-h] --data DATA\ntrain.py: error: the following arguments are "
        "required: --data\n",
        2,
    )
    assert usage.category == "arguments"  # type: ignore[attr-defined]


def test_a_run_past_the_timeout(realworld_verify: ModuleType) -> None:
    stderr = "epoch 1\ndevfix verify --fix: round 1: the script ran past --timeout 60 s: stop\n"
    result = outcome(realworld_verify, "", stderr, 124)
    assert (result.status, result.category) == ("cannot-run", "timeout")
