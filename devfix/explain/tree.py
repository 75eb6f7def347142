"""Where a traceback's frames are in the source tree: the user's files, libraries, notebooks.

A log often comes from another machine (a GPU box, a CI runner): its paths
(``/home/alice/proj/src/model.py``) do not exist here. A frame is the user's when its file is
in the source tree, found as it is named or by the longest tail of its path that exists under
the tree's root (``src/model.py``). A frame in ``site-packages`` or ``dist-packages`` is in the
library named by the folder below it (``torch``, ``transformers``); one in the standard library
or a ``<frozen ...>`` module is Python's own. A notebook frame (``Cell In[3], line 5``,
``<ipython-input-3-...>``) is found in the tree's notebooks by the cell's execution count and
the code the log shows for it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from devfix.explain.logs import Frame

#: folders never searched for the user's notebooks
_SKIPPED = frozenset(
    {".git", ".hg", "node_modules", "site-packages", "dist-packages", "__pycache__", "build"}
)
_MAX_NOTEBOOKS = 500
_STDLIB = re.compile(r"[/\\]lib[/\\]python\d(?:\.\d+)?[/\\]")


@dataclass(frozen=True)
class Place:
    """A frame located in the source tree."""

    #: the file here (a ``.py`` file or a notebook)
    path: str
    #: the line in the Python code devfix reads (for a notebook: its code cells as one module)
    line: int
    #: for a notebook: the code cell (1-based, code cells only) and the line in it
    cell: int | None = None
    cell_line: int | None = None


def library_of(path: str) -> str | None:
    """The library a frame's file belongs to (``torch``), ``python`` for the standard library,
    or None for a file in no library."""
    if path.startswith("<frozen") or path.startswith("<string>"):
        return "python"
    parts = re.split(r"[/\\]", path)
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            index = len(parts) - 1 - parts[::-1].index(marker)
            if index + 1 < len(parts):
                name = parts[index + 1]
                return name[:-3] if name.endswith(".py") else name
    if _STDLIB.search(path):
        return "python"
    return None


class SourceTree:
    """The user's source tree, rooted at ``root``."""

    def __init__(self, root: str = ".") -> None:
        self.root = Path(root).resolve()
        self._notebooks: list[Path] | None = None
        self._cells: dict[Path, list[tuple[int | None, list[str]]]] = {}

    def locate(self, frame: Frame) -> Place | None:
        """Where the frame's code is in the tree; None when it is not the user's."""
        if frame.is_notebook_cell:
            return self._in_notebook(frame)
        if library_of(frame.path) is not None:
            return None
        found = self._file(frame.path)
        if found is None:
            return None
        if found.suffix == ".ipynb":
            return None
        return Place(str(found), frame.line)

    def _inside(self, path: Path) -> bool:
        return path == self.root or self.root in path.parents

    def _file(self, named: str) -> Path | None:
        """The file of the tree that the log's path names."""
        path = Path(named).expanduser()
        here = path if path.is_absolute() else self.root / path
        if here.is_file():
            resolved = here.resolve()
            return resolved if self._inside(resolved) else None
        if path.is_absolute() and path.exists():
            return None  # a file of this machine, outside the tree
        parts = [p for p in re.split(r"[/\\]", named) if p and p not in (".", "~")]
        for start in range(len(parts)):
            candidate = self.root.joinpath(*parts[start:])
            if candidate.is_file():
                return candidate.resolve()
        return None

    # -- notebooks ----------------------------------------------------------------------------

    def notebooks(self) -> list[Path]:
        if self._notebooks is None:
            found: list[Path] = []
            for folder, dirs, files in os.walk(self.root):
                dirs[:] = sorted(
                    d
                    for d in dirs
                    if d not in _SKIPPED
                    and not d.startswith(".")
                    and not (Path(folder) / d / "pyvenv.cfg").exists()
                )
                found.extend(Path(folder) / f for f in sorted(files) if f.endswith(".ipynb"))
                if len(found) >= _MAX_NOTEBOOKS:
                    break
            self._notebooks = found
        return self._notebooks

    def _code_cells(self, notebook: Path) -> list[tuple[int | None, list[str]]]:
        """(execution count, lines) of each code cell, in order."""
        cells = self._cells.get(notebook)
        if cells is None:
            import json

            cells = []
            try:
                data = json.loads(notebook.read_text(encoding="utf-8"))
                for cell in data.get("cells", []):
                    if isinstance(cell, dict) and cell.get("cell_type") == "code":
                        source = cell.get("source", "")
                        text = "".join(source) if isinstance(source, list) else str(source)
                        count = cell.get("execution_count")
                        cells.append((count if isinstance(count, int) else None, text.splitlines()))
            except (OSError, ValueError, UnicodeDecodeError):
                cells = []
            self._cells[notebook] = cells
        return cells

    def _in_notebook(self, frame: Frame) -> Place | None:
        """The notebook cell of a ``Cell In[3], line 5`` frame: the code cell run as In[3]
        whose line 5 is the code the log shows; else the only cell whose line 5 is that code;
        else, without code to compare, the In[3] cell of the tree's only notebook."""
        code = " ".join(frame.code.split())

        def matches(lines: list[str]) -> bool:
            if not code:
                return True
            return 0 < frame.line <= len(lines) and " ".join(lines[frame.line - 1].split()) == code

        by_count: list[tuple[Path, int]] = []
        by_code: list[tuple[Path, int]] = []
        for notebook in self.notebooks():
            for number, (count, lines) in enumerate(self._code_cells(notebook), 1):
                if not matches(lines):
                    continue
                if frame.cell is not None and count == frame.cell:
                    by_count.append((notebook, number))
                elif code:
                    by_code.append((notebook, number))
        chosen = by_count[0] if by_count else (by_code[0] if len(by_code) == 1 else None)
        if chosen is None and not code and len(self.notebooks()) == 1:
            return None
        if chosen is None:
            return None
        notebook, number = chosen
        from devfix.errors import InputError
        from devfix.notebooks import Notebook

        try:
            parsed = Notebook(notebook.read_text(encoding="utf-8"), str(notebook))
        except (OSError, UnicodeDecodeError, InputError):
            return None
        line = parsed.code_line(number, frame.line)
        if line is None:
            return None
        return Place(str(notebook), line, number, frame.line)
