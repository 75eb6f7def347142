"""Provenance under the virtual GPUs: for each device of a device error, the tensor on it, the
line of the user's code that put it there and the devfix finding at that line; the same facts
as JSON (`devfix verify --format json`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from devfix.vgpu import child_env
from devfix.vgpu.placement import describe, suggest
from devfix.vgpu.provenance import ATTRIBUTE, BATCH, CREATED, LOADED, MOVED, Site


def _post(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stderr
    marker = "devfix verify: the script died of a device mismatch\n"
    assert marker in result.stderr, result.stderr
    return result.stderr.split(marker, 1)[1]


@pytest.mark.slow
def test_a_factory_in_forward_names_its_line_and_rule(tmp_path, vgpu_run) -> None:
    (tmp_path / "pos.py").write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.emb = torch.nn.Embedding(10, 4)\n"
        "    def forward(self, src):\n"
        "        pos = torch.arange(src.shape[1])\n"
        "        pos = pos.unsqueeze(0).expand(src.shape[0], -1)\n"
        "        return self.emb(src) + self.emb(pos)\n"
        "m = M().cuda()\n"
        "m(torch.zeros(2, 7, dtype=torch.long).cuda())\n"
    )
    post = _post(vgpu_run(tmp_path / "pos.py"))
    # ops propagate the site: the CPU index is `pos` after unsqueeze, expand and a reshape
    assert (
        "  the cpu tensor `index` (shape [14]) was created at pos.py:7 by torch.arange(...) "
        "without device=  (root cause)\n    -> DF101 fixes it: "
    ) in post, post
    assert "  the cuda:0 tensor `self` (shape [10, 4]) was moved to cuda:0 at pos.py:10 by " in post


@pytest.mark.slow
def test_a_plain_attribute_names_the_init_line_and_its_value(tmp_path, vgpu_run) -> None:
    (tmp_path / "attr.py").write_text(
        "import torch\n"
        "import torch.nn as nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = nn.Linear(4, 4)\n"
        "        weights = torch.ones(4)\n"
        "        self.scale = weights\n"
        "    def forward(self, x):\n"
        "        return self.lin(x) * self.scale\n"
        "device = torch.device('cuda')\n"
        "net = Net().to(device)\n"
        "net(torch.randn(2, 4, device=device))\n"
    )
    post = _post(vgpu_run(tmp_path / "attr.py"))
    assert (
        "  the cpu tensor `other` (shape [4]) is the plain tensor attribute `scale` set at "
        "attr.py:8 (Module.to() and DataParallel move parameters and buffers, not plain "
        "attributes)  (root cause)\n"
        "      its value was created at attr.py:7 by torch.ones(...) without device=\n"
        "    -> DF103 fixes it: "
    ) in post, post


@pytest.mark.slow
def test_a_checkpoint_loaded_without_map_location(tmp_path, vgpu_run) -> None:
    (tmp_path / "load.py").write_text(
        "import torch\n"
        "torch.save({'w': torch.randn(3, 3)}, 'w.pt')\n"
        "lin = torch.nn.Linear(3, 3).cuda()\n"
        "state = torch.load('w.pt')\n"
        "y = lin(torch.randn(2, 3).cuda()) @ state['w']\n"
    )
    post = _post(vgpu_run(tmp_path / "load.py"))
    assert (
        "  the cpu tensor `mat2` (shape [3, 3]) was loaded onto cpu at load.py:4 by "
        "torch.load(...) without map_location=  (root cause)\n    -> DF302 fixes it: "
    ) in post, post


@pytest.mark.slow
def test_a_batch_from_a_collate_function_in_another_file(tmp_path, vgpu_run) -> None:
    (tmp_path / "batching.py").write_text(
        "import torch\n"
        "def collate(rows):\n"
        "    return torch.stack([torch.as_tensor(r, dtype=torch.float32) for r in rows])\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "from batching import collate\n"
        "model = torch.nn.Linear(4, 2).cuda()\n"
        "loader = DataLoader([[1.0, 2.0, 3.0, 4.0]] * 8, batch_size=4, collate_fn=collate)\n"
        "for xb in loader:\n"
        "    out = model(xb)\n"
    )
    post = _post(vgpu_run(tmp_path / "train.py"))
    assert (
        "  the cpu tensor `mat1` (shape [4, 4]) is a DataLoader batch read at train.py:6 and "
        "never moved  (root cause)\n"
        "      its value was created at batching.py:3 by torch.as_tensor(...) without device=\n"
    ) in post, post
    assert "    -> DF204 fixes it: Add `xb = xb.cuda()` at the head of the loop" in post


@pytest.mark.slow
def test_a_dataparallel_replica_names_the_broadcast(vgpu_run) -> None:
    post = _post(vgpu_run("dp_before.py"))
    assert (
        "  the cuda:1 tensor `self` (shape [4, 4]) was moved to cuda:1 at dp_before.py:16 by "
        "nn.DataParallel (DataParallel.forward)\n"
    ) in post, post
    assert (
        "  the cuda:0 tensor `other` (shape [4]) was created at dp_before.py:11 by "
        "torch.ones(...)  (root cause)\n    -> DF102 fixes it: "
    ) in post, post


@pytest.mark.slow
def test_numpy_of_a_gpu_tensor_points_at_the_failing_line(tmp_path, vgpu_run) -> None:
    (tmp_path / "npy.py").write_text(
        "import torch\nx = torch.randn(3).cuda()\ny = (x * 2).numpy()\n"
    )
    post = _post(vgpu_run(tmp_path / "npy.py"))
    assert "  the cuda:0 tensor `self` (shape [3]) was moved to cuda:0 at npy.py:2 by " in post
    assert "(root cause)" not in post
    assert "the fix is at the failing line (`.detach().cpu()`)" in post


@pytest.mark.slow
def test_an_rnn_hidden_state_torch_rejects_is_found_among_the_locals(tmp_path, vgpu_run) -> None:
    """torch's own RNN check raises this error, not the runtime: the operands are the failing
    frame's local tensors on the devices the error names."""
    (tmp_path / "rnn.py").write_text(
        "import torch\n"
        "lstm = torch.nn.LSTM(4, 8, batch_first=True).cuda()\n"
        "x = torch.randn(2, 5, 4).cuda()\n"
        "h0 = torch.zeros(1, 2, 8)\n"
        "c0 = torch.zeros(1, 2, 8)\n"
        "out, _ = lstm(x, (h0, c0))\n"
    )
    post = _post(vgpu_run(tmp_path / "rnn.py"))
    assert "  the cuda:0 tensor `x` (shape [2, 5, 4]) was moved to cuda:0 at rnn.py:3 by " in post
    assert (
        "  the cpu tensor `h0` (shape [1, 2, 8]) was created at rnn.py:4 by torch.zeros(...) "
        "without device=  (root cause)\n"
    ) in post, post


@pytest.mark.slow
def test_indices_on_another_gpu_are_the_root(tmp_path, vgpu_run) -> None:
    (tmp_path / "idx.py").write_text(
        "import torch\n"
        "table = torch.randn(10, 4).cuda()\n"
        "ids = torch.tensor([1, 2]).to('cuda:1')\n"
        "print(table[ids])\n"
    )
    post = _post(vgpu_run(tmp_path / "idx.py"))
    # the error text says "on cpu or on the same device": the devices are the operands'
    assert "  devices involved: cuda:0, cuda:1\n" in post, post
    assert (
        "  the cuda:1 tensor `indices[0]` (shape [2]) was moved to cuda:1 at idx.py:3 by "
        "torch.tensor([1, 2]).to('cuda:1')  (root cause)\n"
    ) in post, post


@pytest.mark.slow
def test_an_uncovered_site_gets_a_suggested_edit(tmp_path, vgpu_run) -> None:
    """A CPU factory in a helper that no rule flags, its result used without a name: the run
    gives no name to fix it with, and the suggestion is marked as not a devfix rule. With a
    name for it, the diagnosis shows the fix made from the run instead."""
    source = (
        "import torch\n"
        "def make(n):\n"
        "    return torch.zeros(n)\n"
        "a = torch.ones(3).cuda()\n"
        "print(a + make(3))\n"
    )
    (tmp_path / "free.py").write_text(source)
    post = _post(vgpu_run(tmp_path / "free.py"))
    assert (
        "  the cpu tensor `other` (shape [3]) was created at free.py:3 by torch.zeros(...)" in post
    )
    assert (
        "-> no devfix rule covers this line; suggested edit (not a devfix rule): create it "
        'on the other operand\'s device ("cuda:0"):\n'
        '         return torch.zeros(n, device="cuda:0")\n'
    ) in post, post
    (tmp_path / "free.py").write_text(
        source.replace("print(a + make(3))", "b = make(3)\nprint(a + b)")
    )
    post = _post(vgpu_run(tmp_path / "free.py"))
    assert (
        "-> no devfix rule covers this line; fix from the run (`devfix verify --fix` applies "
        "it) at free.py:6: .to(a.device)\n"
        "         print(a + b.to(a.device))\n"
    ) in post, post


@pytest.mark.slow
def test_runtime_off_switch_leaves_the_old_report(tmp_path) -> None:
    script = tmp_path / "s.py"
    script.write_text("import torch\ntorch.ones(2, device='cuda:0') + torch.ones(2)\n")
    r = subprocess.run(
        [sys.executable, "-m", "devfix.vgpu", str(script)],
        capture_output=True,
        text=True,
        env=child_env({"DEVFIX_VGPU_PROVENANCE": "0"}),
        cwd=tmp_path,
        timeout=300,
    )
    post = _post(r)
    assert "devices involved: cuda:0, cpu" in post and "the cpu tensor" not in post


@pytest.mark.slow
def test_verify_format_json(tmp_path) -> None:
    (tmp_path / "s.py").write_text(
        "import torch\nprint('hello')\nw = torch.ones(2)\ntorch.ones(2, device='cuda:0') + w\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "devfix", "verify", "--format", "json", "s.py"],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 1
    assert "hello" in r.stderr  # the script's stdout does not corrupt the JSON
    result = json.loads(r.stdout)
    assert result["exit_code"] == 1 and result["script"] == "s.py"
    diagnosis = result["diagnosis"]
    assert diagnosis["raised_at"] == {
        "path": "s.py",
        "line": 4,
        "source": diagnosis["raised_at"]["source"],
    }
    assert diagnosis["devices"] == ["cuda:0", "cpu"]
    root = [o for o in diagnosis["operands"] if o["root"]]
    assert len(root) == 1
    assert root[0]["device"] == "cpu" and root[0]["shape"] == [2]
    assert root[0]["site"]["path"] == "s.py" and root[0]["site"]["line"] == 3
    assert root[0]["site"]["kind"] == "created" and root[0]["placed_at"] == "s.py:3"


# --------------------------------------------------------------------------------------------
# Reading a site back in the source (no torch).


def _site(
    path: Path, line: int, kind: int, op: str = "aten::empty", parent: Site | None = None
) -> Site:
    return Site(0, str(path), line, "f", op, kind, parent, None)


def test_describe_and_suggest_for_each_kind(tmp_path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "pos = torch.arange(n, dtype=torch.long)\n"
        "x = y.to('cuda:1')\n"
        "state = torch.load(path)\n"
        "self.mask = torch.ones(3)\n"
        "for xb, yb in loader:\n"
        "    pass\n"
    )
    created = _site(src, 1, CREATED)
    assert describe(created, "cpu", "m.py:1") == (
        "was created at m.py:1 by torch.arange(...) without device="
    )
    assert suggest(created, "cpu", "x.device") is not None
    assert suggest(created, "cpu", "x.device").text == (  # type: ignore[union-attr]
        "pos = torch.arange(n, dtype=torch.long, device=x.device)"
    )
    moved = _site(src, 2, MOVED, "aten::_to_copy")
    assert describe(moved, "cuda:1", "m.py:2") == "was moved to cuda:1 at m.py:2 by y.to(...)"
    assert suggest(moved, "cuda:1", "z.device").text == "x = y.to(z.device)"  # type: ignore[union-attr]
    loaded = _site(src, 3, LOADED, "torch.load")
    assert describe(loaded, "cpu", "m.py:3").endswith("by torch.load(...) without map_location=")
    assert suggest(loaded, "cpu", '"cuda:0"').text == (  # type: ignore[union-attr]
        'state = torch.load(path, map_location="cuda:0")'
    )
    attribute = _site(src, 4, ATTRIBUTE, "Net.mask")
    assert suggest(attribute, "cpu", '"cuda:0"').text == (  # type: ignore[union-attr]
        'self.register_buffer("mask", torch.ones(3))'
    )
    batch = _site(src, 5, BATCH, "DataLoader")
    suggestion = suggest(batch, "cpu", '"cuda:0"')
    assert suggestion is not None
    assert suggestion.text == 'xb, yb = xb.to("cuda:0"), yb.to("cuda:0")'
    assert suggestion.to_json()["rule"] is None
