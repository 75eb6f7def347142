"""Pass-file sizes: the lines of every pass's file and their median (issue 14: "Passes shrink
to their rule ... Median pass file under 200 lines").

    python bench/pass_sizes.py            # a table, largest first, and the median
    python bench/pass_sizes.py --check    # ... and exit 1 when the median is not under 200

A pass's file is the module that defines its class (`codemods/<rule>.py`), or the
`__init__.py` of a pass that is a package (DF401: `codemods/data_parallel/`, whose other modules
are its parts: planners, and a rule's private facts in `facts.py`). The last column counts a
rule with those parts. The shared modules (`_base.py`, `_edits.py`, `analysis/`) are not pass
files.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
from pathlib import Path

from devfix.registry import all_passes

#: Issue 14's target: the median pass file is under this many lines.
TARGET = 200


def pass_files() -> dict[str, Path]:
    """Every pass's code and the file that defines it, in code order."""
    found: dict[str, Path] = {}
    for pass_class in all_passes():
        source = inspect.getsourcefile(pass_class)
        assert source is not None, pass_class
        found[pass_class.CODE] = Path(source).resolve()  # codemods/, not the devfix/codemods link
    return found


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def rule_size(path: Path) -> int:
    """The lines of a rule with its private parts: the module, or every module of a rule that
    is a package (its facts, planners, helpers). The figure the median of rule files hides."""
    if path.name != "__init__.py":
        return line_count(path)
    return sum(line_count(part) for part in sorted(path.parent.glob("*.py")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help=f"exit 1 unless median < {TARGET}")
    args = parser.parse_args(argv)
    sizes = {code: (path, line_count(path), rule_size(path)) for code, path in pass_files().items()}
    root = Path(__file__).resolve().parents[1]
    print("| pass | file | lines | with its private parts |")
    print("|---|---|---:|---:|")
    for code, (path, lines, whole) in sorted(sizes.items(), key=lambda item: -item[1][2]):
        shown = path.relative_to(root) if path.is_relative_to(root) else path
        print(f"| {code} | `{shown}` | {lines} | {whole} |")
    counts = [lines for _, lines, _ in sizes.values()]
    wholes = [whole for _, _, whole in sizes.values()]
    median = statistics.median(counts)
    under = sum(1 for lines in counts if lines < TARGET)
    print(
        f"\n{len(counts)} pass files; median {median:g} lines (target: under {TARGET}); "
        f"{under} under {TARGET}; largest {max(counts)}"
    )
    print(
        f"with their private parts (package modules): median {statistics.median(wholes):g} "
        f"lines; largest {max(wholes)}"
    )
    return 1 if args.check and median >= TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
