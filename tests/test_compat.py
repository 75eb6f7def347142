"""Rewrites compile on the running Python and on the oldest one the file's project declares."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from devfix import compat, fix_loop
from devfix.engine import fix_file
from devfix.types import FileStatus, Options
from devfix.wrapping import wrap_long_lines
from tests.test_engine import BUGGY

# A DataParallel script whose progress line DF401 indents under `if rank == 0:`: the line grows
# past 88 columns, and the wrapper once split `len(...)` inside the f-string across lines,
# which Python 3.12 accepts and 3.11 rejects.
DATA_PARALLEL_WITH_FSTRING = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(10, 2)
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    model.to(device)
    data = TensorDataset(torch.randn(64, 10), torch.randint(0, 2, (64,)))
    train_loader = DataLoader(data, batch_size=8, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for step, (x, y) in enumerate(train_loader):
            x, y = x.to(device), y.to(device)
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"epoch {epoch} step {step}/{len(train_loader)} loss {loss.item():.4f} ok")
    """
)


def test_converted_script_keeps_its_fstring_whole_and_compiles(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(DATA_PARALLEL_WITH_FSTRING)
    result = fix_file(str(path), Options(select=("DF401",), unsafe_fixes=True))
    assert result.status is FileStatus.CHANGED, result.reason
    rewritten = path.read_text()
    compile(rewritten, str(path), "exec", dont_inherit=True)
    progress = [line for line in rewritten.splitlines() if "len(train_loader)" in line]
    assert len(progress) == 1 and progress[0].rstrip().endswith('ok")'), progress


def test_wrapping_never_splits_a_call_inside_an_fstring() -> None:
    after = 'x = 1\nprint(f"epoch {epoch} of {len(a_loader_with_a_rather_long_name)} batches")\n'
    assert wrap_long_lines("x = 1\n", after, 40) == after
    # The call that holds the f-string as an argument may still be wrapped around it.
    nested = 'x = 1\nlog(prefix, f"{len(loader)} batches", the_step_number_here, more)\n'
    wrapped = wrap_long_lines("x = 1\n", nested, 50)
    assert '\n    f"{len(loader)} batches",\n' in wrapped


def test_wrapping_splits_a_one_name_call_in_the_middle_of_a_line_last() -> None:
    # `transform(name)[0]` has the longest argument list, but split there the name sits alone
    # mid-line; the other call fits as well. A lone name is still split when nothing else fits.
    after = "x = 1\nresult = combine(x, y) + transform(the_argument_name_is_long)[0]\n"
    assert wrap_long_lines("x = 1\n", after, 50).splitlines()[1:] == [
        "result = combine(",
        "    x, y",
        ") + transform(the_argument_name_is_long)[0]",
    ]
    alone = "x = 1\nresult = transform(the_argument_name_is_long)[0] + 1\n"
    assert wrap_long_lines("x = 1\n", alone, 40).splitlines()[1:] == [
        "result = transform(",
        "    the_argument_name_is_long",
        ")[0] + 1",
    ]


def test_wrapping_a_tab_indented_line_indents_its_arguments_with_a_tab() -> None:
    before = "def f(x, n):\n\tpass\n"
    after = "def f(x, n):\n\tpacked = pack_padded_sequence(x_embedded_here, n.cpu(), batch_first=True)\n"
    wrapped = wrap_long_lines(before, after, 60)
    assert wrapped.splitlines()[1:] == [
        "\tpacked = pack_padded_sequence(",
        "\t\tx_embedded_here, n.cpu(), batch_first=True",
        "\t)",
    ]


def _project(tmp_path: Path, requires: str | None) -> Path:
    table = f'[project]\nname = "p"\nrequires-python = "{requires}"\n' if requires else ""
    (tmp_path / "pyproject.toml").write_text(table)
    path = tmp_path / "pkg" / "mod.py"
    path.parent.mkdir()
    path.write_text("x = 1\n")
    return path


@pytest.mark.parametrize(
    ("specifier", "oldest"),
    [
        (">=3.9", (3, 9)),
        (">=3.8,<4", (3, 8)),
        ("~=3.10", (3, 10)),
        ("==3.11.*", (3, 11)),
        ("<4, >=3.7", (3, 7)),
        (">=2.7, !=3.0.*", None),
        ("", None),
    ],
)
def test_lowest_declared_version(specifier: str, oldest: tuple[int, int] | None) -> None:
    assert compat.lowest_version(specifier) == oldest


def test_oldest_python_is_read_from_the_nearest_pyproject(tmp_path: Path) -> None:
    assert compat.oldest_python(str(_project(tmp_path, ">=3.8"))) == (3, 8)
    other = tmp_path / "other"
    other.mkdir()
    assert compat.oldest_python(str(_project(other, None))) == sys.version_info[:2]


@pytest.mark.parametrize(
    ("added", "why", "python_3_12_only"),
    [
        ('f"{loss[\\"total\\"]}"', "backslash", True),
        ("f'{len(\n    loader\n)}'", "spans lines", True),
        ("f'{d[\"a\"] # note\n}'", "spans lines", True),
        ("0 if (n := 3) else 1", "oldest, 3.7 (line 2", False),
    ],
)
def test_rewrite_needing_a_newer_python_than_declared_is_refused(
    tmp_path: Path, added: str, why: str, python_3_12_only: bool
) -> None:
    path = _project(tmp_path, ">=3.7")
    problem = compat.rewrite_problem("x = 1\n", f"x = 1\ny = {added}\n", str(path))
    assert problem is not None, f"{added!r} was accepted for Python 3.7"
    if python_3_12_only and sys.version_info < (3, 12):
        # The running interpreter refuses it first: its grammar is the older one.
        why = "does not compile on the running Python"
    assert why in problem, problem


def test_what_the_original_already_needs_is_not_held_against_the_rewrite(
    tmp_path: Path,
) -> None:
    path = _project(tmp_path, ">=3.7")
    before = "if (n := 3):\n    pass\n"
    assert compat.rewrite_problem(before, before + "x = 1\n", str(path)) is None
    assert compat.rewrite_problem("x = 1\n", "x = (\n", str(path)) is not None
    assert compat.rewrite_problem("x = (\n", "x = ((\n", str(path)) is None


def test_a_rewrite_that_does_not_compile_is_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tagger.py"
    path.write_text(BUGGY)

    def broken_style(path: str, text: str, module: object, rewritten: object) -> str:
        return text + 'print(f"{len(\n  x\n)}")\n' if sys.version_info < (3, 12) else text + "("

    monkeypatch.setattr(fix_loop, "in_file_style", broken_style)
    result = fix_file(str(path), Options(select=("DF101",)))
    assert result.status is FileStatus.FAILED and result.internal_error
    assert "fixes by DF101 produced code that does not compile" in result.reason
    assert path.read_text() == BUGGY


@pytest.mark.parametrize(
    ("code", "problem"),
    [
        ("y = f'{len(\n    loader\n)}'\n", "spans lines"),
        ('y = f"{d["a"]}"\n', "reuses its quote"),
        ("y = f'''{x\n}'''\n", None),
        ("y = f'{x:>{w}}' + f\"{a['b']}\"\n", None),
    ],
)
def test_pre_3_12_fstring_rules_are_checked_on_any_running_python(
    code: str, problem: str | None
) -> None:
    # The running 3.11 would refuse these itself; the check must also hold under 3.12+.
    found = compat.fstring_problem(code)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_libcst_reparses_only_when_a_changed_line_opens_an_fstring() -> None:
    assert compat._new_lines_start_fstrings("x = 1\n", 'x = 1\ny = f"{a}"\n')
    assert compat._new_lines_start_fstrings("a = 1\n", "print(rf'{x}')\n")
    assert not compat._new_lines_start_fstrings('y = f"{a}"\nx = 1\n', 'y = f"{a}"\nx = 2\n')
    assert not compat._new_lines_start_fstrings("x = 1\n", "x = elf('s')\n")


def test_a_new_comment_block_over_the_limit_is_reflowed_as_one_paragraph() -> None:
    before = "def f():\n    # the user's own note, kept as written even though it is long enough\n    pass\n"
    after = (
        "def f():\n"
        "    # the user's own note, kept as written even though it is long enough\n"
        "    # Each process now takes a share of the global batch (when that does not divide\n"
        "    # evenly, the global batch is smaller).\n"
        "    pass\n"
    )
    wrapped = wrap_long_lines(before, after, 72)
    assert wrapped == (
        "def f():\n"
        "    # the user's own note, kept as written even though it is long enough\n"
        "    # Each process now takes a share of the global batch (when that does\n"
        "    # not divide evenly, the global batch is smaller).\n"
        "    pass\n"
    )


def test_a_dict_literal_a_rewrite_made_too_long_is_split_at_its_keys() -> None:
    before = 'state = {"net": net.cpu().state_dict(), "step": step}\n'
    after = 'state = {"net": {k: v.cpu() for k, v in net.state_dict().items()}, "step": step}\n'
    assert wrap_long_lines(before, after, 72) == (
        "state = {\n"
        '    "net": {k: v.cpu() for k, v in net.state_dict().items()},\n'
        '    "step": step,\n'
        "}\n"
    )


def test_a_call_whose_arguments_share_one_line_between_its_parentheses_goes_one_per_line() -> None:
    before = "state = torch.load(\n    os.path.join(root, 'mean.pt'), weights_only=True\n)\n"
    grown = "state = torch.load(\n    os.path.join(root, 'mean.pt'), weights_only=True, map_location=device\n)\n"
    # The arguments' line is the one split, not the call inside it.
    assert wrap_long_lines(before, grown, 60) == (
        "state = torch.load(\n"
        "    os.path.join(root, 'mean.pt'),\n"
        "    weights_only=True,\n"
        "    map_location=device,\n"
        ")\n"
    )
