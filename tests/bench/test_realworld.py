"""The real-world corpus scorer (`bench/realworld.py`): locating sites and judging them.

Every input here is a small synthetic file written for the test; no corpus file is used.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def py(rw: ModuleType, text: str) -> Any:
    return rw.read_program(textwrap.dedent(text).encode(), "train.py")


def notebook_json(cells: list[tuple[str, str]], **extra: Any) -> bytes:
    notebook: dict[str, Any] = {
        "cells": [
            {"cell_type": kind, "metadata": {}, "source": source.splitlines(keepends=True)}
            | ({"outputs": [], "execution_count": None} if kind == "code" else {})
            for kind, source in cells
        ],
        "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    notebook.update(extra)
    return json.dumps(notebook, indent=1).encode()


def site(rw: ModuleType, **fields: Any) -> Any:
    values: dict[str, Any] = {
        "name": "s",
        "rule": "DF101",
        "pattern": "p",
        "scope": "<module>",
        "anchor": ("x",),
        "expect": "fix",
        "fix": "f",
    }
    values.update(fields)
    for key in ("anchor", "accept", "reject", "order", "flag_rules"):
        if isinstance(values.get(key), list):
            values[key] = tuple(values[key])
    return rw.Site(**values)


def texts(located: list[Any]) -> list[str]:
    return [loc.text for loc in located]


MODEL = """\
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = nn.Embedding(10, 4)

    def forward(self, src):
        pos = torch.arange(0, src.shape[1])  # positions
        return self.pos(pos)


def train(model, loader):
    def step(batch):
        out = model(batch.to("cuda"))
        return out.sum()

    for batch in loader:
        loss = step(batch)
        loss.backward()


model = Encoder()
if __name__ == "__main__":
    model = nn.DataParallel(model)
    model.to("cuda:0")
    train(model, [])
"""


# --- scopes ----------------------------------------------------------------------------------


def test_method_scope_is_found_by_dotted_path(realworld: ModuleType) -> None:
    program = py(realworld, MODEL)
    (scope,) = realworld.find_scopes(program, "Encoder.forward")
    assert texts(realworld.locate([scope], ["arange"])) == ["pos = torch.arange(0, src.shape[1])"]
    assert realworld.find_scopes(program, "Encoder.missing") == []
    assert realworld.find_scopes(program, "forward") == []  # methods need the class


def test_nested_def_has_its_own_scope_and_is_not_part_of_the_outer_one(
    realworld: ModuleType,
) -> None:
    program = py(realworld, MODEL)
    (inner,) = realworld.find_scopes(program, "train.step")
    assert texts(realworld.locate([inner], ["batch", "to"])) == ['out = model(batch.to("cuda"))']
    outer = realworld.find_scopes(program, "train")
    assert realworld.locate(outer, ["batch", "to"]) == []
    assert texts(realworld.locate(outer, ["step", "batch"])) == ["loss = step(batch)"]


def test_module_scope_includes_main_block_and_excludes_function_bodies(
    realworld: ModuleType,
) -> None:
    program = py(realworld, MODEL)
    scopes = realworld.find_scopes(program, "<module>")
    assert texts(realworld.locate(scopes, ["DataParallel"])) == ["model = nn.DataParallel(model)"]
    assert realworld.locate(scopes, ["arange"]) == []  # inside Encoder.forward
    text = scopes[0].text()
    assert "nn.DataParallel(model)" in text and "import torch" in text
    assert "arange" not in text and "def train" not in text


def test_defs_under_if_blocks_and_redefinitions_are_all_scopes(realworld: ModuleType) -> None:
    program = py(
        realworld,
        """\
        import torch
        if torch.cuda.is_available():
            def load(path):
                return torch.load(path)
        else:
            def load(path):
                return torch.load(path, map_location="cpu")
        """,
    )
    scopes = realworld.find_scopes(program, "load")
    assert len(scopes) == 2
    assert texts(realworld.locate(scopes, ["load", "path"])) == [
        "return torch.load(path)",
        'return torch.load(path, map_location="cpu")',
    ]


def test_notebook_cells_with_magics_are_scopes(realworld: ModuleType) -> None:
    data = notebook_json(
        [
            ("markdown", "# Training\n"),
            ("code", "!pip install -q timm\n%matplotlib inline\nimport torch\n"),
            ("code", "%%bash\nnvidia-smi\n"),
            ("code", "files = !ls data\nif torch.cuda.is_available():\n    !nvidia-smi\n"
                     "    device = torch.device('cuda:0')\n"),
            ("code", "def train(model):\n    model.to(device)\n"),
        ]
    )  # fmt: skip
    program = realworld.read_program(data, "nb.ipynb")
    assert program.parses
    assert [unit.cell for unit in program.units] == [1, 2, 3, 4]
    (cell,) = realworld.find_scopes(program, "cell 3")
    (located,) = realworld.locate([cell], ["device", "torch"])
    assert located.text == "device = torch.device('cuda:0')"
    assert located.lines == (4, 4)  # the line inside the cell
    assert realworld.find_scopes(program, "cell 9") == []
    (train,) = realworld.find_scopes(program, "train")
    assert train.unit.cell == 4
    assert texts(realworld.locate(realworld.find_scopes(program, "<module>"), ["device"])) == [
        "device = torch.device('cuda:0')"
    ]


def test_percent_inside_brackets_is_python_not_a_magic(realworld: ModuleType) -> None:
    source = 'msg = ("%d of %d"\n       % (1, 2))\n!echo hi \\\n  there\nx = 1\n'
    # the `%` line continues the bracket; the shell line's continuation is masked with it
    assert realworld.mask_magics(source) == 'msg = ("%d of %d"\n       % (1, 2))\npass\n\nx = 1\n'
    assert realworld.mask_magics("if ok:\r\n    %time f()\r\n") == "if ok:\r\n    pass\r\n"
    assert realworld.mask_magics("%%time\nx = 1\n") is None
    assert realworld.mask_magics("model?\nx = 1\n") == "pass\nx = 1\n"


# --- statements ------------------------------------------------------------------------------


def test_smallest_statement_holding_all_anchors(realworld: ModuleType) -> None:
    program = py(
        realworld,
        """\
        import torch
        n_gpu = torch.cuda.device_count()
        if n_gpu > 1:
            model = torch.nn.DataParallel(model)
        for epoch in range(3):
            loss = model(x).mean()
        """,
    )
    scopes = realworld.find_scopes(program, "<module>")
    # both anchors in the body line: that line, not the `if`
    assert texts(realworld.locate(scopes, ["model", "DataParallel"])) == [
        "model = torch.nn.DataParallel(model)"
    ]
    # one anchor in the header, one in the body: the whole `if` statement
    (located,) = realworld.locate(scopes, ["n_gpu", "DataParallel"])
    assert located.text == "if n_gpu > 1: model = torch.nn.DataParallel(model)"
    assert located.lines == (3, 4)


def test_every_smallest_candidate_is_returned_and_comments_are_not_code(
    realworld: ModuleType,
) -> None:
    program = py(
        realworld,
        """\
        import torch
        a = torch.load("a.pt")  # map_location would be nice
        b = torch.load("b.pt", map_location="cpu")
        """,
    )
    scopes = realworld.find_scopes(program, "<module>")
    assert len(realworld.locate(scopes, ["load"])) == 2
    # keyword names are identifiers; the word in the comment is not
    assert texts(realworld.locate(scopes, ["load", "map_location"])) == [
        'b = torch.load("b.pt", map_location="cpu")'
    ]
    load_a = site(realworld, anchor=["load", "a"], accept=["map_location"])
    assert realworld.self_check(load_a, program) == ""
    assert not realworld.is_fixed(load_a, program)[0]  # the comment does not satisfy accept


# --- judging ---------------------------------------------------------------------------------

BEFORE = """\
import torch
import torch.optim as optim

def main():
    model = Net()
    optimizer = optim.SGD(model.parameters(), lr=0.1)
    model.to(device)
    state = torch.load("ckpt.pt")
    model = torch.nn.DataParallel(model)
"""


def finding(rw: ModuleType, code: str, line: int, message: str = "why", cell: Any = None) -> Any:
    return rw.Finding(code=code, line=line, end_line=line, message=message, cell=cell)


def test_accept_and_reject(realworld: ModuleType) -> None:
    original = py(realworld, BEFORE)
    load = site(
        realworld,
        scope="main",
        anchor=["state", "load"],
        accept=[r"map_location\s*="],
        reject=[r"map_location\s*=\s*['\"]cuda"],
    )
    good = py(realworld, BEFORE.replace('"ckpt.pt")', '"ckpt.pt", map_location="cpu")'))
    bad = py(realworld, BEFORE.replace('"ckpt.pt")', '"ckpt.pt", map_location="cuda:0")'))
    assert realworld.judge(load, original, good, []).outcome == "fixed"
    verdict = realworld.judge(load, original, bad, [])
    assert verdict.outcome == "missed"
    assert "rewritten, fix not accepted" in verdict.detail
    assert realworld.judge(load, original, original, []).outcome == "missed"


def test_order_uses_the_first_occurrence_of_each_pattern(realworld: ModuleType) -> None:
    original = py(realworld, BEFORE)
    opt = site(
        realworld,
        rule="DF301",
        scope="main",
        anchor=["optimizer", "SGD"],
        order=[r"model\.to\(device\)", r"optim\.SGD\("],
    )
    moved = py(
        realworld,
        BEFORE.replace(
            "    optimizer = optim.SGD(model.parameters(), lr=0.1)\n    model.to(device)\n",
            "    model.to(device)\n    optimizer = optim.SGD(model.parameters(), lr=0.1)\n",
        ),
    )
    assert realworld.judge(opt, original, moved, []).outcome == "fixed"
    # a second optimizer created after the move does not make the first one right
    again = py(realworld, BEFORE + "    optimizer = optim.SGD(model.parameters(), lr=0.1)\n")
    assert realworld.judge(opt, original, again, []).outcome == "missed"
    assert realworld.in_order(["a", "b"], "a b") and not realworld.in_order(["a", "b"], "b a b")
    assert not realworld.in_order(["a", "c"], "a b")


def test_gone_ok_lets_the_scope_decide_when_the_statement_is_removed(
    realworld: ModuleType,
) -> None:
    original = py(realworld, BEFORE)
    converted = py(
        realworld,
        BEFORE.replace(
            "    model = torch.nn.DataParallel(model)\n",
            "    model = DistributedDataParallel(model, device_ids=[local_rank])\n",
        ),
    )
    dp = dict(
        rule="DF401", scope="main", anchor=["DataParallel"], accept=["DistributedDataParallel"]
    )
    assert realworld.judge(
        site(realworld, **dp, gone_ok=True), original, converted, []
    ).outcome == ("fixed")
    verdict = realworld.judge(site(realworld, **dp), original, converted, [])
    assert verdict.outcome == "missed" and "statement gone" in verdict.detail
    # gone, and the scope does not hold the fix either
    deleted = py(realworld, BEFORE.replace("    model = torch.nn.DataParallel(model)\n", ""))
    assert realworld.judge(site(realworld, **dp, gone_ok=True), original, deleted, []).outcome == (
        "missed"
    )


def test_where_scope_matches_the_whole_scope(realworld: ModuleType) -> None:
    original = py(realworld, BEFORE)
    dp = site(
        realworld,
        rule="DF401",
        scope="main",
        anchor=["DataParallel"],
        where="scope",
        accept=["init_process_group"],
        reject=[r"\bDataParallel\("],
    )
    converted = py(
        realworld,
        BEFORE.replace(
            "    model = torch.nn.DataParallel(model)\n",
            "    dist.init_process_group('gloo')\n    model = DDP(model)\n",
        ),
    )
    assert realworld.judge(dp, original, converted, []).outcome == "fixed"
    half = py(realworld, BEFORE + "    dist.init_process_group('gloo')\n")
    assert realworld.judge(dp, original, half, []).outcome == "missed"
    # a finding anywhere in the scope flags a where="scope" site
    assert realworld.judge(dp, original, original, [finding(realworld, "DF401", 5)]).outcome == (
        "flagged"
    )


def test_flagged_needs_a_finding_with_a_message_on_the_statement(realworld: ModuleType) -> None:
    original = py(realworld, BEFORE)
    load = site(
        realworld, rule="DF302", scope="main", anchor=["state", "load"], accept=["map_location"]
    )
    on_line = [finding(realworld, "DF999", 8)]  # any rule flags a fix site
    assert realworld.judge(load, original, original, on_line).outcome == "flagged"
    assert realworld.judge(load, original, original, [finding(realworld, "DF302", 7)]).outcome == (
        "missed"
    )
    empty = [finding(realworld, "DF302", 8, message="  ")]
    assert realworld.judge(load, original, original, empty).outcome == "missed"
    in_a_cell = [finding(realworld, "DF302", 8, cell=1)]  # a .py file has no cells
    assert realworld.judge(load, original, original, in_a_cell).outcome == "missed"


def test_flag_site_flagged_missed_or_wrong_fix(realworld: ModuleType) -> None:
    data = notebook_json(
        [
            ("code", "import torch\nmodel = Net()\n"),
            ("code", "!nvidia-smi\nmodel = torch.nn.DataParallel(model)\nmodel.cuda()\n"),
        ]
    )
    original = realworld.read_program(data, "nb.ipynb")
    dp = site(realworld, rule="DF401", scope="cell 2", anchor=["DataParallel"], expect="flag")
    flagged = realworld.judge(dp, original, original, [finding(realworld, "DF401", 2, cell=2)])
    assert flagged.outcome == "flagged" and flagged.detail.startswith("DF401")
    other_cell = [finding(realworld, "DF401", 2, cell=1)]
    assert realworld.judge(dp, original, original, other_cell).outcome == "missed"
    other_rule = [finding(realworld, "DF304", 2, cell=2)]
    assert realworld.judge(dp, original, original, other_rule).outcome == "missed"
    with_rules = site(
        realworld, scope="cell 2", anchor=["DataParallel"], expect="flag", flag_rules=["DF304"]
    )
    assert realworld.judge(with_rules, original, original, other_rule).outcome == "flagged"
    rewritten = realworld.read_program(
        data.replace(b"torch.nn.DataParallel(model)", b"DDP(model)"), "nb.ipynb"
    )
    verdict = realworld.judge(dp, original, rewritten, [finding(realworld, "DF401", 2, cell=2)])
    assert verdict.outcome == "wrong-fix"


def test_fix_site_rewritten_wrongly_but_reported_is_flagged_with_a_note(
    realworld: ModuleType,
) -> None:
    original = py(realworld, BEFORE)
    load = site(realworld, scope="main", anchor=["state", "load"], accept=["map_location"])
    wrong = py(realworld, BEFORE.replace('torch.load("ckpt.pt")', 'torch.load("ckpt.pt").cuda()'))
    verdict = realworld.judge(load, original, wrong, [finding(realworld, "DF302", 8)])
    assert verdict.outcome == "flagged"
    assert verdict.detail.startswith("statement rewritten, fix not accepted")
    assert verdict.after == ['state = torch.load("ckpt.pt").cuda()']


def test_self_check_catches_sites_that_cannot_be_scored(realworld: ModuleType) -> None:
    original = py(realworld, BEFORE)
    assert "scope 'nope' not found" in realworld.self_check(site(realworld, scope="nope"), original)
    missing_anchor = site(realworld, scope="main", anchor=["arange"], accept=["x"])
    assert "holds all of" in realworld.self_check(missing_anchor, original)
    already = site(realworld, scope="main", anchor=["state", "load"], accept=["ckpt"])
    assert "already passes" in realworld.self_check(already, original)
    flag = site(realworld, scope="main", anchor=["state", "load"], expect="flag")
    assert realworld.self_check(flag, original) == ""


# --- whole files -----------------------------------------------------------------------------


def report(rw: ModuleType, role: str = "buggy", basename: str = "train.py") -> Any:
    return rw.FileReport("f", role, "script", basename)


def test_clean_control_byte_identical_or_rewritten(realworld: ModuleType) -> None:
    data = b"import torch\r\nx = torch.zeros(3)\r\n"
    untouched = report(realworld, "clean")
    realworld.examine(untouched, None, data, data, data, [], [])
    assert not untouched.changed and not untouched.not_idempotent and not untouched.broken
    lf = report(realworld, "clean")
    realworld.examine(
        lf, None, data, data.replace(b"\r\n", b"\n"), data.replace(b"\r\n", b"\n"), [], []
    )
    assert lf.changed  # a line-ending change is a change
    text, figures = realworld.summary([untouched, lf], {})
    assert figures["clean"] == 2 and figures["clean_rewritten"] == ["f"]
    assert "clean controls byte-identical: 1/2" in text


def test_broken_and_unstable_files(realworld: ModuleType) -> None:
    data = b"import torch\nx = torch.zeros(3)\n"
    broken = report(realworld)
    realworld.examine(broken, None, data, data + b"y = (\n", data + b"y = (\n", [], [])
    assert broken.broken.startswith("does not parse")
    unstable = report(realworld)
    realworld.examine(unstable, None, data, data + b"y = 1\n", data + b"y = 2\n", [], [])
    assert unstable.not_idempotent and not unstable.broken
    # a file that never parsed is not "broken" by a rewrite
    never = report(realworld)
    realworld.examine(never, None, b"print 'x'\n", b"print 'y'\n", b"print 'y'\n", [], [])
    assert never.broken == ""


def test_notebook_validity(realworld: ModuleType) -> None:
    data = notebook_json([("code", "import torch\n")])
    good = report(realworld, basename="nb.ipynb")
    realworld.examine(
        good, None, data, data.replace(b"import torch", b"import torch "), data, [], []
    )
    assert good.changed and not good.broken
    for bad_bytes in (
        data[:-2],  # truncated JSON
        data.replace(b'"nbformat": 4', b'"nbformat": "4"'),
        data.replace(b'"outputs": []', b'"outputs": {}'),
        notebook_json([("code", "def f(:\n")]),  # a cell that no longer parses
    ):
        broken = report(realworld, basename="nb.ipynb")
        realworld.examine(broken, None, data, bad_bytes, bad_bytes, [], [])
        assert broken.broken, bad_bytes[-80:]


def test_examine_judges_sites_and_records_sites_not_found(realworld: ModuleType) -> None:
    original = BEFORE.encode()
    fixed = original.replace(b'"ckpt.pt")', b'"ckpt.pt", map_location="cpu")')
    sites = realworld.SitesFile(
        "f",
        "buggy",
        "one GPU",
        (
            site(
                realworld,
                name="load",
                rule="DF302",
                scope="main",
                anchor=["load"],
                accept=["map_location"],
            ),
            site(
                realworld,
                name="gone",
                rule="DF101",
                scope="Encoder.forward",
                anchor=["x"],
                accept=["y"],
            ),
        ),
    )
    file_report = report(realworld)
    realworld.examine(file_report, sites, original, fixed, fixed, [], [])
    assert file_report.verdicts["load"].outcome == "fixed"
    assert file_report.site_errors == ["site gone: scope 'Encoder.forward' not found"]
    only = report(realworld)
    realworld.examine(only, sites, original, fixed, fixed, [], [], rule="DF101")
    assert only.verdicts == {}
    text, figures = realworld.summary([file_report], {"f": sites})
    assert figures["rules"]["DF302"] == {
        "sites": 1, "fix_sites": 1, "fixed": 1, "flagged": 0, "missed": 0, "wrong-fix": 0,
    }  # fmt: skip
    assert "fixed: 1/1 (100.0 %)" in text
    assert "sites not found in their original file" in text


def test_summary_percentages_and_misses(realworld: ModuleType) -> None:
    sites = realworld.SitesFile(
        "f",
        "buggy",
        "c",
        (
            site(realworld, name="a", rule="DF101"),
            site(realworld, name="b", rule="DF101"),
            site(realworld, name="c", rule="DF401", expect="flag"),
            site(realworld, name="d", rule="DF401", expect="flag"),
        ),
    )
    file_report = report(realworld)
    file_report.verdicts = {
        "a": realworld.Verdict("fixed"),
        "b": realworld.Verdict("missed", "no finding on the statement"),
        "c": realworld.Verdict("flagged", "DF401: notebook"),
        "d": realworld.Verdict("wrong-fix", "rewritten"),
    }
    text, figures = realworld.summary([file_report], {"f": sites})
    assert "fixed: 1/2 (50.0 %) of the sites where a fix is expected" in text
    assert "fixed or flagged with a reason: 2/4 (50.0 %) of all sites" in text
    assert figures["fixed_percent"] == 50.0 and figures["fixed_or_flagged_percent"] == 50.0
    assert "  f  b  DF101  fix  missed  no finding on the statement" in text
    assert "  f  d  DF401  flag  wrong-fix  rewritten" in text


# --- the corpus description ------------------------------------------------------------------

HEADER = "id\trepo\tcommit\tpath\tkind\trole\tbytes\tsha256\tnote\n"


def write_spec(tmp_path: Path, rows: list[tuple[str, str, bytes]], sites: dict[str, str]) -> Path:
    """A spec folder (manifest + sites) and a corpus folder for (id, role, content) rows."""
    spec, files = tmp_path / "spec", tmp_path / "files"
    (spec / "sites").mkdir(parents=True)
    lines = [HEADER]
    for row_id, role, data in rows:
        digest = hashlib.sha256(data).hexdigest()
        lines.append(
            f"{row_id}\towner/repo\t{'a' * 40}\tsrc/train.py\tscript\t{role}\t{len(data)}\t{digest}\tnote\n"
        )
        (files / row_id).mkdir(parents=True)
        (files / row_id / "train.py").write_bytes(data)
    (spec / "manifest.tsv").write_text("".join(lines))
    for row_id, text in sites.items():
        (spec / "sites" / f"{row_id}.toml").write_text(textwrap.dedent(text))
    return spec


LOAD_SITE = """\
    role = "buggy"
    configuration = "checkpoint saved on cuda:1, loaded on a 1-GPU machine"
    [[site]]
    name = "load"
    rule = "DF302"
    pattern = "torch.load without map_location"
    scope = "main"
    anchor = ["state", "load"]
    line = 8
    expect = "fix"
    fix = "torch.load(path, map_location='cpu')"
    accept = ['map_location\\s*=']
"""


def test_validate_accepts_a_sound_corpus_and_reports_each_problem(
    realworld: ModuleType, tmp_path: Path
) -> None:
    clean = b"import torch\nx = torch.load('a', map_location='cpu')\n"
    spec = write_spec(
        tmp_path,
        [("buggy-one", "buggy", BEFORE.encode()), ("clean-one", "clean", clean)],
        {"buggy-one": LOAD_SITE, "clean-one": 'role = "clean"\nconfiguration = "one GPU"\n'},
    )
    rows = realworld.read_manifest(spec / "manifest.tsv")
    assert realworld.validate(rows, spec / "sites", tmp_path / "files") == []
    (tmp_path / "files" / "clean-one" / "train.py").write_bytes(clean + b"\n")
    (spec / "sites" / "orphan.toml").write_text('role = "clean"\nconfiguration = "x"\n')
    (spec / "sites" / "buggy-one.toml").write_text(
        textwrap.dedent(LOAD_SITE).replace('anchor = ["state", "load"]', 'anchor = ["nothing"]')
    )
    problems = realworld.validate(rows, spec / "sites", tmp_path / "files")
    assert problems == [
        "orphan.toml: no manifest row has id 'orphan'",
        "buggy-one: site load: no statement in main holds all of ['nothing']",
        f"clean-one: {len(clean) + 1} bytes, the manifest says {len(clean)}",
        "clean-one: sha256 differs from the manifest",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'role = "clean"\nconfiguration = "c"\n' + LOAD_SITE.split("\n", 2)[2],
            "a clean control has no",
        ),
        ('role = "buggy"\nconfiguration = "c"\n', "needs at least one"),
        (LOAD_SITE.replace("line = 8", "lines = 8"), "unknown key(s) lines"),
        (LOAD_SITE.replace("map_location\\s*=", "map_location("), "accept regex"),
        (LOAD_SITE.replace('rule = "DF302"', 'rule = "torch-load"'), "neither DFxxx"),
        (LOAD_SITE.replace('expect = "fix"', 'expect = "maybe"'), "expect 'maybe'"),
        (LOAD_SITE.replace("accept = ['map_location\\s*=']", ""), "needs `accept`"),
        (LOAD_SITE.replace('["state", "load"]', '["torch.load"]'), "identifiers"),
        (LOAD_SITE + LOAD_SITE.split("\n", 2)[2], "used twice: load"),
    ],
)
def test_malformed_sites_files(
    realworld: ModuleType, tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "x.toml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(realworld.CorpusError, match=None) as raised:
        realworld.read_sites(path)
    assert message in str(raised.value)


def test_malformed_manifest_rows(realworld: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "manifest.tsv"
    path.write_text(HEADER + "Bad Id\tnot-a-repo\tabc\tp.py\tblog\tmaybe\tx\tzz\tn\n")
    with pytest.raises(realworld.CorpusError) as raised:
        realworld.read_manifest(path)
    for part in ("id 'Bad Id'", "repo 'not-a-repo'", "commit 'abc'", "kind 'blog'", "role 'maybe'"):
        assert part in str(raised.value)
    path.write_text("id\trepo\n")
    with pytest.raises(realworld.CorpusError, match="header"):
        realworld.read_manifest(path)


# --- the whole command, with a stand-in for devfix -------------------------------------------

FAKE_DEVFIX = """\
import json, sys
args = sys.argv[1:]
paths = [a for a in args[1:] if a.endswith((".py", ".ipynb"))]
if args[0] == "check":
    findings = []
    for path in paths:
        for number, line in enumerate(open(path, encoding="utf-8"), start=1):
            if "torch.load(" in line and "map_location" not in line:
                findings.append({"path": path, "line": number, "code": "DF302",
                                 "message": "no map_location", "applicability": "safe"})
    print(json.dumps(findings))
    sys.exit(1 if findings else 0)
for path in paths:
    text = open(path, encoding="utf-8").read()
    if "crash" in text:
        print(f"{path}: INTERNAL ERROR: boom. Nothing was written", file=sys.stderr)
        continue
    text = text.replace('torch.load("ckpt.pt")', 'torch.load("ckpt.pt", map_location="cpu")')
    open(path, "w", encoding="utf-8").write(text)
"""


@pytest.mark.slow
def test_main_scores_a_corpus_with_a_stand_in_devfix(
    realworld: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = b"import torch\nx = torch.load('a', map_location='cpu')\n# crash\n"
    spec = write_spec(
        tmp_path,
        [("buggy-one", "buggy", BEFORE.encode()), ("clean-one", "clean", clean)],
        {"buggy-one": LOAD_SITE, "clean-one": 'role = "clean"\nconfiguration = "one GPU"\n'},
    )
    fake = tmp_path / "fake_devfix.py"
    fake.write_text(FAKE_DEVFIX)
    out = tmp_path / "out.json"
    command = f"{sys.executable} {fake}"
    argv = ["--files", str(tmp_path / "files"), "--spec", str(spec), "--devfix", command]
    assert realworld.main([*argv, "--json", str(out), "-v", "--keep", str(tmp_path / "w")]) == 0
    text = capsys.readouterr().out
    assert "fixed: 1/1 (100.0 %)" in text
    assert "clean controls byte-identical: 1/1" in text
    assert "clean-one/train.py: INTERNAL ERROR: boom" in text
    assert 'after:  state = torch.load("ckpt.pt", map_location="cpu")' in text
    figures = json.loads(out.read_text())
    assert figures["sites"] == [
        {
            "id": "buggy-one",
            "site": "load",
            "rule": "DF302",
            "expect": "fix",
            "outcome": "fixed",
            "detail": "",
        }
    ]
    assert (tmp_path / "files" / "buggy-one" / "train.py").read_bytes() == BEFORE.encode()
    assert realworld.main([*argv, "--only", "nope"]) == 2
    assert realworld.main(["--validate", str(tmp_path / "files"), "--spec", str(spec)]) == 0


def _in_git_checkout() -> bool:
    root = Path(__file__).resolve().parents[2]
    probe = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return probe.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _in_git_checkout(), reason="--at installs a commit of a git checkout")
def test_at_scores_the_devfix_of_a_commit_installed_apart_from_the_checkout(
    realworld: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(tmp_path, [("buggy-one", "buggy", BEFORE.encode())], {"buggy-one": LOAD_SITE})
    out = tmp_path / "out.json"
    argv = ["--files", str(tmp_path / "files"), "--spec", str(spec), "--at", "HEAD"]
    assert realworld.main([*argv, "--json", str(out), "--jobs", "1"]) == 0
    head = subprocess.run(
        ["git", "-C", str(realworld.REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    figures = json.loads(out.read_text())
    assert figures["commit"] == head
    assert [site["outcome"] for site in figures["sites"]] == ["fixed"]
    assert f"devfix at {head}" in capsys.readouterr().out

    command, short = realworld.install_at("HEAD", tmp_path / "installed")
    where = subprocess.run(
        [*command[:3], "-c", "import devfix.codemods, devfix.cli; print(devfix.codemods.__file__)"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    ).stdout  # fmt: skip
    assert short == head
    assert Path(where.strip()).is_relative_to(tmp_path / "installed")
    assert realworld.main([*argv[:4], "--at", "no-such-commit"]) == 2


def test_unknown_coding_cookie_falls_back_to_utf8(realworld: ModuleType) -> None:
    data = "# -*- coding: future_fstrings -*-\nimport torch\nname = 'é'\nx = torch.load(p)\n"
    program = realworld.read_program(data.encode(), "train.py")
    assert program.parses
    scopes = realworld.find_scopes(program, "<module>")
    assert texts(realworld.locate(scopes, ["x", "load"])) == ["x = torch.load(p)"]


def test_error_lines_are_kept_once_per_file(realworld: ModuleType) -> None:
    stderr = (
        "a/train.py: error: does not parse (line 3)\n"
        "devfix: 1 file failed.\n"
        "a/train.py: error: does not parse (line 3)\n"
        "b/nb.ipynb: INTERNAL ERROR: boom. Nothing was written\n"
        "c/other.py: error: not ours\n"
    )
    assert realworld._error_lines(stderr, ["a/train.py", "b/nb.ipynb"]) == {
        "a/train.py": ["a/train.py: error: does not parse (line 3)"],
        "b/nb.ipynb": ["b/nb.ipynb: INTERNAL ERROR: boom. Nothing was written"],
    }


def test_validate_only_some_rows_keeps_the_other_site_files(
    realworld: ModuleType, tmp_path: Path
) -> None:
    clean = b"import torch\nx = torch.load('a', map_location='cpu')\n"
    spec = write_spec(
        tmp_path,
        [("buggy-one", "buggy", BEFORE.encode()), ("clean-one", "clean", clean)],
        {"buggy-one": LOAD_SITE, "clean-one": 'role = "clean"\nconfiguration = "one GPU"\n'},
    )
    argv = ["--validate", str(tmp_path / "files"), "--spec", str(spec), "--only", "clean-one"]
    assert realworld.main(argv) == 0
    (tmp_path / "files" / "clean-one" / "train.py").write_bytes(b"changed")
    assert realworld.main(argv) == 1


def test_the_smallest_candidate_wins_and_the_rewritten_file_is_searched_for_its_kind(
    realworld: ModuleType,
) -> None:
    source = """\
        import torch
        device = torch.device('cuda:1')
        for data in loader:
            data = data.to(device)
            with torch.no_grad():
                out = model(data)
        """
    original = py(realworld, source)
    scopes = realworld.find_scopes(original, "<module>")
    # the loop holds both anchors between its children, but the assignment is smaller
    assert texts(realworld.locate(scopes, ["device", "torch"])) == [
        "device = torch.device('cuda:1')"
    ]
    pick = site(
        realworld,
        rule="DF304",
        anchor=["device", "torch"],
        accept=["select_device"],
        gone_ok=True,
    )
    rewritten = py(realworld, source.replace("torch.device('cuda:1')", "select_device()"))
    # the assignment no longer holds `torch`: the site is gone (not found again in the loop),
    # and gone_ok lets the scope decide
    verdict = realworld.judge(pick, original, rewritten, [])
    assert verdict.outcome == "fixed" and verdict.after == []
