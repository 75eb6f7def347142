"""The text prefilter (`DevicePass.wakes_on`) decides which files are parsed at all: it may wake
on clean code, but must never stay asleep on code its pass flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from devfix.codemods.device_in_data_pipeline import DeviceInDataPipeline
from devfix.codemods.labels_not_on_logits_device import LabelsNotOnLogitsDevice
from devfix.codemods.torch_load_without_map_location import TorchLoadWithoutMapLocation
from devfix.engine import check_source
from devfix.registry import select_passes
from devfix.types import Options

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = [
    path
    for path in sorted((REPO / "golden").rglob("*.py")) + sorted((REPO / "examples").glob("*.py"))
    if not path.name.endswith(".after.py")
]


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.relative_to(REPO).as_posix() for p in SCRIPTS])
def test_every_pass_that_reports_on_a_script_wakes_on_it(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = path.read_text(encoding="utf-8")
    woken = {cls.CODE: cls.wakes_on(text) for cls in select_passes()}
    # The findings every pass would report if the prefilter let every file through.
    for cls in select_passes():
        monkeypatch.setattr(cls, "wakes_on", classmethod(lambda _cls, _text: True))
    reported = {finding.code for finding in check_source(text, str(path), Options())}
    assert {code for code in reported if not woken[code]} == set()


def test_every_pass_sleeps_on_code_without_its_words() -> None:
    plain = "import os\n\ndef read(path):\n    with open(path) as f:\n        return f.read()\n"
    assert [cls.CODE for cls in select_passes() if cls.wakes_on(plain)] == []


def test_data_pipeline_needs_a_move_and_data_preparation() -> None:
    wakes = DeviceInDataPipeline.wakes_on
    # "device" in a file about disks: no data preparation, no `.to(`.
    assert not wakes("def mount(device):\n    return os.stat(device)\n")
    # A Hugging Face `.map` callback that moves tokenizer output, without "torch" anywhere.
    mapped = (
        "def encode(batch):\n"
        "    return tok(batch['text'], return_tensors='pt').to('cuda')\n"
        "ds = ds.map(encode)\n"
    )
    assert wakes(mapped)
    # The method name may follow the dot after a line continuation.
    assert wakes(mapped.replace("ds.map(encode)", "ds.\\\n    map(encode)"))
    assert wakes(
        "class D(torch.utils.data.Dataset):\n    def __getitem__(self, i):\n"
        "        return self.x[i].cuda()\n"
    )


def test_torch_load_wakes_on_the_word_load_only() -> None:
    wakes = TorchLoadWithoutMapLocation.wakes_on
    assert not wakes("import torch\nmodel.load_state_dict(state)\ndownload(url)\n")
    assert wakes("import torch\nstate = torch.load(path)\n")
    assert wakes("from torch import load as restore\nstate = restore(path)\n")


def test_labels_pass_needs_a_model_over_several_devices() -> None:
    wakes = LabelsNotOnLogitsDevice.wakes_on
    single = "import torch\nloss = F.cross_entropy(logits, labels)\n"
    assert not wakes(single)
    assert wakes(single + "model = AutoModel.from_pretrained(name, device_map='auto')\n")
    # A language model scored on its own inputs, its logits read by name.
    assert wakes(single.replace("(logits,", '(out["logits"],'))
