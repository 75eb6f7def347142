"""Slowdown of a Transformer training step under the virtual GPUs vs plain CPU.

    python bench/vgpu_overhead.py [--rounds 5] [--steps 20] [--models small,tiny]

Each round starts fresh interpreters with one intra-op thread, each with the same model and
data: plain CPU (``device='cpu'``), the same script under ``python -m devfix.vgpu`` on
``cuda:0``, and (unless ``--no-python-path``) the virtual GPUs with every op on the Python
path (``DEVFIX_VGPU_FAST=0``), which shows what the runtime's C++ fast path saves. They run
in lockstep: one step in each, in turn (the order rotating), so that a change of the machine's
speed, which on a shared machine moves a plain step by a third within a minute, falls on all of
them alike. A step's slowdown is its time over the plain step of the same turn; the figure is
the median over all turns of all rounds, for the small model (d=128, seq 64, batch 16; target
<= 1.3x) and the tiny one (d=32, seq 16, batch 4; target <= 2x).

A step's time is the process's CPU time (all threads), so that other work on a shared machine
inflates neither side; ``--wall`` measures wall-clock time instead.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
import torch, torch.nn as nn
torch.set_num_threads(1)
d, seq, batch = (int(a) for a in sys.argv[1:4])
device = sys.argv[4]
clock = time.perf_counter if sys.argv[5] == "wall" else time.process_time
torch.manual_seed(0)
vocab = 1000
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)
    def forward(self, x):
        return self.head(self.enc(self.emb(x)))
model = Model().to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randint(0, vocab, (batch, seq)).to(device)
y = torch.randint(0, vocab, (batch, seq)).to(device)
def step():
    opt.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
    loss.backward()
    opt.step()
    return loss
for _ in range(3):
    step()
print("ready", flush=True)
for line in sys.stdin:  # one line per step; an empty one ends the run
    if not line.strip():
        break
    t0 = clock()
    loss = step()
    print(json.dumps({"ms": 1000 * (clock() - t0)}), flush=True)
print(json.dumps({"loss": loss.item()}), flush=True)
"""

MODELS = {"small": (128, 64, 16), "tiny": (32, 16, 4)}

#: name -> (on virtual GPUs, fast path)
CONFIGS = {"plain": (False, True), "vgpu": (True, True), "python path": (True, False)}


def start(script: str, cfg: tuple[int, int, int], config: str, clock: str) -> subprocess.Popen[str]:
    virtual, fast_path = CONFIGS[config]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["DEVFIX_VGPU_FAST"] = "1" if fast_path else "0"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    args = [*(str(n) for n in cfg), "cuda:0" if virtual else "cpu", clock]
    prefix = [sys.executable, "-m", "devfix.vgpu", "--gpus", "1"] if virtual else [sys.executable]
    proc = subprocess.Popen(
        [*prefix, script, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit(f"{config}: the benchmark script failed to start")
    return proc


def ask(proc: subprocess.Popen[str], line: str) -> dict[str, float]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())  # type: ignore[no-any-return]


def lockstep_round(
    script: str, cfg: tuple[int, int, int], configs: list[str], steps: int, clock: str
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Per-step times of each configuration, stepped in turn; and each one's last loss."""
    procs = {c: start(script, cfg, c, clock) for c in configs}
    times: dict[str, list[float]] = {c: [] for c in configs}
    for i in range(steps):
        order = configs[i % len(configs) :] + configs[: i % len(configs)]
        for c in order:
            times[c].append(ask(procs[c], "step")["ms"])
    losses = {c: ask(p, "")["loss"] for c, p in procs.items()}
    for p in procs.values():
        p.wait()
    return times, losses


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--models", default="small,tiny")
    ap.add_argument("--wall", action="store_true", help="wall-clock instead of CPU time")
    ap.add_argument(
        "--no-python-path",
        action="store_true",
        help="skip the virtual GPUs with every op on the Python path (DEVFIX_VGPU_FAST=0)",
    )
    opts = ap.parse_args()
    configs = ["plain", "vgpu"] + ([] if opts.no_python_path else ["python path"])
    clock = "wall" if opts.wall else "cpu"
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "step.py")
        Path(script).write_text(CHILD)
        for name in opts.models.split(","):
            cfg = MODELS[name]
            times: dict[str, list[float]] = {c: [] for c in configs}
            round_ratios: dict[str, list[float]] = {c: [] for c in configs[1:]}
            same_loss = True
            for _ in range(opts.rounds):
                got, losses = lockstep_round(script, cfg, configs, opts.steps, clock)
                same_loss = same_loss and len(set(losses.values())) == 1
                for c in configs:
                    times[c].extend(got[c])
                for c in configs[1:]:
                    turn = [v / p for p, v in zip(got["plain"], got[c])]
                    round_ratios[c].append(statistics.median(turn))
            plain = statistics.median(times["plain"])
            parts = [f"{name:5s} d={cfg[0]} seq={cfg[1]} batch={cfg[2]}: plain {plain:.2f} ms/step"]
            for c in configs[1:]:
                per_turn = [v / p for p, v in zip(times["plain"], times[c])]
                rr = sorted(round_ratios[c])
                parts.append(
                    f"{c} {statistics.median(times[c]):.2f} ms/step, "
                    f"slowdown {statistics.median(per_turn):.2f}x "
                    f"(rounds {rr[0]:.2f}-{rr[-1]:.2f})"
                )
            print("; ".join(parts) + f"; losses bitwise identical: {same_loss}")


if __name__ == "__main__":
    main()
