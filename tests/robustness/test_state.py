"""Issue 19, items 2, 4, 5, 6, 7 and 8: devfix's own state (cache, run record, configuration)
against links, edits during a run, corrupted entries, kills and concurrent runs; owners kept."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.robustness.cli import FIXABLE, FIXED, assert_no_traceback, devfix, error_lines

pytestmark = pytest.mark.slow


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


@pytest.mark.parametrize(
    "linked", ["run-state.jsonl", ".gitignore", "results", "the folder itself"]
)
def test_state_files_are_never_written_through_links(tmp_path: Path, linked: str) -> None:
    """A repository can commit `.devfix_cache/...` as links to files outside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("precious\n")
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "train.py").write_text(FIXABLE)
    state = project / ".devfix_cache"
    if linked == "the folder itself":
        state.symlink_to(outside, target_is_directory=True)
    else:
        state.mkdir()
        if linked == "results":  # every name the results cache could take
            devfix("check", "src", cwd=project)
            names = [p.name for p in state.iterdir() if p.name.startswith("results-")]
            for name in names:
                (state / name).unlink()
                (state / name).symlink_to(outside / "victim.txt")
        elif linked == "run-state.jsonl":  # to a file that exists: overwritten before
            (state / linked).symlink_to(outside / "victim.txt")
        else:  # to a file that does not exist yet: created before
            (state / linked).symlink_to(outside / "created-by-devfix")
    before = _files(outside)
    for command in (("check", "src"), ("apply", "src"), ("check", "src")):
        completed = devfix(*command, cwd=project)
        assert_no_traceback(completed)
        assert completed.returncode in (0, 1), completed.stderr
    assert _files(outside) == before
    assert (project / "src" / "train.py").read_text() == FIXED
    if linked == "the folder itself":
        assert "is a symbolic link; devfix does not write its state through links" in (
            completed.stderr
        )


CLEAN = "import torch\nw = torch.load('w.pt', map_location='cpu')\n"
#: Simulates an editor saving b.py while devfix works on a.py (after the cache was looked up).
EDIT_DURING_RUN = f"""
import pathlib
import devfix.engine as engine
_fix_one = engine._fix_one
def _edit_then_fix(job):
    if job[0].endswith("a.py"):
        pathlib.Path("src/b.py").write_text({CLEAN!r})
    return _fix_one(job)
engine._fix_one = _edit_then_fix
"""


def test_cache_is_keyed_on_the_bytes_parsed(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("import torch\n")
    (src / "b.py").write_text(FIXABLE)
    # b.py had a finding when the run began; it is clean when it is parsed.
    edited = devfix("check", "-j", "1", "src", cwd=tmp_path, prelude=EDIT_DURING_RUN)
    assert edited.returncode == 0, edited.stdout + edited.stderr
    (src / "b.py").write_text(FIXABLE)  # back as it was (git checkout, an undo)
    again = devfix("check", "-j", "1", "src", cwd=tmp_path)
    assert "src/b.py:2:5: DF302" in again.stdout, again.stdout + again.stderr


@pytest.mark.parametrize(
    "corrupt",
    [
        {"hidden_unsafe": "x"},
        {"hidden_unsafe": True},
        {"findings": "x"},
        {"findings": [{"line": "x"}]},
        {"findings": [None]},
        {"findings": [{"file_span": [1, 2, "x", 4]}]},
        {"extra": 1},
        "not an entry",
    ],
    ids=lambda value: json.dumps(value)[:30],
)
def test_a_corrupted_cache_entry_is_a_miss(tmp_path: Path, corrupt: object) -> None:
    (tmp_path / "train.py").write_text(FIXABLE)
    first = devfix("check", "train.py", cwd=tmp_path)
    [cache] = (tmp_path / ".devfix_cache").glob("results-*.json")
    entries = json.loads(cache.read_text())
    for key, entry in entries.items():
        if isinstance(corrupt, dict):
            entry = {**entry, **corrupt}
            if "findings" in corrupt and isinstance(corrupt["findings"], list):
                entry["findings"] = [
                    {**entries[key]["findings"][0], **item} if isinstance(item, dict) else item
                    for item in corrupt["findings"]
                ]
            entries[key] = entry
        else:
            entries[key] = corrupt
    cache.write_text(json.dumps(entries))
    again = devfix("check", "train.py", cwd=tmp_path)
    assert_no_traceback(again)
    assert (again.returncode, again.stdout) == (first.returncode, first.stdout)
    assert "train.py:2:5: DF302 [*]" in again.stdout


# -- a SIGKILL to the main process while workers rewrite files ----------------------------------

BODY = "".join(
    f"def step_{i}(model, batch):\n    out = model(batch)\n    return out.sum() * {i}\n\n"
    for i in range(60)
)


def _record(state: Path) -> tuple[set[str], dict[str, str]]:
    """Files the run record says were rewritten, and those it says were being renamed."""
    changed: set[str] = set()
    writing: dict[str, str] = {}
    for line in (state / "run-state.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if "writing" in entry:
            writing[entry["path"]] = entry["writing"]
        elif entry.get("status") == "changed":
            changed.add(entry["path"])
    return changed, writing


def _children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.add(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_killing_the_main_process_stops_its_workers_and_the_record_is_true(
    tmp_path: Path,
) -> None:
    import hashlib

    src = tmp_path / "src"
    src.mkdir()
    originals = {}
    for i in range(60):
        text = f"import torch\n\n{BODY}w = torch.load('w{i}.pt')\n"
        (src / f"m{i:02}.py").write_text(text)
        originals[f"src/m{i:02}.py"] = text.encode()
    rng = random.Random(19)
    for _kill in range(3):
        at_start = {name: (tmp_path / name).read_bytes() for name in originals}
        process = subprocess.Popen(
            [sys.executable, "-m", "devfix", "apply", "-q", "-j", "2", "src"],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        done = sum((tmp_path / name).read_bytes() != data for name, data in originals.items())
        goal = done + rng.randint(1, 8)
        deadline = time.monotonic() + 60
        workers: set[int] = set()
        while time.monotonic() < deadline and process.poll() is None:
            workers |= _children(process.pid)
            now = sum((tmp_path / name).read_bytes() != data for name, data in originals.items())
            if now >= goal:
                break
            time.sleep(rng.uniform(0, 0.05))
        assert process.poll() is None, "the run ended before the kill"
        workers |= _children(process.pid)
        process.kill()  # the main process only, as `kill -9 PID` does
        process.wait()
        deadline = time.monotonic() + 5
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in workers), "workers outlived the main process"
        settled = _files(src)
        time.sleep(0.5)
        assert _files(src) == settled, "files changed after the kill"
        # This run's record: every file it rewrote, and only those.
        changed, writing = _record(tmp_path / ".devfix_cache")
        for name, data in at_start.items():
            current = (tmp_path / name).read_bytes()
            if current == data:
                assert name not in changed, f"{name} recorded as rewritten but is not"
            else:
                digest = hashlib.blake2b(current, digest_size=16).hexdigest()
                assert writing.get(name) == digest, f"{name} rewritten but not recorded"
    assert done < len(originals)


def test_two_runs_at_once_keep_separate_records(tmp_path: Path) -> None:
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        for i in range(12):
            (tmp_path / folder / f"m{i}.py").write_text(f"import torch\n\n{BODY}{FIXABLE}")
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "devfix", "apply", "-q", "-j", "1", folder],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for folder in ("one", "two")
    ]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
    records = sorted((tmp_path / ".devfix_cache").glob("run-state*.jsonl"))
    assert len(records) == 2, records
    folders = set()
    for record in records:
        lines = [json.loads(line) for line in record.read_text().splitlines()]
        assert "started" in lines[0] and lines[-1] == {"finished": True, "interrupted": False}
        paths = {entry["path"] for entry in lines[1:-1]}
        [folder] = {path.split("/")[0] for path in paths}
        assert len(paths) == 12
        folders.add(folder)
    assert folders == {"one", "two"}


# -- configuration --------------------------------------------------------------------------------


def test_config_discovery_stops_at_the_nearest_project_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.devfix\nselect = \n")  # broken, unrelated
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "mine"\n')
    (project / "src" / "train.py").write_text(FIXABLE)
    completed = devfix("check", "src", cwd=project)
    assert completed.returncode == 1, completed.stderr
    assert "src/train.py:2:5: DF302" in completed.stdout
    # The nearest file decides, whatever it holds: its own [tool.devfix] applies ...
    (project / "pyproject.toml").write_text('[tool.devfix]\nignore = ["DF302"]\n')
    assert devfix("check", "src", cwd=project).returncode == 0
    # ... and a devfix.toml beside it comes first.
    (project / "devfix.toml").write_text("unsafe-fixes = false\n")
    assert devfix("check", "src", cwd=project).returncode == 1


def test_non_utf8_configuration_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_bytes(b"[tool.devfix]\n# caf\xe9\nselect = []\n")
    (tmp_path / "train.py").write_text(FIXABLE)
    completed = devfix("check", "train.py", cwd=tmp_path)
    assert completed.returncode == 2
    assert completed.stderr.splitlines() == [
        f"devfix: error: {tmp_path / 'pyproject.toml'}: cannot read configuration: "
        "not valid UTF-8 (byte 19)"
    ]


# -- ownership ----------------------------------------------------------------------------------


def test_rewrite_keeps_owner_and_group(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(FIXABLE)
    path.chmod(0o640)
    if os.geteuid() == 0:
        owner, group = 4242, 4343
    else:
        others = [gid for gid in os.getgroups() if gid != os.getegid()]
        if not others:
            pytest.skip("needs root, or a second group to give the file")
        owner, group = os.geteuid(), others[0]
    os.chown(path, owner, group)
    tmp_path.chmod(0o777)
    completed = devfix("apply", "--no-cache", "train.py", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert path.read_text() == FIXED
    info = path.stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (owner, group, 0o640)
    assert not error_lines(completed)
