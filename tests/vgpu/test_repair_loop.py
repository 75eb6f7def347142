"""`devfix verify --fix`'s loop in-process: the budget (--max-rounds, --timeout) and the
interactive answers, with the runs replaced by scripted results (the runs themselves are
tested through the command line in test_repair.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devfix.vgpu import repair as repair_module
from devfix.vgpu.repair import Answer, Decision, Offer, repair

#: Two unsafe DF103 sites (plain tensor attributes set in __init__), lines 6 and 7.
MODEL = (
    "import torch\n"
    "import torch.nn as nn\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.scale = torch.ones(3)\n"
    "        self.shift = torch.zeros(3)\n"
    "    def forward(self, x):\n"
    "        return x * self.scale + self.shift\n"
)
ERROR = (
    "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
)


def device_error(path: Path, line: int, findings: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's result as `run_one_json` gives it: a device error whose root is at `line`."""
    root = {
        "label": "other",
        "device": "cpu",
        "shape": [3],
        "root": True,
        "description": f"is the plain tensor attribute set at {path.name}:{line}",
        "site": {"path": str(path), "line": line, "function": "__init__", "kind": "attribute"},
        "findings": findings,
        "suggestion": None,
    }
    diagnosis = {"error": ERROR, "operands": [root]}
    return {"exit_code": 1, "timed_out": False, "diagnosis": diagnosis, "stdout": "", "stderr": "E"}


def df103(line: int) -> dict[str, Any]:
    return {"code": "DF103", "line": line, "fix": "register_buffer", "applicability": "unsafe"}


RUNS = {"ok": {"exit_code": 0, "timed_out": False, "diagnosis": None, "stdout": "ran\n"}}


class Script:
    """Scripted runs; records the keyword arguments of each."""

    def __init__(self, results: list[dict[str, Any]]) -> None:
        self.results: Iterator[dict[str, Any]] = iter(results)
        self.calls: list[dict[str, Any]] = []

    def __call__(self, script: str, args: Any, **kwargs: Any) -> tuple[int, dict[str, Any]]:
        self.calls.append(kwargs)
        result = next(self.results)
        return int(result["exit_code"]), result


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "net.py"
    path.write_text(MODEL)
    return path


def run(
    monkeypatch: pytest.MonkeyPatch, results: list[dict[str, Any]], **options: Any
) -> tuple[int, Script, list[tuple[str, bool]]]:
    script = Script(results)
    monkeypatch.setattr(repair_module, "run_one_json", script)
    said: list[tuple[str, bool]] = []
    settings: dict[str, Any] = {
        "gpus": 2, "env": {}, "unsafe": True, "max_rounds": 5, "keep_partial": False,
        "echo": lambda text, err: said.append((text, err)),
    }  # fmt: skip
    settings.update(options)
    code = repair("train.py", (), **settings)
    return code, script, said


def lines(said: list[tuple[str, bool]]) -> str:
    return "\n".join(text for text, _ in said)


def test_max_rounds_bounds_the_fixes_and_one_last_run_judges_them(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each round dies at another line, so only --max-rounds ends it: 2 fixes, 3 runs."""
    results = [device_error(model, 6, [df103(6)]), device_error(model, 7, [df103(7)])]
    code, script, said = run(monkeypatch, [*results, results[1]], max_rounds=2)
    assert code == 1
    assert len(script.calls) == 3
    assert "still failing after 2 rounds (--max-rounds)" in lines(said)
    assert lines(said).count("-> applied DF103") == 2
    assert model.read_text() == MODEL  # restored: the last run still failed


def test_max_rounds_one_then_the_script_runs(model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, script, said = run(
        monkeypatch, [device_error(model, 6, [df103(6)]), RUNS["ok"]], max_rounds=1
    )
    assert code == 0 and len(script.calls) == 2
    assert "devfix verify --fix: the script runs after 1 rounds" in lines(said)
    assert 'self.register_buffer("scale", torch.ones(3), persistent=False)' in model.read_text()


def test_every_run_gets_the_timeout_and_a_run_past_it_ends_the_repair(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    late = {"exit_code": 124, "timed_out": True, "diagnosis": None, "stdout": "", "stderr": ""}
    code, script, said = run(
        monkeypatch, [device_error(model, 6, [df103(6)]), late], timeout=7.5, max_rounds=5
    )
    assert code == 124
    assert [call["timeout"] for call in script.calls] == [7.5, 7.5]
    assert ("devfix verify --fix: round 2: the script ran past --timeout 7.5 s: stop", True) in said
    assert model.read_text() == MODEL


def test_a_script_that_exits_124_itself_is_not_a_timeout(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = {"exit_code": 124, "timed_out": False, "diagnosis": None, "stdout": "", "stderr": ""}
    code, _script, said = run(monkeypatch, [own], timeout=7.5)
    assert code == 124
    assert "the script failed (exit 124), not of a device error: stop" in lines(said)


class Answers:
    def __init__(self, *decisions: Decision) -> None:
        self.decisions = list(decisions)
        self.offers: list[Offer] = []

    def __call__(self, offer: Offer) -> Decision:
        self.offers.append(offer)
        return self.decisions.pop(0)


def test_interactive_yes_applies_the_shown_diff_unsafe_included(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = Answers(Decision(Answer.APPLY))
    code, script, said = run(
        monkeypatch, [device_error(model, 6, [df103(6)]), RUNS["ok"]], unsafe=False, ask=answers
    )
    assert code == 0
    (offer,) = answers.offers
    assert (offer.round, offer.number, offer.total) == (1, 1, 1)
    assert offer.proposal.code == "DF103" and offer.proposal.line == 6
    assert '+        self.register_buffer("scale", torch.ones(3), persistent=False)' in (
        offer.proposal.diff
    )
    assert model.read_text() == offer.proposed != MODEL
    assert "self.shift = torch.zeros(3)" in offer.proposed  # only the root's line changed
    assert "devfix verify --fix: round 1: applied DF103 at net.py:6 (unsafe)" in lines(said)
    # Keys go to the prompt: the script's stdin is closed.
    assert all(call["stdin"] is not None for call in script.calls)


def test_interactive_no_offers_the_next_fix_on_the_line_then_stops(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two rules on the root's line: `n` to the first offers the second; `n` again stops and
    nothing is written."""
    other = {"code": "DF101", "line": 6, "fix": "device=", "applicability": "safe"}
    answers = Answers(Decision(Answer.SKIP), Decision(Answer.SKIP))
    code, _script, said = run(monkeypatch, [device_error(model, 6, [df103(6), other])], ask=answers)
    assert code == 1
    assert [o.fix.code for o in answers.offers] == ["DF103"]  # DF101 changes nothing on line 6
    assert "  DF101 at net.py:6 would change nothing; not offered" in lines(said)
    assert "round 1: every fix at the root's line was skipped: stop" in lines(said)
    assert model.read_text() == MODEL


def test_interactive_edit_is_written_instead_of_the_fix(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edited = MODEL.replace("self.scale = torch.ones(3)", "self.scale = nn.Parameter(torch.ones(3))")
    answers = Answers(Decision(Answer.APPLY, edited))
    code, _script, said = run(
        monkeypatch, [device_error(model, 6, [df103(6)]), RUNS["ok"]], ask=answers
    )
    assert code == 0 and model.read_text() == edited
    assert "applied DF103 at net.py:6 (edited)" in lines(said)


def test_interactive_quit_restores_what_earlier_rounds_wrote(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = Answers(Decision(Answer.APPLY), Decision(Answer.QUIT))
    results = [device_error(model, 6, [df103(6)]), device_error(model, 7, [df103(7)])]
    code, _script, said = run(monkeypatch, results, ask=answers)
    assert code == 1 and len(answers.offers) == 2
    assert "round 2: quit at the prompt: stop" in lines(said)
    assert "the script still fails; restored net.py" in lines(said)
    assert model.read_text() == MODEL
    kept_answers = Answers(Decision(Answer.APPLY), Decision(Answer.QUIT))
    run(monkeypatch, results, ask=kept_answers, keep_partial=True)
    assert "register_buffer" in model.read_text()


def test_interrupt_restores_the_files(model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupt(offer: Offer) -> Decision:
        raise KeyboardInterrupt

    results = [device_error(model, 6, [df103(6)]), device_error(model, 7, [df103(7)])]
    answers = Answers(Decision(Answer.APPLY))

    def first_then_interrupt(offer: Offer) -> Decision:
        return answers(offer) if not answers.offers else interrupt(offer)

    with pytest.raises(KeyboardInterrupt):
        run(monkeypatch, results, ask=first_then_interrupt)
    assert model.read_text() == MODEL


def test_the_diff_offered_is_the_diff_written(model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fix that makes a long line is wrapped when written; the offer shows it wrapped."""
    long = MODEL.replace("torch.ones(3)", "torch.ones(3) * torch.tensor([1.0, 2.0, 3.0]).sqrt()")
    model.write_text(long)
    answers = Answers(Decision(Answer.APPLY))
    run(monkeypatch, [device_error(model, 6, [df103(6)]), RUNS["ok"]], ask=answers)
    (offer,) = answers.offers
    written = model.read_text()
    added = [line[1:] for line in offer.proposal.diff.splitlines() if line.startswith("+ ")]
    assert added and all(line in written.splitlines() for line in added)
    assert max(len(line) for line in written.splitlines()) <= 88  # it was wrapped


def test_the_prompt_reads_keys_until_an_answer(
    model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown key prints the help; `e` with nothing saved, or an edit that does not
    parse, goes back to the prompt; a parsed edit is the answer."""
    from devfix.cli import review as review_cli
    from devfix.cli import verify as verify_cli

    offer = repair_module.offer_for(
        repair_module.RoundFix("DF103", str(model), 6, "unsafe"), 1, 1, 1
    )
    assert offer is not None
    keys = iter("xeeey")
    edits = iter([None, "def broken(:\n", offer.proposed + "# mine\n"])
    monkeypatch.setattr(review_cli, "read_key", lambda prompt: next(keys))
    monkeypatch.setattr(verify_cli.click, "edit", lambda text, **kw: next(edits))
    decision = verify_cli._ask(offer)
    assert decision.answer is Answer.APPLY and decision.edited == offer.proposed + "# mine\n"
    shown = capsys.readouterr().out
    assert "[1/1] net.py:6:9  DF103" in shown and "UNSAFE fix" in shown
    assert "e - edit the file's proposed result in $EDITOR" in shown  # the help, for `x`
    assert "No edit was saved; back to the prompt" in shown
    assert "the edited code does not parse (line 1); the edit was discarded" in shown
    assert next(keys) == "y"  # the last edit answered; `y` was never read
    monkeypatch.setattr(review_cli, "read_key", lambda prompt: "n")
    assert verify_cli._ask(offer).answer is Answer.SKIP
    monkeypatch.setattr(review_cli, "read_key", lambda prompt: "q")
    assert verify_cli._ask(offer).answer is Answer.QUIT


def test_round_lines_keep_the_devices_of_the_error(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_error = (
        "RuntimeError: Expected all tensors to be on the same device, but got index is on cpu, "
        "different from other tensors on cuda:0 (when checking argument in method "
        "wrapper_CUDA__index_select)"
    )
    failing = device_error(model, 6, [df103(6)])
    failing["diagnosis"]["error"] = long_error
    _code, _script, said = run(monkeypatch, [failing, RUNS["ok"]])
    assert f"devfix verify --fix: round 1: {long_error} -> applied DF103 at net.py:6 (unsafe)" in (
        lines(said)
    )


# -- fixes made from the run (devfix.vgpu.synthesis) ------------------------------------------

LABELS = (
    "import torch\n"
    "import torch.nn.functional as F\n"
    "\n"
    "for step in range(3):\n"
    "    labels = torch.randint(0, 3, (4,))\n"
    "    logits = model(inputs)\n"
    "    loss = F.cross_entropy(logits, labels)\n"
)
LABELS_ERROR = "Expected all tensors to be on the same device, but got target is on cpu"


def labels_error(path: Path, *, line: int = 7, evidence: bool = True) -> dict[str, Any]:
    """A run that died in `F.cross_entropy(logits, labels)`: no finding covers the root (the
    `torch.randint` at line 5), the frame's names say which tensor is which."""
    root = {
        "label": "target",
        "device": "cpu",
        "shape": [4],
        "root": True,
        "description": f"was created at {path.name}:5 by torch.randint(...) without device=",
        "site": {"path": path.name, "line": 5, "function": "<module>", "kind": "created"},
        "findings": [],
        "suggestion": None,
    }
    other = {"label": "self", "device": "cuda:1", "root": False, "site": None, "findings": []}
    names = {
        "labels": {"kind": "tensor", "device": "cpu", "holds": "root"},
        "logits": {"kind": "tensor", "device": "cuda:1", "holds": "other-site"},
    }
    frame = {
        "path": path.name, "line": line, "col": 11, "end_line": line, "end_col": 42,
        "function": "<module>", "qualname": "<module>", "first_line": 1, "last_line": 7,
        "params": [], "module_method": False, "names": names,
    }  # fmt: skip
    diagnosis = {
        "error": LABELS_ERROR,
        "raised_at": {"path": path.name, "line": line},
        "operands": [other, root],
        "evidence": {"root_device": "cpu", "needed": "cuda:1", "frames": [frame]}
        if evidence
        else None,
    }
    return {"exit_code": 1, "timed_out": False, "diagnosis": diagnosis, "stdout": "", "stderr": "E"}


@pytest.fixture
def labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "train.py"
    path.write_text(LABELS)
    return path


FIXED = "    loss = F.cross_entropy(logits, labels.to(logits.device))\n"


def test_a_fix_from_the_run_needs_no_unsafe_fixes(
    labels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _script, said = run(monkeypatch, [labels_error(labels), RUNS["ok"]], unsafe=False)
    assert code == 0
    assert FIXED in labels.read_text()
    assert (
        f"devfix verify --fix: round 1: {LABELS_ERROR} -> applied runtime fix at train.py:7 "
        "(.to(logits.device))"
    ) in lines(said)
    assert "+    loss = F.cross_entropy(logits, labels.to(logits.device))" in lines(said)


def test_a_fix_from_the_run_that_does_not_get_past_the_error_is_taken_back(
    labels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, script, said = run(
        monkeypatch, [labels_error(labels), labels_error(labels)], keep_partial=True
    )
    assert code == 1 and len(script.calls) == 2
    assert (
        "  the runtime fix at train.py:7 did not get past this error; restored train.py: stop",
        True,
    ) in said
    assert labels.read_text() == LABELS  # taken back even with --keep-partial


def test_a_fix_from_the_run_that_gets_past_its_error_stays(
    labels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next run dies elsewhere (another line, nothing to fix there): the repair stops, and
    --keep-partial keeps the fix that got past its error."""
    later = labels_error(labels, line=6, evidence=False)
    code, _script, said = run(monkeypatch, [labels_error(labels), later], keep_partial=True)
    assert code == 1
    assert "did not get past" not in lines(said)
    assert (
        "  no fix from the run: the run kept no frame of your code to name the operands from"
        in (lines(said))
    )
    assert FIXED in labels.read_text()


def test_a_static_finding_with_an_unsafe_fix_is_not_replaced_by_one_from_the_run(
    labels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gated = labels_error(labels)
    root = gated["diagnosis"]["operands"][1]
    root["findings"] = [{"code": "DF101", "line": 5, "fix": "device=", "applicability": "unsafe"}]
    code, _script, said = run(monkeypatch, [gated], unsafe=False)
    assert code == 1
    assert "the finding at the root's line has an unsafe fix" in lines(said)
    assert "runtime fix" not in lines(said)
    assert labels.read_text() == LABELS


def test_interactive_offers_the_fix_from_the_run(
    labels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from devfix.types import Applicability

    answers = Answers(Decision(Answer.APPLY))
    code, _script, said = run(
        monkeypatch, [labels_error(labels), RUNS["ok"]], unsafe=False, ask=answers
    )
    assert code == 0
    (offer,) = answers.offers
    assert offer.fix.from_the_run and offer.proposal.code == "runtime"
    assert offer.proposal.applicability is Applicability.UNSAFE
    assert offer.proposal.location == "train.py:7:36"
    assert "+" + FIXED in offer.proposal.diff
    assert labels.read_text() == offer.proposed
    assert "round 1: applied runtime fix at train.py:7 (.to(logits.device))" in lines(said)


def test_interactive_skip_of_the_fix_from_the_run_stops(
    labels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = Answers(Decision(Answer.SKIP))
    code, _script, said = run(monkeypatch, [labels_error(labels)], ask=answers)
    assert code == 1
    assert "round 1: the fix from the run was skipped: stop" in lines(said)
    assert labels.read_text() == LABELS


def test_the_prompt_marks_a_fix_from_the_run(
    labels: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from devfix.cli import review as review_cli
    from devfix.cli import verify as verify_cli
    from devfix.vgpu.synthesis import RuntimeFix, synthesise

    made = synthesise(labels_error(labels)["diagnosis"])
    assert isinstance(made, RuntimeFix)
    fix = repair_module.RoundFix("runtime", made.path, made.line, "unsafe", made.summary)
    offer = repair_module.runtime_offer(1, fix, made)
    monkeypatch.setattr(review_cli, "read_key", lambda prompt: "y")
    assert verify_cli._ask(offer).answer is Answer.APPLY
    shown = capsys.readouterr().out
    assert "[1/1] train.py:7:36  runtime fix-from-the-run" in shown and "UNSAFE fix" in shown
    assert "Fix: .to(logits.device)" in shown
    assert "A fix made from this run, not a devfix rule: y keeps it only if the next run" in shown
