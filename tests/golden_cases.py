"""Collects golden/<pass>/<case>.{before,after,noop}.py and reads their header directives.

Directives are comment lines at the top of the `before` (or `noop`) file:

    # devfix-flags: --select DF101 --unsafe-fixes     options devfix runs the case with
    # devfix-expect: DF101 DF102                      codes that must be found on `before`
    # devfix-golden: gpus=2 fails-with="..." devices="cuda:1,cuda:0"   virtual-GPU tier
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from devfix.types import Options

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "golden"

_DIRECTIVE = re.compile(r"^#\s*devfix-(flags|expect):\s*(.*)$", re.MULTILINE)


@dataclass(frozen=True)
class GoldenCase:
    pass_name: str
    name: str
    before: Path | None
    after: Path | None
    noop: Path | None

    @property
    def id(self) -> str:
        return f"{self.pass_name}/{self.name}"

    @property
    def source(self) -> Path:
        path = self.before or self.noop
        assert path is not None
        return path

    def directives(self) -> dict[str, str]:
        return {key: value.strip() for key, value in _DIRECTIVE.findall(self.source.read_text())}

    def options(self) -> Options:
        words = shlex.split(self.directives().get("flags", ""))
        select: list[str] = []
        ignore: list[str] = []
        unsafe = False
        index = 0
        while index < len(words):
            word = words[index]
            if word == "--unsafe-fixes":
                unsafe = True
            elif word in ("--select", "--ignore") and index + 1 < len(words):
                target = select if word == "--select" else ignore
                target.extend(part for part in words[index + 1].split(",") if part)
                index += 1
            else:
                raise ValueError(f"{self.source}: unknown devfix-flags word {word!r}")
            index += 1
        return Options(select=tuple(select), ignore=tuple(ignore), unsafe_fixes=unsafe)

    def folder_gpus(self) -> int:
        """The virtual GPUs of this case's folder: the most any `before` there declares."""
        from devfix.vgpu.golden import parse_golden_header

        counts = [
            exp.gpus
            for path in sorted(self.source.parent.glob("*.before.py"))
            if (exp := parse_golden_header(path.read_text())) is not None
        ]
        return max(counts, default=2)

    def expected_codes(self) -> set[str]:
        return set(re.split(r"[\s,]+", self.directives().get("expect", "").strip())) - {""}


def collect() -> list[GoldenCase]:
    cases: list[GoldenCase] = []
    for folder in sorted(p for p in GOLDEN.iterdir() if p.is_dir()):
        stems: set[str] = set()
        for file in folder.glob("*.py"):
            stem, _, kind = file.name[: -len(".py")].rpartition(".")
            if kind in ("before", "after", "noop"):
                stems.add(stem)
        for stem in sorted(stems):

            def find(kind: str, stem: str = stem, folder: Path = folder) -> Path | None:
                path = folder / f"{stem}.{kind}.py"
                return path if path.exists() else None

            cases.append(GoldenCase(folder.name, stem, find("before"), find("after"), find("noop")))
    return cases
