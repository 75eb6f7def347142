"""Code devfix generates looks like the file's own: ruff finds nothing on a rewritten golden that
it did not find on the original (imports in their sorted block, lines within the line length)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.golden_cases import GOLDEN, ROOT

pytestmark = pytest.mark.slow

RUFF = [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "E,W,F,I"]
#: The goldens live in this repository, whose pyproject.toml sets ruff's line length.
LINE_LENGTH = "100"


def _issues(path: Path, line_length: str = LINE_LENGTH) -> Counter[str]:
    completed = subprocess.run(
        [*RUFF, "--line-length", line_length, "--output-format", "json", str(path)],
        capture_output=True,
        text=True,
    )
    return Counter(item["code"] for item in json.loads(completed.stdout))


PAIRS = sorted(
    (before, before.with_name(before.name.replace(".before.py", ".after.py")))
    for before in GOLDEN.glob("*/*.before.py")
)


@pytest.mark.parametrize("before, after", PAIRS, ids=[p[0].stem for p in PAIRS])
def test_rewrite_adds_no_lint(before: Path, after: Path) -> None:
    added = _issues(after) - _issues(before)
    assert not added, f"{after.relative_to(ROOT)}: {dict(added)}"


def test_imports_land_in_their_block_with_the_default_line_length(tmp_path: Path) -> None:
    source = (
        '"""Training."""\n'
        "import argparse\n\nimport numpy as np\nimport torch\nfrom torch import nn\n\n"
        'model = nn.Linear(2, 2).to("cuda:0")\n'
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x in np.split(np.ones((4, 2), dtype=np.float32), 2):\n"
        '    model(torch.from_numpy(x).to("cuda:0")).sum().backward()\n'
        "    opt.step()\n"
    )
    path = tmp_path / "train.py"
    path.write_text(source)
    subprocess.run([sys.executable, "-m", "devfix", "apply", str(path)], capture_output=True)
    text = path.read_text()
    assert text.startswith('"""Training."""\nimport argparse\nimport os\n\nimport numpy as np\n')
    shutil.copy(path, tmp_path / "after.py")
    path.write_text(source)
    assert not _issues(tmp_path / "after.py", "88") - _issues(path, "88")
