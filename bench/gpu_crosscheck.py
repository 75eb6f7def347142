"""Cross-check the virtual GPUs' error texts against a real CUDA GPU (run by hand).

The virtual runtime needs a CPU-only torch, a real check needs a CUDA torch, so this runs in two
steps (or in one, given a second interpreter with CPU-only torch):

1. On any machine with CPU-only torch, record what the virtual GPUs say:

       python bench/gpu_crosscheck.py record vgpu.json

2. On a machine with a real CUDA GPU, run the same scripts and battery for real and print every
   difference:

       python bench/gpu_crosscheck.py compare vgpu.json
       python bench/gpu_crosscheck.py compare --vgpu-python /path/to/cpu-venv/bin/python

Covered: every golden ``before`` whose header asks for no more GPUs than the machine has (all
one-GPU cases on a single-GPU machine), and the op battery of ``devfix/vgpu/battery.py``.
Exit status 1 if anything differs.
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

from devfix.vgpu.golden import parse_golden_header  # noqa: E402

BATTERY = "import json\nfrom devfix.vgpu.battery import run_all\nprint(json.dumps(run_all({n})))\n"


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def error_line(stderr: str, prefix: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    hits = [ln for ln in lines if prefix in ln]
    if hits:
        return hits[-1]
    exc = [ln for ln in lines if ln.split(":", 1)[0].endswith(("Error", "Exception"))]
    return exc[-1] if exc else (lines[-1] if lines else "")


def goldens() -> list[Path]:
    return sorted(ROOT.glob("golden/*/*.before.py"))


def run_goldens(python: str, virtual: bool, max_gpus: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in goldens():
        exp = parse_golden_header(path.read_text())
        if exp is None or exp.gpus > max_gpus:
            continue
        cmd = [python]
        if virtual:
            cmd += ["-m", "devfix.vgpu", "--gpus", str(exp.gpus)]
        cmd.append(str(path))
        r = subprocess.run(cmd, capture_output=True, text=True, env=_env(exp.env), timeout=600)
        out[str(path.relative_to(ROOT))] = {
            "rc": r.returncode,
            "line": error_line(r.stderr, exp.fails_with),
        }
    return out


def run_battery(python: str, virtual: bool, max_gpus: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "battery.py"
        script.write_text(BATTERY.format(n=max_gpus))
        cmd = [python]
        if virtual:
            cmd += ["-m", "devfix.vgpu", "--gpus", str(max(2, max_gpus))]
        r = subprocess.run(
            [*cmd, str(script)], capture_output=True, text=True, env=_env({}), timeout=600
        )
    if r.returncode != 0:
        raise SystemExit(f"battery failed:\n{r.stderr}")
    rows = json.loads(r.stdout.strip().splitlines()[-1])
    return {row["case"]["name"]: {"exc": row["exc"], "got": row["got"]} for row in rows}


def record(args: argparse.Namespace) -> int:
    data = {
        "goldens": run_goldens(args.python, True, args.gpus),
        "battery": run_battery(args.python, True, args.gpus),
    }
    Path(args.output).write_text(json.dumps(data, indent=1))
    print(f"recorded {len(data['goldens'])} golden cases, {len(data['battery'])} battery cases")
    return 0


def compare(args: argparse.Namespace) -> int:
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("compare needs a real CUDA GPU")
    n = torch.cuda.device_count()
    if args.vgpu_python:
        virt = {
            "goldens": run_goldens(args.vgpu_python, True, n),
            "battery": run_battery(args.vgpu_python, True, n),
        }
    elif args.recorded:
        virt = json.loads(Path(args.recorded).read_text())
    else:
        raise SystemExit("give the recorded JSON or --vgpu-python")
    real = {
        "goldens": run_goldens(sys.executable, False, n),
        "battery": run_battery(sys.executable, False, n),
    }
    diffs = 0
    for kind in ("goldens", "battery"):
        for name, r in sorted(real[kind].items()):
            v = virt[kind].get(name)
            if v is None:
                print(f"[{kind}] {name}: not recorded under vgpu")
                continue
            if v != r:
                diffs += 1
                print(f"[{kind}] {name}\n  real: {r}\n  vgpu: {v}")
    print(f"{diffs} difference(s) on {n} real GPU(s)")
    return 1 if diffs else 0


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="run under the virtual GPUs (CPU-only torch)")
    rec.add_argument("output")
    rec.add_argument("--gpus", type=int, default=1, help="largest GPU count to record")
    rec.add_argument("--python", default=sys.executable)
    cmp_ = sub.add_parser("compare", help="run on a real GPU and diff")
    cmp_.add_argument("recorded", nargs="?")
    cmp_.add_argument("--vgpu-python", help="an interpreter with CPU-only torch")
    args = ap.parse_args()
    return record(args) if args.cmd == "record" else compare(args)


if __name__ == "__main__":
    raise SystemExit(main())
