"""Run the differential battery and the golden `before` scripts on a real GPU; print differences.

    python bench/gpu_crosscheck.py                 # on a CUDA machine (torch with CUDA)
    python bench/gpu_crosscheck.py --virtual       # the same, under the virtual GPUs (CPU torch)
    python bench/gpu_crosscheck.py --battery-only --json result.json

Every probe of ``devfix/vgpu/battery.py`` declares the outcome a CUDA build gives (an exception
text, or a check that must hold) and the PyTorch source it comes from. On a real GPU this script
runs the battery with plain torch and prints each probe whose outcome differs from the declared
one, with its source; then it runs every golden ``before`` whose header asks for no more GPUs
than the machine has, and prints each one that does not fail as its header declares (and each
``after`` that does not exit 0). Under ``--virtual`` the same runs use ``python -m devfix.vgpu``,
which is how the test suite checks this script on machines without a GPU.

Exit status: 0 when nothing differs, 1 otherwise. Results are recorded in
``docs/gpu-crosscheck.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from devfix.vgpu.battery import CASES  # noqa: E402
from devfix.vgpu.golden import check_failure, parse_golden_header  # noqa: E402

BATTERY = (
    "import json, sys\n"
    "from devfix.vgpu.battery import run_all\n"
    "print('BATTERY ' + json.dumps(run_all(int(sys.argv[1]))))\n"
)


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _command(python: str, gpus: int, virtual: bool) -> list[str]:
    return [python, "-m", "devfix.vgpu", "--gpus", str(gpus)] if virtual else [python]


def run_battery(python: str, gpus: int, virtual: bool) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "battery.py"
        script.write_text(BATTERY)
        r = subprocess.run(
            [*_command(python, gpus, virtual), str(script), str(gpus)],
            capture_output=True,
            text=True,
            env=_env({}),
            timeout=900,
            cwd=tmp,
        )
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("BATTERY ")]
    if r.returncode != 0 or not lines:
        raise SystemExit(f"the battery did not run (exit {r.returncode}):\n{r.stderr[-4000:]}")
    rows: list[dict[str, Any]] = json.loads(lines[-1][len("BATTERY ") :])
    return rows


def battery_differences(rows: list[dict[str, Any]]) -> list[str]:
    """One paragraph per probe whose outcome is not the declared one."""
    out = []
    for row in rows:
        if row["passed"]:
            continue
        case = row["case"]
        if row["expect"] is None:
            want = f"runs and `{case['check']}` holds" if case["check"] else "runs"
        else:
            want = f"{case['exc']}: {row['expect']}"
        got = "ran, check false" if row["got"] is None else f"{row['exc']}: {row['got']}"
        out.append(
            f"[battery] {case['name']} ({case['group']})\n"
            f"  expected: {want}\n  got:      {got}\n  source:   {case['source']}"
        )
    return out


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=cwd)


def golden_differences(python: str, gpus: int, virtual: bool) -> tuple[int, list[str]]:
    checked = 0
    out: list[str] = []
    for path in sorted(ROOT.glob("golden/*/*.before.py")):
        exp = parse_golden_header(path.read_text())
        if exp is None or exp.gpus > gpus:
            continue
        checked += 1
        env = _env({"OMP_NUM_THREADS": "1", **exp.env})
        cmd = _command(python, exp.gpus, virtual)
        before = run([*cmd, str(path)], env, path.parent)
        problem = check_failure(exp, before)
        if problem is not None:
            out.append(f"[golden] {path.relative_to(ROOT)}\n  {problem}")
        after = path.with_name(path.name.replace(".before.py", ".after.py"))
        ran = run([*cmd, str(after)], env, path.parent)
        if ran.returncode != 0:
            tail = (ran.stderr.strip().splitlines() or ["(no stderr)"])[-1]
            out.append(f"[golden] {after.relative_to(ROOT)}\n  exit {ran.returncode}: {tail}")
    return checked, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--virtual", action="store_true", help="run under the virtual GPUs")
    ap.add_argument("--gpus", type=int, help="GPUs to use (default: all real ones; 2 virtual)")
    ap.add_argument("--battery-only", action="store_true", help="skip the golden scripts")
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs the probes")
    ap.add_argument("--json", help="also write the battery rows to this file")
    args = ap.parse_args(argv)
    if args.virtual:
        gpus = args.gpus or 2
    else:
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("no CUDA GPU here: run on a GPU machine, or pass --virtual")
        gpus = min(args.gpus or torch.cuda.device_count(), torch.cuda.device_count())
        print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, {gpus} GPU(s)")
    rows = run_battery(args.python, gpus, args.virtual)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    diffs = battery_differences(rows)
    skipped = sum(1 for case in CASES if case.gpus > gpus)
    print(f"battery: {len(rows)} probes run ({skipped} need more GPUs), {len(diffs)} differ")
    if not args.battery_only:
        checked, golden = golden_differences(args.python, gpus, args.virtual)
        print(f"goldens: {checked} before/after pairs run, {len(golden)} differ")
        diffs += golden
    for d in diffs:
        print(d)
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
