"""Pass-file sizes: the lines of every pass's file and their median (issue 14: "Passes shrink
to their rule ... Median pass file under 200 lines").

    python bench/pass_sizes.py            # a table, largest first, and the median
    python bench/pass_sizes.py --check    # ... and exit 1 when the median is not under 200

A pass's file is the module that defines its class (`codemods/<rule>.py`), or the
`__init__.py` of a pass that is a package (DF401: `codemods/data_parallel/`, whose other modules
are its parts). The shared modules (`_base.py`, `_edits.py`, `analysis/`) are not pass files.
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
        found[pass_class.CODE] = Path(source)
    return found


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help=f"exit 1 unless median < {TARGET}")
    args = parser.parse_args(argv)
    sizes = {code: (path, line_count(path)) for code, path in pass_files().items()}
    root = Path(__file__).resolve().parents[1]
    print("| pass | file | lines |")
    print("|---|---|---:|")
    for code, (path, lines) in sorted(sizes.items(), key=lambda item: -item[1][1]):
        shown = path.relative_to(root) if path.is_relative_to(root) else path
        print(f"| {code} | `{shown}` | {lines} |")
    counts = [lines for _, lines in sizes.values()]
    median = statistics.median(counts)
    under = sum(1 for lines in counts if lines < TARGET)
    print(
        f"\n{len(counts)} pass files; median {median:g} lines (target: under {TARGET}); "
        f"{under} under {TARGET}; largest {max(counts)}"
    )
    return 1 if args.check and median >= TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
