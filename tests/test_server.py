"""`devfix server` with a real client over stdio (tests/lsp_client.py): diagnostics on open and
change, for text documents and notebook cells; code actions whose workspace edits give exactly
the text `devfix apply` writes; the configuration found as the command line finds it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from click.testing import CliRunner

from devfix.cli import main
from tests.lsp_client import LspClient, apply_edits, apply_workspace_edit

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def applied_by_cli(path: Path, *flags: str) -> str:
    """What `devfix apply FLAGS` writes for `path` (run on a copy beside it)."""
    copy = path.with_name(f"applied-{path.name}")
    shutil.copyfile(path, copy)
    result = CliRunner().invoke(main, ["apply", "--no-cache", *flags, str(copy)])
    assert result.exit_code in (0, 1), result.output
    text = copy.read_text(encoding="utf-8")
    copy.unlink()
    return text


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'sample'\n", encoding="utf-8")
    return tmp_path


@pytest.fixture
def client(project: Path) -> Iterator[LspClient]:
    session = LspClient(cwd=project)
    session.initialize(project)
    yield session
    assert session.close() == 0


def titles(actions: list[dict[str, object]]) -> list[object]:
    return [action["title"] for action in actions]


def test_fix_of_a_finding_is_what_apply_writes(project: Path, client: LspClient) -> None:
    model = project / "model.py"
    shutil.copyfile(EXAMPLES / "tensor_factory_without_device.py", model)
    text = model.read_text(encoding="utf-8")
    uri = client.open(model)
    [diagnostic] = client.diagnostics(uri, version=1)
    assert diagnostic["code"] == "DF101"
    assert diagnostic["source"] == "devfix"
    assert diagnostic["severity"] == 2
    line = text.splitlines()[diagnostic["range"]["start"]["line"]]
    assert line[diagnostic["range"]["start"]["character"] :].startswith("torch.arange(0, src_len)")
    docs = Path(unquote(urlparse(diagnostic["codeDescription"]["href"]).path))
    assert "tensor-factory-without-device" in docs.read_text(encoding="utf-8")
    assert "## Fix safety" in docs.read_text(encoding="utf-8")

    actions = client.code_actions(uri, diagnostic)
    assert titles(actions) == [
        "Fix DF101: Use `device=self.pos_embedding.weight.device`",
        "Ignore DF101 on this line",
        "Fix all safe devfix findings",
    ]
    fix, ignore, fix_all = actions
    assert fix["kind"] == "quickfix" and fix["isPreferred"] is True
    assert fix["diagnostics"][0]["code"] == "DF101"
    fixed = apply_workspace_edit({uri: text}, fix["edit"])[uri]
    assert fixed == applied_by_cli(model) != text
    assert apply_workspace_edit({uri: text}, fix_all["edit"])[uri] == fixed

    ignored = apply_workspace_edit({uri: text}, ignore["edit"])[uri]
    assert ignored.splitlines()[diagnostic["range"]["start"]["line"]] == (
        line + "  # devfix: ignore[DF101]"
    )
    client.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": ignored}]},
    )
    assert client.diagnostics(uri, version=2) == []

    # an incremental change that brings the finding back (the comment removed)
    start = {"line": diagnostic["range"]["start"]["line"], "character": len(line)}
    end = {"line": start["line"], "character": len(line) + len("  # devfix: ignore[DF101]")}
    client.notify(
        "textDocument/didChange",
        {
            "textDocument": {"uri": uri, "version": 3},
            "contentChanges": [{"range": {"start": start, "end": end}, "text": ""}],
        },
    )
    assert [d["code"] for d in client.diagnostics(uri, version=3)] == ["DF101"]


def test_unsafe_fixes_only_when_configured(project: Path) -> None:
    pipeline = project / "pipeline.py"
    shutil.copyfile(EXAMPLES / "device_in_data_pipeline.py", pipeline)
    text = pipeline.read_text(encoding="utf-8")
    session = LspClient(cwd=project)
    session.initialize(project)
    uri = session.open(pipeline)
    diagnostics = session.diagnostics(uri, version=1)
    assert [d["code"] for d in diagnostics] == ["DF201", "DF201"]
    assert {d["data"]["fixability"] for d in diagnostics} == {"needs-unsafe-fixes"}
    # no fix offered, and nothing to fix in the whole file: only the suppression
    assert titles(session.code_actions(uri, diagnostics[0])) == ["Ignore DF201 on this line"]
    assert session.close() == 0

    # unsafe fixes configured in pyproject.toml, as `devfix apply` reads them
    config = project / "pyproject.toml"
    config.write_text(
        config.read_text(encoding="utf-8") + "\n[tool.devfix]\nunsafe-fixes = true\n",
        encoding="utf-8",
    )
    session = LspClient(cwd=project)
    session.initialize(project)
    uri = session.open(pipeline)
    diagnostics = session.diagnostics(uri, version=1)
    assert {d["data"]["fixability"] for d in diagnostics} == {"fixable"}
    actions = session.code_actions(uri, diagnostics[0])
    assert [a["title"].split(":")[0] for a in actions] == [
        "Fix DF201",
        "Ignore DF201 on this line",
        "Fix all devfix findings (unsafe fixes included)",
    ]
    fix, _ignore, fix_all = actions
    assert fix["title"].endswith("(unsafe)") and not fix.get("isPreferred")
    fixed_all = apply_workspace_edit({uri: text}, fix_all["edit"])[uri]
    assert fixed_all == applied_by_cli(pipeline) != text
    only_fix_all = session.code_actions(uri, diagnostics[0], only=["source.fixAll"])
    assert [a["kind"] for a in only_fix_all] == ["source.fixAll.devfix"]
    assert apply_workspace_edit({uri: text}, only_fix_all[0]["edit"])[uri] == fixed_all
    assert session.close() == 0


def test_fix_all_with_resolved_edits(project: Path) -> None:
    script = project / "train.py"
    shutil.copyfile(EXAMPLES / "hard_coded_device.py", script)
    text = script.read_text(encoding="utf-8")
    session = LspClient(cwd=project)
    session.initialize(project, resolve_edits=True)
    uri = session.open(script)
    diagnostics = session.diagnostics(uri, version=1)
    assert [d["code"] for d in diagnostics] == ["DF304"] * 3
    actions = session.code_actions(uri, diagnostics[1])
    assert all("edit" not in action for action in actions)  # the edits come on resolve
    fix_all = session.request("codeAction/resolve", actions[-1])
    assert fix_all["title"] == "Fix all safe devfix findings"
    assert apply_workspace_edit({uri: text}, fix_all["edit"])[uri] == applied_by_cli(script)
    fix = session.request("codeAction/resolve", actions[0])
    fixed = apply_workspace_edit({uri: text}, fix["edit"])[uri]
    assert fixed != text
    # the one fix changes the finding's line only
    changed = [n for n, (a, b) in enumerate(zip(text.splitlines(), fixed.splitlines())) if a != b]
    assert changed == [diagnostics[1]["range"]["start"]["line"]]
    assert session.close() == 0


def test_configuration_is_found_as_the_command_line_finds_it(project: Path) -> None:
    sub = project / "pkg"
    sub.mkdir()
    (sub / "devfix.toml").write_text('select = ["DF304"]\n', encoding="utf-8")
    shutil.copyfile(EXAMPLES / "hard_coded_device.py", sub / "train.py")
    shutil.copyfile(EXAMPLES / "tensor_factory_without_device.py", sub / "model.py")
    shutil.copyfile(EXAMPLES / "tensor_factory_without_device.py", project / "model.py")
    session = LspClient(cwd=project)
    session.initialize(project)
    assert [d["code"] for d in session.diagnostics(session.open(sub / "train.py"))] == ["DF304"] * 3
    assert session.diagnostics(session.open(sub / "model.py")) == []  # DF101 not selected there
    assert [d["code"] for d in session.diagnostics(session.open(project / "model.py"))] == ["DF101"]
    # a broken configuration is said once, as the command line says it
    (sub / "devfix.toml").write_text("select = 3\n", encoding="utf-8")
    uri = (sub / "train.py").as_uri()
    session.notify(
        "textDocument/didChange",
        {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"text": (sub / "train.py").read_text(encoding="utf-8")}],
        },
    )
    shown = session.wait_for("window/showMessage")
    assert shown["type"] == 1
    assert "`select` must be a list of strings" in shown["message"]
    assert session.close() == 0


def test_flags_of_the_command(project: Path) -> None:
    shutil.copyfile(EXAMPLES / "hard_coded_device.py", project / "train.py")
    session = LspClient(["--ignore", "DF304", "--no-cache"], cwd=project)
    session.initialize(project)
    assert session.diagnostics(session.open(project / "train.py")) == []
    assert session.close() == 0
    assert not (project / ".devfix_cache").exists()


def test_results_are_cached_as_check_caches_them(project: Path, client: LspClient) -> None:
    model = project / "model.py"
    shutil.copyfile(EXAMPLES / "tensor_factory_without_device.py", model)
    uri = client.open(model)
    first = client.diagnostics(uri, version=1)
    client.notify(
        "textDocument/didSave", {"textDocument": {"uri": uri}}
    )  # the session's results are written to the result cache
    assert client.diagnostics(uri) == first
    caches = list((project / ".devfix_cache").glob("results-*.json"))
    assert len(caches) == 1
    # `devfix check` reads the entry the server wrote (same content, same settings)
    entries = json.loads(caches[0].read_text(encoding="utf-8"))
    assert [f["code"] for entry in entries.values() for f in entry["findings"]] == ["DF101"]
    result = CliRunner().invoke(main, ["check", "--format", "json", str(model)])
    assert [f["code"] for f in json.loads(result.stdout)] == ["DF101"]


def notebook_cells(path: Path) -> list[dict[str, object]]:
    return list(json.loads(path.read_text(encoding="utf-8"))["cells"])


def test_notebook_cells_get_diagnostics_and_fixes(project: Path, client: LspClient) -> None:
    notebook = project / "tagger.ipynb"
    shutil.copyfile(EXAMPLES / "lstm_tagger.ipynb", notebook)
    cells = notebook_cells(notebook)
    nb_uri = notebook.as_uri()
    uris = [f"vscode-notebook-cell:{notebook}#cell{n}" for n in range(len(cells))]
    texts = {uri: "".join(cell["source"]) for uri, cell in zip(uris, cells)}  # type: ignore[arg-type]
    client.notify(
        "notebookDocument/didOpen",
        {
            "notebookDocument": {
                "uri": nb_uri,
                "notebookType": "jupyter-notebook",
                "version": 1,
                "cells": [
                    {"kind": 2 if cell["cell_type"] == "code" else 1, "document": uri}
                    for uri, cell in zip(uris, cells)
                ],
            },
            "cellTextDocuments": [
                {
                    "uri": uri,
                    "languageId": "python" if cell["cell_type"] == "code" else "markdown",
                    "version": 1,
                    "text": texts[uri],
                }
                for uri, cell in zip(uris, cells)
            ],
        },
    )
    code_cells = [uri for uri, cell in zip(uris, cells) if cell["cell_type"] == "code"]
    published: dict[str, list[dict[str, Any]]] = {}
    while set(published) != set(code_cells):
        params = client.wait_for("textDocument/publishDiagnostics")
        published[params["uri"]] = params["diagnostics"]
    found = {uri: [d["code"] for d in found] for uri, found in published.items() if found}
    second = code_cells[1]
    assert found == {second: ["DF101", "DF101"]}
    diagnostic = published[second][0]
    start = diagnostic["range"]["start"]
    assert (
        texts[second].splitlines()[start["line"]][start["character"] :].startswith("torch.zeros(")
    )

    fix_all = client.code_actions(second, diagnostic)[-1]
    assert fix_all["title"] == "Fix all safe devfix findings"
    after = apply_workspace_edit(texts, fix_all["edit"])
    applied = project / "applied.ipynb"
    CliRunner().invoke(main, ["apply", "--no-cache", str(shutil.copyfile(notebook, applied))])
    expected = ["".join(cell["source"]) for cell in notebook_cells(applied)]  # type: ignore[arg-type]
    assert [after[uri] for uri in uris] == expected
    assert after[second] != texts[second]

    # the cell edited in the editor: the fix applied, its diagnostics go
    change = {"uri": nb_uri, "version": 2}
    client.notify(
        "notebookDocument/didChange",
        {
            "notebookDocument": change,
            "change": {
                "cells": {
                    "textContent": [
                        {
                            "document": {"uri": second, "version": 2},
                            "changes": [
                                {"range": r["range"], "text": r["newText"]}
                                for r in fix_all["edit"]["changes"][second]
                            ],
                        }
                    ]
                }
            },
        },
    )
    assert client.diagnostics(second) == []
    assert apply_edits(texts[second], fix_all["edit"]["changes"][second]) == after[second]
