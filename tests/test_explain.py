"""devfix explain on hand-written logs in the forms users paste: tracebacks from a GPU machine
(CUDA wording, site-packages paths of another machine), torchrun's `[rank0]:` prefixes,
notebooks (`Cell In[3], line 5`, `<ipython-input-...>`), chained errors. The tracebacks
produced under the virtual GPUs for every golden are checked in tests/test_golden.py."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from click.testing import CliRunner

from devfix.cli import main
from devfix.explain import explain, render
from devfix.explain.logs import mismatch, parse

TRAIN = """\
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = nn.Embedding(16, 8)

    def forward(self, src):
        pos = torch.arange(0, src.shape[1]).unsqueeze(0)
        return src + self.pos(pos)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Encoder().to(device)
x = torch.randn(2, 5, 8, device=device)
out = model(x)
"""

#: what a CUDA machine prints for TRAIN, from /home/alice/proj with a conda environment
CUDA_LOG = """\
Epoch 0: starting
Traceback (most recent call last):
  File "/home/alice/proj/src/train.py", line 18, in <module>
    out = model(x)
          ^^^^^^^^
  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1736, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1747, in _call_impl
    return forward_call(*args, **kwargs)
  File "/home/alice/proj/src/train.py", line 12, in forward
    return src + self.pos(pos)
                 ^^^^^^^^^^^^^
  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/sparse.py", line 190, in forward
    return F.embedding(
  File "/opt/conda/lib/python3.10/site-packages/torch/nn/functional.py", line 2551, in embedding
    return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)
RuntimeError: Expected all tensors to be on the same device, but got index is on cpu, different from other tensors on cuda:0 (when checking argument for argument index in method wrapper_CUDA__index_select)
"""


def _project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN)
    return tmp_path


def test_both_message_forms_are_read() -> None:
    two = mismatch(
        "Expected all tensors to be on the same device, but found at least two devices, "
        "cuda:1 and cuda:0!"
    )
    assert two is not None and two.form == "two-devices" and two.devices == ("cuda:1", "cuda:0")
    per_argument = mismatch(
        "Expected all tensors to be on the same device, but got index is on cpu, different "
        "from other tensors on cuda:0 (when checking argument for argument index in method "
        "wrapper_CUDA__index_select)"
    )
    assert per_argument is not None and per_argument.form == "argument"
    assert (per_argument.argument, per_argument.argument_device) == ("index", "cpu")
    assert per_argument.others_device == "cuda:0" and per_argument.op == "index_select"
    new = mismatch(
        "Expected all tensors to be on the same device, but got mat1 is on cuda:0, different "
        "from other tensors on cpu (when checking argument in method wrapper_CUDA_addmm)"
    )
    assert new is not None and (new.argument, new.op) == ("mat1", "addmm")
    assert new.devices == ("cpu", "cuda:0")
    old = mismatch(
        "Expected all tensors to be on the same device, but found at least two devices, "
        "cuda:0 and cpu! (when checking argument for argument mat1 in method wrapper_addmm)"
    )
    assert old is not None and (old.form, old.argument, old.op) == ("two-devices", "mat1", "addmm")
    assert mismatch("CUDA out of memory. Tried to allocate 2.00 GiB") is None


def test_a_log_from_a_gpu_machine_is_read_against_the_tree(tmp_path: Path) -> None:
    root = _project(tmp_path)
    explained = explain(CUDA_LOG, str(root))
    assert explained.mismatch is not None and explained.mismatch.argument == "index"
    frame = explained.frame
    assert frame is not None
    # the last frame in the source tree, found by the tail of the other machine's path
    assert frame.info.place is not None and frame.info.place.line == 12
    assert Path(frame.info.place.path) == root / "src" / "train.py"
    assert [c.info.frame.line for c in explained.calls] == [12, 18]
    assert explained.library == "torch"
    assert explained.failing is not None and explained.failing.frame.function == "embedding"
    operands = {o.text: o for o in frame.operands}
    assert operands["self.pos"].called and operands["self.pos"].origin_line == 8
    assert operands["pos"].origin_line == 11
    fix = explained.fix()
    assert fix is not None and fix.finding.code == "DF101" and fix.finding.line == 11
    assert fix.why == "where `pos` got its device"
    assert fix.diff is not None
    assert "+        pos = torch.arange(0, src.shape[1], device=self.pos.weight.device)" in fix.diff


def test_the_text_report(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(_project(tmp_path))
    text = render(explain(CUDA_LOG))
    assert text.startswith(
        "devfix explain: RuntimeError: Expected all tensors to be on the same device, but got "
        "index is on cpu"
    )
    assert "  devices: cuda:0, cpu\n" in text
    assert "  `index_select`'s argument `index` is on cpu, its other tensors on cuda:0\n" in text
    assert (
        "  raised inside torch (torch/nn/functional.py:2551, in embedding), called from your code"
    ) in text
    assert "  your frame: src/train.py:12, in forward\n      return src + self.pos(pos)\n" in text
    assert "  called from: src/train.py:18, in <module>\n" in text
    assert "src/train.py:11:15: DF101 " in text
    assert text.rstrip().endswith("to fix: devfix apply --select DF101 src/train.py")


def test_the_command_reads_stdin_and_prints_json(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(_project(tmp_path))
    result = CliRunner().invoke(main, ["explain", "--format", "json", "-"], input=CUDA_LOG)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["form"] == "argument" and data["devices"] == ["cuda:0", "cpu"]
    assert data["argument"] == {"name": "index", "device": "cpu", "others": "cuda:0"}
    assert data["frame"]["path"] == "src/train.py" and data["frame"]["line"] == 12
    assert data["frame"]["log_path"] == "/home/alice/proj/src/train.py"
    assert data["library"] == "torch"
    assert data["fix"]["code"] == "DF101" and data["fix"]["line"] == 11
    assert data["fix"]["command"] == "devfix apply --select DF101 src/train.py"
    assert "pos" in {o["expression"] for o in data["operands"]}


def test_a_log_file_with_torchrun_prefixes_and_colours(tmp_path: Path) -> None:
    root = _project(tmp_path)
    log = "".join(f"[rank1]: \x1b[0m{line}\n" for line in CUDA_LOG.splitlines())
    (root / "job.log").write_text(log)
    result = CliRunner().invoke(main, ["explain", "--root", str(root), str(root / "job.log")])
    assert result.exit_code == 0, result.output
    assert "DF101" in result.stdout and "your frame: " in result.stdout


def test_no_traceback_exits_2() -> None:
    result = CliRunner().invoke(main, ["explain", "-"], input="all good\n")
    assert result.exit_code == 2
    assert "no Python traceback" in result.stdout


def test_frames_outside_the_tree_are_said(tmp_path: Path) -> None:
    explained = explain(CUDA_LOG, str(tmp_path))
    assert explained.frame is None and explained.findings == []
    assert any("no frame of the traceback is in the source tree" in n for n in explained.notes)


NOTEBOOK_CELLS = [
    "import torch\nimport torch.nn as nn\n",
    "device = torch.device('cuda')\nmodel = nn.Linear(4, 2).to(device)\n",
    "x = torch.randn(3, 4)\nweights = torch.ones(2)\nout = model(x) * weights\n",
]


def _notebook(path: Path) -> None:
    cells = [
        {
            "cell_type": "code",
            "execution_count": count,
            "metadata": {},
            "outputs": [],
            "source": source.splitlines(keepends=True),
        }
        for count, source in zip((1, 2, 7), NOTEBOOK_CELLS)
    ]
    notebook = {
        "cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# run\n"]}, *cells],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(notebook))


IPYTHON_8 = """\
---------------------------------------------------------------------------
RuntimeError                              Traceback (most recent call last)
Cell In[7], line 3
      1 x = torch.randn(3, 4)
      2 weights = torch.ones(2)
----> 3 out = model(x) * weights

File ~/miniconda3/lib/python3.11/site-packages/torch/nn/modules/module.py:1751, in Module._wrapped_call_impl(self, *args, **kwargs)
   1749     return self._compiled_call_impl(*args, **kwargs)  # type: ignore[misc]
   1750 else:
-> 1751     return self._call_impl(*args, **kwargs)

File ~/miniconda3/lib/python3.11/site-packages/torch/nn/modules/linear.py:125, in Linear.forward(self, input)
    124 def forward(self, input: Tensor) -> Tensor:
--> 125     return F.linear(input, self.weight, self.bias)

RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! (when checking argument for argument mat1 in method wrapper_CUDA_addmm)
"""

OLD_IPYTHON = """\
RuntimeError                              Traceback (most recent call last)
<ipython-input-7-2b4c1e0f9a7d> in <module>
      1 x = torch.randn(3, 4)
      2 weights = torch.ones(2)
----> 3 out = model(x) * weights

/usr/local/lib/python3.7/dist-packages/torch/nn/modules/module.py in _call_impl(self, *input, **kwargs)
   1049                 or _global_forward_hooks or _global_forward_pre_hooks):
-> 1051             return forward_call(*input, **kwargs)

/usr/local/lib/python3.7/dist-packages/torch/nn/modules/linear.py in forward(self, input)
---> 96         return F.linear(input, self.weight, self.bias)

RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! (when checking arugment for argument mat1 in method wrapper_addmm)
"""


def test_notebook_frames_are_found_by_execution_count_and_code(tmp_path: Path) -> None:
    _notebook(tmp_path / "explore.ipynb")
    for log in (IPYTHON_8, OLD_IPYTHON):
        explained = explain(log, str(tmp_path))
        frame = explained.frame
        assert frame is not None, log
        place = frame.info.place
        assert place is not None and (place.cell, place.cell_line) == (3, 3)
        assert frame.info.where().endswith("explore.ipynb:cell 3:3")
        assert explained.library == "torch"
        operands = {o.text: o for o in frame.operands}
        assert operands["model"].placement == "device" and operands["model"].called
        assert operands["x"].placement == "cpu" and operands["weights"].placement == "cpu"
        # the call hands torch the CPU `x` and the model on `device`
        assert explained.mixed is True


def test_parse_reads_each_frame_of_an_ipython_traceback() -> None:
    tb = parse(IPYTHON_8).chosen()
    assert tb is not None and tb.error_type == "RuntimeError"
    assert [(f.path, f.line) for f in tb.frames] == [
        ("Cell In[7]", 3),
        ("~/miniconda3/lib/python3.11/site-packages/torch/nn/modules/module.py", 1751),
        ("~/miniconda3/lib/python3.11/site-packages/torch/nn/modules/linear.py", 125),
    ]
    assert tb.frames[0].code == "out = model(x) * weights" and tb.frames[0].cell == 7
    old = parse(OLD_IPYTHON).chosen()
    assert old is not None and [f.line for f in old.frames] == [3, 1051, 96]


def test_a_chained_error_explains_the_device_error_with_the_outer_frames(tmp_path: Path) -> None:
    (tmp_path / "eval.py").write_text(
        textwrap.dedent(
            """\
            import torch
            from torchmetrics import Accuracy

            metric = Accuracy(task="multiclass", num_classes=3)
            preds = torch.randn(4, 3, device="cuda")
            target = torch.randint(0, 3, (4,), device="cuda")
            print(metric(preds, target))
            """
        )
    )
    log = textwrap.dedent(
        """\
        Traceback (most recent call last):
          File "/venv/lib/python3.11/site-packages/torchmetrics/metric.py", line 549, in wrapped_func
            update(*args, **kwargs)
        RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!

        The above exception was the direct cause of the following exception:

        Traceback (most recent call last):
          File "/ci/work/eval.py", line 7, in <module>
            print(metric(preds, target))
          File "/venv/lib/python3.11/site-packages/torchmetrics/metric.py", line 552, in wrapped_func
            raise RuntimeError(
        RuntimeError: Encountered different devices in metric calculation (see stacktrace for details).
        """
    )
    explained = explain(log, str(tmp_path))
    assert explained.error is not None and "cuda:0 and cpu" in explained.error
    assert explained.frame is not None and explained.frame.info.frame.line == 7
    assert explained.library == "torchmetrics"
    assert "DF205" in {c.finding.code for c in explained.findings}
