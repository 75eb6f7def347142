"""Throughput benchmark: devfix against TorchFix 0.7 on the same corpora, in the same run.

    python bench/throughput.py                  # full run: 2,000-file corpora, jobs 1 and 2
    python bench/throughput.py --limit 200      # quick run while developing
    python bench/throughput.py --profile        # where devfix's time goes (in-process)

Builds three reproducible corpora in a scratch folder (see bench/_corpus.py): ``torch`` (the
installed torch package's sources plus golden/ and examples/: every file parsed, every pass
busy), ``projects`` (the sources of pinned timm and transformers wheels from PyPI: PyTorch code
where most files have nothing to fix) and ``stdlib`` (the standard library: no torch at all, so
it measures the prefilter and start-up). For every corpus, tool, command
and job count it runs the tool as a child process and records wall time, files/s, CPU seconds,
and peak memory: the largest single process (``ru_maxrss`` from ``wait4``, exact) and the sum
over the whole process tree (sampled every 50 ms from /proc, so approximate). Every ``apply``
runs on a fresh copy of the corpus. TorchFix is installed from PyPI into its own virtual
environment under the cache folder (``~/.cache/devfix-bench/torchfix-venv``) on first use.

Prints a Markdown table, the ratios against the targets of issue 8 (devfix at least 2x
TorchFix's files/s on the torch corpus, at least 5x on the mostly clean ones) and the command
line that produced it. Every corpus is also parsed by libcst alone (`libcst-parse`, in a child
process with the same job count: the floor of any libcst tool), and devfix `check`'s wall time
is given as a multiple of it (issue 14: within 2x with every pass on). Timings on a shared
machine are noisy; CPU seconds are steadier.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpus

TORCHFIX_SPEC = "torchfix==0.7.*"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "devfix-bench"


@dataclasses.dataclass
class Run:
    corpus: str
    tool: str
    mode: str
    jobs: int
    files: int
    wall: float
    cpu: float
    max_rss_mib: float
    tree_rss_mib: float
    exit_code: int
    summary: str
    command: list[str]

    @property
    def files_per_s(self) -> float:
        return self.files / self.wall if self.wall else 0.0


# -- measuring a child process ------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found.extend(int(child) for child in handle.read().split())
        except OSError:
            continue
    return found


def _tree_rss(root: int) -> int:
    """Resident bytes of `root` and all its descendants, now."""
    page = os.sysconf("SC_PAGE_SIZE")
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        try:
            with open(f"/proc/{pid}/statm") as handle:
                total += int(handle.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
        pending.extend(_children(pid))
    return total


#: The tools run as installed tools do, from compiled bytecode (pip writes it at install time;
#: libcst's comes that way). A sandbox that sets PYTHONDONTWRITEBYTECODE would otherwise make
#: every start of an editable devfix compile its hundred modules again (about 0.4 s).
CHILD_ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def warm_bytecode(devfix: list[str], work: Path) -> None:
    """Start devfix once, untimed, so its bytecode is written before the measured runs."""
    empty = work / "empty"
    empty.mkdir(exist_ok=True)
    subprocess.run(
        [*devfix, "check", str(empty)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=CHILD_ENV,
        check=False,
    )


def measure(command: Sequence[str], log: Path) -> tuple[float, float, float, float, int, str]:
    """Run `command`; wall s, CPU s, largest-process RSS MiB, tree RSS MiB, exit code, last line."""
    with open(log, "wb") as err:
        start = time.perf_counter()
        process = subprocess.Popen(
            list(command), stdout=subprocess.DEVNULL, stderr=err, env=CHILD_ENV
        )
        peak_tree = 0
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid == process.pid:
                break
            peak_tree = max(peak_tree, _tree_rss(process.pid))
            time.sleep(0.05)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
    # Linux: wait4's usage covers the child and every descendant it waited for; ru_maxrss is KiB.
    cpu = usage.ru_utime + usage.ru_stime
    max_rss = usage.ru_maxrss / 1024
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return (
        wall,
        cpu,
        max_rss,
        max(peak_tree / 2**20, max_rss),
        process.returncode,
        (lines[-1].strip() if lines else ""),
    )


# -- the tools ----------------------------------------------------------------------------------


def devfix_command() -> list[str]:
    script = Path(sys.executable).with_name("devfix")
    return [str(script)] if script.exists() else [sys.executable, "-m", "devfix"]


def torchfix_command(cache: Path, python: str | None) -> list[str]:
    venv = cache / "torchfix-venv"
    exe = venv / "bin" / "torchfix"
    if not exe.exists():
        print(f"installing {TORCHFIX_SPEC} into {venv} ...", file=sys.stderr)
        subprocess.run(
            [python or shutil.which("python3") or sys.executable, "-m", "venv", str(venv)],
            check=True,
        )
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", TORCHFIX_SPEC],
            check=True,
        )
    return [str(exe)]


#: The parse-only baseline: read every .py file under a folder and parse it with libcst.
PARSE_ONLY = """
import os, sys
from concurrent.futures import ProcessPoolExecutor
import libcst

def parse(path):
    with open(path, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    try:
        libcst.parse_module(text)
    except Exception:
        return 0
    return 1

root, jobs = sys.argv[1], int(sys.argv[2])
files = sorted(
    os.path.join(d, n) for d, _, names in os.walk(root) for n in names if n.endswith(".py")
)
if jobs <= 1:
    parsed = sum(parse(f) for f in files)
else:
    with ProcessPoolExecutor(jobs) as pool:
        parsed = sum(pool.map(parse, files, chunksize=max(1, len(files) // (jobs * 8))))
print(f"libcst parsed {parsed} of {len(files)} files", file=sys.stderr)
"""


def tool_version(command: list[str]) -> str:
    try:
        result = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return (
        (result.stdout or result.stderr).strip().splitlines()[-1] if result.returncode == 0 else "?"
    )


def build_command(
    tool: str, mode: str, jobs: int, root: Path, exes: dict[str, list[str]]
) -> list[str]:
    if tool == "libcst-parse":
        return [sys.executable, "-c", PARSE_ONLY, str(root), str(jobs)]
    if tool == "devfix":
        # --no-cache: every run must parse every file, or later runs would only read the cache.
        if mode == "check":
            return [*exes[tool], "check", "--no-cache", "--jobs", str(jobs), str(root)]
        return [
            *exes[tool],
            "apply",
            "--no-cache",
            "--unsafe-fixes",
            "-q",
            "--jobs",
            str(jobs),
            str(root),
        ]
    fix = ["--fix"] if mode == "apply" else []
    return [*exes[tool], *fix, "--select", "ALL", "--jobs", str(jobs), str(root)]


# -- report -------------------------------------------------------------------------------------


def _parse_ratio(run: Run, runs: list[Run]) -> str:
    """devfix's wall time as a multiple of libcst's parse-only time on the same corpus."""
    if run.tool != "devfix":
        return ""
    for other in runs:
        if (other.tool, other.corpus, other.jobs) == ("libcst-parse", run.corpus, run.jobs):
            return f"{run.wall / other.wall:.2f}×" if other.wall else "—"
    return "—"


def _ratio(run: Run, runs: list[Run]) -> str:
    if run.tool != "devfix":
        return ""
    for other in runs:
        if (other.tool, other.corpus, other.mode, other.jobs) == (
            "torchfix",
            run.corpus,
            run.mode,
            run.jobs,
        ) and other.files_per_s:
            return f"{run.files_per_s / other.files_per_s:.1f}×"
    return "—"


def table(runs: list[Run], corpora: dict[str, _corpus.Corpus]) -> str:
    head = (
        "| corpus | tool | command | jobs | files | wall s | files/s | CPU s | "
        "peak RSS, largest process (MiB) | peak RSS, all processes (MiB) | exit | "
        "files/s vs TorchFix | wall vs libcst parse-only |"
    )
    rows = [head, "|" + "---|" * 13]
    for run in runs:
        corpus = corpora[run.corpus]
        rows.append(
            f"| {run.corpus} ({corpus.files} files) | {run.tool} | {run.mode} | {run.jobs} | "
            f"{run.files} | {run.wall:.1f} | {run.files_per_s:.1f} | {run.cpu:.1f} | "
            f"{run.max_rss_mib:.0f} | {run.tree_rss_mib:.0f} | {run.exit_code} | "
            f"{_ratio(run, runs)} | {_parse_ratio(run, runs)} |"
        )
    return "\n".join(rows)


def targets(runs: list[Run]) -> list[str]:
    wanted = {"torch": 2.0, "projects": 5.0, "stdlib": 5.0}
    lines = []
    for run in runs:
        if run.tool != "devfix" or run.corpus not in wanted:
            continue
        ratio = _ratio(run, runs)
        if not ratio.endswith("×"):
            continue
        value = float(ratio[:-1])
        goal = wanted[run.corpus]
        verdict = "met" if value >= goal else "NOT met"
        lines.append(
            f"- {run.corpus} `{run.mode}` with {run.jobs} job(s): {value:.1f}× TorchFix "
            f"(target ≥ {goal:.0f}×: {verdict})"
        )
    for run in runs:
        ratio = _parse_ratio(run, runs)
        if run.mode == "check" and ratio.endswith("×"):
            value = float(ratio[:-1])
            verdict = "met" if value <= 2.0 else "NOT met"
            lines.append(
                f"- {run.corpus} `check` with {run.jobs} job(s): {value:.2f}× libcst's "
                f"parse-only time (target ≤ 2×: {verdict})"
            )
    return lines


# -- profile ------------------------------------------------------------------------------------


def profile(corpus: _corpus.Corpus, top: int) -> None:
    """Where devfix's time goes on `corpus`: per phase and per pass, then cProfile's top list."""
    import cProfile
    import io
    import pstats

    from devfix import engine
    from devfix.context import FileContext
    from devfix.registry import select_passes
    from devfix.types import Options

    files = sorted(str(p) for p in corpus.root.rglob("*.py"))
    passes = select_passes()
    phase: dict[str, float] = {"read": 0.0, "prefilter": 0.0, "parse": 0.0, "metadata": 0.0}
    per_pass: dict[str, float] = {cls.CODE: 0.0 for cls in passes}
    triggered: dict[str, int] = {cls.CODE: 0 for cls in passes}
    metadata_files: dict[str, int] = {}
    parsed = 0
    original_metadata = FileContext._metadata

    def timed_metadata(self: FileContext, provider: type) -> object:
        if provider in self._resolved:
            return self._resolved[provider]
        t0 = time.perf_counter()
        try:
            return original_metadata(self, provider)
        finally:
            phase["metadata"] += time.perf_counter() - t0
            metadata_files[provider.__name__] = metadata_files.get(provider.__name__, 0) + 1

    FileContext._metadata = timed_metadata  # type: ignore[method-assign]
    start = time.perf_counter()
    try:
        for path in files:
            t0 = time.perf_counter()
            text = Path(path).read_text(encoding="utf-8", errors="replace")
            t1 = time.perf_counter()
            phase["read"] += t1 - t0
            hit = any(cls.wakes_on(text) for cls in passes)
            t2 = time.perf_counter()
            phase["prefilter"] += t2 - t1
            if not hit:
                continue
            try:
                module = engine.parse(text, path)
            except Exception:
                continue
            t3 = time.perf_counter()
            phase["parse"] += t3 - t2
            parsed += 1
            context = FileContext(module, path)
            for cls in passes:
                if not cls.wakes_on(text):
                    continue
                triggered[cls.CODE] += 1
                t4 = time.perf_counter()
                meta_before = phase["metadata"]
                with contextlib.suppress(Exception):
                    module.visit(cls(context))
                per_pass[cls.CODE] += (time.perf_counter() - t4) - (phase["metadata"] - meta_before)
    finally:
        FileContext._metadata = original_metadata  # type: ignore[method-assign]
    total = time.perf_counter() - start
    print(
        f"\n### Where devfix `check` spends its time ({corpus.name}, {len(files)} files, "
        "1 process)\n"
    )
    print(f"Total {total:.1f} s ({len(files) / total:.1f} files/s); {parsed} files parsed.\n")
    print("| phase | seconds | share |\n|---|---|---|")
    for name, seconds in phase.items():
        print(f"| {name} | {seconds:.2f} | {seconds / total:.0%} |")
    print(
        f"| passes (visiting, metadata excluded) | {sum(per_pass.values()):.2f} | "
        f"{sum(per_pass.values()) / total:.0%} |"
    )
    print(
        "\nMetadata resolved (files): "
        + ", ".join(f"{k} {v}" for k, v in sorted(metadata_files.items()))
    )
    print("\n| pass | files visited | seconds (metadata excluded) |\n|---|---|---|")
    for cls in passes:
        print(f"| {cls.CODE} {cls.NAME} | {triggered[cls.CODE]} | {per_pass[cls.CODE]:.2f} |")

    for label, check_only in (("check", True), ("apply --unsafe-fixes (no write)", False)):
        profiler = cProfile.Profile()
        opts = Options(unsafe_fixes=True)
        t0 = time.perf_counter()
        profiler.enable()
        for path in files:
            engine.fix_file(path, opts, write=False, check_only=check_only)
        profiler.disable()
        elapsed = time.perf_counter() - t0
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("cumulative").print_stats(top)
        stats.sort_stats("tottime").print_stats(top)
        print(f"\n### cProfile, devfix {label}: {elapsed:.1f} s under the profiler\n")
        print("```")
        print(out.getvalue().strip())
        print("```")


# -- main ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit", type=int, default=2000, help="files per corpus (default 2000)")
    parser.add_argument("--jobs", default="1,2", help="job counts, comma-separated (default 1,2)")
    parser.add_argument("--tools", default="devfix,torchfix", help="default devfix,torchfix")
    parser.add_argument("--modes", default="check,apply", help="default check,apply")
    parser.add_argument(
        "--corpora", default="torch,projects,stdlib", help="default torch,projects,stdlib"
    )
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--work-dir", type=Path, help="scratch folder (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--venv-python", help="interpreter for TorchFix's venv (default python3)")
    parser.add_argument("--profile", action="store_true", help="profile devfix instead")
    parser.add_argument("--top", type=int, default=30, help="cProfile rows with --profile")
    args = parser.parse_args(argv)

    jobs = [int(j) for j in args.jobs.split(",") if j]
    tools = [t for t in args.tools.split(",") if t]
    modes = [m for m in args.modes.split(",") if m]
    names = [c for c in args.corpora.split(",") if c]
    for value, allowed in (
        (tools, {"devfix", "torchfix"}),
        (modes, {"check", "apply"}),
        (names, {"torch", "projects", "stdlib"}),
    ):
        unknown = set(value) - allowed
        if unknown:
            parser.error(f"unknown value(s) {sorted(unknown)}; choose from {sorted(allowed)}")

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="devfix-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        builders = {
            "torch": _corpus.torch_corpus,
            "stdlib": _corpus.stdlib_corpus,
            "projects": lambda path, limit: _corpus.projects_corpus(path, limit, args.cache_dir),
        }
        corpora = {name: builders[name](work / f"corpus-{name}", args.limit) for name in names}
        if args.profile:
            for corpus in corpora.values():
                profile(corpus, args.top)
            return 0
        exes = {"devfix": devfix_command()}
        if "torchfix" in tools:
            exes["torchfix"] = torchfix_command(args.cache_dir, args.venv_python)
        warm_bytecode(exes["devfix"], work)
        runs: list[Run] = []
        for name, corpus in corpora.items():
            for mode in modes:
                mode_tools = ["libcst-parse", *tools] if mode == modes[0] else tools
                for tool in mode_tools:
                    for job_count in jobs:
                        root = corpus.root
                        if mode == "apply" and tool != "libcst-parse":
                            root = _corpus.fresh_copy(corpus, work / "apply-copy")
                        command = build_command(tool, mode, job_count, root, exes)
                        log = work / f"{name}-{tool}-{mode}-{job_count}.log"
                        print(f"running {shlex.join(command)}", file=sys.stderr, flush=True)
                        wall, cpu, rss, tree, code, last = measure(command, log)
                        run = Run(
                            name,
                            tool,
                            "parse" if tool == "libcst-parse" else mode,
                            job_count,
                            corpus.files,
                            wall,
                            cpu,
                            rss,
                            tree,
                            code,
                            last,
                            command,
                        )
                        runs.append(run)
                        print(
                            f"  {wall:.1f} s, {run.files_per_s:.1f} files/s, exit {code}: "
                            f"{last[:160]}",
                            file=sys.stderr,
                            flush=True,
                        )
        print(report(runs, corpora, exes, argv))
    finally:
        if args.keep or args.work_dir:
            print(f"scratch folder kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def report(
    runs: list[Run],
    corpora: dict[str, _corpus.Corpus],
    exes: dict[str, list[str]],
    argv: list[str] | None,
) -> str:
    from importlib.metadata import version

    given = sys.argv[1:] if argv is None else argv
    command = shlex.join(["python", "bench/throughput.py", *given])
    try:
        commit = subprocess.run(
            ["git", "-C", str(_corpus.REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        commit = "?"
    lines = [
        f"### Throughput: devfix vs TorchFix ({datetime.date.today().isoformat()})",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {os.cpu_count()} CPUs ({platform.machine()}), "
        f"Python {platform.python_version()}, "
        f"libcst {version('libcst')}, torch {version('torch')} (corpus source), devfix "
        f"{version('devfix')} @ {commit or '?'}"
        + (f", TorchFix: {tool_version(exes['torchfix'])}" if "torchfix" in exes else "")
        + ".",
        "",
        "Corpora: "
        + "; ".join(
            f"`{c.name}` {c.files} files, {c.lines:,} lines, {c.bytes / 2**20:.1f} MiB"
            for c in corpora.values()
        )
        + ". devfix `check` runs every pass (default selection); `apply` is "
        "`apply --unsafe-fixes -q` (every fix). TorchFix runs `--select ALL` (`--fix` for apply). "
        "Each apply starts from a fresh copy.",
        "",
        table(runs, corpora),
        "",
        *targets(runs),
        "",
        "Last stderr line per run: "
        + "; ".join(f"{r.corpus}/{r.tool}/{r.mode}/j{r.jobs}: {r.summary[:120]!r}" for r in runs),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
