"""A cache of results for files whose content has not changed since the last run.

One JSON file per devfix build (its version and the state of its source files, so an edited
checkout never reads results of its old code), run mode and configuration, holding, per
content hash (of the exact bytes that were parsed), the findings of a file that needed no
rewrite. A hit costs
one read and one hash instead of a parse. The file lives in devfix's state folder and is read
and written without following links (devfix.state); an entry that is not exactly what devfix
writes (a corrupted or crafted file) is a miss, never an error.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from dataclasses import asdict, fields
from typing import Any

from devfix import state
from devfix.settings import Settings
from devfix.types import Applicability, FileResult, FileStatus, Finding, TextEdit
from devfix.version import __version__

#: The folder devfix keeps its state in (result cache, run record, review answers), in the
#: configuration's folder or the working folder. It ignores itself for git.
CACHE_FOLDER = state.STATE_FOLDER


def ensure_cache_folder(directory: str) -> None:
    """Create `directory` (a devfix state folder) with a `.gitignore` that ignores all of it;
    never through a symbolic link (then StateError, an OSError)."""
    state.ensure_folder(directory)


def content_key(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Size and modification time of every Python file of the installed devfix (passes
    included): a few hundred `stat` calls, once per process."""
    import devfix.codemods  # the passes: beside devfix/ in a checkout, inside it in a wheel

    roots = {os.path.dirname(os.path.abspath(__file__))}
    roots.add(os.path.dirname(os.path.abspath(devfix.codemods.__file__)))
    files: set[str] = set()
    for root in roots:
        for folder, _dirs, names in os.walk(root):
            files.update(os.path.join(folder, n) for n in names if n.endswith(".py"))
    parts: list[str] = []
    for path in sorted(files):
        with contextlib.suppress(OSError):
            info = os.stat(path)
            parts.append(f"{path}:{info.st_size}:{info.st_mtime_ns}")
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=8).hexdigest()


def _settings_key(settings: Settings, mode: str) -> str:
    described = {
        "version": __version__,
        "code": code_fingerprint(),
        "mode": mode,
        "passes": settings.codes,
        "unsafe_fixes": settings.unsafe_fixes,
        "pass_options": {code: dict(values) for code, values in settings.pass_options.items()},
    }
    text = json.dumps(described, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def _finding_to_json(finding: Finding) -> dict[str, Any]:
    data = {
        key: value
        for key, value in asdict(finding.without_nodes()).items()
        if key not in ("edits", "imports")
    }
    data["applicability"] = finding.applicability.value
    return data


_TEXT_FIELDS = ("code", "name", "message", "fix_title")
_POSITION_FIELDS = ("line", "col", "end_line", "end_col")
_FINDING_FIELDS = frozenset(f.name for f in fields(Finding)) - {"edits", "imports"}


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


def _text_edit_from_json(data: object) -> TextEdit:
    if not (
        isinstance(data, dict)
        and set(data) == {*_POSITION_FIELDS, "text"}
        and all(_is_count(data[key]) for key in _POSITION_FIELDS)
        and isinstance(data["text"], str)
    ):
        raise ValueError("not a text edit")
    return TextEdit(**data)


def _finding_from_json(data: object, rules: dict[str, str], lines: int) -> Finding:
    """A Finding from what :func:`_finding_to_json` wrote for a file of at most `lines` lines,
    by one of `rules` (code -> name); ValueError for anything else (a cache file edited by hand
    or by another program is not trusted with what devfix prints)."""
    if not isinstance(data, dict) or set(data) != _FINDING_FIELDS:
        raise ValueError("not a finding")
    if not all(isinstance(data[key], str) for key in _TEXT_FIELDS):
        raise ValueError("not a finding")
    if not all(data[key].isprintable() for key in ("code", "name", "fix_title")):
        raise ValueError("not a finding")
    if rules.get(data["code"]) != data["name"] or any(ord(c) < 0x20 for c in data["message"]):
        raise ValueError("not a finding of this run's rules")
    if not all(_is_count(data[key]) for key in _POSITION_FIELDS):
        raise ValueError("not a finding")
    if not 1 <= data["line"] <= data["end_line"] <= lines:
        raise ValueError("not a place in the file")
    if data["cell"] is not None and not _is_count(data["cell"]):
        raise ValueError("not a finding")
    if not isinstance(data["text_edits"], list):
        raise ValueError("not a finding")
    span = data["file_span"]
    if span is not None and not (
        isinstance(span, list) and len(span) == 4 and all(_is_count(value) for value in span)
    ):
        raise ValueError("not a finding")
    values = dict(data)
    values["applicability"] = Applicability(data["applicability"])
    values["text_edits"] = tuple(_text_edit_from_json(edit) for edit in data["text_edits"])
    values["file_span"] = tuple(span) if span is not None else None
    return Finding(**values)


class ResultCache:
    """Load on creation, `lookup` / `store` during the run, `save` at the end (atomically)."""

    def __init__(self, directory: str, settings: Settings, mode: str) -> None:
        self.name = f"results-{_settings_key(settings, mode)}.json"
        self.path = os.path.join(directory, self.name)
        self.directory = directory
        self.rules = {pass_class.CODE: pass_class.NAME for pass_class in settings.passes}
        self.entries: dict[str, Any] = {}
        self.dirty = False
        data = state.read_file(directory, self.name)
        with contextlib.suppress(ValueError, RecursionError):
            loaded = json.loads(data) if data is not None else None
            if isinstance(loaded, dict):
                self.entries = loaded

    def lookup(self, path: str, key: str, lines: int) -> FileResult | None:
        """The cached result for the file whose content has `key`, if the entry is one devfix
        could have written for it (`lines`: a bound on the lines of any of its code)."""
        entry = self.entries.get(key)
        if not isinstance(entry, dict) or set(entry) != {"findings"}:
            return None
        if not isinstance(entry["findings"], list):
            return None
        try:
            findings = tuple(
                _finding_from_json(item, self.rules, lines) for item in entry["findings"]
            )
        except (TypeError, ValueError):
            return None
        return FileResult(
            path,
            FileStatus.UNCHANGED,
            findings=findings,
            remaining=findings,
            fingerprint=key,
        )

    def store(self, key: str, result: FileResult) -> None:
        if result.status is not FileStatus.UNCHANGED:
            return
        self.entries[key] = {"findings": [_finding_to_json(f) for f in result.findings]}
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            state.write_file(self.directory, self.name, json.dumps(self.entries).encode())
        except state.StateError as error:
            state.warn_once(f"{error}; results are not cached")
