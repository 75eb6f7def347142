"""Reading, writing and finding source files, byte-exactly.

PEP 263 coding cookies and UTF-8 byte-order marks are honoured and kept, line endings are never
translated, and writes are atomic: a temporary file in the same folder is renamed over the old
one, so a file is either as it was or fully rewritten, even if devfix is killed mid-run.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import errno
import functools
import hashlib
import io
import os
import re
import stat
import sys
import tempfile
import time
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pathspec

from devfix import state
from devfix.errors import InputError
from devfix.limits import MAX_NOTEBOOK_BYTES, MAX_SOURCE_BYTES
from devfix.types import FileResult, FileStatus

#: Folder names never walked into: version control, environments, caches, build output.
EXCLUDED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".bzr",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".tox",
        ".nox",
        ".eggs",
        ".venv",
        "venv",
        "site-packages",
        "dist-packages",
        "build",
        "dist",
        "node_modules",
        ".ipynb_checkpoints",
    }
)
SOURCE_SUFFIXES = (".py", ".ipynb")  # notebooks: see devfix.notebooks


@dataclass(frozen=True)
class Document:
    """A file's text plus what is needed to write it back exactly as it was encoded."""

    path: str
    text: str
    encoding: str
    #: Hash of the bytes read; `write_atomic` refuses to replace a file that changed since.
    fingerprint: str | None = None

    def with_text(self, text: str) -> Document:
        return replace(self, text=text)

    def encode(self) -> bytes:
        return self.text.encode(self.encoding)


_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


def decode(data: bytes, path: str) -> Document:
    if b"\x00" in data:
        raise InputError("contains NUL bytes; not a Python source file")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        if not _has_cookie(data):
            # Python reads the first two lines to look for a cookie; without one they must be
            # UTF-8, and the error is in the bytes, not in a cookie.
            encoding = "utf-8-sig" if data.startswith(codecs.BOM_UTF8) else "utf-8"
        else:
            unknown = _unknown_codec(data, error)
            if unknown is None:
                raise InputError(f"has an invalid coding cookie ({error})") from None
            # A codec Python lacks unless a package registers it (`future_fstrings`,
            # `pyxl`): such codecs read UTF-8 and rewrite it before Python compiles the
            # text. As UTF-8 the file is read and written back byte for byte, cookie and all.
            encoding = "utf-8"
            state.warn_once(
                f"{path}: its coding cookie names `{unknown}`, a codec this Python does not "
                "have; read and written as UTF-8 (its bytes are valid UTF-8), the cookie kept"
            )
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as error:
        line, column = _position(data, error.start)
        name = "UTF-8" if encoding.startswith("utf-8") else encoding
        where = f"byte 0x{data[error.start]:02X} at line {line}, column {column}"
        if _has_cookie(data):
            raise InputError(f"is not valid {name}, as its coding cookie says ({where})") from None
        raise InputError(f"is not valid {name} ({where}) and has no coding cookie") from None
    return Document(path, text, encoding, _fingerprint(data))


def _unknown_codec(data: bytes, error: SyntaxError) -> str | None:
    """The codec a cookie names when Python does not know it and the bytes are UTF-8 anyway
    (without a byte-order mark, which with another cookie is an error of its own)."""
    if not str(error).startswith("unknown encoding") or data.startswith(codecs.BOM_UTF8):
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    for line in data.splitlines()[:2]:
        match = _COOKIE.match(line)
        if match:
            return match.group(1).decode("ascii", errors="replace")
    return None


def _has_cookie(data: bytes) -> bool:
    """Whether one of the first two lines holds a PEP 263 coding cookie."""
    return any(_COOKIE.match(line) for line in data.splitlines()[:2])


def _position(data: bytes, offset: int) -> tuple[int, int]:
    """1-based (line, column in characters) of byte `offset`."""
    start = data.rfind(b"\n", 0, offset) + 1
    column = len(data[start:offset].decode("utf-8", errors="replace")) + 1
    return data.count(b"\n", 0, offset) + 1, column


def _fingerprint(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def is_generated(text: str) -> bool:
    """A `@generated` marker in a comment near the top: the file is produced by a tool."""
    for line in text.splitlines()[:30]:
        stripped = line.strip()
        if stripped.startswith("#") and "@generated" in stripped:
            return True
    return False


def read(path: str) -> Document:
    if os.path.isdir(path):
        raise InputError("is a directory")
    try:
        info = os.stat(path)
    except OSError as error:
        raise InputError(f"cannot be read: {error.strerror or error}") from None
    if not stat.S_ISREG(info.st_mode):
        # A FIFO or device would block or never end; only regular files are read.
        raise InputError("is not a regular file")
    # A notebook's outputs weigh, not its code: its cells obey MAX_SOURCE_BYTES once joined.
    limit = MAX_NOTEBOOK_BYTES if path.endswith(".ipynb") else MAX_SOURCE_BYTES
    if info.st_size > limit:
        kind = "notebooks" if limit == MAX_NOTEBOOK_BYTES else "source files"
        raise InputError(
            f"is {info.st_size / 2**20:.1f} MiB; devfix reads {kind} up to {limit // 2**20} MiB"
        )
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise InputError(f"cannot be read: {error.strerror or error}") from None
    return decode(data, path)


def write_atomic(path: str, document: Document) -> None:
    """Replace the file's content in one rename, keeping its permission bits and, where this
    process may set them, its owner and group (a new file replaces the old one, so a hard link
    to the old file keeps the old content)."""
    target = os.path.realpath(path)
    directory = os.path.dirname(target) or "."
    try:
        info = os.stat(target)
        folder_mode = stat.S_IMODE(os.stat(directory).st_mode)
    except OSError as error:
        raise InputError(f"cannot be written: {error.strerror or error}") from None
    mode = stat.S_IMODE(info.st_mode)
    # The mode bits count even for root, who may write anything: read-only means kept, for the
    # file and for the folder the new file is renamed into.
    if not os.access(target, os.W_OK) or not mode & _ANY_WRITE:
        raise InputError("is read-only; not rewritten")
    if not os.access(directory, os.W_OK) or not folder_mode & _ANY_WRITE:
        raise InputError("is in a read-only folder; not rewritten")
    if document.fingerprint is not None:
        try:
            with open(target, "rb") as existing:
                current = _fingerprint(existing.read())
        except OSError as error:
            raise InputError(f"cannot be written: {error.strerror or error}") from None
        if current != document.fingerprint:
            # Another process (a second devfix run, an editor) wrote it meanwhile: keep theirs.
            raise InputError(CHANGED_ON_DISK)
    _remove_stale_temporaries(directory, os.path.basename(target))
    try:
        handle, temporary = tempfile.mkstemp(
            dir=directory, prefix=_temporary_prefix(os.path.basename(target)), suffix=_TEMP_SUFFIX
        )
    except OSError as error:
        raise InputError(f"cannot be written: {error.strerror or error}") from None
    data = document.encode()
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        _keep_owner(temporary, info)
        os.chmod(temporary, mode)  # after chown, which clears set-user-ID bits
        with state.recorded_rewrite(path, data):
            _replace_if_unchanged(temporary, target, document.fingerprint)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(error, OSError):
            raise InputError(f"cannot be written: {error.strerror or error}") from None
        raise


_ANY_WRITE = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
CHANGED_ON_DISK = "changed on disk while devfix was working on it; not rewritten"
_TEMP_SUFFIX = ".devfix-tmp"
#: The longest file name most file systems take (bytes); mkstemp adds 8 characters.
_NAME_MAX = 255


def _temporary_prefix(name: str) -> str:
    """`.NAME.`, with NAME cut so that the temporary's name still fits in 255 bytes."""
    room = _NAME_MAX - len(_TEMP_SUFFIX) - 8 - 2
    encoded = os.fsencode(name)
    if len(encoded) > room:
        name = encoded[:room].decode("utf-8", "ignore") or "devfix"
    return f".{name}."


def write_report(path: str, data: bytes) -> None:
    """Create or replace the report file `path` in one rename; InputError if `path` is a link
    (never written through, as state files are not), not a regular file (a FIFO would block),
    or read-only (kept, as source files are)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as error:
        raise InputError(error.strerror or str(error)) from None
    mode = 0o644
    if info is not None:
        if stat.S_ISLNK(info.st_mode):
            raise InputError("is a symbolic link; devfix does not write through links")
        if not stat.S_ISREG(info.st_mode):
            raise InputError("is not a regular file")
        mode = stat.S_IMODE(info.st_mode)
        if not os.access(path, os.W_OK) or not mode & _ANY_WRITE:
            raise InputError("is read-only; not replaced")
    try:
        replace_file(path, data, mode)
    except OSError as error:
        raise InputError(error.strerror or str(error)) from None


def replace_file(path: str, data: bytes, mode: int) -> None:
    """Put `data` (permission bits `mode`) at `path` in one rename; a temporary file in the
    same folder, removed if anything fails. A link at `path` is replaced, never written
    through."""
    handle, temporary = tempfile.mkstemp(
        dir=os.path.dirname(os.path.abspath(path)),
        prefix=_temporary_prefix(os.path.basename(path)),
        suffix=_TEMP_SUFFIX,
    )
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _replace_if_unchanged(temporary: str, target: str, expected: str | None) -> None:
    """Rename `temporary` over `target` unless `target` no longer has the fingerprint `expected`.

    Where the platform can exchange two names atomically (Linux's `renameat2`), the file that
    was replaced is read back after the exchange and put back if it is not the one devfix read:
    an edit saved at any moment before the rename is kept. Elsewhere `target` is read once more
    just before the rename, which leaves a window of microseconds.
    """
    if expected is None:
        os.replace(temporary, target)
        return
    if _exchange(temporary, target):
        with open(temporary, "rb") as replaced:
            kept = _fingerprint(replaced.read())
        if kept != expected:
            _exchange(temporary, target)  # theirs back; ours is removed by the caller
            raise InputError(CHANGED_ON_DISK)
        os.unlink(temporary)
        return
    with open(target, "rb") as current:
        if _fingerprint(current.read()) != expected:
            raise InputError(CHANGED_ON_DISK)
    os.replace(temporary, target)


@functools.lru_cache(maxsize=1)
def _renameat2() -> Any:
    if not sys.platform.startswith("linux"):
        return None  # pragma: no cover - other platforms
    try:
        return getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    except OSError:  # pragma: no cover - no C library to load
        return None


def _exchange(first: str, second: str) -> bool:
    """Swap the files named `first` and `second` in one step; False where that is not possible
    (no `renameat2`, or a file system without RENAME_EXCHANGE)."""
    function = _renameat2()
    if function is None:
        return False
    at_cwd, rename_exchange = -100, 2
    if function(at_cwd, os.fsencode(first), at_cwd, os.fsencode(second), rename_exchange) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(error, os.strerror(error), second)


def _keep_owner(temporary: str, original: os.stat_result) -> None:
    """Give the new file the old one's owner and group, or its group alone, as far as allowed
    (root may set both; an owner may set a group they belong to)."""
    created = os.stat(temporary)
    if (created.st_uid, created.st_gid) == (original.st_uid, original.st_gid):
        return
    for uid in (original.st_uid, -1):
        try:
            os.chown(temporary, uid, original.st_gid)
            return
        except OSError:
            continue


#: Temporary files are `.<name>.<random>.devfix-tmp` beside the file; one older than this was
#: left by a killed run (a live one exists for milliseconds) and is removed by the next run that
#: walks its folder or writes that file.
STALE_TEMPORARY_SECONDS = 60.0


def _remove_stale_temporaries(directory: str, name: str) -> None:
    prefix, suffix = _temporary_prefix(name), _TEMP_SUFFIX
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for entry in entries:
        if entry.startswith(prefix) and entry.endswith(suffix):
            _remove_if_stale(os.path.join(directory, entry))


def _remove_if_stale(temporary: str) -> None:
    with contextlib.suppress(OSError):
        if time.time() - os.lstat(temporary).st_mtime > STALE_TEMPORARY_SECONDS:
            os.unlink(temporary)


def invalid_pattern(pattern: str) -> str | None:
    """Why `pattern` is no gitignore pattern (None when it is one)."""
    try:
        pathspec.GitIgnoreSpec.from_lines([pattern])
    except ValueError as error:  # pathspec's pattern error, by any of its names across versions
        return str(error).splitlines()[0] if str(error) else "not a gitignore pattern"
    return None


class _IgnoreRules:
    """Every `.gitignore` from the walk's root down; the deepest file that matches decides."""

    def __init__(self) -> None:
        self._specs: dict[str, pathspec.GitIgnoreSpec] = {}

    def load(self, directory: str) -> None:
        candidate = os.path.join(directory, ".gitignore")
        if os.path.isfile(candidate):
            try:
                with open(candidate, encoding="utf-8", errors="replace") as handle:
                    # git skips a line it cannot read as a pattern (a lone `!` or `\\`).
                    lines = [line for line in handle if invalid_pattern(line) is None]
                self._specs[directory] = pathspec.GitIgnoreSpec.from_lines(lines)
            except OSError:
                pass

    def ignored(self, path: str, is_dir: bool) -> bool:
        directory = os.path.dirname(path)
        while True:
            spec = self._specs.get(directory)
            if spec is not None:
                relative = os.path.relpath(path, directory).replace(os.sep, "/")
                verdict = spec.check_file(relative + "/" if is_dir else relative).include
                if verdict is not None:
                    return verdict
            parent = os.path.dirname(directory)
            if parent == directory:
                return False
            directory = parent


def _is_virtualenv(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "pyvenv.cfg"))


class Excludes:
    """`exclude` / `extend-exclude` patterns (gitignore syntax) relative to a root folder.

    Without `exclude`, the defaults (EXCLUDED_DIRS) apply; `extend_exclude` adds to either.
    """

    def __init__(
        self,
        exclude: Iterable[str] | None = None,
        extend_exclude: Iterable[str] = (),
        root: str = ".",
    ) -> None:
        base = [f"{name}/" for name in sorted(EXCLUDED_DIRS)] if exclude is None else list(exclude)
        self.spec = pathspec.GitIgnoreSpec.from_lines([*base, *extend_exclude])
        self.root = os.path.abspath(root)

    def excluded(self, path: str, is_dir: bool) -> bool:
        relative = os.path.relpath(os.path.abspath(path), self.root).replace(os.sep, "/")
        if relative.startswith("../"):
            # Outside the configuration's folder: match on the path below the walk root only.
            relative = os.path.basename(path)
        return self.spec.match_file(relative + "/" if is_dir else relative)


#: The reason of a SKIPPED result for a symbolic link, found in a folder, to a file outside it.
LINK_OUT_OF_TREE = "symbolic link to a file outside the folder; not followed"


def discover(
    paths: Iterable[str], excludes: Excludes | None = None, *, report_links: bool = False
) -> Iterator[str | FileResult]:
    """Source files under `paths` (each once), or a FAILED result for a path that is unusable.

    A file named explicitly is always taken; folders are walked without following symbolic
    links, skipping excluded folders (EXCLUDED_DIRS unless configured otherwise), virtual
    environments and what `.gitignore` files exclude. A link to a file outside the folder
    walked is not followed; with `report_links`, each is a SKIPPED result (LINK_OUT_OF_TREE).
    """
    excludes = excludes or Excludes()
    seen: set[str] = set()
    for given in paths:
        if os.path.exists(given) and not os.path.isdir(given):
            real = os.path.realpath(given)
            if real not in seen:
                seen.add(real)
                yield given
            continue
        if not os.path.isdir(given):
            reason = (
                "broken symbolic link" if os.path.islink(given) else "no such file or directory"
            )
            yield FileResult(given, FileStatus.FAILED, reason=reason)
            continue
        yield from _walk(given, seen, excludes, report_links)


def _walk(
    root: str, seen: set[str], excludes: Excludes, report_links: bool
) -> Iterator[str | FileResult]:
    rules = _IgnoreRules()
    absolute_root = os.path.abspath(root)
    # .gitignore files above the root still apply inside it, up to the repository's top.
    ancestors = []
    current = absolute_root
    while True:
        ancestors.append(current)
        if os.path.isdir(os.path.join(current, ".git")):
            break
        parent = os.path.dirname(current)
        if parent == current:
            ancestors = [absolute_root]
            break
        current = parent
    for directory in reversed(ancestors):
        rules.load(directory)
    for directory, subdirs, filenames in os.walk(absolute_root):
        if directory != absolute_root:
            rules.load(directory)
        subdirs[:] = sorted(
            name
            for name in subdirs
            if not excludes.excluded(os.path.join(directory, name), is_dir=True)
            and not os.path.islink(os.path.join(directory, name))
            and not _is_virtualenv(os.path.join(directory, name))
            and not rules.ignored(os.path.join(directory, name), is_dir=True)
        )
        for name in sorted(filenames):
            if name.startswith(".") and name.endswith(".devfix-tmp"):
                _remove_if_stale(os.path.join(directory, name))  # left by a killed run
                continue
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            full = os.path.join(directory, name)
            if rules.ignored(full, is_dir=False) or excludes.excluded(full, is_dir=False):
                continue
            real = os.path.realpath(full)
            if os.path.islink(full) and not real.startswith(absolute_root + os.sep):
                if report_links:
                    where = os.path.join(root, os.path.relpath(full, absolute_root))
                    yield FileResult(where, FileStatus.SKIPPED, reason=LINK_OUT_OF_TREE)
                continue
            if real in seen:
                continue
            seen.add(real)
            # `.` given: `model.py`, as ruff and git name it, not `./model.py`.
            yield os.path.normpath(os.path.join(root, os.path.relpath(full, absolute_root)))
