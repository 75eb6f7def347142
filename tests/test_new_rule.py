"""A new rule touches three places: the rule, its tests and its goldens.

A copy of the tracked tree gets a toy rule (`codemods/<module>.py`), its inline tests and its
golden cases, nothing else; the generated files (the README's rule table, `examples/`) are
rewritten by their generators, as CONTRIBUTING says. Every check that lists or documents the
rules then passes on the copy, and fails once one of the three places is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import copy_tracked_files

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
MODULE = "zeros_like_forced_to_cpu"

RULE = '''
"""DF990: a toy rule (tests/test_new_rule.py adds it to a copy of the tree)."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.types import Applicability, Edit


class ZerosLikeForcedToCpu(DevicePass):
    """`torch.zeros_like(x, device="cpu")`: a copy of `x` forced onto the CPU.

    ## What it does
    Finds `torch.zeros_like` calls given `device="cpu"` and drops the argument.

    ## Why is this bad?
    The result no longer follows `x` to its device.

    ## Example
    ```python
    mask = torch.zeros_like(x, device="cpu")
    ```

    ## Use instead
    ```python
    mask = torch.zeros_like(x)
    ```

    ## Fix safety
    Safe.
    """

    CODE = "DF990"
    NAME = "zeros-like-forced-to-cpu"
    MESSAGE = "`zeros_like` forced onto the CPU"
    FIX_TITLE = "Drop `device=\\"cpu\\"`"
    APPLICABILITY = Applicability.SAFE
    TRIGGER_WORDS = ("zeros_like",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.qualified_name(node.func) != "torch.zeros_like":
            return
        kept = [a for a in node.args if not _is_cpu_device(a)]
        if len(kept) == len(node.args):
            return
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        self.report(node, edits=[Edit(node, node.with_changes(args=kept))])


def _is_cpu_device(arg: cst.Arg) -> bool:
    keyword = arg.keyword.value if arg.keyword else None
    return keyword == "device" and isinstance(arg.value, cst.SimpleString) and (
        arg.value.evaluated_value == "cpu"
    )
'''

TESTS = """
from tests.helpers import assert_fix, assert_noop


def test_fix() -> None:
    assert_fix(
        "DF990",
        "import torch\\nm = torch.zeros_like(x, device='cpu')  # keep\\n",
        "import torch\\nm = torch.zeros_like(x)  # keep\\n",
    )


def test_alias_and_noop() -> None:
    assert_fix("DF990", "import torch as t\\nt.zeros_like(x, device='cpu')\\n", "import torch as t\\nt.zeros_like(x)\\n")
    assert_noop("DF990", "import torch\\nm = torch.zeros_like(x, device='cuda')\\n")
"""

HEADER = """# A toy golden case: {what}.
# Run: python {case}.before.py
# devfix-flags: --select DF990
# devfix-expect: DF990
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
{extra}import torch

x = torch.ones(3, device="cuda" if torch.cuda.is_available() else "cpu")
"""
CASES = {
    "keyword": (
        "a keyword",
        "m = torch.zeros_like(x, device='cpu') + x\n",
        "m = torch.zeros_like(x) + x\n",
    ),
    "dtype_too": (
        "with dtype",
        "m = torch.zeros_like(x, dtype=torch.int64, device='cpu') + x\n",
        "m = torch.zeros_like(x, dtype=torch.int64) + x\n",
    ),
    "in_function": (
        "in a function",
        "def f(t):\n    return torch.zeros_like(t, device='cpu') + t\n\n\nprint(f(x))\n",
        "def f(t):\n    return torch.zeros_like(t) + t\n\n\nprint(f(x))\n",
    ),
}


def _add_the_three_places(tree: Path) -> None:
    (tree / "codemods" / f"{MODULE}.py").write_text(textwrap.dedent(RULE).lstrip())
    (tree / "tests" / "codemods" / f"test_{MODULE}.py").write_text(textwrap.dedent(TESTS).lstrip())
    golden = tree / "golden" / MODULE
    golden.mkdir()
    for number, (case, (what, before, after)) in enumerate(CASES.items()):
        extra = f"# devfix-example: examples/{MODULE}.py is this case\n" if number == 0 else ""
        head = HEADER.format(what=what, case=case, extra=extra)
        (golden / f"{case}.before.py").write_text(head + before)
        (golden / f"{case}.after.py").write_text(head + after)
    (golden / "on_a_device.noop.py").write_text(
        "# devfix-flags: --select DF990\nimport torch\n\n"
        "m = torch.zeros_like(torch.ones(3), device='cuda' if torch.cuda.is_available() else None)\n"
    )


def _run(tree: Path, *command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, *command], cwd=tree, env=env, capture_output=True, text=True, check=False
    )


CHECKS = (
    f"tests/codemods/test_{MODULE}.py",
    "tests/test_golden.py",
    "tests/test_examples.py",
    "tests/test_engine.py::test_registry_codes_and_names_are_unique_and_documented",
    "tests/test_cli.py::test_readme_rule_table_is_current",
    "tests/test_cli.py::test_rules_lists_every_pass_and_prints_documentation",
    "tests/test_cli.py::test_examples_show_a_fix_from_every_pass",
    "tests/test_prefilter.py",
    "tests/bench/test_pass_sizes.py",
)
PYTEST = ("-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-k")
SELECT = f"{MODULE} or every or registry or readme or rules_lists or examples or pass or sleeps"


def test_a_toy_rule_needs_only_its_module_tests_and_goldens(tmp_path: Path) -> None:
    tree = copy_tracked_files(ROOT, tmp_path / "tree")
    _add_the_three_places(tree)
    probe = _run(tree, "-c", "import devfix.codemods; print(devfix.codemods.__file__)")
    assert probe.stdout.strip() == str(tree / "devfix" / "codemods" / "__init__.py"), probe.stderr

    for generator in (
        ("-m", "devfix.docs", "README.md"),
        (
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_examples.py",
            "--update-goldens",
        ),
    ):
        done = _run(tree, *generator)
        assert done.returncode == 0, done.stdout + done.stderr
    assert "DF990" in (tree / "README.md").read_text()
    assert (tree / "examples" / f"{MODULE}.py").exists()

    own = _run(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", CHECKS[0])
    assert own.returncode == 0 and "2 passed" in own.stdout, own.stdout[-2000:]
    checks = _run(tree, *PYTEST, SELECT, *CHECKS)
    assert checks.returncode == 0, checks.stdout[-3000:] + checks.stderr[-2000:]

    # Without its goldens, the rule is caught.
    shutil.rmtree(tree / "golden" / MODULE)
    missing = _run(tree, *PYTEST, "every_pass_has_three", "tests/test_golden.py")
    assert missing.returncode == 1 and f"golden/{MODULE}/" in missing.stdout, missing.stdout[-2000:]
