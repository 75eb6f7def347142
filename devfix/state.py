"""What devfix writes for itself in its state folder (`.devfix_cache/`), never through a link.

A repository can commit `.devfix_cache` itself, or a file in it, as a symbolic link; following
it would let a checkout make devfix overwrite (or create) any file its user can write. So the
folder is opened with `O_NOFOLLOW | O_DIRECTORY`, and every file in it is created, opened or
renamed relative to that descriptor with `O_NOFOLLOW`: a link at either step makes the write
fail, devfix says so once (on stderr) and goes on without that state.

The run record (:class:`RunRecord`, `run-state.jsonl`) is written by whoever does the work: the
worker process that rewrites a file appends `{"path": ..., "writing": HASH}` just before the
rename that replaces it and `{"path": ..., "status": "changed"}` just after, so after a kill at
any moment the record is true: a file with neither line is as it was, a file with only the
first is either as it was or has exactly the content HASH (blake2b-128 of its bytes).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import sys
import time
from collections.abc import Iterator

from devfix.types import FileResult, FileStatus

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

#: The default state folder, relative to the configuration's folder (or the working directory).
STATE_FOLDER = ".devfix_cache"
RECORD_NAME = "run-state.jsonl"
_IGNORE_ALL = b"# Created by devfix; the cache never belongs in git.\n*\n"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_warned: set[str] = set()


class StateError(OSError):
    """The state folder or a file in it cannot be used (a link, permissions, a full disk)."""


def warn_once(message: str) -> None:
    """One line on stderr, once per process and message."""
    if message not in _warned:
        _warned.add(message)
        sys.stderr.write(f"devfix: warning: {message}\n")
        sys.stderr.flush()


def open_folder(folder: str, *, create: bool) -> int:
    """A descriptor of `folder` (made if `create`), refusing a symbolic link."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder)
    try:
        return os.open(folder, os.O_RDONLY | _DIRECTORY | _NOFOLLOW)
    except OSError as error:
        if os.path.islink(folder):
            raise StateError(
                f"{folder} is a symbolic link; devfix does not write its state through links"
            ) from None
        raise StateError(f"{folder}: {error.strerror or error}") from None


def _describe(folder: str, name: str, error: OSError) -> StateError:
    path = os.path.join(folder, name)
    if os.path.islink(path):
        return StateError(f"{path} is a symbolic link; devfix does not write through links")
    return StateError(f"{path}: {error.strerror or error}")


def _ensure_ignored(directory: int, folder: str) -> None:
    """A `.gitignore` that keeps the folder out of git, unless one (of any kind) is there.

    It is written under another name and linked into place whole, so that a full disk leaves no
    empty `.gitignore` behind (which would let git see the cache); StateError if it cannot be.
    """
    try:
        os.stat(".gitignore", dir_fd=directory, follow_symlinks=False)
        return  # already there (perhaps a link: then it is left alone, never written through)
    except FileNotFoundError:
        pass
    except OSError as error:
        raise _describe(folder, ".gitignore", error) from None
    temporary = f".gitignore.{secrets.token_hex(6)}.tmp"
    try:
        handle = os.open(
            temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, dir_fd=directory
        )
        try:
            if os.write(handle, _IGNORE_ALL) != len(_IGNORE_ALL):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        finally:
            os.close(handle)
        with contextlib.suppress(FileExistsError):  # another run made it meanwhile
            os.link(
                temporary,
                ".gitignore",
                src_dir_fd=directory,
                dst_dir_fd=directory,
                follow_symlinks=False,
            )
    except OSError as error:
        raise _describe(folder, ".gitignore", error) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=directory)


def ensure_folder(folder: str) -> None:
    """Create `folder` (a state folder) with a `.gitignore` that keeps it out of git; StateError
    if it, or its `.gitignore`, is a symbolic link or cannot be made."""
    parent = os.path.dirname(os.path.abspath(folder))
    with contextlib.suppress(OSError):
        os.makedirs(parent, exist_ok=True)
    directory = open_folder(folder, create=True)
    try:
        _ensure_ignored(directory, folder)
    finally:
        os.close(directory)


def read_file(folder: str, name: str) -> bytes | None:
    """The bytes of `folder/name`, or None if it is missing, unreadable or reached by a link."""
    try:
        directory = open_folder(folder, create=False)
    except StateError:
        return None
    try:
        handle = os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=directory)
    except OSError:
        return None
    finally:
        os.close(directory)
    with os.fdopen(handle, "rb") as stream:
        return stream.read()


def write_file(folder: str, name: str, data: bytes) -> None:
    """Replace `folder/name` with `data` in one rename (StateError if it cannot)."""
    directory = open_folder(folder, create=True)
    try:
        _ensure_ignored(directory, folder)
        temporary = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            handle = os.open(
                temporary,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW,
                0o644,
                dir_fd=directory,
            )
        except OSError as error:
            raise _describe(folder, temporary, error) from None
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
            # A rename replaces a link named `name` itself; it never writes where one points.
            os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=directory)
            raise _describe(folder, name, error) from None
    finally:
        os.close(directory)


def fingerprint(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class RunRecord:
    """`run-state.jsonl` in the state folder: one JSON line per event, appended as it happens.

    Lines: `{"started": time, "argv": [...], "pid": n}`; for a rewritten file
    `{"path": p, "writing": hash}` then `{"path": p, "status": "changed"}` (written by the process
    that does the rename, around it); for every other file `{"path": p, "status": s}`; at the
    end `{"finished": bool, "interrupted": bool}`. Each line is one `write` to a file opened with
    O_APPEND, so lines of one run's processes never mix. The file is locked (`flock`) for the
    run: a second run at the same time keeps its own record, `run-state-PID.jsonl`.
    """

    def __init__(self, folder: str | None) -> None:
        self.folder = folder or STATE_FOLDER
        self.path = os.path.join(self.folder, RECORD_NAME)
        self._handle: int | None = None
        try:
            self._handle = self._open()
        except StateError as error:
            warn_once(f"{error}; this run keeps no record of finished files")
            return
        self._write({"started": time.time(), "argv": sys.argv[1:], "pid": os.getpid()})
        global _recording
        _recording = self

    def _open(self) -> int:
        directory = open_folder(self.folder, create=True)
        try:
            _ensure_ignored(directory, self.folder)
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | _NOFOLLOW
            name = RECORD_NAME
            try:
                handle = os.open(name, flags, 0o644, dir_fd=directory)
            except OSError as error:
                raise _describe(self.folder, name, error) from None
            if fcntl is not None:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(handle)
                    name = f"run-state-{os.getpid()}.jsonl"
                    try:
                        handle = os.open(name, flags | os.O_TRUNC, 0o644, dir_fd=directory)
                    except OSError as error:
                        raise _describe(self.folder, name, error) from None
                    self.path = os.path.join(self.folder, name)
                    warn_once(
                        f"another devfix run holds {os.path.join(self.folder, RECORD_NAME)}; "
                        f"this run's record is {self.path}"
                    )
            os.ftruncate(handle, 0)
            return handle
        finally:
            os.close(directory)

    @property
    def active(self) -> bool:
        return self._handle is not None

    def _write(self, record: dict[str, object]) -> None:
        if self._handle is not None:
            with contextlib.suppress(OSError):
                os.write(self._handle, (json.dumps(record) + "\n").encode("utf-8"))

    def done(self, result: FileResult) -> None:
        """A file's outcome; rewritten files were recorded by the process that wrote them."""
        if result.status is not FileStatus.CHANGED:
            self._write({"path": result.path, "status": result.status.value})

    def finish(self, *, interrupted: bool) -> None:
        global _recording
        if _recording is self:
            _recording = None
        self._write({"finished": not interrupted, "interrupted": interrupted})
        if self._handle is not None:
            os.close(self._handle)
            self._handle = None


_recording: RunRecord | None = None


@contextlib.contextmanager
def recorded_rewrite(path: str, data: bytes) -> Iterator[None]:
    """Around the rename that replaces `path` with `data`: the two record lines."""
    record = _recording
    if record is None:
        yield
        return
    record._write({"path": path, "writing": fingerprint(data)})
    yield
    record._write({"path": path, "status": FileStatus.CHANGED.value})
