"""`bench/realworld/recreate.py`: the corpus folder re-created byte for byte from git."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

CRLF = b"import torch\r\nmodel = torch.nn.Linear(2, 2)\r\n"
LF = b"import torch\nx = torch.zeros(3)\n"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "core.autocrlf=false", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
             "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(cwd)},
    ).stdout.strip()  # fmt: skip


def make_repo(path: Path) -> str:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    (path / "src").mkdir()
    (path / "src" / "train.py").write_bytes(CRLF)
    (path / "nb.ipynb").write_bytes(LF)
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "one")
    first = git(path, "rev-parse", "HEAD")
    (path / "src" / "train.py").write_bytes(b"changed later\n")
    git(path, "commit", "-q", "-am", "two")
    return first


def row(row_id: str, repo: str, commit: str, path: str, data: bytes) -> dict[str, str]:
    digest = hashlib.sha256(data).hexdigest()
    return {"id": row_id, "repo": repo, "commit": commit, "path": path, "kind": "script",
            "role": "buggy", "bytes": str(len(data)), "sha256": digest, "note": ""}  # fmt: skip


@pytest.mark.slow
def test_recreate_from_clones_and_bare_mirrors(recreate: ModuleType, tmp_path: Path) -> None:
    root = tmp_path / "mirrors"
    first = make_repo(root / "alice" / "proj")  # ROOT/<owner>/<name>, a clone
    bare_parent = root / "bob+lib"  # ROOT/<owner>+<name>, a bare git dir one level down
    bare_parent.mkdir(parents=True)
    subprocess.run(
        [
            "git",
            "clone",
            "-q",
            "--bare",
            str(root / "alice" / "proj"),
            str(bare_parent / "lib.git"),
        ],
        check=True,
    )
    rows = [
        row("a-train", "alice/proj", first, "src/train.py", CRLF),
        row("b-nb", "bob/lib", first, "nb.ipynb", LF),
        row("wrong-hash", "alice/proj", first, "nb.ipynb", LF + b"x"),
        row("no-repo", "carol/none", first, "x.py", LF),
        row("no-path", "alice/proj", first, "missing.py", LF),
    ]
    out = tmp_path / "corpus"
    problems = recreate.recreate(rows, root, out)
    assert (out / "a-train" / "train.py").read_bytes() == CRLF  # CRLF kept
    assert (out / "b-nb" / "nb.ipynb").read_bytes() == LF
    assert [p.split(":")[0] for p in problems] == ["wrong-hash", "no-repo", "no-path"]
    assert "another sha256" in problems[0] and "no git directory" in problems[1]
    assert not (out / "wrong-hash").exists()
    # a second run leaves good files alone and repairs a damaged one
    (out / "b-nb" / "nb.ipynb").write_bytes(b"damaged")
    assert recreate.recreate(rows[:2], root, out) == []
    assert (out / "b-nb" / "nb.ipynb").read_bytes() == LF


@pytest.mark.slow
def test_recreate_command_line(recreate: ModuleType, tmp_path: Path) -> None:
    root = tmp_path / "mirrors"
    first = make_repo(root / "alice+proj")
    manifest = tmp_path / "manifest.tsv"
    fields = row("a-train", "alice/proj", first, "src/train.py", CRLF)
    manifest.write_text("\t".join(recreate.COLUMNS) + "\n" + "\t".join(fields.values()) + "\n")
    out = tmp_path / "corpus"
    argv = ["--git-dirs", str(root), "--out", str(out), "--manifest", str(manifest)]
    assert recreate.main(argv) == 0
    assert (out / "a-train" / "train.py").read_bytes() == CRLF
    assert recreate.main([*argv, "--git-dirs", str(tmp_path / "nothing")]) == 0  # already there
    (out / "a-train" / "train.py").unlink()
    assert recreate.main([*argv, "--git-dirs", str(tmp_path / "nothing")]) == 1
