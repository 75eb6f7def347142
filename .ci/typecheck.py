"""Type-check devfix as it is installed: `codemods/` as `devfix.codemods`, `cli/` as `devfix.cli`.

mypy names a module after its folder and does not run import hooks, so neither a plain `mypy`
run nor an editable install lets it see the top-level `codemods/` and `cli/` folders as parts of
`devfix`. This script reads the package layout from pyproject.toml (`[tool.setuptools]`
`packages` and `package-dir`, the same mapping wheels and editable installs use) and hands mypy
every file with its module name, so each file is checked once, under its installed name, and
errors name the file in the source tree. Settings come from `[tool.mypy]`; extra arguments are
passed on to mypy.

    python .ci/typecheck.py [mypy options]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mypy import build
from mypy.errors import CompileError
from mypy.fscache import FileSystemCache
from mypy.main import process_options
from mypy.modulefinder import BuildSource

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def package_folders(pyproject: Path) -> dict[str, Path]:
    """Package name -> folder, as setuptools maps them (`package-dir`, else the dotted path)."""
    settings = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["setuptools"]
    mapping: dict[str, str] = settings.get("package-dir", {})
    folders: dict[str, Path] = {}
    for package in settings["packages"]:
        parts = package.split(".")
        # The nearest mapped ancestor decides, as in setuptools.
        for depth in range(len(parts), -1, -1):
            prefix = ".".join(parts[:depth])
            if prefix in mapping or depth == 0:
                base = mapping.get(prefix, "")
                folders[package] = ROOT / base / Path(*parts[depth:])
                break
    return folders


def sources(pyproject: Path) -> list[BuildSource]:
    found: list[BuildSource] = []
    for package, folder in package_folders(pyproject).items():
        for path in sorted(folder.glob("*.py")):
            module = package if path.stem == "__init__" else f"{package}.{path.stem}"
            found.append(BuildSource(os.path.relpath(path), module))
    return found


def main(argv: list[str]) -> int:
    os.chdir(ROOT)
    _, options = process_options(["--config-file", "pyproject.toml", *argv], require_targets=False)
    targets = sources(ROOT / "pyproject.toml")
    try:
        result = build.build(targets, options, fscache=FileSystemCache())
        messages = result.errors
    except CompileError as error:
        messages = error.messages
    for message in messages:
        print(message)
    errors = [m for m in messages if ": error:" in m]
    files = {m.split(":", 1)[0] for m in errors}
    if errors:
        print(
            f"Found {len(errors)} error{'s' * (len(errors) != 1)} in {len(files)} "
            f"file{'s' * (len(files) != 1)} (checked {len(targets)} source files)"
        )
        return 1
    print(f"Success: no issues found in {len(targets)} source files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
