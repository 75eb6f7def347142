"""The source tree has the installed layout: `devfix/codemods` and `devfix/cli` lead to the
top-level `codemods/` and `cli/`, so tools that read a package from its folder (mypy, grimp,
pydeps) see `devfix.codemods.*` and `devfix.cli.*` without import hooks or a script of their own.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mypy.find_sources import create_source_list
from mypy.options import Options

ROOT = Path(__file__).resolve().parent.parent
LINKED = ("codemods", "cli")


def _modules_under(folder: Path, package: str) -> dict[str, Path]:
    """Module name -> file, for the packages (folders with `__init__.py`) under `folder`."""
    found: dict[str, Path] = {}
    for path in sorted(folder.rglob("*.py")):
        if "__pycache__" in path.parts or not (path.parent / "__init__.py").exists():
            continue
        parts = path.relative_to(folder).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join((package, *parts))] = path
    return found


@pytest.mark.parametrize("folder", LINKED)
def test_the_package_folder_leads_to_the_top_level_folder(folder: str) -> None:
    link = ROOT / "devfix" / folder
    assert link.is_symlink(), f"devfix/{folder} must be a link to ../{folder}"
    assert os.readlink(link) == f"../{folder}"
    assert link.resolve() == (ROOT / folder).resolve()


def test_plain_mypy_names_every_module_as_installed() -> None:
    options = Options()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        named = {
            source.module: Path(source.path or "").resolve()
            for source in create_source_list(["devfix"], options)
        }
    finally:
        os.chdir(cwd)
    for folder in LINKED:
        expected = _modules_under(ROOT / folder, f"devfix.{folder}")
        assert expected, folder
        for module, path in expected.items():
            assert named.get(module) == path.resolve(), module
    assert not any(module.split(".")[0] in LINKED for module in named)
