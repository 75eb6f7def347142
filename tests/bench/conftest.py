"""The bench scripts are not a package: load them by path, once per test session."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def realworld() -> ModuleType:
    return _load("bench_realworld", BENCH / "realworld.py")


@pytest.fixture(scope="session")
def recreate() -> ModuleType:
    return _load("bench_realworld_recreate", BENCH / "realworld" / "recreate.py")


@pytest.fixture(scope="session")
def realworld_verify() -> ModuleType:
    return _load("bench_realworld_verify", BENCH / "realworld_verify.py")


@pytest.fixture(scope="session")
def pass_sizes() -> ModuleType:
    return _load("bench_pass_sizes", BENCH / "pass_sizes.py")
