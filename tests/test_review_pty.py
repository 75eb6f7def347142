"""`devfix apply -i` driven in a real pseudo-terminal through the installed `devfix` command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_review import MASK, MISC, TAGGER

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.slow

DEVFIX = os.path.join(os.path.dirname(sys.executable), "devfix")
PROMPT = "Apply this fix? [y,n,a,d,A,e,u,q,?]"
RULES = ["--select", "DF101,DF102"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a_tagger.py").write_text(TAGGER)
    (root / "b_misc.py").write_text(MISC)
    (root / "c_mask.py").write_text(MASK)
    return root


def _contents(root: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(root.glob("*.py*"))}


def _spawn(root: Path, *args: str, env: dict[str, str] | None = None) -> pexpect.spawn:
    environment = {"PATH": os.environ.get("PATH", ""), "NO_COLOR": "1", "TERM": "xterm"}
    environment.update(env or {})
    return pexpect.spawn(
        DEVFIX,
        ["apply", "-i", "-j", "1", *RULES, *args, "."],
        cwd=str(root),
        env=environment,
        encoding="utf-8",
        timeout=120,
        dimensions=(50, 200),
    )


def _prompts(child: pexpect.spawn) -> Iterator[str]:
    """Yield the text shown before each prompt, until the command ends."""
    while child.expect_exact([PROMPT, pexpect.EOF]) == 0:
        yield child.before
    child.tail = child.before  # what was printed after the last prompt


def _finish(child: pexpect.spawn) -> int:
    if not hasattr(child, "tail"):
        child.expect(pexpect.EOF)
        child.tail = child.before
    child.close()
    return int(child.exitstatus if child.exitstatus is not None else -(child.signalstatus or 0))


def test_no_to_everything_changes_nothing(project: Path) -> None:
    before = _contents(project)
    child = _spawn(project)
    shown = []
    for screen in _prompts(child):
        shown.append(screen)
        child.send("n")
    assert _finish(child) == 1  # findings remain
    assert len(shown) == 4
    assert "[1/4] a_tagger.py:12:14  DF101 tensor-factory-without-device  (safe fix)" in shown[0]
    assert "+        h0 = torch.zeros(1, x.size(0), self.n_hidden, device=x.device)" in shown[0]
    assert "--- a/a_tagger.py" in shown[0] and "@@ -9,7 +9,7 @@" in shown[0]
    assert "UNSAFE fix" in shown[2]
    # The display-only finding is shown, with its reason, and not asked about.
    assert "display-only" in shown[3] and "no tensor or layer in scope" in shown[3]
    assert "devfix: 0 fixes accepted, 4 rejected, 1 to fix by hand, 0 files changed." in (
        child.tail
    )
    assert _contents(project) == before


def test_yes_to_everything_matches_apply_unsafe_fixes(project: Path, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    shutil.copytree(project, reference)
    subprocess.run(
        [DEVFIX, "apply", "--unsafe-fixes", *RULES, "."], cwd=reference, capture_output=True
    )
    child = _spawn(project)
    for _screen in _prompts(child):
        child.send("y")
    assert _finish(child) == 1  # the display-only finding remains
    assert _contents(project) == _contents(reference)
    assert _contents(project)["a_tagger.py"] != TAGGER


def test_quit_at_the_first_prompt_changes_nothing(project: Path) -> None:
    before = _contents(project)
    child = _spawn(project)
    child.expect_exact(PROMPT)
    child.send("q")
    _finish(child)
    assert _contents(project) == before


def test_help_undo_unknown_keys_and_partial_answers(project: Path) -> None:
    child = _spawn(project)
    child.expect_exact(PROMPT)
    child.send("u")
    child.expect_exact("Nothing to undo.")
    child.send("?")
    child.expect_exact("u - undo the previous answer")
    child.send("x")  # unknown: help again
    child.expect_exact("q - quit")
    child.send("y")  # h0
    child.expect_exact("[2/4] a_tagger.py:13:14")
    child.send("n")  # c0
    child.expect_exact("[3/4] b_misc.py:11:16")
    child.send("u")  # back to c0
    child.expect_exact("[2/4] a_tagger.py:13:14")
    child.send("y")
    child.expect_exact("[3/4] b_misc.py:11:16")
    child.send("d")  # skip the rest of b_misc.py
    child.expect_exact("[4/4] c_mask.py:10:")
    child.send("q")
    _finish(child)
    assert (project / "a_tagger.py").read_text().count("device=x.device") == 2
    assert (project / "b_misc.py").read_text() == MISC
    assert (project / "c_mask.py").read_text() == MASK


def test_a_and_capital_a(project: Path) -> None:
    child = _spawn(project)
    child.expect_exact(PROMPT)
    child.send("a")  # both fixes of a_tagger.py
    child.expect_exact("[3/4] b_misc.py")
    child.send("A")  # every remaining DF101: b_misc.py and c_mask.py
    assert _finish(child) == 1
    assert (project / "a_tagger.py").read_text().count("device=x.device") == 2
    assert "device=self.gru.weight_ih_l0.device" in (project / "b_misc.py").read_text()
    assert "device=scores.device" in (project / "c_mask.py").read_text()


def test_resume_does_not_ask_again_about_rejected_fixes(project: Path) -> None:
    child = _spawn(project)
    child.expect_exact(PROMPT)
    child.send("n")
    child.expect_exact(PROMPT)
    child.send("q")
    _finish(child)
    state = json.loads((project / ".devfix_cache" / "review.json").read_text())
    assert [entry["answer"] for entry in state["answers"].values()] == ["rejected"]
    # Move the rejected fix down a line: it is still recognised.
    (project / "a_tagger.py").write_text("# a new first line\n" + TAGGER)
    child = _spawn(project, "--resume")
    child.expect_exact("3 fixes to review (1 rejected in an earlier session, not asked again)")
    child.expect_exact(PROMPT)
    assert "a_tagger.py:14:14" in child.before  # c0; h0 (line 13) is not asked
    child.send("q")
    _finish(child)
    # Without --resume everything is asked again.
    child = _spawn(project)
    child.expect_exact("4 fixes to review.")
    child.expect_exact(PROMPT)
    assert "a_tagger.py:13:14" in child.before
    child.send("q")
    _finish(child)


def test_edit_in_editor(project: Path, tmp_path: Path) -> None:
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nsed -i -e "s/# initial state/# initial state (reviewed)/" "$1"\n')
    editor.chmod(0o755)
    child = _spawn(project, env={"EDITOR": str(editor), "VISUAL": str(editor)})
    child.expect_exact(PROMPT)
    child.send("e")
    child.expect_exact("[2/4] a_tagger.py:13:14")
    child.expect_exact(PROMPT)
    child.send("q")
    _finish(child)
    text = (project / "a_tagger.py").read_text()
    assert (
        "h0 = torch.zeros(1, x.size(0), self.n_hidden, device=x.device)  # initial state (reviewed)"
        in text
    )
    assert "c0 = torch.zeros(1, x.size(0), self.n_hidden)\n" in text


def test_stdin_not_a_terminal_exits_2(project: Path) -> None:
    before = _contents(project)
    done = subprocess.run(
        [DEVFIX, "apply", "-i", "."],
        cwd=project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--interactive needs a terminal on stdin" in lines[0]
    assert _contents(project) == before


def test_ctrl_c_writes_nothing(project: Path) -> None:
    before = _contents(project)
    child = _spawn(project)
    child.expect_exact(PROMPT)
    child.send("y")
    child.expect_exact(PROMPT)
    child.sendintr()
    assert _finish(child) == 130
    assert _contents(project) == before


def test_colours_and_notebooks(project: Path) -> None:
    notebook = Path(__file__).parent.parent / "examples" / "lstm_tagger.ipynb"
    for name in ("a_tagger.py", "b_misc.py", "c_mask.py"):
        (project / name).unlink()
    shutil.copy(notebook, project / "tagger.ipynb")
    original = (project / "tagger.ipynb").read_text()
    child = _spawn(project, env={"NO_COLOR": ""})
    child.expect_exact("Apply this fix?")
    screen = child.before
    assert "tagger.ipynb:cell 2:8:14" in screen
    assert "--- a/tagger.ipynb:cell 2" in screen
    assert "\x1b[32m+        h0 = torch.zeros(1, x.shape[0], self.n_hidden, device=x.device)" in (
        screen
    )
    child.send("y")
    child.expect_exact("Apply this fix?")
    child.send("n")
    _finish(child)
    changed = (project / "tagger.ipynb").read_text()
    assert changed == original.replace(
        "self.n_hidden)  # initial state", "self.n_hidden, device=x.device)  # initial state"
    )


TWINS = """\
import torch


def load_inputs(x):
    return x.to("cuda:0")


def load_targets(x):
    return x.to("cuda:0")


def train(model, loader, optimizer):
    for x, y in loader:
        loss = (model(load_inputs(x)) - load_targets(y)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def _spawn_command(root: Path, *args: str) -> pexpect.spawn:
    environment = {"PATH": os.environ.get("PATH", ""), "NO_COLOR": "1", "TERM": "xterm"}
    return pexpect.spawn(
        DEVFIX, list(args), cwd=str(root), env=environment, encoding="utf-8", timeout=120
    )


def test_accepted_twins_are_both_applied_and_state_stays_in_the_cache_folder(
    tmp_path: Path,
) -> None:
    """Two identical `.to("cuda:0")` lines whose fixes overlap (both add the same device): the
    second is applied on the code the first produced. The answers are kept in .devfix_cache/,
    which git ignores."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "twins.py").write_text(TWINS)
    for args in (["init", "-q"], ["add", "."]):
        subprocess.run(["git", *args], cwd=root, check=True)
    child = _spawn_command(root, "apply", "-i", "-j", "1", "--select", "DF304", ".")
    answered = 0
    for _screen in _prompts(child):
        child.send("y")
        answered += 1
    assert _finish(child) == 0, child.tail
    assert answered == 2
    assert "not applied" not in child.tail and "could not be applied" not in child.tail
    text = (root / "twins.py").read_text()
    assert '"cuda:0"' not in text and text.count(".to(device)") == 2
    assert (root / ".devfix_cache" / "review.json").is_file()
    untracked = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert [line for line in untracked.splitlines() if line.startswith("??")] == []


def test_progress_shows_no_eta_before_it_means_something(tmp_path: Path) -> None:
    for number in range(6):
        (tmp_path / f"m{number}.py").write_text("import os\n")
    child = _spawn_command(tmp_path, "check", "-j", "1", "--no-cache", ".")
    child.expect(pexpect.EOF)
    output = child.before
    child.close()
    assert "/6 files" in output  # the progress line is drawn on a terminal
    assert "ETA" not in output and "files/s" not in output
