"""One way in and out of a file for the engine, whether a `.py` file or a Jupyter notebook.

A :class:`SourceFile` holds the file as read and the Python code the passes see (for a notebook,
its code cells as one module, see :mod:`devfix.notebooks`), and knows the way back: the file's
new text for rewritten code, a finding's location in the file (a notebook's cell), and diffs.
The engine, the review and the reports go through it, so a notebook takes the same path as a
`.py` file everywhere.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import replace

from devfix import sources
from devfix.notebooks import Notebook, check_parses, is_notebook
from devfix.types import Finding


class SourceFile:
    """A plain Python file: the code is the file's text."""

    def __init__(self, document: sources.Document) -> None:
        self.document = document

    @property
    def path(self) -> str:
        return self.document.path

    @property
    def code(self) -> str:
        """The Python code the passes read."""
        return self.document.text

    def render(self, code: str) -> str:
        """The file's text once its code is `code` (a rewrite of :attr:`code`)."""
        return code

    def locate(self, finding: Finding, code: str | None = None) -> Finding:
        """`finding`, located in :attr:`code` (or in `code`, a rewrite of it), located in the
        file as users see it."""
        return finding

    def unlocate(self, finding: Finding) -> Finding | None:
        """A finding as users see it (:meth:`locate`'s result) located in :attr:`code` again;
        None when its line is not one of the code's."""
        return finding

    def diff(self, code: str, path: str | None = None) -> str:
        """A unified diff of the file for rewritten `code`, as `git apply` takes it."""
        return unified_diff(self.document.text, self.render(code), path or self.path)

    def review_diff(self, before: str, after: str, path: str, context: int = 3) -> str:
        """The diff shown to a reviewer for code `before` rewritten into `after`: the file's, or
        one per changed cell for a notebook."""
        return unified_diff(before, after, path, context)


class NotebookFile(SourceFile):
    """A notebook: the code is its code cells as one module; findings are located in cells."""

    def __init__(self, document: sources.Document, notebook: Notebook) -> None:
        super().__init__(document)
        self.notebook = notebook

    @property
    def code(self) -> str:
        return self.notebook.code

    def render(self, code: str) -> str:
        return self.notebook.rebuild(code)

    def locate(self, finding: Finding, code: str | None = None) -> Finding:
        return self.notebook.remap(finding, code)

    def unlocate(self, finding: Finding) -> Finding | None:
        if finding.cell is None:
            return None
        line = self.notebook.code_line(finding.cell, finding.line)
        end = self.notebook.code_line(finding.cell, finding.end_line)
        if line is None or end is None:
            return None
        return replace(finding, line=line, end_line=end, cell=None)

    def review_diff(self, before: str, after: str, path: str, context: int = 3) -> str:
        return self.notebook.cell_diffs(after, diff_label(path), context)


def open_source(path: str) -> SourceFile:
    """Read `path`; InputError names what is wrong (a notebook cell that does not parse, ...)."""
    return source_from_document(sources.read(path))


def source_from_document(document: sources.Document, *, check: bool = True) -> SourceFile:
    """The SourceFile for a document already read (`check`: that a notebook's cells parse)."""
    if not is_notebook(document.path):
        return SourceFile(document)
    notebook = Notebook(document.text, document.path)
    if check:
        check_parses(notebook)
    return NotebookFile(document, notebook)


def diff_label(path: str) -> str:
    """`path` as a diff header names it: relative to the working folder and normalised (what
    `git apply` run there expects after `a/`). A path outside that folder is named relative to
    the root of its git work tree (:func:`diff_root`), where `git apply` takes it, or
    absolutely when it is in none."""
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute)
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        root = diff_root(path)
        if root is not None:
            relative = os.path.relpath(absolute, root)
        else:
            return absolute.replace(os.sep, "/")
    return relative.replace(os.sep, "/")


def diff_root(path: str) -> str | None:
    """The folder that a diff of `path` must be applied from when that is not the working
    folder: the top of the git work tree holding `path` (git applies a patch run in another
    folder to paths below that folder only); None when `path` is below the working folder or
    in no work tree."""
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute)
    if relative != os.pardir and not relative.startswith(os.pardir + os.sep):
        return None
    folder = os.path.dirname(absolute)
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def unified_diff(before: str, after: str, path: str, context: int = 3) -> str:
    """A unified diff with `a/` and `b/` labels that `git apply` and `patch -p1` accept."""
    label = diff_label(path)
    old, new = (label, label) if os.path.isabs(label) else (f"a/{label}", f"b/{label}")
    out: list[str] = []
    for line in difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=old,
        tofile=new,
        n=context,
    ):
        if line.endswith("\n"):
            out.append(line)
        elif line.startswith(("---", "+++")):
            out.append(line + "\n")
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)
