"""Golden files: devfix(before) == after byte for byte, stable, and the scripts run.

Tier 0 (always): exact output, second run changes nothing, noop files untouched, expected
codes found. Tier 1 (torch on CPU): `after` and `noop` scripts run and exit 0.
"""

from __future__ import annotations

from pathlib import Path
from subprocess import CompletedProcess

import pytest

from devfix.engine import fix_source
from devfix.registry import all_passes
from devfix.types import Options
from tests.golden_cases import GOLDEN, GoldenCase, collect
from tests.warm_servers import SERVER_ENV, warm_run

CASES = collect()
TRANSFORM_CASES = [c for c in CASES if c.before is not None]
NOOP_CASES = [c for c in CASES if c.noop is not None]


def _ids(cases: list[GoldenCase]) -> list[str]:
    return [case.id for case in cases]


@pytest.mark.parametrize("case", TRANSFORM_CASES, ids=_ids(TRANSFORM_CASES))
def test_before_becomes_after(case: GoldenCase, request: pytest.FixtureRequest) -> None:
    assert case.before is not None
    options = case.options()
    result = fix_source(case.before.read_text(), options, path=str(case.before))
    expected_path = case.before.with_name(f"{case.name}.after.py")
    if request.config.getoption("--update-goldens"):
        expected_path.write_text(result.output)
    assert case.after is not None or expected_path.exists(), f"{case.id}: no .after.py"
    assert result.output == expected_path.read_text()
    found = {f.code for f in result.findings}
    assert case.expected_codes(), f"{case.id}: the before file needs a `# devfix-expect:` line"
    assert case.expected_codes() <= found, f"expected {case.expected_codes()}, found {found}"
    again = fix_source(result.output, options, path=str(expected_path))
    assert again.output == result.output, "a second run changed the after file"


@pytest.mark.parametrize("case", NOOP_CASES, ids=_ids(NOOP_CASES))
def test_noop_is_untouched(case: GoldenCase) -> None:
    assert case.noop is not None
    text = case.noop.read_text()
    options = case.options()
    result = fix_source(text, options.__class__(unsafe_fixes=True, select=options.select))
    assert result.output == text
    assert not [f for f in result.findings if f.has_fix], [f.message for f in result.findings]


def test_every_pass_has_three_golden_cases_and_a_noop() -> None:
    for cls in all_passes():
        module = cls.__module__.rsplit(".", 1)[1]
        folder = GOLDEN / module
        befores = list(folder.glob("*.before.py"))
        noops = list(folder.glob("*.noop.py"))
        assert len(befores) >= 3, f"golden/{module}/ has {len(befores)} before/after cases"
        assert noops, f"golden/{module}/ has no noop case"


RUNNABLE = [(c, c.source.with_name(f"{c.name}.after.py")) for c in TRANSFORM_CASES] + [
    (c, c.source) for c in NOOP_CASES
]


def _run(
    script: Path, gpus: int, tmp: Path, env: dict[str, str] | None = None
) -> CompletedProcess[str]:
    """Run a golden script in a forked child of a warm process (see devfix.vgpu.warm), with
    its temporary files (`tempfile`) in the test's own folder."""
    return warm_run(script, gpus, env={**SERVER_ENV, "TMPDIR": str(tmp), **(env or {})}, cwd=GOLDEN)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "script"), RUNNABLE, ids=[f"{c.id}.{p.name.split('.')[-2]}" for c, p in RUNNABLE]
)
def test_script_runs_on_cpu(case: GoldenCase, script: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="tier 1 runs the golden scripts with torch")
    completed = _run(script, 0, tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]


CLEAN_FILES = [c.source.with_name(f"{c.name}.after.py") for c in TRANSFORM_CASES] + [
    c.source for c in NOOP_CASES
]


@pytest.mark.parametrize(
    "script", CLEAN_FILES, ids=[f"{p.parent.name}/{p.name}" for p in CLEAN_FILES]
)
def test_no_pass_changes_a_fixed_or_noop_file(script: Path) -> None:
    """Every pass, unsafe fixes included, leaves every after/noop file alone: no pass fights
    another's fix."""
    text = script.read_text()
    result = fix_source(text, Options(unsafe_fixes=True), path=str(script))
    assert result.output == text, [f"{f.code}: {f.message}" for f in result.applied]


@pytest.mark.slow
@pytest.mark.parametrize("case", TRANSFORM_CASES, ids=_ids(TRANSFORM_CASES))
def test_before_fails_and_after_runs_on_virtual_gpus(case: GoldenCase, tmp_path: Path) -> None:
    """Tier 2 on CPU: the `before` dies of the declared device error under virtual GPUs, and
    the `after` runs under the same settings."""
    pytest.importorskip("torch", reason="the virtual GPU runtime needs torch")
    from devfix.vgpu.golden import check_failure, parse_golden_header

    assert case.before is not None
    expectation = parse_golden_header(case.before.read_text())
    assert expectation is not None, f"{case.id}: the before file needs a `# devfix-golden:` line"
    before = _run(case.before, expectation.gpus, tmp_path, expectation.env)
    problem = check_failure(expectation, before)
    assert problem is None, f"{case.id}.before: {problem}\n{before.stderr[-3000:]}"
    _assert_explain_names_the_fix(case, before.stderr)
    after_path = case.before.with_name(f"{case.name}.after.py")
    after = _run(after_path, expectation.gpus, tmp_path, expectation.env)
    assert after.returncode == 0, f"{case.id}.after:\n{after.stderr[-3000:]}"


def _assert_explain_names_the_fix(case: GoldenCase, stderr: str) -> None:
    """`devfix explain` on the traceback the `before` printed (without the diagnosis
    `devfix verify` adds after it, which a log from a GPU machine does not have) names the
    rule whose fix turns it into the `after`."""
    from devfix.explain import explain

    traceback = stderr.split("\ndevfix verify: the script died", 1)[0]
    assert case.before is not None
    explained = explain(traceback, str(case.before.parent))
    assert explained.frame is not None, f"{case.id}: no user frame in\n{traceback[-2000:]}"
    named = {c.finding.code for c in explained.findings}
    fixable = {c.finding.code for c in explained.findings if c.fixable}
    assert case.expected_codes() & fixable, (case.id, named, explained.notes)


@pytest.mark.slow
@pytest.mark.parametrize("case", NOOP_CASES, ids=_ids(NOOP_CASES))
def test_noop_runs_on_virtual_gpus(case: GoldenCase, tmp_path: Path) -> None:
    """A noop script is correct code: it also runs with the virtual GPUs of its folder."""
    pytest.importorskip("torch", reason="the virtual GPU runtime needs torch")
    assert case.noop is not None
    completed = _run(case.noop, case.folder_gpus(), tmp_path)
    assert completed.returncode == 0, f"{case.id}.noop:\n{completed.stderr[-3000:]}"
