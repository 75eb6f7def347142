"""The torch release a project declares, which rules read as `torch_version` (DF304 picks
PyTorch's own `torch.accelerator` selection from 2.6 on, a helper before)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from devfix.config import declared_torch, load_config, torch_near
from devfix.settings import Settings, installed_torch
from devfix.types import Options

SCRIPT = """import torch

model = torch.nn.Linear(2, 2).to("cuda:0")
for x in range(2):
    model(torch.ones(2, device="cuda:0")).sum().backward()
"""


@pytest.mark.parametrize(
    ("requirement", "lowest"),
    [
        ("torch==2.4.1", "2.4.1"),
        ("torch>=2.1,<2.6", "2.1"),
        ("torch<2.6,>=2.1", "2.1"),
        ("torch[opt] ~= 2.7", "2.7"),
        ('torch >= 2.6 ; python_version >= "3.9"', "2.6"),
        ("torch<3", None),
        ("torchvision>=0.20", None),
        ("  # torch==2.1", None),
    ],
)
def test_the_lowest_release_a_requirement_allows(
    tmp_path: Path, requirement: str, lowest: str | None
) -> None:
    assert declared_torch(tmp_path, {"project": {"dependencies": [requirement]}}) == lowest
    (tmp_path / "requirements.txt").write_text(f"numpy\n{requirement}\n")
    assert declared_torch(tmp_path, None) == lowest


def test_pyproject_dependencies_then_requirements_then_the_installed_torch(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "p"\ndependencies = ["torch>=2.2"]\n'
    )
    assert load_config(project / "pyproject.toml").torch_version == "2.2"
    (project / "pyproject.toml").write_text('[project]\nname = "p"\n')
    (project / "requirements.txt").write_text("torch==2.8.0\n")
    assert load_config(project / "pyproject.toml").torch_version == "2.8.0"
    assert torch_near(project / "src") == "2.8.0"
    settings = Settings.resolve(Options(select=("DF304",)))
    assert settings.pass_options["DF304"]["torch_version"] == installed_torch()
    # A version set in the rule's own options wins.
    chosen = Options(select=("DF304",), pass_options={"DF304": {"torch_version": "2.4"}})
    assert Settings.resolve(chosen).pass_options["DF304"]["torch_version"] == "2.4"


@pytest.mark.slow  # runs devfix
@pytest.mark.parametrize(
    ("declared", "selection"),
    [
        ('[project]\nname = "p"\ndependencies = ["torch>=2.1,<2.6"]\n', "def select_device()"),
        ('[project]\nname = "p"\ndependencies = ["torch>=2.6"]\n', "torch.accelerator"),
    ],
)
def test_apply_writes_the_selection_the_projects_torch_has(
    tmp_path: Path, declared: str, selection: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(declared)
    (tmp_path / "train.py").write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, "-m", "devfix", "apply", "--diff", "train.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert selection in done.stdout
    other = "torch.accelerator" if selection.startswith("def") else "def select_device()"
    assert other not in done.stdout
