"""What the language server does with a buffer, without the protocol: findings, fixes, ignores.

An editor holds text that may not be saved: a `.py` file's buffer, or the code cells of a
notebook. :class:`Buffer` is one such text with the file it belongs to (the path decides the
configuration, the line length and the Python version, as for `devfix apply`). Its findings are
those `devfix check` reports on the same text, and each edit it proposes is the text that
`devfix apply` (with the same settings) writes: one finding's fix, every fix the settings
allow, or a `# devfix: ignore[CODE]` comment (:mod:`devfix.suppression`).

Results are kept per content and settings (:class:`FindingCache`), so a change analyses only
the buffer that changed, and text seen before (an undo, a file `devfix check` already cached)
is not parsed again.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Union

from devfix import sources
from devfix.cache import ResultCache, content_key
from devfix.errors import InputError, InternalError
from devfix.fix_loop import check_source, fix_source
from devfix.notebooks import Notebook
from devfix.review import Spot, spot
from devfix.settings import Settings
from devfix.suppression import add_ignores
from devfix.types import FileResult, FileStatus, Finding

#: A finding's identity across analyses of one text: where it is, its rule and its message.


@dataclass(frozen=True)
class Cell:
    """One code cell of a notebook an editor has open: its key (the cell document's URI in the
    protocol) and its text."""

    key: str
    text: str


@dataclass(frozen=True)
class TextBuffer:
    """A `.py` file's text as the editor has it; `key` names it (its URI)."""

    key: str
    path: str
    text: str

    @property
    def code(self) -> str:
        return self.text

    def split(self, code: str) -> dict[str, str]:
        """The new text of every part that `code` (a rewrite of :attr:`code`) changes."""
        return {} if code == self.text else {self.key: code}

    def place(self, finding: Finding) -> tuple[str, Finding]:
        """The part a finding of :attr:`code` is in, and the finding located there."""
        return self.key, finding

    def texts(self) -> dict[str, str]:
        return {self.key: self.text}


class NotebookBuffer:
    """A notebook's code cells as the editor has them: the passes read them as one module, as
    they read a `.ipynb` file's (:class:`devfix.notebooks.Notebook`), so findings and fixes are
    those of `devfix check` and `devfix apply` on the notebook saved with these cells."""

    def __init__(self, key: str, path: str, cells: Sequence[Cell]) -> None:
        self.key = key
        self.path = path
        self.cells = tuple(cells)
        document = {
            "cells": [
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "metadata": {},
                    "outputs": [],
                    "source": cell.text.splitlines(keepends=True),
                }
                for cell in self.cells
            ],
            "metadata": {"language_info": {"name": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
        self.notebook = Notebook(json.dumps(document, indent=1), path)

    @property
    def code(self) -> str:
        return self.notebook.code

    def split(self, code: str) -> dict[str, str]:
        changed = self.notebook.split(code)
        return {self.cells[number - 1].key: text for number, text in changed.items()}

    def place(self, finding: Finding) -> tuple[str, Finding]:
        located = self.notebook.remap(finding)
        cell = located.cell or 1
        return self.cells[cell - 1].key, replace(located, cell=None, file_span=None)

    def texts(self) -> dict[str, str]:
        return {cell.key: cell.text for cell in self.cells}


Buffer = Union[TextBuffer, NotebookBuffer]


@dataclass(frozen=True)
class Analysis:
    """The findings of one buffer, located in its code (:meth:`Buffer.place` puts them in the
    part the user sees); `problem` says why there are none when the code could not be read."""

    findings: tuple[Finding, ...] = ()
    problem: str | None = None


class FindingCache:
    """Findings per (settings, content): in memory for this session, and in the result cache
    `devfix check` keeps (`.devfix_cache/`) for a `.py` buffer whose settings have one."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        #: The server analyses in a worker thread and answers code actions on its loop's.
        self._lock = threading.RLock()
        self._memory: OrderedDict[tuple[str, str, str], tuple[Finding, ...]] = OrderedDict()
        self._stores: dict[str, ResultCache] = {}

    def _store(self, settings: Settings) -> ResultCache | None:
        if settings.cache_dir is None:
            return None
        described = settings_key(settings)
        store = self._stores.get(described)
        if store is None:
            store = self._stores[described] = ResultCache(settings.cache_dir, settings, "check")
        return store

    def get(self, buffer: Buffer, settings: Settings) -> tuple[Finding, ...] | None:
        with self._lock:
            return self._get(buffer, settings)

    def _get(self, buffer: Buffer, settings: Settings) -> tuple[Finding, ...] | None:
        key = (settings_key(settings), buffer.path, _hash(buffer.code))
        found = self._memory.get(key)
        if found is not None:
            self._memory.move_to_end(key)
            return found
        store = self._store(settings)
        if store is None or not isinstance(buffer, TextBuffer):
            return None
        data = buffer.text.encode("utf-8", "surrogatepass")
        hit = store.lookup(buffer.path, content_key(data), data.count(b"\n") + 1)
        if hit is None:
            return None
        self._remember(key, hit.findings)
        return hit.findings

    def put(self, buffer: Buffer, settings: Settings, findings: tuple[Finding, ...]) -> None:
        with self._lock:
            self._put(buffer, settings, findings)

    def _put(self, buffer: Buffer, settings: Settings, findings: tuple[Finding, ...]) -> None:
        key = (settings_key(settings), buffer.path, _hash(buffer.code))
        self._remember(key, findings)
        store = self._store(settings)
        if store is not None and isinstance(buffer, TextBuffer):
            data = buffer.text.encode("utf-8", "surrogatepass")
            result = FileResult(buffer.path, FileStatus.UNCHANGED, findings=findings)
            store.store(content_key(data), result)

    def _remember(self, key: tuple[str, str, str], findings: tuple[Finding, ...]) -> None:
        self._memory[key] = findings
        self._memory.move_to_end(key)
        while len(self._memory) > self.size:
            self._memory.popitem(last=False)

    def save(self) -> None:
        """Write what this session added to the result caches on disk."""
        with self._lock:
            for store in self._stores.values():
                store.save()


def _hash(text: str) -> str:
    return content_key(text.encode("utf-8", "surrogatepass"))


def settings_key(settings: Settings) -> str:
    """What of a run's settings decides its findings (and where its result cache is)."""
    described = {
        "passes": settings.codes,
        "unsafe_fixes": settings.unsafe_fixes,
        "pass_options": {code: dict(values) for code, values in settings.pass_options.items()},
        "cache_dir": settings.cache_dir,
    }
    return json.dumps(described, sort_keys=True, default=str)


def analyse(buffer: Buffer, settings: Settings, cache: FindingCache | None = None) -> Analysis:
    """The findings `devfix check` reports on the buffer's code, from `cache` when it has them."""
    if sources.is_generated(buffer.code):
        return Analysis(problem="generated file (@generated marker)")
    if cache is not None:
        known = cache.get(buffer, settings)
        if known is not None:
            return Analysis(known)
    try:
        found = tuple(f.without_nodes() for f in check_source(buffer.code, buffer.path, settings))
    except (InputError, InternalError) as error:
        return Analysis(problem=str(error))
    if cache is not None:
        cache.put(buffer, settings, found)
    return Analysis(found)


def fix_all(buffer: Buffer, settings: Settings) -> dict[str, str]:
    """The new text of each part the fixes change: every fix the settings let `apply` write."""
    return _rewrite(buffer, settings, None)


def fix_one(buffer: Buffer, settings: Settings, finding: Finding) -> dict[str, str]:
    """The new text of each part that the fix of `finding` (a finding of the buffer's code)
    changes, that fix alone; nothing when the finding is no longer there or has no fix."""
    wanted = spot(finding)
    return _rewrite(buffer, settings, wanted)


def _rewrite(buffer: Buffer, settings: Settings, wanted: Spot | None) -> dict[str, str]:
    if sources.is_generated(buffer.code):
        return {}
    try:
        if wanted is None:
            result = fix_source(buffer.code, settings, path=buffer.path)
        else:
            result = fix_source(
                buffer.code,
                settings,
                path=buffer.path,
                accept=lambda candidate: spot(candidate) == wanted,
            )
        if wanted is not None and not any(spot(f) == wanted for f in result.applied):
            return {}
        return buffer.split(result.output)
    except (InputError, InternalError):
        return {}


def ignore(buffer: Buffer, finding: Finding) -> dict[str, str]:
    """The new text of the part where a `# devfix: ignore[CODE]` comment hides `finding` (merged
    into a devfix comment already on its line); nothing where no comment can go."""
    text, missed = add_ignores(buffer.code, [finding])
    if missed:
        return {}
    try:
        return buffer.split(text)
    except InternalError:
        return {}


def fixable(finding: Finding, settings: Settings) -> bool:
    """Whether the editor offers the finding's fix: `apply` with these settings writes it."""
    return settings.writes(finding)
