"""The package list, read from the folders so that a new rule package needs no entry anywhere.

`devfix`'s own subpackages sit under `devfix/`; `codemods/` and `cli/` sit at the top level
and install as `devfix.codemods` and `devfix.cli` (`package-dir` in pyproject.toml, which
holds everything else). Every folder with an `__init__.py` is a package. The links
`devfix/codemods` and `devfix/cli` (for tools that read the package from its folder) are not
followed, so a module is never listed twice, and an sdist, which has no links, builds the same.
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent
#: package name -> its folder, relative to the repository's root
ROOTS = {"devfix": "devfix", "devfix.codemods": "codemods", "devfix.cli": "cli"}


def packages_under(name: str, folder: str) -> list[str]:
    found = []
    for here, folders, files in os.walk(ROOT / folder):
        folders[:] = sorted(f for f in folders if f != "__pycache__")
        if "__init__.py" in files:
            relative = Path(here).relative_to(ROOT / folder).parts
            found.append(".".join((name, *relative)))
    return found


setup(packages=sorted({p for name, folder in ROOTS.items() for p in packages_under(name, folder)}))
