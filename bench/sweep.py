"""Sweep devfix over whole real source trees: the torch package and the standard library.

    python bench/sweep.py                 # both trees, one worker per core
    python bench/sweep.py --tree stdlib -j 2
    python bench/sweep.py --sample 300    # the fixed sample that CI runs
    python bench/sweep.py --root .../site-packages/transformers   # any other tree

For every file: `check` and `apply --unsafe-fixes` (in process, through the engine API) must not
crash, a rewritten file must parse and compile, a second apply must change nothing, and an
unchanged file must re-encode byte for byte. The standard library must come out unchanged.
Prints, per tree: files, changed, refused (with reasons), fixes per rule, failures by kind and
seconds; exits 1 if anything failed. See docs/robustness.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.robustness.sweep_core import (
    FAILURE_KINDS,
    FileOutcome,
    Tally,
    check_file,
    python_files,
    sample,
    stdlib_root,
    torch_root,
)


def _check(path: str) -> FileOutcome:
    outcome = check_file(path)
    outcome.output = None  # not needed here; keeps the pipe small
    return outcome


class _Serial:
    """`map` in this process, with the executor's interface (for -j 1)."""

    def __enter__(self) -> _Serial:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def map(
        self, function: Callable[[str], FileOutcome], items: list[str], chunksize: int = 1
    ) -> Iterator[FileOutcome]:
        del chunksize
        return map(function, items)


def run_tree(name: str, root: str, size: int | None, jobs: int, verbose: bool) -> Tally:
    files = python_files(root)
    if size is not None:
        files = sample(files, size, root)
    tally = Tally(name)
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=jobs) if jobs > 1 else _Serial() as pool:
        for outcome in pool.map(_check, files, chunksize=4):
            tally.add(outcome, root)
            if outcome.failure is not None:
                # At once, not only in the closing table: a run cut short still shows it.
                relative = os.path.relpath(outcome.path, root)
                print(f"  {outcome.failure}: {relative}: {outcome.detail}", file=sys.stderr)
            if tally.files % 100 == 0:
                elapsed = time.perf_counter() - started
                progress = (
                    f"  {name}: {tally.files}/{len(files)} files, {elapsed:.0f} s, "
                    f"{tally.changed} changed, {tally.refused} refused, "
                    f"{sum(tally.failures.values())} failures"
                )
                print(progress, file=sys.stderr)
    tally.seconds = time.perf_counter() - started
    _print(tally, root, verbose)
    return tally


def _print(tally: Tally, root: str, verbose: bool) -> None:
    print(f"== {tally.tree}: {root}")
    print(f"files      {tally.files}")
    print(f"changed    {tally.changed}")
    print(f"refused    {tally.refused}  (InputError: devfix declines the file with a reason)")
    fixes = ", ".join(f"{code} {count}" for code, count in sorted(tally.fixes.items())) or "none"
    print(f"fixes      {sum(tally.fixes.values())}  ({fixes})")
    failures = ", ".join(f"{kind} {tally.failures.get(kind, 0)}" for kind in FAILURE_KINDS)
    print(f"failures   {sum(tally.failures.values())}  ({failures})")
    print(f"seconds    {tally.seconds:.1f}")
    for kind in ("refused", *FAILURE_KINDS):
        shown = tally.examples.get(kind, [])
        limit = len(shown) if verbose or kind != "refused" else 10
        for line in shown[:limit]:
            print(f"  {kind}: {line}")
        if len(shown) > limit:
            print(f"  {kind}: ... {len(shown) - limit} more (--verbose)")
    if verbose:
        for path in tally.changed_files:
            print(f"  changed: {path}")
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", choices=("torch", "stdlib", "both"), default="both")
    parser.add_argument(
        "--root",
        action="append",
        default=[],
        help="sweep this source tree instead (repeatable; named by its folder)",
    )
    parser.add_argument(
        "--sample", type=int, default=None, help="check a fixed sample of N files per tree"
    )
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="list every refused and changed file"
    )
    args = parser.parse_args(argv)
    trees = [(os.path.basename(os.path.normpath(root)), root) for root in args.root]
    if not args.root and args.tree in ("torch", "both"):
        trees.append(("torch", torch_root()))
    if not args.root and args.tree in ("stdlib", "both"):
        trees.append(("stdlib", stdlib_root()))
    ok = True
    for name, root in trees:
        tally = run_tree(name, root, args.sample, args.jobs, args.verbose)
        if tally.failures:
            ok = False
        if name == "stdlib" and tally.changed:
            print(f"stdlib: {tally.changed} files changed; expected none")
            ok = False
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
