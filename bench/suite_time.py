"""Time the test suite: the inner loop (`pytest -m "not slow"`) and the full `pytest`.

    python bench/suite_time.py [--only not-slow|full] [-- extra pytest arguments]

For each run: wall seconds, CPU seconds of pytest and everything it started (user + system,
children included: pytest-xdist workers, warm servers, their forked scripts, devfix and torchrun
subprocesses), the tests passed, and the load average before and after. On a shared machine the
wall time grows with the other work; the CPU time does not. The suite runs on every core
(pytest-xdist, see tests/conftest.py), so on an idle 2-core machine the wall time is about half
the CPU time, plus the tail where one worker finishes its last long test alone. Targets:
not-slow <= 60 s, full <= 5 minutes, on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = {"not-slow": ["-m", "not slow"], "full": []}


def measure(name: str, extra: list[str]) -> str:
    before = os.getloadavg()
    start = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *RUNS[name], *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    end = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (end.ru_utime - start.ru_utime) + (end.ru_stime - start.ru_stime)
    after = os.getloadavg()
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "(no output)"
    summary = re.sub(r" in [\d.]+s.*$", "", tail)
    return (
        f"| {name} | {wall:.0f} s | {cpu:.0f} s | {summary} | "
        f"{before[0]:.1f} → {after[0]:.1f} | {done.returncode} |"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=sorted(RUNS))
    ap.add_argument("pytest_args", nargs="*")
    args = ap.parse_args()
    print("| run | wall | CPU (user+sys, children) | result | load average before → after | exit |")
    print("|---|---|---|---|---|---|")
    for name in [args.only] if args.only else list(RUNS):
        print(measure(name, args.pytest_args), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
