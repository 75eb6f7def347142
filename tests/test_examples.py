"""examples/: one script per pass, each generated from the golden `before` case marked
`# devfix-example`.

An example is its golden case without the `# devfix-...` directive lines (which only the golden
tests read), its `# Run:` line naming the example. `pytest tests/test_examples.py --update-goldens` rewrites examples/ from golden/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from devfix.registry import all_passes

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
GOLDEN = ROOT / "golden"


#: examples/<pass module>.py is generated from golden/<pass module>/<case>.before.py.
def _marked_cases() -> dict[str, str]:
    """Pass module -> the golden case marked `# devfix-example` (read from golden/, so a new
    pass needs no entry here)."""
    found: dict[str, str] = {}
    for before in sorted(GOLDEN.glob("*/*.before.py")):
        if any(
            line.startswith("# devfix-example")
            for line in before.read_text(encoding="utf-8").splitlines()
        ):
            module, case = before.parent.name, before.name.removesuffix(".before.py")
            assert module not in found, f"two example cases for {module}: {found[module]}, {case}"
            found[module] = case
    return found


#: examples/<pass module>.py is generated from golden/<pass module>/<case>.before.py.
SOURCES = _marked_cases()


def example_text(golden_before: str, case: str, module: str) -> str:
    """The golden case without its directives, its `# Run:` line naming the example's file."""
    return "".join(
        line.replace(f"{case}.before.py", f"{module}.py") if line.startswith("# Run:") else line
        for line in golden_before.splitlines(keepends=True)
        if not line.startswith("# devfix-")
    )


@pytest.mark.parametrize("module", sorted(SOURCES))
def test_example_is_generated_from_its_golden_case(
    module: str, request: pytest.FixtureRequest
) -> None:
    source = GOLDEN / module / f"{SOURCES[module]}.before.py"
    expected = example_text(source.read_text(encoding="utf-8"), SOURCES[module], module)
    example = EXAMPLES / f"{module}.py"
    if request.config.getoption("--update-goldens"):
        example.write_text(expected, encoding="utf-8")
    assert example.read_text(encoding="utf-8") == expected, (
        f"examples/{module}.py differs from golden/{module}/{SOURCES[module]}.before.py; "
        "run pytest tests/test_examples.py --update-goldens"
    )


# After the generated examples: `--update-goldens` has written them by the time this runs.
def test_every_pass_has_one_example_and_nothing_else_is_there() -> None:
    modules = {cls.__module__.rsplit(".", 1)[1] for cls in all_passes()}
    assert set(SOURCES) == modules
    scripts = {path.stem for path in EXAMPLES.glob("*.py")}
    assert scripts == modules
