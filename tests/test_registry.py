"""Pass discovery: one pass per public module or per public package of `codemods/`."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from devfix.registry import all_passes, discover

PASS = '''
from devfix.codemods._base import DevicePass
from devfix.types import Applicability


class {name}(DevicePass):
    """{name}."""

    CODE = "{code}"
    NAME = "{kebab}"
    MESSAGE = "m"
    FIX_TITLE = "f"
    APPLICABILITY = Applicability.SAFE
'''


@pytest.fixture
def package(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "fakepasses"
    root.mkdir()
    (root / "__init__.py").write_text("")
    sys.path.insert(0, str(tmp_path))
    yield root
    sys.path.remove(str(tmp_path))
    for name in [m for m in sys.modules if m == "fakepasses" or m.startswith("fakepasses.")]:
        del sys.modules[name]


def _write(path: Path, text: str) -> None:
    path.write_text(textwrap.dedent(text))


def test_a_module_and_a_package_each_define_one_pass(package: Path) -> None:
    _write(package / "one_module.py", PASS.format(name="OneModule", code="DF901", kebab="one"))
    (package / "a_package").mkdir()
    _write(
        package / "a_package" / "__init__.py",
        "from fakepasses.a_package import planner\n"
        + PASS.format(name="APackage", code="DF902", kebab="two"),
    )
    # The package's own modules are its parts, not passes (this one imports the base class).
    _write(package / "a_package" / "planner.py", "from devfix.codemods._base import DevicePass\n")
    _write(package / "_helper.py", "X = 1\n")
    found = discover(importlib.import_module("fakepasses"))
    assert [cls.CODE for cls in found] == ["DF901", "DF902"]
    assert found[1].__module__ == "fakepasses.a_package"


def test_a_package_without_its_pass_in_init_is_an_error(package: Path) -> None:
    (package / "broken").mkdir()
    _write(package / "broken" / "__init__.py", "")
    _write(package / "broken" / "the_pass.py", PASS.format(name="B", code="DF903", kebab="b"))
    with pytest.raises(RuntimeError, match=r"fakepasses\.broken\.__init__ must define exactly one"):
        discover(importlib.import_module("fakepasses"))


def test_data_parallel_is_a_package_pass() -> None:
    (dp,) = [cls for cls in all_passes() if cls.CODE == "DF401"]
    assert dp.__module__ == "devfix.codemods.data_parallel"
    assert Path(sys.modules[dp.__module__].__file__ or "").name == "__init__.py"


def test_the_engine_loads_no_rule_until_the_rules_are_asked_for() -> None:
    import subprocess

    probe = (
        "import sys, devfix.settings, devfix.rule\n"
        "before = sorted(m for m in sys.modules if m.startswith('devfix.codemods'))\n"
        "from devfix.registry import all_passes\n"
        "all_passes()\n"
        "print(before, any(m.startswith('devfix.codemods.') for m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[] True"


def test_a_rule_need_not_use_the_device_analysis(package: Path) -> None:
    # The engine's base is enough: a rule that reads only the tree is discovered as any other.
    _write(
        package / "plain_rule.py",
        PASS.format(name="PlainRule", code="DF903", kebab="plain")
        .replace("from devfix.codemods._base import DevicePass", "from devfix.rule import Rule")
        .replace("(DevicePass)", "(Rule)"),
    )
    found = discover(importlib.import_module("fakepasses"))
    assert [cls.CODE for cls in found] == ["DF903"]
