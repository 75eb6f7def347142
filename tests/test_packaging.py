"""Packaging: `codemods/` and `cli/` (top-level folders) install as `devfix.codemods`/`devfix.cli`.

The wheel and the sdist are built from a copy of the tracked files, as a release would be, and
compared with the source tree; the wheel is then imported from outside the repository.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.helpers import copy_tracked_files

# one worker builds the module-scoped fixture once (pytest-xdist, tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("packaging-build")]

ROOT = Path(__file__).resolve().parent.parent
#: Source folder -> where its files land in the wheel.
INSTALLED_AS = {"devfix": "devfix", "codemods": "devfix/codemods", "cli": "devfix/cli"}


def _tracked_tree(destination: Path) -> Path:
    return copy_tracked_files(ROOT, destination)


def _package_files(folder: str) -> set[str]:
    """The modules of the packages under `folder`, relative to it."""
    base = ROOT / folder
    found = set()
    for here, folders, files in os.walk(base):  # not into the links devfix/codemods, devfix/cli
        folders[:] = [f for f in folders if f != "__pycache__"]
        if "__init__.py" in files:
            found |= {
                (Path(here) / f).relative_to(base).as_posix() for f in files if f.endswith(".py")
            }
    return found


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(wheel, sdist) built from a copy of the tracked files."""
    work = tmp_path_factory.mktemp("release")
    tree = _tracked_tree(work / "tree")
    dist = work / "dist"
    dist.mkdir()
    build = (
        "import sys; from setuptools import build_meta as b; out = sys.argv[1]; "
        "b.build_sdist(out); b.build_wheel(out)"
    )
    subprocess.run(
        [sys.executable, "-c", build, str(dist)], cwd=tree, check=True, capture_output=True
    )
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    return wheel, sdist


def test_wheel_holds_codemods_and_cli_inside_devfix(built: tuple[Path, Path]) -> None:
    wheel, _ = built
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in INSTALLED_AS:
        missing = {f"{INSTALLED_AS[folder]}/{name}" for name in _package_files(folder)} - names
        assert not missing, f"not in the wheel: {sorted(missing)}"
    assert {"devfix/py.typed", "devfix/vgpu/shim.cpp"} <= names
    top = {name.split("/", 1)[0] for name in names}
    assert top == {
        "devfix",
        wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info",
    }
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "devfix = devfix.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_sdist_has_the_source_layout_and_builds_the_same_wheel(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    wheel, sdist = built
    with tarfile.open(sdist) as archive:
        members = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
        archive.extractall(tmp_path, filter="data")
    for folder in INSTALLED_AS:
        expected = {f"{folder}/{name}" for name in _package_files(folder)}
        assert expected <= members, sorted(expected - members)
    assert {"pyproject.toml", "README.md"} <= members
    assert not any(name.startswith(("devfix/codemods", "devfix/cli")) for name in members)
    (unpacked,) = tmp_path.glob("devfix-*")
    again = tmp_path / "again"
    again.mkdir()
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from setuptools import build_meta as b; b.build_wheel(sys.argv[1])",
            str(again),
        ],
        cwd=unpacked,
        check=True,
        capture_output=True,
    )
    (rebuilt,) = again.glob("*.whl")
    assert set(zipfile.ZipFile(rebuilt).namelist()) == set(zipfile.ZipFile(wheel).namelist())


def test_installed_wheel_runs_as_devfix_and_python_m_devfix(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    wheel, _ = built
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    environment = {**os.environ, "PYTHONPATH": str(target)}

    def output(*command: str) -> str:
        return subprocess.run(
            command, cwd=tmp_path, env=environment, capture_output=True, text=True, check=True
        ).stdout

    where = output(
        sys.executable,
        "-c",
        "import devfix.codemods, devfix.cli; "
        "print(devfix.codemods.__file__); print(devfix.cli.__file__)",
    ).split()
    assert all(path.startswith(str(target)) for path in where), where
    listing = output(sys.executable, "-m", "devfix", "rules")
    assert "DF101" in listing and "DF401" in listing
    assert "## Why is this bad?" in output(str(target / "bin" / "devfix"), "rules", "DF101")


def test_the_only_symbolic_links_are_the_package_views() -> None:
    # devfix/codemods and devfix/cli (tests/test_source_layout.py); a release carries none
    files = subprocess.run(
        ["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    links = [line.split("\t", 1)[1] for line in files if line.startswith("120000")]
    assert links == ["devfix/cli", "devfix/codemods"], links
