"""Re-create the real-world corpus folder byte for byte from the pinned commits.

    python bench/realworld/recreate.py --git-dirs ROOT --out DIR

For every row of `manifest.tsv`, reads the blob `<commit>:<path>` from the repository's git
directory or clone under ROOT (`ROOT/<owner>+<name>` or `ROOT/<owner>/<name>`: a bare git
directory, a clone, or a folder holding one of those one level down, as the session `fetch`
tool leaves them) with `git cat-file blob`, which gives the committed bytes (no end-of-line
conversion, no filters: CRLF files keep their CRLF), checks its size and sha256 against the
manifest and writes it to `DIR/<id>/<basename>`. A file already there with the right bytes is
left alone. Files that cannot be re-created are listed with the reason; the exit code is 1 when
there is any.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLUMNS = ("id", "repo", "commit", "path", "kind", "role", "bytes", "sha256", "note")


def read_rows(manifest: Path) -> list[dict[str, str]]:
    lines = manifest.read_text(encoding="utf-8").splitlines()
    if not lines or tuple(lines[0].split("\t")) != COLUMNS:
        raise SystemExit(f"recreate: {manifest}: not a manifest (header {'/'.join(COLUMNS)})")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != len(COLUMNS):
            raise SystemExit(f"recreate: {manifest}:{number}: {len(cells)} columns")
        rows.append(dict(zip(COLUMNS, cells)))
    return rows


def _is_git_dir(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


def find_git_dir(root: Path, repo: str) -> Path | None:
    """The git directory for `owner/name` under `root`, or None."""
    owner, name = repo.split("/", 1)
    for base in (root / f"{owner}+{name}", root / owner / name):
        if not base.is_dir():
            continue
        for candidate in (base, base / ".git"):
            if _is_git_dir(candidate):
                return candidate
        for child in sorted(base.iterdir()):  # a snapshot unpacked one level down
            for candidate in (child, child / ".git"):
                if candidate.is_dir() and _is_git_dir(candidate):
                    return candidate
    return None


def read_blob(git_dir: Path, commit: str, path: str) -> bytes:
    """The committed bytes of `path` at `commit` (raises LookupError with git's reason)."""
    result = subprocess.run(
        ["git", "--git-dir", str(git_dir), "cat-file", "blob", f"{commit}:{path}"],
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        reason = result.stderr.decode("utf-8", "replace").strip().splitlines()
        raise LookupError(reason[-1] if reason else f"git exited {result.returncode}")
    return result.stdout


def _write_atomically(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".recreate-")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, target)
    except BaseException:
        os.unlink(temporary)
        raise


def recreate(rows: Sequence[dict[str, str]], git_dirs: Path, out: Path) -> list[str]:
    """Write every row's file under `out`; returns one line per file that could not be made."""
    problems: list[str] = []
    for row in rows:
        target = out / row["id"] / row["path"].rsplit("/", 1)[-1]
        size, digest = int(row["bytes"]), row["sha256"]
        if target.is_file():
            existing = target.read_bytes()
            if len(existing) == size and hashlib.sha256(existing).hexdigest() == digest:
                continue
        git_dir = find_git_dir(git_dirs, row["repo"])
        if git_dir is None:
            problems.append(f"{row['id']}: no git directory for {row['repo']} under {git_dirs}")
            continue
        try:
            data = read_blob(git_dir, row["commit"], row["path"])
        except LookupError as error:
            problems.append(
                f"{row['id']}: {row['repo']}@{row['commit'][:12]}:{row['path']}: {error}"
            )
            continue
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            problems.append(
                f"{row['id']}: {len(data)} bytes with another sha256 than the manifest's "
                f"{size} bytes (wrong commit or path?)"
            )
            continue
        _write_atomically(target, data)
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python bench/realworld/recreate.py",
        description="Re-create the real-world corpus folder from git mirrors or clones.",
    )
    parser.add_argument(
        "--git-dirs",
        type=Path,
        required=True,
        metavar="ROOT",
        help="folder holding ROOT/<owner>+<name> or ROOT/<owner>/<name> (git dir or clone)",
    )
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="corpus folder")
    parser.add_argument("--manifest", type=Path, default=HERE / "manifest.tsv")
    parser.add_argument("--only", action="append", default=[], metavar="ID")
    args = parser.parse_args(argv)
    rows = read_rows(args.manifest)
    if args.only:
        rows = [row for row in rows if row["id"] in args.only]
    problems = recreate(rows, args.git_dirs, args.out)
    for problem in problems:
        print(problem)
    made = len(rows) - len(problems)
    print(f"recreate: {made}/{len(rows)} files in {args.out}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
