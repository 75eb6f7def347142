"""Behavioural snapshots: what devfix reports and rewrites on a fixed set of files, and the diff
between two snapshots (before and after a refactoring of the passes).

    python bench/snapshot.py record OUT.json [--corpora golden,torch,projects,realworld]
    python bench/snapshot.py diff BEFORE.json AFTER.json

`record` runs devfix in this process, on every file of each corpus, twice: `check` with every
rule (the findings of `devfix check --format json`) and `apply --unsafe-fixes` without writing
(the unified diff of `devfix apply --unsafe-fixes --diff`). Corpora: `golden` (every script of
golden/ and examples/), `torch` (a sample of the installed torch package, bench/_corpus.py),
`projects` (timm + transformers, bench/_corpus.py), `realworld` (every file under
/work/realworld/<id>/, or `--realworld DIR`). The torch and projects corpora are copied once into
`--work-dir` and reused by later runs, so two snapshots read the very same files.

`diff` prints, per rule, the findings that appeared, disappeared or changed (message, fix
title, applicability, position) and the files whose rewrite changed; the exit code is 1 when
anything differs. Snapshots hold third-party paths and messages: never commit them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpus

DEFAULT_WORK = Path("/work/snapshots/corpora")
DEFAULT_REALWORLD = Path("/work/realworld")


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".py", ".ipynb"))


def corpus_files(
    names: list[str], work: Path, limit: int, realworld: Path
) -> Iterator[tuple[str, Path]]:
    """(key, path) for every file of the named corpora; keys are stable across runs."""
    for name in names:
        if name == "golden":
            for group in ("golden", "examples"):
                base = _corpus.REPO / group
                for path in _files(base):
                    yield f"{group}/{path.relative_to(base).as_posix()}", path
        elif name in ("torch", "projects"):
            root = work / f"{name}-{limit}"
            if not root.is_dir():
                partial = work / f"{name}-{limit}.partial"
                if name == "torch":
                    _corpus.torch_corpus(partial, limit)
                else:
                    _corpus.projects_corpus(partial, limit, _corpus_cache())
                partial.rename(root)
            for path in _files(root):
                yield f"{name}/{path.relative_to(root).as_posix()}", path
        elif name == "realworld":
            if realworld.is_dir():
                for path in _files(realworld):
                    yield f"realworld/{path.relative_to(realworld).as_posix()}", path
        else:
            raise SystemExit(f"unknown corpus {name!r}")


def _corpus_cache() -> Path:
    import os

    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "devfix-bench"


def record(args: argparse.Namespace) -> int:
    from devfix.engine import fix_file, tune_collector
    from devfix.types import Options

    tune_collector()
    names = [c for c in args.corpora.split(",") if c]
    snapshot: dict[str, dict[str, object]] = {}
    start = time.perf_counter()
    for key, path in corpus_files(names, args.work_dir, args.limit, args.realworld):
        checked = fix_file(str(path), Options(), write=False, check_only=True)
        applied = fix_file(str(path), Options(unsafe_fixes=True), write=False, want_diff=True)
        diff = applied.diff
        # The diff names the file's absolute path; keys are what the snapshots compare by.
        diff = diff.replace(str(path), key)
        snapshot[key] = {
            "status": checked.status.value,
            "reason": checked.reason,
            "findings": [f.to_json(key) for f in checked.findings],
            "apply_status": applied.status.value,
            "apply_reason": applied.reason,
            "diff": diff,
        }
    elapsed = time.perf_counter() - start
    Path(args.out).write_text(json.dumps(snapshot, indent=1, sort_keys=True))
    total = sum(len(entry["findings"]) for entry in snapshot.values())  # type: ignore[arg-type]
    print(f"{len(snapshot)} files, {total} findings, {elapsed:.1f} s -> {args.out}")
    return 0


def _finding_key(finding: dict[str, object]) -> tuple[object, ...]:
    return (finding["path"], finding["code"], finding["line"], finding["col"])


def diff(args: argparse.Namespace) -> int:
    before = json.loads(Path(args.before).read_text())
    after = json.loads(Path(args.after).read_text())
    added: Counter[str] = Counter()
    removed: Counter[str] = Counter()
    changed: Counter[str] = Counter()
    unchanged: Counter[str] = Counter()
    lines: list[str] = []
    for key in sorted(set(before) | set(after)):
        old = before.get(key)
        new = after.get(key)
        if old is None or new is None:
            lines.append(f"{key}: only in {'after' if old is None else 'before'}")
            continue
        for field in ("status", "reason", "apply_status", "apply_reason"):
            if old[field] != new[field]:
                lines.append(f"{key}: {field} {old[field]!r} -> {new[field]!r}")
        old_findings = {_finding_key(f): f for f in old["findings"]}
        new_findings = {_finding_key(f): f for f in new["findings"]}
        for fkey in sorted(set(old_findings) | set(new_findings), key=str):
            was, now = old_findings.get(fkey), new_findings.get(fkey)
            code = str((was or now or {}).get("code"))
            if was is None:
                added[code] += 1
                lines.append(f"+ {fkey}: {now['applicability']}: {now['message']}")  # type: ignore[index]
            elif now is None:
                removed[code] += 1
                lines.append(f"- {fkey}: {was['applicability']}: {was['message']}")
            elif was != now:
                changed[code] += 1
                lines.append(f"~ {fkey}:")
                for field in ("message", "fix_title", "applicability", "end_line", "end_col"):
                    if was[field] != now[field]:
                        lines.append(f"    {field}: {was[field]!r}\n         -> {now[field]!r}")
            else:
                unchanged[code] += 1
        if old["diff"] != new["diff"]:
            lines.append(f"{key}: rewrite differs")
            if args.verbose:
                lines.append("  --- before ---\n" + str(old["diff"]))
                lines.append("  --- after ---\n" + str(new["diff"]))
    codes = sorted(set(added) | set(removed) | set(changed) | set(unchanged))
    print("| rule | unchanged | added | removed | changed |\n|---|---|---|---|---|")
    for code in codes:
        print(f"| {code} | {unchanged[code]} | {added[code]} | {removed[code]} | {changed[code]} |")
    rewrites = sum(1 for line in lines if line.endswith("rewrite differs"))
    print(f"\nfiles: {len(set(before) | set(after))}; rewrites that differ: {rewrites}")
    for line in lines:
        print(line)
    return 1 if lines else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record", help="write a snapshot")
    rec.add_argument("out")
    rec.add_argument("--corpora", default="golden,torch,projects,realworld")
    rec.add_argument("--limit", type=int, default=300, help="files per sampled corpus")
    rec.add_argument("--work-dir", type=Path, default=DEFAULT_WORK)
    rec.add_argument("--realworld", type=Path, default=DEFAULT_REALWORLD)
    cmp = commands.add_parser("diff", help="compare two snapshots")
    cmp.add_argument("before")
    cmp.add_argument("after")
    cmp.add_argument("-v", "--verbose", action="store_true", help="print differing rewrites")
    args = parser.parse_args(argv)
    return record(args) if args.command == "record" else diff(args)


if __name__ == "__main__":
    sys.exit(main())
