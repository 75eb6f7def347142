"""How long an unchanged re-run takes with the result cache (target: < 1 s per 1,000 files).

Builds a tree of N real source files (torch's own sources, copied), runs `devfix check` over it
once to fill the cache, then times the second, unchanged run in-process and per 1,000 files.

    python bench/cache_rerun.py --files 10000
"""

from __future__ import annotations

import argparse
import shutil
import sysconfig
import tempfile
import time
from pathlib import Path

from devfix.engine import fix_paths
from devfix.types import Options


def build_tree(root: Path, count: int) -> None:
    torch_root = Path(sysconfig.get_paths()["purelib"]) / "torch"
    sources = sorted(p for p in torch_root.rglob("*.py") if p.stat().st_size < 60_000)
    for index in range(count):
        source = sources[index % len(sources)]
        target = root / f"part{index // 1000}" / f"{index:05d}_{source.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=0)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "tree"
        build_tree(tree, arguments.files)
        options = Options(cache_dir=str(Path(scratch) / "cache"), jobs=arguments.jobs)
        started = time.perf_counter()
        first = sum(1 for _ in fix_paths([str(tree)], options, check_only=True))
        cold = time.perf_counter() - started
        started = time.perf_counter()
        second = sum(1 for _ in fix_paths([str(tree)], options, check_only=True))
        warm = time.perf_counter() - started
    print(f"files: {first} (second run: {second})")
    print(f"first run (cold, fills the cache): {cold:.1f} s")
    print(f"unchanged re-run: {warm:.2f} s = {warm / second * 1000:.2f} s per 1,000 files")


if __name__ == "__main__":
    main()
