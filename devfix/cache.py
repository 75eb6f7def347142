"""A cache of results for files whose content has not changed since the last run.

One JSON file per devfix version, run mode and configuration, holding, per content hash, the
findings of a file that needed no rewrite. A hit costs one read and one hash instead of a parse.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from typing import Any

from devfix.settings import Settings
from devfix.types import Applicability, FileResult, FileStatus, Finding, TextEdit
from devfix.version import __version__

#: The folder devfix keeps its state in (result cache, run record, review answers), in the
#: configuration's folder or the working folder. It ignores itself for git.
CACHE_FOLDER = ".devfix_cache"
_IGNORE_ALL = "# Created by devfix; the cache never belongs in git.\n*\n"


def ensure_cache_folder(directory: str) -> None:
    """Create `directory` (a devfix state folder) with a `.gitignore` that ignores all of it."""
    os.makedirs(directory, exist_ok=True)
    ignore_file = os.path.join(directory, ".gitignore")
    if not os.path.exists(ignore_file):
        with open(ignore_file, "w", encoding="utf-8") as handle:
            handle.write(_IGNORE_ALL)


def content_key(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _settings_key(settings: Settings, mode: str) -> str:
    described = {
        "version": __version__,
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


def _finding_from_json(data: dict[str, Any]) -> Finding:
    fields = dict(data)
    fields["applicability"] = Applicability(fields["applicability"])
    fields["text_edits"] = tuple(TextEdit(**edit) for edit in fields.get("text_edits", ()))
    if fields.get("file_span") is not None:
        fields["file_span"] = tuple(fields["file_span"])
    return Finding(**fields)


class ResultCache:
    """Load on creation, `lookup` / `store` during the run, `save` at the end (atomically)."""

    def __init__(self, directory: str, settings: Settings, mode: str) -> None:
        self.path = os.path.join(directory, f"results-{_settings_key(settings, mode)}.json")
        self.directory = directory
        self.entries: dict[str, Any] = {}
        self.dirty = False
        with contextlib.suppress(OSError, ValueError):
            with open(self.path, encoding="utf-8") as handle:
                loaded = json.load(handle)
            if isinstance(loaded, dict):
                self.entries = loaded

    def lookup(self, path: str, key: str) -> FileResult | None:
        entry = self.entries.get(key)
        if entry is None:
            return None
        try:
            findings = tuple(_finding_from_json(item) for item in entry["findings"])
        except (KeyError, TypeError, ValueError):
            return None
        return FileResult(path, FileStatus.UNCHANGED, findings=findings, remaining=findings)

    def store(self, key: str, result: FileResult) -> None:
        if result.status is not FileStatus.UNCHANGED:
            return
        self.entries[key] = {"findings": [_finding_to_json(f) for f in result.findings]}
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        with contextlib.suppress(OSError):
            ensure_cache_folder(self.directory)
            handle_fd, temporary = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(handle_fd, "w", encoding="utf-8") as stream:
                json.dump(self.entries, stream)
            os.replace(temporary, self.path)
