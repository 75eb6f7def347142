"""Fault injection: SIGKILL mid-run, a full disk, a failing rename, two runs at once.

After any of them every file is either its original bytes or the complete rewrite (compared
with a reference run), permissions and unrelated files are unchanged, and what is left behind
is only `.<name>.<random>.devfix-tmp` files that the next run removes (see docs/robustness.md).
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import resource
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devfix import sources
from devfix.engine import fix_file
from devfix.errors import InputError
from devfix.types import FileStatus, Options

# one worker builds the module-scoped fixture once (pytest-xdist, tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("robustness-faults")]

# Enough for a run to last a few seconds, so each kill lands mid-run.
FILES = 150
KILLS = 4
SEED = 20261130

TEMPLATES = (
    "import torch\n{pad}\ndef load_{i}(path):\n    return torch.load(path)  # keep me\n",
    "import torch as t\r\n{pad}\r\nstate_{i} = t.load('w{i}.pt')\r\n",
    "# -*- coding: latin-1 -*-\n# caf\xe9 {i}\nfrom torch import load\n{pad}\nw = load('x')\n",
    "import torch\n{pad}\nclass Net{i}(torch.nn.Module):\n    pass\n\nnet = Net{i}()\n"
    "net.load_state_dict(torch.load('n.pt'))\n",
)


def _make_tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """FILES sources over ten packages plus unrelated files; returns path -> (bytes, mode)."""
    rng = random.Random(SEED)
    made: dict[str, tuple[bytes, int]] = {}
    for i in range(FILES):
        package = root / f"pkg{i % 10}"
        package.mkdir(parents=True, exist_ok=True)
        template = TEMPLATES[i % len(TEMPLATES)]
        newline = "\r\n" if "\r\n" in template else "\n"
        pad = "".join(f"# note {j}: {'x' * rng.randint(0, 70)}{newline}" for j in range(i % 37))
        encoding = "latin-1" if "coding: latin-1" in template else "utf-8"
        data = template.format(pad=pad, i=i).encode(encoding)
        path = package / f"mod{i}.py"
        path.write_bytes(data)
        mode = (0o644, 0o600, 0o755)[i % 3]
        path.chmod(mode)
        made[str(path.relative_to(root))] = (data, mode)
    for name, data in (("README.txt", b"torch.load(x)\n"), ("pkg0/data.bin", bytes(range(256)))):
        (root / name).write_bytes(data)
        made[name] = (data, 0o644)
    (root / "pkg1" / "clean.py").write_bytes(b"import os\nprint(os.sep)\n")
    made["pkg1/clean.py"] = ((root / "pkg1" / "clean.py").read_bytes(), 0o644)
    return made


def _devfix(*args: str, cwd: Path, **kwargs: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "devfix", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its workers share the process group: one kill takes all
        **kwargs,
    )


APPLY = ("apply", "--unsafe-fixes", "--no-cache", "-q", "-j", "2", "tree")


@pytest.fixture(scope="module")
def reference(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, dict[str, tuple[bytes, int]], dict[str, bytes]]:
    """A pristine tree (kept in `pristine/tree`) and the bytes a complete run produces."""
    base = tmp_path_factory.mktemp("faults")
    made = _make_tree(base / "pristine" / "tree")
    shutil.copytree(base / "pristine" / "tree", base / "ref" / "tree", symlinks=True)
    process = _devfix(*APPLY, cwd=base / "ref")
    _, err = process.communicate(timeout=600)
    assert process.returncode == 0, err.decode()
    after = {name: (base / "ref" / "tree" / name).read_bytes() for name in made}
    changed = sum(after[name] != made[name][0] for name in made)
    assert changed == FILES, "every generated source must need a fix"
    return base, made, after


def _fresh_copy(base: Path, name: str) -> Path:
    target = base / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(base / "pristine" / "tree", target / "tree", symlinks=True)
    return target


def _leftovers(tree: Path) -> list[Path]:
    return [p for p in tree.rglob("*") if p.is_file() and p.name.endswith(".devfix-tmp")]


def _assert_each_original_or_rewritten(
    tree: Path, made: dict[str, tuple[bytes, int]], after: dict[str, bytes]
) -> int:
    rewritten = 0
    for name, (original, mode) in made.items():
        path = tree / name
        data = path.read_bytes()
        assert data in (original, after[name]), f"{name} is neither original nor rewritten"
        rewritten += data != original
        assert stat.S_IMODE(path.stat().st_mode) == mode, f"{name}: mode changed"
    # Nothing else appeared, except devfix's clearly named temporary files.
    extra = {
        str(p.relative_to(tree))
        for p in tree.rglob("*")
        if p.is_file() and not p.name.endswith(".devfix-tmp")
    } - set(made)
    assert extra == set(), extra
    for leftover in _leftovers(tree):
        assert leftover.name.startswith("."), leftover
    return rewritten


def _rewritten_count(tree: Path, made: dict[str, tuple[bytes, int]]) -> int:
    count = 0
    for name, (original, _) in made.items():
        with contextlib.suppress(OSError):
            count += (tree / name).stat().st_size != len(original)
    return count


def test_sigkill_mid_run_leaves_every_file_whole(
    reference: tuple[Path, dict[str, tuple[bytes, int]], dict[str, bytes]],
) -> None:
    base, made, after = reference
    work = _fresh_copy(base, "killed")
    tree = work / "tree"
    rng = random.Random(SEED)
    kills_mid_run = 0
    for _ in range(KILLS):
        already = _rewritten_count(tree, made)
        if already >= FILES:
            break
        # Kill once a random number of further files has been rewritten (or after a deadline).
        goal = already + rng.randint(1, max(1, (FILES - already) * 3 // 4))
        process = _devfix(*APPLY, cwd=work)
        deadline = time.monotonic() + 300
        while process.poll() is None and time.monotonic() < deadline:
            if _rewritten_count(tree, made) >= goal:
                break
            time.sleep(rng.uniform(0.0, 0.05))
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            kills_mid_run += 1
        process.communicate(timeout=60)
        _assert_each_original_or_rewritten(tree, made, after)
    assert kills_mid_run >= 1
    # Leftover temporaries (if a kill hit between write and rename) look stale to the next run.
    for leftover in _leftovers(tree):
        old = time.time() - 3600
        os.utime(leftover, (old, old))
    process = _devfix(*APPLY, cwd=work)
    _, err = process.communicate(timeout=600)
    assert process.returncode == 0, err.decode()
    assert _assert_each_original_or_rewritten(tree, made, after) == FILES
    assert _leftovers(tree) == []


def test_two_runs_at_once_do_not_corrupt_files(
    reference: tuple[Path, dict[str, tuple[bytes, int]], dict[str, bytes]],
) -> None:
    base, made, after = reference
    work = _fresh_copy(base, "concurrent")
    first, second = _devfix(*APPLY, cwd=work), _devfix(*APPLY, cwd=work)
    outputs = [process.communicate(timeout=600) for process in (first, second)]
    for process, (_, err) in zip((first, second), outputs):
        text = err.decode()
        assert "Traceback" not in text and "INTERNAL ERROR" not in text, text
        for line in text.splitlines():
            if ": error: " in line:
                # The only acceptable failure: the other run got there first.
                assert "changed on disk while devfix was working on it" in line, line
        assert process.returncode in (0, 2), text
    # Whichever run wrote a file first won; the other saw the change and kept its hands off.
    assert _assert_each_original_or_rewritten(work / "tree", made, after) == FILES
    assert _leftovers(work / "tree") == []


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))


def test_disk_full_keeps_the_original(tmp_path: Path) -> None:
    """A write that cannot complete (here: RLIMIT_FSIZE, as on a full disk) changes nothing."""
    big = tmp_path / "big.py"
    original = b"import torch\n" + b"# filler\n" * 200 + b"w = torch.load('x')\n"
    big.write_bytes(original)
    small = tmp_path / "small.py"
    small.write_bytes(b"import torch\nw = torch.load('x')\n")
    process = _devfix(
        "apply",
        "--no-cache",
        "-j",
        "1",
        "big.py",
        "small.py",
        cwd=tmp_path,
        preexec_fn=_limit_file_size,
    )
    _, err = process.communicate(timeout=300)
    text = err.decode()
    assert process.returncode == 2, text
    assert "big.py: error: cannot be written: File too large" in text
    assert big.read_bytes() == original
    assert small.read_bytes() == b"import torch\nw = torch.load('x', map_location=\"cpu\")\n"
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_failed_write_is_reported_and_cleaned_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    path = tmp_path / "train.py"
    original = b"import torch\nw = torch.load('x')\n"
    path.write_bytes(original)

    def no_space(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, failing, no_space)
    if failing == "replace":  # the rename, by either of write_atomic's means
        monkeypatch.setattr(sources, "_exchange", no_space)
    result = fix_file(str(path), Options(jobs=1))
    assert result.status is FileStatus.FAILED and not result.internal_error
    assert result.reason == "cannot be written: No space left on device"
    assert path.read_bytes() == original
    assert _leftovers(tmp_path) == []


def test_write_refuses_a_file_changed_since_it_was_read(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text("import torch\n")
    document = sources.read(str(path))
    path.write_text("import torch  # edited meanwhile\n")
    with pytest.raises(InputError, match="changed on disk"):
        sources.write_atomic(str(path), document.with_text("import torch  # devfix\n"))
    assert path.read_text() == "import torch  # edited meanwhile\n"


@pytest.fixture
def temporaries(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    path = tmp_path / "train.py"
    path.write_text("x = 1\n")
    stale = tmp_path / ".train.py.abc123.devfix-tmp"
    fresh = tmp_path / ".train.py.def456.devfix-tmp"
    other = tmp_path / ".other.py.abc123.devfix-tmp"
    for leftover in (stale, fresh, other):
        leftover.write_text("partial")
    old = time.time() - 2 * sources.STALE_TEMPORARY_SECONDS
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    yield path, stale, fresh
    assert other.exists()  # another file's leftovers are that file's business


def test_next_write_removes_stale_temporaries_only(temporaries: tuple[Path, Path, Path]) -> None:
    path, stale, fresh = temporaries
    sources.write_atomic(str(path), sources.read(str(path)).with_text("x = 2\n"))
    assert path.read_text() == "x = 2\n"
    assert not stale.exists()
    assert fresh.exists()  # could be a concurrent run's live temporary file


def test_walking_a_folder_removes_stale_temporaries(tmp_path: Path) -> None:
    """A kill can leave a temporary beside a file that a later run then rewrites or finds clean;
    any later run that walks the folder removes it once stale."""
    (tmp_path / "train.py").write_text("import torch\n")
    stale = tmp_path / ".train.py.abc123.devfix-tmp"
    fresh = tmp_path / ".train.py.def456.devfix-tmp"
    for leftover in (stale, fresh):
        leftover.write_text("partial")
    old = time.time() - 2 * sources.STALE_TEMPORARY_SECONDS
    os.utime(stale, (old, old))
    assert list(sources.discover([str(tmp_path)])) == [str(tmp_path / "train.py")]
    assert not stale.exists()
    assert fresh.exists()
