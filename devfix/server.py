"""`devfix server`: a language server (LSP over stdio, on pygls) for devfix's findings.

* Diagnostics on open and on every change of a Python document, and of the code cells of a
  notebook document (LSP 3.17): one per finding, its code linking to the rule's documentation.
* Code actions per finding: "Fix DF101" (preferred when the fix is safe; an unsafe fix only
  when unsafe fixes are configured), "Ignore DF101 on this line" (a `# devfix: ignore[DF101]`
  comment), and "Fix all safe devfix findings" (also as the `source.fixAll.devfix` kind).
  Each edit is what `devfix apply` writes for the same text and settings.
* The settings of a document are those `devfix check` would use on its file: flags of the
  command, over the configuration found from the file upwards (:func:`SettingsFor`).
* A change analyses only its document, off the message loop (a newer change waiting makes the
  older result be dropped), and content seen before is not analysed again (the result cache).

The protocol is pygls's (the `server` extra); what is done with a buffer is :mod:`devfix.editor`.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path
from pygls.workspace import PositionCodec

from devfix import editor
from devfix.editor import Analysis, Buffer, Cell, NotebookBuffer, TextBuffer
from devfix.engine import text_replacement
from devfix.registry import all_passes
from devfix.settings import Settings
from devfix.types import Applicability, Finding
from devfix.version import __version__

SOURCE = "devfix"
FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"


class SettingsError(Exception):
    """The configuration of a document cannot be used (its message says why)."""


#: A document's path (None for a document that is no file) to the settings of its run.
SettingsFor = Callable[[Optional[str]], Settings]


@dataclass(frozen=True)
class _Snapshot:
    """What one analysis looks at: the buffer, the document version, the settings."""

    buffer: Buffer
    version: int | None
    settings: Settings


class DevfixServer(LanguageServer):
    """The language server; `settings_for(path)` gives a document's settings."""

    def __init__(self, settings_for: SettingsFor) -> None:
        super().__init__(
            SOURCE,
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[
                    types.NotebookDocumentFilterWithCells(
                        notebook="*", cells=[types.NotebookCellLanguage(language="python")]
                    )
                ]
            ),
        )
        self.settings_for = settings_for
        self.cache = editor.FindingCache()
        self.analyses: dict[str, tuple[_Snapshot, Analysis]] = {}
        #: Cell URIs of each notebook that got diagnostics (to clear them when cells go).
        self.published_cells: dict[str, set[str]] = {}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="devfix-analysis")
        self._running: set[str] = set()
        self._again: set[str] = set()
        self._rule_docs: str | None = None
        self._problems_shown: set[str] = set()

    # -- documents ------------------------------------------------------------------------------

    def is_notebook_cell(self, uri: str) -> bool:
        return self.workspace.get_notebook_document(cell_uri=uri) is not None

    def buffer_of(self, key: str) -> Buffer | None:
        """The buffer of a text document or a notebook (`key`: its URI), as open now."""
        notebook = self.workspace.get_notebook_document(notebook_uri=key)
        if notebook is not None:
            cells = []
            for cell in notebook.cells:
                if cell.kind != types.NotebookCellKind.Code:
                    continue
                document = self.workspace.text_documents.get(cell.document)
                if document is None or document.language_id not in (None, "python"):
                    continue
                cells.append(Cell(cell.document, document.source))
            return NotebookBuffer(key, _path_of(key) or "<notebook>.ipynb", cells)
        document = self.workspace.text_documents.get(key)
        if document is None:
            return None
        return TextBuffer(key, _path_of(key) or "<untitled>", document.source)

    def version_of(self, key: str) -> int | None:
        notebook = self.workspace.get_notebook_document(notebook_uri=key)
        if notebook is not None:
            return notebook.version
        document = self.workspace.text_documents.get(key)
        return document.version if document is not None else None

    def owner_of(self, uri: str) -> str:
        """The key of the buffer a document belongs to: its notebook's URI for a cell."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        return notebook.uri if notebook is not None else uri

    def snapshot(self, key: str) -> _Snapshot | None:
        buffer = self.buffer_of(key)
        if buffer is None:
            return None
        path = _path_of(key)
        try:
            settings = self.settings_for(path)
        except SettingsError as error:
            self.say_once(str(error))
            return None
        return _Snapshot(buffer, self.version_of(key), settings)

    def current(self, key: str) -> tuple[_Snapshot, Analysis] | None:
        """The latest analysis of a buffer, made now when there is none for its current text
        (a code action may come before the analysis of the change it follows)."""
        snapshot = self.snapshot(key)
        if snapshot is None:
            return None
        known = self.analyses.get(key)
        if (
            known is not None
            and known[0].buffer.texts() == snapshot.buffer.texts()
            and editor.settings_key(known[0].settings) == editor.settings_key(snapshot.settings)
        ):
            return known
        analysis = editor.analyse(snapshot.buffer, snapshot.settings, self.cache)
        self.analyses[key] = (snapshot, analysis)
        return snapshot, analysis

    def say_once(self, message: str) -> None:
        if message not in self._problems_shown:
            self._problems_shown.add(message)
            self.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Error, message=f"devfix: {message}")
            )

    # -- diagnostics ----------------------------------------------------------------------------

    async def refresh(self, key: str) -> None:
        """Analyse the buffer `key` and publish its diagnostics; a change that comes while it
        is analysed starts one more analysis, of the newest text, when this one ends."""
        if key in self._running:
            self._again.add(key)
            return
        self._running.add(key)
        try:
            while True:
                self._again.discard(key)
                snapshot = self.snapshot(key)
                if snapshot is None:
                    return
                loop = asyncio.get_running_loop()
                analysis = await loop.run_in_executor(
                    self._pool, editor.analyse, snapshot.buffer, snapshot.settings, self.cache
                )
                if key in self._again:
                    continue
                self.analyses[key] = (snapshot, analysis)
                self.publish(key, snapshot, analysis)
                return
        finally:
            self._running.discard(key)

    def publish(self, key: str, snapshot: _Snapshot, analysis: Analysis) -> None:
        buffer = snapshot.buffer
        texts = buffer.texts()
        per_part: dict[str, list[types.Diagnostic]] = {part: [] for part in texts}
        for finding in analysis.findings:
            part, located = buffer.place(finding)
            if part in per_part:
                per_part[part].append(self.diagnostic(located, texts[part], snapshot.settings))
        if isinstance(buffer, NotebookBuffer):
            gone = self.published_cells.get(key, set()) - set(per_part)
            for part in gone:
                per_part[part] = []
            self.published_cells[key] = set(texts)
        for part, diagnostics in per_part.items():
            version = snapshot.version if part == key else None
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=part, diagnostics=diagnostics, version=version)
            )

    def diagnostic(self, finding: Finding, text: str, settings: Settings) -> types.Diagnostic:
        fixability = settings.fixability(finding).value
        return types.Diagnostic(
            range=self.range_of(text, finding.line, finding.col, finding.end_line, finding.end_col),
            message=finding.message,
            severity=types.DiagnosticSeverity.Warning,
            code=finding.code,
            code_description=self.rule_link(finding.code),
            source=SOURCE,
            data={"name": finding.name, "fixability": fixability},
        )

    def range_of(self, text: str, line: int, col: int, end_line: int, end_col: int) -> types.Range:
        """The range in the client's units of 1-based lines and columns (code points)."""
        lines = text.splitlines(keepends=True) or [""]
        codec: PositionCodec = self.workspace.position_codec
        start = codec.position_to_client_units(
            lines, types.Position(line=line - 1, character=col - 1)
        )
        end = codec.position_to_client_units(
            lines, types.Position(line=end_line - 1, character=end_col - 1)
        )
        return types.Range(start=start, end=end)

    def rule_link(self, code: str) -> types.CodeDescription | None:
        """A link to the rule's documentation (`devfix rules CODE`), as a file this server
        writes once per session."""
        if self._rule_docs is None:
            folder = tempfile.mkdtemp(prefix="devfix-rules-")
            atexit.register(shutil.rmtree, folder, True)
            for cls in all_passes():
                text = f"# {cls.CODE} `{cls.NAME}`\n\n{cls.documentation()}\n"
                Path(folder, f"{cls.CODE}.md").write_text(text, encoding="utf-8")
            self._rule_docs = folder
        path = os.path.join(self._rule_docs, f"{code}.md")
        if not os.path.isfile(path):
            return None
        return types.CodeDescription(href=from_fs_path(path) or path)

    # -- code actions ---------------------------------------------------------------------------

    def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        key = self.owner_of(uri)
        known = self.current(key)
        if known is None:
            return []
        snapshot, analysis = known
        texts = snapshot.buffer.texts()
        if uri not in texts:
            return []
        settings = snapshot.settings
        wanted = params.context.only
        lazy = self._resolves_edits()
        actions: list[types.CodeAction] = []
        anywhere_fixable = False
        for finding in analysis.findings:
            part, located = snapshot.buffer.place(finding)
            writes = editor.fixable(finding, settings)
            anywhere_fixable = anywhere_fixable or writes
            if part != uri or not _overlaps(located, params.range, texts[part], self):
                continue
            if writes and _kind_wanted(types.CodeActionKind.QuickFix, wanted):
                unsafe = finding.applicability is Applicability.UNSAFE
                title = f"Fix {finding.code}: {finding.fix_title}" + (" (unsafe)" * unsafe)
                actions.append(
                    self._action(
                        title,
                        types.CodeActionKind.QuickFix,
                        {"do": "fix", "key": key, "finding": _as_data(finding)},
                        snapshot,
                        lazy,
                        preferred=not unsafe,
                        diagnostic=self.diagnostic(located, texts[part], settings),
                    )
                )
            if _kind_wanted(types.CodeActionKind.QuickFix, wanted):
                actions.append(
                    self._action(
                        f"Ignore {finding.code} on this line",
                        types.CodeActionKind.QuickFix,
                        {"do": "ignore", "key": key, "finding": _as_data(finding)},
                        snapshot,
                        lazy,
                        diagnostic=self.diagnostic(located, texts[part], settings),
                    )
                )
        if anywhere_fixable:
            title = (
                "Fix all devfix findings (unsafe fixes included)"
                if settings.unsafe_fixes
                else "Fix all safe devfix findings"
            )
            for kind in (types.CodeActionKind.QuickFix, FIX_ALL_KIND):
                if _kind_wanted(kind, wanted):
                    actions.append(
                        self._action(title, kind, {"do": "fix-all", "key": key}, snapshot, lazy)
                    )
        return actions

    def _resolves_edits(self) -> bool:
        """Whether the client asks for an action's edit only when it is chosen."""
        document = self.client_capabilities.text_document
        support = document.code_action if document is not None else None
        resolve = support.resolve_support if support is not None else None
        return resolve is not None and "edit" in resolve.properties

    def _action(
        self,
        title: str,
        kind: str,
        data: dict[str, Any],
        snapshot: _Snapshot,
        lazy: bool,
        *,
        preferred: bool | None = None,
        diagnostic: types.Diagnostic | None = None,
    ) -> types.CodeAction:
        action = types.CodeAction(
            title=title,
            kind=kind,
            is_preferred=preferred,
            diagnostics=[diagnostic] if diagnostic is not None else None,
            data=data,
        )
        if not lazy:
            action.edit = self.edit_for(data, snapshot)
        return action

    def resolve(self, action: types.CodeAction) -> types.CodeAction:
        data = action.data
        if not isinstance(data, dict) or not isinstance(data.get("key"), str):
            return action
        known = self.current(data["key"])
        if known is not None:
            action.edit = self.edit_for(data, known[0])
        return action

    def edit_for(self, data: dict[str, Any], snapshot: _Snapshot) -> types.WorkspaceEdit:
        buffer, settings = snapshot.buffer, snapshot.settings
        finding = _from_data(data.get("finding"))
        if data.get("do") == "fix-all":
            new = editor.fix_all(buffer, settings)
        elif finding is None:
            new = {}
        elif data.get("do") == "fix":
            new = editor.fix_one(buffer, settings, finding)
        else:
            new = editor.ignore(buffer, finding)
        texts = buffer.texts()
        changes = {
            part: [self.text_edit(texts[part], text)] for part, text in new.items() if part in texts
        }
        return types.WorkspaceEdit(changes=changes)

    def text_edit(self, before: str, after: str) -> types.TextEdit:
        """One edit that turns `before` into `after`: the span where they differ."""
        edit = text_replacement(before, after)
        where = self.range_of(before, edit.line, edit.col, edit.end_line, edit.end_col)
        return types.TextEdit(range=where, new_text=edit.text)

    def close(self, key: str) -> None:
        self.analyses.pop(key, None)
        parts = self.published_cells.pop(key, {key})
        for part in parts:
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=part, diagnostics=[])
            )


def _path_of(uri: str) -> str | None:
    if not uri.startswith("file:"):
        return None
    return to_fs_path(uri)


def _kind_wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Whether a client that asked for `only` these kinds wants an action of `kind`."""
    if not only:
        return kind != FIX_ALL_KIND
    return any(kind == asked or kind.startswith(f"{asked}.") for asked in only)


def _overlaps(finding: Finding, asked: types.Range, text: str, server: DevfixServer) -> bool:
    where = server.range_of(text, finding.line, finding.col, finding.end_line, finding.end_col)
    start = (where.start.line, where.start.character)
    end = (where.end.line, where.end.character)
    return not (
        end < (asked.start.line, asked.start.character)
        or start > (asked.end.line, asked.end.character)
    )


_DATA_FIELDS = ("line", "col", "end_line", "end_col", "code", "message")


def _as_data(finding: Finding) -> dict[str, object]:
    return {name: getattr(finding, name) for name in _DATA_FIELDS}


def _from_data(data: object) -> Finding | None:
    """The finding an action's data names (enough of it to find it again by :func:`spot`)."""
    if not isinstance(data, dict) or set(data) != set(_DATA_FIELDS):
        return None
    numbers = [data[name] for name in _DATA_FIELDS[:4]]
    if not all(type(n) is int for n in numbers) or not all(
        isinstance(data[name], str) for name in _DATA_FIELDS[4:]
    ):
        return None
    return Finding(
        code=data["code"],
        name="",
        message=data["message"],
        line=data["line"],
        col=data["col"],
        end_line=data["end_line"],
        end_col=data["end_col"],
        fix_title="",
        applicability=Applicability.DISPLAY_ONLY,
    )


def build(settings_for: SettingsFor) -> DevfixServer:
    """The server with its handlers registered."""
    server = DevfixServer(settings_for)
    pending: set[asyncio.Future[None]] = set()

    def refresh_soon(key: str) -> None:
        task = asyncio.ensure_future(server.refresh(key))
        pending.add(task)  # held until done: the loop keeps only weak references to tasks
        task.add_done_callback(pending.discard)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: DevfixServer, params: types.DidOpenTextDocumentParams) -> None:
        if not ls.is_notebook_cell(params.text_document.uri):
            refresh_soon(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: DevfixServer, params: types.DidChangeTextDocumentParams) -> None:
        refresh_soon(ls.owner_of(params.text_document.uri))

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: DevfixServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.cache.save()
        refresh_soon(ls.owner_of(params.text_document.uri))

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: DevfixServer, params: types.DidCloseTextDocumentParams) -> None:
        if not ls.is_notebook_cell(params.text_document.uri):
            ls.close(params.text_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_open(ls: DevfixServer, params: types.DidOpenNotebookDocumentParams) -> None:
        refresh_soon(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_change(ls: DevfixServer, params: types.DidChangeNotebookDocumentParams) -> None:
        refresh_soon(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_save(ls: DevfixServer, params: types.DidSaveNotebookDocumentParams) -> None:
        ls.cache.save()

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_close(ls: DevfixServer, params: types.DidCloseNotebookDocumentParams) -> None:
        ls.close(params.notebook_document.uri)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND],
            resolve_provider=True,
        ),
    )
    def code_action(ls: DevfixServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return ls.code_actions(params)

    @server.feature(types.CODE_ACTION_RESOLVE)
    def code_action_resolve(ls: DevfixServer, action: types.CodeAction) -> types.CodeAction:
        return ls.resolve(action)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: DevfixServer, params: None) -> None:
        ls.cache.save()

    return server


def serve(settings_for: SettingsFor) -> None:
    """Run the server over stdin and stdout until the client says `exit`."""
    build(settings_for).start_io()
