"""devfix.review: the interactive review without a terminal (keys, undo, edit, resume, writes)."""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest

from devfix import review
from devfix.engine import fix_file
from devfix.review import Answer, ReviewSession, ReviewState
from devfix.types import Applicability, Options

OPTIONS = Options(select=("DF101",), jobs=1)

TAGGER = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn


    class Tagger(nn.Module):
        def __init__(self, n_in=6, n_hidden=12):
            super().__init__()
            self.n_hidden = n_hidden
            self.lstm = nn.LSTM(n_in, n_hidden, batch_first=True)

        def forward(self, x):
            h0 = torch.zeros(1, x.size(0), self.n_hidden)  # initial state
            c0 = torch.zeros(1, x.size(0), self.n_hidden)
            out, _ = self.lstm(x, (h0, c0))
            return out
    """
)

MISC = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn


    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(4, 8)

        def init_hidden(self, batch_size):
            return torch.zeros(1, batch_size, 8)


    class Counter(nn.Module):
        def reset(self):
            self.count = torch.zeros(1)
    """
)

MASK = textwrap.dedent(
    """\
    import math

    import torch
    import torch.nn as nn


    class Attention(nn.Module):
        def forward(self, q, k):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            mask = torch.triu(torch.ones(q.shape[1], q.shape[1]), diagonal=1).bool()
            return scores.masked_fill(mask, float("-inf"))
    """
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "a_tagger.py").write_text(TAGGER)
    (tmp_path / "b_misc.py").write_text(MISC)
    (tmp_path / "c_mask.py").write_text(MASK)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _session(options: Options = OPTIONS, rejected: frozenset[str] = frozenset()) -> ReviewSession:
    return ReviewSession(review.analyse_paths(["."], options), options, rejected_before=rejected)


def _answer_all(session: ReviewSession, key: str) -> list[review.Proposal]:
    """Answer `key` to every prompt (display-only ones acknowledged); the proposals asked."""
    asked = []
    while (item := session.current()) is not None:
        if not item.fixable:
            session.acknowledge()
            continue
        asked.append(item)
        session.answer(key)
    return asked


def _contents(root: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(root.glob("*.py"))}


def test_analysis_proposes_each_fix_with_its_own_diff(project: Path) -> None:
    session = _session()
    items = [item for state in session.files for item in state.items]
    assert [(Path(i.path).name, i.line, i.fixable) for i in items] == [
        ("a_tagger.py", 12, True),
        ("a_tagger.py", 13, True),
        ("b_misc.py", 11, True),
        ("b_misc.py", 16, False),
        ("c_mask.py", 10, True),
    ]
    first = items[0]
    assert first.applicability is Applicability.SAFE
    assert first.diff.count("\n+ ") == 1 and first.diff.count("\n- ") == 1
    assert "+        h0 = torch.zeros(1, x.size(0), self.n_hidden, device=x.device)" in first.diff
    assert "c0 = torch.zeros(1, x.size(0), self.n_hidden)\n" in first.diff  # context, unchanged
    assert first.diff.startswith("--- a/a_tagger.py\n+++ b/a_tagger.py\n@@ -9,7 +9,7 @@")
    assert items[2].applicability is Applicability.UNSAFE  # offered although not --unsafe-fixes
    assert items[3].diff == "" and "no tensor or layer in scope" in items[3].message


def test_no_to_everything_changes_nothing(project: Path) -> None:
    before = _contents(project)
    session = _session()
    assert len(_answer_all(session, "n")) == 4
    results = review.write_reviewed(session)
    assert _contents(project) == before
    assert all(r.status.value == "unchanged" for r in results)
    assert session.counts() == {"accepted": 0, "rejected": 4, "unanswered": 0, "display_only": 1}


def test_yes_to_everything_equals_apply_with_unsafe_fixes(project: Path, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    reference.mkdir()
    for name in ("a_tagger.py", "b_misc.py", "c_mask.py"):
        shutil.copy(project / name, reference / name)
        fix_file(str(reference / name), Options(select=("DF101",), unsafe_fixes=True))
    session = _session()
    _answer_all(session, "y")
    review.write_reviewed(session)
    assert _contents(project) == _contents(reference)
    assert _contents(project) != {"a_tagger.py": TAGGER, "b_misc.py": MISC, "c_mask.py": MASK}


def test_y_and_n_apply_exactly_the_accepted_fix(project: Path) -> None:
    session = _session()
    session.answer("y")
    session.answer("n")
    session.answer("q")
    assert session.current() is None
    review.write_reviewed(session)
    text = (project / "a_tagger.py").read_text()
    assert "h0 = torch.zeros(1, x.size(0), self.n_hidden, device=x.device)  # initial state" in text
    assert "c0 = torch.zeros(1, x.size(0), self.n_hidden)\n" in text
    assert (project / "b_misc.py").read_text() == MISC
    assert session.counts()["unanswered"] == 2


def test_quit_at_the_first_prompt_changes_nothing(project: Path) -> None:
    before = _contents(project)
    session = _session()
    session.answer("q")
    review.write_reviewed(session)
    assert _contents(project) == before


def test_a_takes_the_rest_of_the_file_and_d_skips_it(project: Path) -> None:
    session = _session()
    session.answer("a")
    item = session.current()
    assert item is not None and Path(item.path).name == "b_misc.py"
    session.answer("d")
    shown = session.current()
    assert shown is not None and not shown.fixable  # the display-only finding is still shown
    session.acknowledge()
    item = session.current()
    assert item is not None and Path(item.path).name == "c_mask.py"
    session.answer("n")
    review.write_reviewed(session)
    assert (project / "a_tagger.py").read_text().count("device=x.device") == 2
    assert (project / "b_misc.py").read_text() == MISC


def test_capital_a_accepts_the_rule_in_every_later_file(project: Path) -> None:
    options = Options(select=("DF101", "DF102"), jobs=1)
    (project / "d_fixed.py").write_text(
        textwrap.dedent(
            """\
            import torch
            import torch.nn as nn


            class Embed(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.device = torch.device("cuda:0")
                    self.tokens = nn.Embedding(10, 4)

                def forward(self, ids):
                    pos = torch.arange(ids.shape[1]).to(self.device)
                    return self.tokens(ids) + pos[:, None]
            """
        )
    )
    session = _session(options)
    session.answer("n")
    session.answer("A")  # second DF101 of a_tagger: it and every later DF101
    rest = _answer_all(session, "n")
    assert {item.code for item in rest} <= {"DF102"}
    review.write_reviewed(session)
    assert (
        "c0 = torch.zeros(1, x.size(0), self.n_hidden, device=x.device)"
        in (project / "a_tagger.py").read_text()
    )
    assert (
        "h0 = torch.zeros(1, x.size(0), self.n_hidden)  #" in (project / "a_tagger.py").read_text()
    )
    assert "device=self.gru.weight_ih_l0.device" in (project / "b_misc.py").read_text()
    assert "device=scores.device" in (project / "c_mask.py").read_text()


def test_undo_takes_back_one_keystroke_whole(project: Path) -> None:
    session = _session()
    first = session.current()
    assert not session.can_undo()
    session.answer("y")
    session.answer("n")
    assert session.undo() == session.current()
    second = session.current()
    assert second is not None and second.line == 13
    assert session.files[0].answers == {first.key: Answer.ACCEPT} if first else False
    assert session.undo() == first
    assert session.files[0].answers == {}
    # `A` answers many at once; one undo takes all of them back, and the rule is forgotten.
    session.answer("A")
    assert session.current() is not None and not session.current().fixable  # type: ignore[union-attr]
    session.acknowledge()  # the display-only notice is passed over by undo
    assert session.current() is None
    assert session.undo() == first
    assert all(not state.answers for state in session.files)
    assert session.auto_rules == set()
    # `d` likewise.
    session.answer("d")
    assert session.undo() == first
    assert not session.files[0].answers


def test_edit_becomes_the_answer_and_later_fixes_are_recomputed(project: Path) -> None:
    session = _session()
    session.answer("y")
    proposed = session.proposed_text()
    assert proposed.count("device=x.device") == 2  # the accepted fix and this one
    edited = proposed.replace("device=x.device)\n", "device=x.device, dtype=x.dtype)\n")
    session.edited(edited)
    item = session.current()
    assert item is not None and Path(item.path).name == "b_misc.py"
    _answer_all(session, "n")
    results = review.write_reviewed(session)
    assert (project / "a_tagger.py").read_text() == edited
    assert [r.reason for r in results] == ["", "", ""]
    assert session.counts()["accepted"] == 2


def test_edit_that_leaves_a_fix_undone_asks_about_it(project: Path) -> None:
    session = _session()
    text = session.proposed_text()
    # The user fixes the first call by hand in another way and leaves the second alone.
    edited = text.replace(
        "h0 = torch.zeros(1, x.size(0), self.n_hidden, device=x.device)",
        "h0 = x.new_zeros(1, x.size(0), self.n_hidden)",
    )
    session.edited(edited)
    item = session.current()
    assert item is not None and item.line == 13 and item.fixable
    session.answer("y")
    _answer_all(session, "n")
    review.write_reviewed(session)
    result = (project / "a_tagger.py").read_text()
    assert "h0 = x.new_zeros(1, x.size(0), self.n_hidden)" in result
    assert "c0 = torch.zeros(1, x.size(0), self.n_hidden, device=" in result  # recomputed


def test_edit_is_undone_whole_and_bad_edits_are_refused(project: Path) -> None:
    session = _session()
    first = session.current()
    with pytest.raises(review.InputError, match="does not parse"):
        session.edited("def broken(:\n")
    assert session.current() == first
    session.edited(session.proposed_text() + "# reviewed\n")
    assert session.undo() == first
    assert session.files[0].code == TAGGER and not session.files[0].edited
    _answer_all(session, "n")
    review.write_reviewed(session)
    assert (project / "a_tagger.py").read_text() == TAGGER


def test_keys_survive_moved_lines_and_tell_twins_apart(tmp_path: Path) -> None:
    from devfix.engine import check_source

    moved = "# a comment\n\n" + TAGGER
    keys = review.proposal_keys("m.py", TAGGER, check_source(TAGGER, options=OPTIONS))
    moved_keys = review.proposal_keys("m.py", moved, check_source(moved, options=OPTIONS))
    assert keys == moved_keys and len(set(keys)) == 2
    twins = TAGGER.replace("c0 = torch.zeros", "h1 = torch.zeros").replace(
        "h0 = torch.zeros", "h1 = torch.zeros"
    )
    twin_keys = review.proposal_keys("m.py", twins, check_source(twins, options=OPTIONS))
    assert len(set(twin_keys)) == 2
    assert review.proposal_keys("other.py", TAGGER, check_source(TAGGER, options=OPTIONS)) != keys


STATE = ".devfix_cache/review.json"


def test_state_file_and_resume_skip_rejected_fixes(project: Path) -> None:
    session = _session()
    session.answer("n")  # reject h0
    session.answer("q")
    state = ReviewState.load(STATE)
    state.save(session.state_entries(), review.session_keys(session))
    saved = ReviewState.load(STATE)
    assert len(saved.rejected()) == 1
    entry = next(iter(saved.entries.values()))
    assert entry["code"] == "DF101" and entry["path"] == "a_tagger.py"
    # Lines move above the rejected fix: it is still recognised.
    (project / "a_tagger.py").write_text("# moved\n" + TAGGER)
    resumed = _session(rejected=frozenset(saved.rejected()))
    assert resumed.skipped_earlier == 1
    item = resumed.current()
    assert item is not None and item.line == 14  # the c0 fix, not the rejected h0 one
    assert resumed.progress() == (1, 3)
    _answer_all(resumed, "y")
    review.write_reviewed(resumed)
    text = (project / "a_tagger.py").read_text()
    assert "h0 = torch.zeros(1, x.size(0), self.n_hidden)  #" in text
    assert "c0 = torch.zeros(1, x.size(0), self.n_hidden, device=x.device)" in text
    # The earlier rejection stays on record; this session's answers are added.
    saved.save(resumed.state_entries(), review.session_keys(resumed))
    final = ReviewState.load(STATE)
    assert len(final.rejected()) == 1
    assert sum(e["answer"] == "accepted" for e in final.entries.values()) == 3


def test_broken_state_file_is_an_input_error(project: Path) -> None:
    (project / ".devfix_cache").mkdir()
    (project / STATE).write_text("{not json")
    with pytest.raises(review.InputError, match="review state"):
        ReviewState.load(STATE)


def test_file_changed_during_review_is_not_written(project: Path) -> None:
    session = _session()
    _answer_all(session, "y")
    (project / "a_tagger.py").write_text(TAGGER + "# edited meanwhile\n")
    results = review.write_reviewed(session)
    failed = [r for r in results if r.status.value == "failed"]
    assert len(failed) == 1 and "changed on disk" in failed[0].reason
    assert (project / "a_tagger.py").read_text() == TAGGER + "# edited meanwhile\n"


def test_parallel_analysis_matches_serial(project: Path) -> None:
    (project / "d_copy.py").write_text(TAGGER)
    serial = list(review.analyse_paths(["."], Options(select=("DF101",), jobs=1)))
    parallel = list(review.analyse_paths(["."], Options(select=("DF101",), jobs=2)))
    assert serial == parallel


def test_unreadable_files_become_failed_analyses(project: Path) -> None:
    (project / "broken.py").write_text("import torch\ndef f(:\n")
    analyses = {Path(a.path).name: a for a in review.analyse_paths(["."], OPTIONS)}
    assert analyses["broken.py"].failed and "does not parse" in analyses["broken.py"].error
    missing = list(review.analyse_paths([os.path.join(str(project), "nope.py")], OPTIONS))
    assert missing[0].failed


def test_edit_after_a_rejection_keeps_it_and_asks_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    source = textwrap.dedent(
        """\
        import torch
        import torch.nn as nn


        class M(nn.Module):
            def forward(self, x):
                a = torch.zeros(x.size(0))
                b = torch.ones(x.size(0))
                c = torch.rand(x.size(0))
                return x + a + b + c
        """
    )
    (tmp_path / "m.py").write_text(source)
    session = _session()
    assert [item.line for item in session.files[0].items] == [7, 8, 9]
    session.answer("n")
    session.edited(session.proposed_text().replace("b = ", "b_ = ").replace("+ b +", "+ b_ +"))
    item = session.current()
    assert item is not None and item.line == 9  # `a` stays rejected, `c` is asked
    session.answer("y")
    assert session.current() is None
    review.write_reviewed(session)
    result = (tmp_path / "m.py").read_text()
    assert "a = torch.zeros(x.size(0))\n" in result
    assert "b_ = torch.ones(x.size(0), device=" in result
    assert "c = torch.rand(x.size(0), device=" in result


def test_proposed_diff_is_what_yes_writes_when_the_fix_wraps_a_long_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A project with a short line length: the fix's line is wrapped on write, and the review
    # must show that wrapped text, not the bare edit.
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 60\n")
    (tmp_path / "tagger.py").write_text(TAGGER)
    monkeypatch.chdir(tmp_path)
    session = _session()
    first = session.current()
    assert first is not None and first.fixable
    added = [line[1:] for line in first.diff.splitlines() if line.startswith("+ ")]
    assert len(added) > 1 and all(len(line) <= 60 for line in added)
    session.answer("y")
    while (item := session.current()) is not None:
        session.answer("n") if item.fixable else session.acknowledge()
    review.write_reviewed(session)
    written = (tmp_path / "tagger.py").read_text()
    assert "\n".join(added) in written
