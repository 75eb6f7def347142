"""Finds the rules in `devfix.codemods` and resolves `--select` / `--ignore`.

`devfix.codemods` is imported only when the rules are first asked for: the engine's own modules
(settings, the CLI's option parsing) load no rule and no analysis."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Iterable
from types import ModuleType

from devfix.errors import UnknownRuleError
from devfix.rule import Rule

#: Subpackages of `devfix.codemods` that are shared layers, not passes.
SHARED_PACKAGES = frozenset({"analysis"})


@functools.cache
def all_passes() -> tuple[type[Rule], ...]:
    """Every pass class, sorted by code."""
    import devfix.codemods as package

    return discover(package)


def discover(package: ModuleType) -> tuple[type[Rule], ...]:
    """The passes of `package`, sorted by code: one per public module, or per public
    subpackage whose `__init__` defines the pass (its own modules are its parts: planners,
    helpers). Names starting with `_` and the `analysis` layer hold what passes share."""
    found: list[type[Rule]] = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_") or info.name in SHARED_PACKAGES:
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        classes = [
            value
            for value in vars(module).values()
            if isinstance(value, type)
            and issubclass(value, Rule)
            and value.__module__ == module.__name__
        ]
        if len(classes) != 1:
            where = f"{module.__name__}.__init__" if info.ispkg else module.__name__
            raise RuntimeError(f"{where} must define exactly one pass, found {len(classes)}")
        found.extend(classes)
    return tuple(sorted(found, key=lambda cls: cls.CODE))


def _matches(pass_class: type[Rule], selector: str) -> bool:
    selector = selector.strip()
    return (
        pass_class.CODE.upper().startswith(selector.upper())
        or selector.lower() == pass_class.NAME
        or selector.upper() == "ALL"
    )


def _check_known(selectors: Iterable[str]) -> None:
    for selector in selectors:
        if not any(_matches(cls, selector) for cls in all_passes()):
            raise UnknownRuleError(f"unknown rule selector {selector!r} (see `devfix rules`)")


def select_passes(select: Iterable[str] = (), ignore: Iterable[str] = ()) -> tuple[type[Rule], ...]:
    """Passes chosen by code, code prefix or kebab name; nothing selected means all."""
    select, ignore = tuple(select), tuple(ignore)
    _check_known(select)
    _check_known(ignore)
    chosen = [
        cls
        for cls in all_passes()
        if (not select or any(_matches(cls, s) for s in select))
        and not any(_matches(cls, s) for s in ignore)
    ]
    return tuple(chosen)


def find_pass(selector: str) -> type[Rule]:
    """The one pass with this code or name."""
    for cls in all_passes():
        if cls.CODE.upper() == selector.upper() or selector.lower() == cls.NAME:
            return cls
    raise UnknownRuleError(f"unknown rule {selector!r} (see `devfix rules`)")
