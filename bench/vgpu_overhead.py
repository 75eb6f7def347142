"""Slowdown of a Transformer training step under the virtual GPUs vs plain CPU.

    python bench/vgpu_overhead.py [--rounds 5] [--steps 20]

Each measurement runs in a fresh interpreter with one intra-op thread: plain CPU
(``device='cpu'``) against the same script under ``python -m devfix.vgpu`` on ``cuda:0``.
Reports the median step time of each and their ratio, for the small model (d=128, seq 64,
batch 16; target <= 1.3x) and the tiny one (d=32, seq 16, batch 4; target <= 2x).

A step's time is the process's CPU time (all threads: the autograd engine runs a virtual GPU's
backward on its device thread, as on a GPU), so that other work on a shared machine inflates
neither side; ``--wall`` measures wall-clock time instead.
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
d, seq, batch, steps = (int(a) for a in sys.argv[1:5])
device = sys.argv[5]
clock = time.perf_counter if sys.argv[6] == "wall" else time.process_time
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
times = []
for _ in range(steps):
    t0 = clock()
    loss = step()
    times.append(clock() - t0)
print(json.dumps({"median_ms": 1000 * sorted(times)[len(times) // 2], "loss": loss.item()}))
"""

MODELS = {"small": (128, 64, 16), "tiny": (32, 16, 4)}


def run(
    script: str, cfg: tuple[int, int, int], steps: int, virtual: bool, clock: str
) -> dict[str, float]:
    d, seq, batch = cfg
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    args = [str(d), str(seq), str(batch), str(steps)]
    if virtual:
        cmd = [sys.executable, "-m", "devfix.vgpu", "--gpus", "1", script, *args, "cuda:0", clock]
    else:
        cmd = [sys.executable, script, *args, "cpu", clock]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--models", default="small,tiny")
    ap.add_argument("--wall", action="store_true", help="wall-clock instead of CPU time")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "step.py")
        Path(script).write_text(CHILD)
        for name in opts.models.split(","):
            cfg = MODELS[name]
            plain: list[float] = []
            virt: list[float] = []
            same_loss = True
            for _ in range(opts.rounds):
                clock = "wall" if opts.wall else "cpu"
                p = run(script, cfg, opts.steps, False, clock)
                v = run(script, cfg, opts.steps, True, clock)
                plain.append(p["median_ms"])
                virt.append(v["median_ms"])
                same_loss = same_loss and p["loss"] == v["loss"]
            mp, mv = statistics.median(plain), statistics.median(virt)
            # each round's pair ran back to back: its ratio is less exposed to the machine's
            # speed drifting between rounds than the ratio of the two medians
            ratios = sorted(v / p for p, v in zip(plain, virt))
            print(
                f"{name:5s} d={cfg[0]} seq={cfg[1]} batch={cfg[2]}: plain {mp:.2f} ms/step, "
                f"vgpu {mv:.2f} ms/step, slowdown {mv / mp:.2f}x, "
                f"per round {statistics.median(ratios):.2f}x "
                f"({ratios[0]:.2f}-{ratios[-1]:.2f}), "
                f"losses bitwise identical: {same_loss}"
            )


if __name__ == "__main__":
    main()
