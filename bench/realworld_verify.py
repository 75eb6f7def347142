"""`devfix verify --fix` on the real-world corpus: which scripts end running, in how many rounds.

    python bench/realworld_verify.py --files /work/realworld [--timeout 60] [--only ID ...]
                                     [--devfix CMD] [--json OUT] [-v]

Every corpus file (`bench/realworld/manifest.tsv`, the file in `DIR/<id>/<basename>`) is copied
alone into a scratch folder and run there with
`devfix verify --fix --unsafe-fixes --timeout T FILE` (no arguments, stdin closed, offline).
Most corpus files cannot run on their own: they read datasets, download weights, import packages
or sibling modules of their project that are not here, or want command-line arguments. Round 1
of `--fix` is that first run, so one call per file tells both: a file that fails of something
other than a device error is listed with the reason read from its last traceback line, and a
device error is repaired round after round. Notebooks are not run (`--fix` does not edit them).

A run costs tens of seconds on a loaded machine (an interpreter that imports torch under the
virtual GPUs), so the files are screened first, without running them: a file whose module-level
imports (outside `try`) name a module this interpreter cannot find, or that imports relatively
(part of a package), cannot run here and is listed with that reason (`ran: false`). Run this
script with the interpreter devfix runs scripts with, from a folder outside the repository.

Only the standard library is used; devfix runs as a child process (`--devfix`, default the
`devfix` next to this interpreter), under `nice`, one file at a time. The corpus files are
never written: each run works on its own copy, removed afterwards.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MANIFEST = REPO / "bench" / "realworld" / "manifest.tsv"

#: What the script sees: no network (fail fast instead of waiting on a download), no display.
SCRIPT_ENV = {
    "OMP_NUM_THREADS": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "WANDB_MODE": "disabled",
    "MPLBACKEND": "Agg",
    "PYTHONWARNINGS": "ignore",
}

_ROUND_RUNS = re.compile(r"^devfix verify --fix: round (\d+): the script runs", re.M)
_RUNS_AFTER = re.compile(r"^devfix verify --fix: the script runs after (\d+) rounds", re.M)
_APPLIED = re.compile(r"-> applied (DF\d+) at | applied (DF\d+) at ")
_STOP = re.compile(r"^devfix verify --fix: round (\d+): (.*)$", re.M)
_EXCEPTION = re.compile(
    r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning))(?::\s*(.*))?$"
)
_NO_MODULE = re.compile(r"No module named '([^']+)'")


@dataclass(frozen=True)
class Outcome:
    id: str
    kind: str
    #: "runs" (as is, or after fixes), "stopped" (a device error --fix could not repair),
    #: "cannot-run" (fails of something else, or was not run).
    status: str
    #: Runs of the script (for "runs": the round that ran), fixes applied, their rules.
    rounds: int
    fixes: tuple[str, ...]
    #: Why it cannot run or why the repair stopped: a category and the detail.
    category: str
    detail: str
    seconds: float
    #: False when the import screen decided, without running the file.
    ran: bool = True


def _imports(body: Sequence[ast.stmt]) -> list[ast.stmt]:
    """Import statements of a module body, looking into `if` blocks and past guarded ones:
    an import under `try` may be optional, so it is not counted."""
    found: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            found.append(stmt)
        elif isinstance(stmt, ast.If):
            found += _imports(stmt.body) + _imports(stmt.orelse)
    return found


def screen(source: Path) -> tuple[str, str] | None:
    """(category, detail) when the file's module-level imports cannot all be satisfied by this
    interpreter with the file alone in its folder; None when it may run."""
    try:
        tree = ast.parse(source.read_bytes())
    except SyntaxError as error:
        return "error", f"does not parse here: {error.msg}"
    except ValueError as error:
        return "error", f"does not parse here: {error}"
    for stmt in _imports(tree.body):
        if isinstance(stmt, ast.ImportFrom) and stmt.level:
            return "relative-import", "part of a package (relative import)"
        names = (
            [alias.name for alias in stmt.names]
            if isinstance(stmt, ast.Import)
            else [stmt.module or ""]
        )
        for name in names:
            top = name.split(".")[0]
            if top == "__future__" or top in sys.builtin_module_names:
                continue
            if importlib.util.find_spec(top) is None:
                return "missing-module", top
    return None


def _last_exception(stderr: str) -> tuple[str, str] | None:
    """The exception type and message of the last traceback in ``stderr``."""
    found = None
    for line in stderr.splitlines():
        match = _EXCEPTION.match(line.strip())
        if match and not line.startswith(" "):
            found = (match.group(1), (match.group(2) or "").strip())
    return found


def classify_failure(stdout: str, stderr: str, code: int) -> tuple[str, str]:
    """(category, detail) for a run that failed of something other than a device error."""
    if "ran past --timeout" in stderr:
        return "timeout", "still running at the time limit (trains, waits on data or input)"
    if "not supported under virtual GPUs" in stderr:
        line = next(
            (ln for ln in stderr.splitlines() if "not supported under virtual GPUs" in ln), ""
        )
        return "unsupported", line.split("not supported under virtual GPUs:", 1)[-1].strip()
    exception = _last_exception(stderr)
    if exception is None:
        if code == 2 and "usage:" in (stderr + stdout):
            return "arguments", "its command line needs arguments"
        tail = stderr.strip().splitlines()[-1:] or [f"exit {code}"]
        return "other", tail[0][:120]
    name, message = exception
    short = name.rsplit(".", 1)[-1]
    if short in ("ModuleNotFoundError", "ImportError"):
        missing = _NO_MODULE.search(message)
        if "relative import" in message:
            return "relative-import", "part of a package (relative import)"
        if missing:
            return "missing-module", missing.group(1).split(".")[0]
        return "missing-module", message[:120]
    if short in ("FileNotFoundError", "IsADirectoryError", "NotADirectoryError"):
        return "data", message[:120]
    offline = ("offline", "connect", "resolve", "urlopen", "Network", "huggingface.co")
    if short in (
        "URLError",
        "ConnectionError",
        "HTTPError",
        "MaxRetryError",
        "LocalEntryNotFoundError",
    ) or any(word in message for word in offline):
        return "download", f"{short}: {message[:100]}"
    if short == "SystemExit" or (code == 2 and "usage:" in stderr):
        return "arguments", message[:120] or "its command line needs arguments"
    if short == "KeyError" and "RANK" in message:
        return "launcher", f"needs torchrun's environment ({message})"
    return "error", f"{short}: {message[:100]}"


def read_outcome(
    row_id: str, kind: str, stdout: str, stderr: str, code: int, seconds: float
) -> Outcome:
    """What one `devfix verify --fix` call says about a file."""
    fixes = tuple(a or b for a, b in _APPLIED.findall(stdout + stderr))
    ran = _ROUND_RUNS.search(stdout)
    if code == 0 and ran:
        return Outcome(row_id, kind, "runs", int(ran.group(1)), fixes, "", "", seconds)
    after = _RUNS_AFTER.search(stdout)
    if code == 0 and after:
        return Outcome(row_id, kind, "runs", int(after.group(1)) + 1, fixes, "", "", seconds)
    stops = _STOP.findall(stderr)
    last = stops[-1] if stops else None
    if last is not None and "not of a device error" not in last[1] and "ran past" not in last[1]:
        # A device error the loop could not repair: what it said, and the line after it.
        lines = stderr.splitlines()
        reason = last[1]
        index = lines.index(f"devfix verify --fix: round {last[0]}: {last[1]}")
        if (
            index + 1 < len(lines)
            and lines[index + 1].startswith("  ")
            and lines[index + 1].endswith(": stop")
        ):
            reason = lines[index + 1].strip()
        return Outcome(
            row_id, kind, "stopped", int(last[0]), fixes, "device-error", reason, seconds
        )
    category, detail = classify_failure(stdout, stderr, code)
    rounds = int(last[0]) if last else 1
    return Outcome(row_id, kind, "cannot-run", rounds, fixes, category, detail, seconds)


def run_file(
    devfix: Sequence[str], row_id: str, kind: str, source: Path, timeout: float, max_rounds: int
) -> tuple[Outcome, str, str]:
    """Run `verify --fix` on a scratch copy of ``source``; the outcome and the raw output."""
    with tempfile.TemporaryDirectory(prefix="devfix-rwv-") as tmp:
        work = Path(tmp) / row_id
        work.mkdir()
        target = work / source.name
        shutil.copyfile(source, target)
        argv = [
            *devfix,
            "verify",
            "--fix",
            "--unsafe-fixes",
            "--timeout",
            f"{timeout:g}",
            "--max-rounds",
            str(max_rounds),
            source.name,
        ]
        env = {**os.environ, **SCRIPT_ENV, "HOME": tmp, "TMPDIR": tmp}
        started = time.monotonic()
        try:
            done = subprocess.run(
                argv,
                cwd=work,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=(max_rounds + 1) * (timeout + 30),
            )
            code, out, err = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as expired:
            code, out, err = 124, str(expired.stdout or ""), str(expired.stderr or "")
            err += "\ndevfix verify: the script ran past --timeout and was stopped"
        seconds = time.monotonic() - started
    return read_outcome(row_id, kind, out, err, code, seconds), out, err


def read_rows(manifest: Path) -> list[tuple[str, str, str]]:
    """(id, basename, kind) of every manifest row."""
    lines = manifest.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    rows = []
    for line in lines[1:]:
        if not line.strip():
            continue
        fields = dict(zip(header, line.split("\t")))
        rows.append((fields["id"], fields["path"].rsplit("/", 1)[-1], fields["kind"]))
    return rows


def summary(outcomes: Sequence[Outcome], timeout: float) -> str:
    total = len(outcomes)
    runs = [o for o in outcomes if o.status == "runs"]
    as_is = [o for o in runs if not o.fixes]
    repaired = [o for o in runs if o.fixes]
    stopped = [o for o in outcomes if o.status == "stopped"]
    cannot = [o for o in outcomes if o.status == "cannot-run"]
    lines = [
        f"{total} corpus files; timeout {timeout:g} s per run",
        f"  end running: {len(runs)} ({len(as_is)} as they are, {len(repaired)} after fixes)",
    ]
    for o in repaired:
        lines.append(f"    {o.id}: runs in round {o.rounds} after {', '.join(o.fixes)}")
    lines.append(f"  device error not repaired: {len(stopped)}")
    for o in stopped:
        applied = f" after {', '.join(o.fixes)}" if o.fixes else ""
        lines.append(f"    {o.id}: round {o.rounds}{applied}: {o.detail}")
    screened = sum(1 for o in cannot if not o.ran)
    lines.append(
        f"  cannot run standalone: {len(cannot)} ({screened} decided without running: "
        "notebooks, and imports this interpreter cannot satisfy)"
    )
    for category, count in Counter(o.category for o in cannot).most_common():
        lines.append(f"    {category}: {count}")
    modules = Counter(o.detail for o in cannot if o.category == "missing-module")
    if modules:
        lines.append(
            "    missing modules: "
            + ", ".join(f"{name} ({n})" for name, n in modules.most_common())
        )
    if as_is:
        kinds = Counter(o.kind for o in as_is)
        lines.append(
            "  running as they are, by kind: "
            + ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=Path, required=True, help="the corpus: DIR/<id>/<file>")
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument(
        "--devfix",
        default=str(Path(sys.executable).with_name("devfix")),
        help="the devfix command (default: the one next to this interpreter)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per run")
    parser.add_argument("--max-rounds", type=int, default=5)
    parser.add_argument("--only", action="append", default=[], metavar="ID")
    parser.add_argument("--json", type=Path, help="write every outcome here")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per file")
    options = parser.parse_args(argv)
    os.nice(5)  # the machine is shared; the children inherit it
    # The screen must see what a script alone in a scratch folder sees, not this folder.
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if p not in ("", here) and Path(p).resolve() != REPO]
    devfix = shlex.split(options.devfix)
    outcomes: list[Outcome] = []
    for row_id, basename, kind in read_rows(options.manifest):
        if options.only and row_id not in options.only:
            continue
        source = options.files / row_id / basename
        if not source.is_file():
            outcome = Outcome(row_id, kind, "cannot-run", 0, (), "absent", str(source), 0.0)
        elif basename.endswith(".ipynb"):
            outcome = Outcome(
                row_id,
                kind,
                "cannot-run",
                0,
                (),
                "notebook",
                "--fix does not edit notebooks",
                0.0,
                ran=False,
            )
        elif (found := screen(source)) is not None:
            outcome = Outcome(row_id, kind, "cannot-run", 0, (), *found, 0.0, ran=False)
        else:
            outcome, _out, _err = run_file(
                devfix, row_id, kind, source, options.timeout, options.max_rounds
            )
        outcomes.append(outcome)
        if options.verbose:
            fixes = f" fixes={','.join(outcome.fixes)}" if outcome.fixes else ""
            print(
                f"{row_id}: {outcome.status} rounds={outcome.rounds}{fixes} "
                f"{outcome.category} {outcome.detail} ({outcome.seconds:.0f} s)",
                flush=True,
            )
    print(summary(outcomes, options.timeout))
    if options.json:
        options.json.write_text(
            json.dumps([asdict(o) for o in outcomes], indent=1) + "\n", encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
