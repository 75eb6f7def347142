"""Reproducible benchmark corpora: real Python files copied into a scratch folder.

Two corpora, both chosen deterministically (sorted paths, evenly spaced when capped), so two
runs on the same installation measure the same files:

* ``torch``: the installed ``torch`` package's own sources plus this repository's ``golden/``
  and ``examples/`` scripts. Nearly every file mentions ``torch``, so nearly every file is parsed
  and analysed: the "all passes, real work" case.
* ``stdlib``: the standard library of the running interpreter (tests included, files that do not
  compile left out). No file imports torch, so most files have nothing to fix: the prefilter case.
* ``projects``: third-party PyTorch code, the Python files of two pinned wheels from PyPI
  (``timm`` and ``transformers``: models, layers, training utilities, plus TensorFlow/Flax files
  that never mention torch). Most files have nothing to fix, yet most of them import torch, so
  a tool that only looks for "torch" parses nearly all of them: the "mostly clean PyTorch
  repository" case.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: Folder names devfix's file discovery never walks into; files under them are not picked, so
#: every tool sees exactly the same files.
_SKIPPED_DIRS = frozenset(
    {"__pycache__", "site-packages", "dist-packages", "build", "dist", "node_modules", "venv"}
)


@dataclass(frozen=True)
class Corpus:
    name: str
    root: Path
    files: int
    bytes: int
    lines: int


def _python_files(root: Path) -> list[Path]:
    found = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in _SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(names):
            if name.endswith(".py"):
                found.append(Path(directory, name))
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def _spread(items: list[Path], count: int) -> list[Path]:
    """`count` items evenly spaced over the sorted list (all of them if there are fewer)."""
    if count >= len(items):
        return list(items)
    return [items[i * len(items) // count] for i in range(count)]


def _compiles(path: Path) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return False
    return True


def _copy(groups: list[tuple[str, Path, list[Path]]], destination: Path, name: str) -> Corpus:
    if destination.exists():
        shutil.rmtree(destination)
    total_bytes = total_lines = count = 0
    for group, base, files in groups:
        for source in files:
            target = destination / group / source.relative_to(base)
            target.parent.mkdir(parents=True, exist_ok=True)
            data = source.read_bytes()
            target.write_bytes(data)
            total_bytes += len(data)
            total_lines += data.count(b"\n")
            count += 1
    return Corpus(name, destination, count, total_bytes, total_lines)


def torch_corpus(destination: Path, limit: int) -> Corpus:
    """`limit` files: the golden/examples scripts (all of them if they are at most a tenth of
    `limit`), the rest spread over torch's sources."""
    # Found without importing it: the benchmark process stays small, and its children inherit
    # its peak RSS (Linux keeps ru_maxrss across exec), which would hide theirs.
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torch is not installed in this interpreter")
    torch_root = Path(next(iter(spec.submodule_search_locations))).resolve()
    own = [(group, REPO / group) for group in ("golden", "examples")]
    own_files = [(group, base, _python_files(base)) for group, base in own if base.is_dir()]
    # All of them in a full-size corpus; a tenth of a small one, so a quick run is mostly torch.
    own_total = sum(len(files) for _, _, files in own_files)
    if own_total > limit // 10:
        own_files = [
            (group, base, _spread(files, len(files) * (limit // 10) // own_total))
            for group, base, files in own_files
        ]
    taken = sum(len(files) for _, _, files in own_files)
    torch_files = _spread(_python_files(torch_root), max(0, limit - taken))
    groups = [("torch", torch_root, torch_files), *own_files]
    return _copy(groups, destination, "torch")


def stdlib_corpus(destination: Path, limit: int) -> Corpus:
    """`limit` standard-library files that compile, spread over the sorted list."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    candidates = [path for path in _python_files(stdlib) if _compiles(path)]
    return _copy([("stdlib", stdlib, _spread(candidates, limit))], destination, "stdlib")


#: Pinned so the corpus is the same on every machine and every day.
PROJECT_WHEELS = ("timm==1.0.15", "transformers==4.46.3")


def projects_corpus(destination: Path, limit: int, cache: Path) -> Corpus:
    """`limit` Python files spread over the pinned wheels' sources (downloaded once into
    `cache`, without dependencies)."""
    wheels = cache / "wheels"
    extracted = cache / "projects"
    if not extracted.is_dir():
        wheels.mkdir(parents=True, exist_ok=True)
        download = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        subprocess.run([*download, "--dest", str(wheels), *PROJECT_WHEELS], check=True)
        partial = cache / "projects.partial"
        shutil.rmtree(partial, ignore_errors=True)
        for spec in PROJECT_WHEELS:
            name, version = spec.split("==")
            (wheel,) = wheels.glob(f"{name}-{version}-*.whl")
            with zipfile.ZipFile(wheel) as archive:
                members = [m for m in archive.namelist() if m.endswith(".py")]
                archive.extractall(partial / name, members)
        partial.rename(extracted)
    groups = []
    everything = [
        (group.name, group, path)
        for group in sorted(extracted.iterdir())
        for path in _python_files(group)
        if _compiles(path)
    ]
    chosen = _spread([path for _, _, path in everything], limit)
    picked = set(chosen)
    for group in sorted(extracted.iterdir()):
        files = [path for name, _, path in everything if name == group.name and path in picked]
        groups.append((group.name, group, files))
    return _copy(groups, destination, "projects")


def fresh_copy(corpus: Corpus, destination: Path) -> Path:
    """A writable copy of the corpus for a run that rewrites files."""
    if destination.exists():
        shutil.rmtree(destination)
    shutil.copytree(corpus.root, destination)
    return destination
