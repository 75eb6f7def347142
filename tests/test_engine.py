"""The engine: findings applied as groups, rounds until stable, guards, encodings, atomic writes."""

from __future__ import annotations

import os
import stat
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from devfix import sources
from devfix.engine import apply_findings, check_source, fix_file, fix_paths, fix_source
from devfix.errors import InputError
from devfix.registry import all_passes, select_passes
from devfix.types import Applicability, FileStatus, Finding, Options

BUGGY = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn


    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(4, 8)

        def forward(self, x):
            h0 = torch.zeros(1, x.size(1), 8)  # initial hidden state
            c0 = torch.zeros(1, x.size(1), 8)
            return self.lstm(x, (h0, c0))
    """
)
FIXED_LINE = "h0 = torch.zeros(1, x.size(1), 8, device=x.device)  # initial hidden state"


def test_fix_source_applies_safe_fixes_and_keeps_comments() -> None:
    result = fix_source(BUGGY, Options(select=("DF101",)))
    assert FIXED_LINE in result.output
    assert len(result.applied) == 2
    assert [f.code for f in result.findings] == ["DF101", "DF101"]
    assert result.remaining == ()


def test_text_without_trigger_words_is_not_parsed() -> None:
    # Would raise InputError if it were parsed.
    result = fix_source("this is not python (\n", Options())
    assert result.output == result.source and not result.findings


def test_syntax_error_is_an_input_error_naming_the_place() -> None:
    with pytest.raises(InputError, match=r"does not parse \(line 2"):
        fix_source("import torch\nprint 'x'\n", Options())


def test_overlapping_edit_groups_are_deferred_to_the_next_round() -> None:
    module = cst.parse_module(BUGGY)
    findings = check_source(BUGGY, options=Options(select=("DF101",)))
    # Re-find on the same module object so the edits target its nodes.
    from devfix.context import FileContext

    context = FileContext(module)
    checker = select_passes(("DF101",))[0](context)
    module.visit(checker)
    first = checker.findings[0]
    clash = first.__class__(**{**first.__dict__, "line": 99})
    rewritten, applied = apply_findings(module, [first, clash])
    assert applied == [first]
    assert rewritten.code.count("device=x.device") == 1
    assert len(findings) == 2


def test_unsafe_fixes_are_hidden_unless_asked_for() -> None:
    source = textwrap.dedent(
        """\
        import torch
        import torch.nn as nn

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(4, 8)

            def init_hidden(self, batch_size):
                return torch.zeros(1, batch_size, 8)
        """
    )
    safe_only = fix_source(source, Options())
    assert safe_only.output == source
    assert safe_only.hidden_unsafe == 1
    assert safe_only.findings[0].applicability is Applicability.UNSAFE
    unsafe = fix_source(source, Options(unsafe_fixes=True))
    assert "device=self.gru.weight_ih_l0.device" in unsafe.output


def test_suppression_comment_by_code_and_bare() -> None:
    source = BUGGY.replace("# initial hidden state", "# devfix: ignore[DF101]").replace(
        "c0 = torch.zeros(1, x.size(1), 8)", "c0 = torch.zeros(1, x.size(1), 8)  # devfix: ignore"
    )
    assert check_source(source) == []
    other = BUGGY.replace("# initial hidden state", "# devfix: ignore[DF102]")
    assert len(check_source(other)) == 2


def test_crlf_bom_and_latin1_survive_byte_for_byte(tmp_path: Path) -> None:
    crlf = tmp_path / "crlf.py"
    crlf.write_bytes(b"\xef\xbb\xbf" + BUGGY.replace("\n", "\r\n").encode())
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + BUGGY.encode())
    for path in (crlf, latin):
        result = fix_file(str(path), Options())
        assert result.status is FileStatus.CHANGED, result.reason
    data = crlf.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    assert b"\r\n" in data and b"\n" not in data.replace(b"\r\n", b"")
    assert FIXED_LINE.encode() in data
    assert latin.read_bytes().startswith(b"# -*- coding: latin-1 -*-\n# caf\xe9\n")


def test_cookie_of_a_codec_python_lacks_reads_as_utf8_and_keeps_its_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`# -*- coding: future_fstrings -*-`: a codec a package registers at start-up to rewrite
    UTF-8 source. Read as UTF-8 with a warning, written back byte for byte, cookie kept; an
    unknown codec over bytes that are not UTF-8 is still an error."""
    cookie = b"# -*- coding: future_fstrings -*-\n"
    script = tmp_path / "train.py"
    script.write_bytes(cookie + b"# \xc3\xa9tape 1\n" + BUGGY.encode())
    result = fix_file(str(script), Options())
    assert result.status is FileStatus.CHANGED, result.reason
    data = script.read_bytes()
    assert data.startswith(cookie + b"# \xc3\xa9tape 1\n") and FIXED_LINE.encode() in data
    warning = capsys.readouterr().err
    assert "`future_fstrings`, a codec this Python does not have" in warning
    assert "read and written as UTF-8" in warning
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# -*- coding: klingon -*-\n# caf\xe9\n" + BUGGY.encode())
    failed = fix_file(str(latin), Options())
    assert failed.status is FileStatus.FAILED
    assert failed.reason == "has an invalid coding cookie (unknown encoding: klingon)"


def test_write_is_atomic_keeps_permissions_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_text(BUGGY)
    os.chmod(path, 0o640)
    assert fix_file(str(path), Options()).status is FileStatus.CHANGED
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.py"]


def test_write_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_text(BUGGY)
    link = tmp_path / "link.py"
    link.symlink_to(real)
    assert fix_file(str(link), Options()).status is FileStatus.CHANGED
    assert link.is_symlink() and FIXED_LINE in real.read_text()


def test_file_libcst_cannot_round_trip_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ragged.py"
    original = BUGGY + "\n  \n\t"
    path.write_text(original)
    result = fix_file(str(path), Options())
    assert result.status is FileStatus.FAILED
    assert "byte for byte" in result.reason
    assert path.read_text() == original


def test_fix_paths_reports_failures_and_continues(tmp_path: Path) -> None:
    (tmp_path / "a_bad.py").write_text("import torch\ndef f(:\n")
    (tmp_path / "b_good.py").write_text(BUGGY)
    (tmp_path / "c_plain.py").write_text("print('no torch here')\n")
    results = {Path(r.path).name: r for r in fix_paths([str(tmp_path)], Options(jobs=1))}
    assert results["a_bad.py"].status is FileStatus.FAILED
    assert "does not parse" in results["a_bad.py"].reason
    assert results["b_good.py"].status is FileStatus.CHANGED
    assert results["c_plain.py"].status is FileStatus.UNCHANGED
    assert FIXED_LINE in (tmp_path / "b_good.py").read_text()


def test_parallel_run_matches_serial_run(tmp_path: Path) -> None:
    for index in range(6):
        (tmp_path / f"m{index}.py").write_text(BUGGY)
    serial = [r.findings for r in fix_paths([str(tmp_path)], Options(jobs=1), write=False)]
    parallel = [r.findings for r in fix_paths([str(tmp_path)], Options(jobs=2), write=False)]
    assert serial == parallel and len(serial) == 6


def test_discovery_skips_excluded_and_gitignored_paths(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("generated/\n*_skip.py\n")
    for relative in (
        "train.py",
        "pkg/model.py",
        "pkg/x_skip.py",
        "generated/out.py",
        "venv/lib/site.py",
        "env/pyvenv.cfg",
        "env/lib/mod.py",
        "node_modules/a.py",
        "sub/.gitignore",
        "sub/keep.py",
        "sub/drop.py",
    ):
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("drop.py\n" if relative == "sub/.gitignore" else "import torch\n")
    found = sorted(
        os.path.relpath(entry, tmp_path)
        for entry in sources.discover([str(tmp_path)])
        if isinstance(entry, str)
    )
    assert found == ["pkg/model.py", "sub/keep.py", "train.py"]


def test_registry_codes_and_names_are_unique_and_documented() -> None:
    passes = all_passes()
    assert len({p.CODE for p in passes}) == len(passes)
    assert len({p.NAME for p in passes}) == len(passes)
    headings = (
        "## What it does",
        "## Why is this bad?",
        "## Example",
        "## Use instead",
        "## Fix safety",
    )
    tests = Path(__file__).parent / "codemods"
    for cls in passes:
        doc = cls.documentation()
        positions = [doc.find(h) for h in headings]
        assert -1 not in positions and positions == sorted(positions), cls.CODE
        # A heading is a line of its own (`devfix explain` and the docs render it as one).
        lines = {line.strip() for line in doc.splitlines()}
        assert all(h in lines for h in headings), cls.CODE
        module = cls.__module__.rsplit(".", 1)[1]
        assert (tests / f"test_{module}.py").exists(), f"{cls.CODE} has no inline test module"


def test_ambiguous_names_resolve_per_scope_in_huge_files_too() -> None:
    from devfix import context

    source = (
        "import torch\nimport torch as t\n\ndef f(torch):\n    return t.zeros(3) + torch.ones(2)\n"
    )

    def resolved(text: str) -> dict[str, set[str]]:
        ctx = context.FileContext(cst.parse_module(text), "f.py", text)
        return {
            ctx.module.code_for_node(node): {q.name for q in ctx.qualified_names(node)}
            for node in ctx._all_nodes()
            if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)
        }

    # The parameter shadows the import; a file of 300,000 characters is answered alike (it
    # used to need libcst's scope analysis, about 30 s of CPU for a file that size).
    for text in (source, source + "#" * 300_000):
        names = resolved(text)
        assert names["t.zeros"] == {"torch.zeros"}
        assert names["torch.ones"] == {"torch.ones"} and not _imported(text, "torch.ones")


def _imported(text: str, dotted: str) -> bool:
    from libcst.metadata import QualifiedNameSource

    from devfix import context

    ctx = context.FileContext(cst.parse_module(text), "f.py", text)
    return any(
        q.source is QualifiedNameSource.IMPORT
        for node in ctx._all_nodes()
        if isinstance(node, cst.Attribute) and ctx.module.code_for_node(node) == dotted
        for q in ctx.qualified_names(node)
    )


def _given(text: str, old: str, new: str) -> tuple[cst.Module, list[Finding]]:
    """A finding made outside the passes: replace the Name `old` with the expression `new`."""
    from devfix.types import Edit

    module = cst.parse_module(text)
    names: list[cst.Name] = []

    class Find(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            if node.value == old:
                names.append(node)

    module.visit(Find())
    finding = Finding(
        "runtime", "fix-from-the-run", "m", 1, 1, 1, 1, "t", Applicability.UNSAFE,
        edits=tuple(Edit(name, cst.parse_expression(new)) for name in names),
    )  # fmt: skip
    return module, [finding]


def test_apply_given_writes_a_finding_made_outside_the_passes(tmp_path: Path) -> None:
    from devfix.fix_loop import apply_given

    text = "loss = f(logits, labels)  # the loss\n"
    module, findings = _given(text, "labels", "labels.to(logits.device)")
    out = apply_given(text, module, findings, path=str(tmp_path / "t.py"))
    assert out == "loss = f(logits, labels.to(logits.device))  # the loss\n"


def test_apply_given_refuses_what_does_not_compile(tmp_path: Path) -> None:
    from devfix.errors import InternalError
    from devfix.fix_loop import apply_given

    text = "def f(x):\n    return g(x)\n"
    module, findings = _given(text, "g", "(yield)")
    (tmp_path / "t.py").write_text(text)
    out = apply_given(text, module, findings, path=str(tmp_path / "t.py"))
    assert "yield" in out  # a generator now: it compiles
    module, findings = _given("x = g(1)\n", "g", "(await h)")
    with pytest.raises(InternalError, match="does not compile"):
        apply_given("x = g(1)\n", module, findings, path=str(tmp_path / "t.py"))
