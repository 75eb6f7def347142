"""Configuration: `[tool.devfix]` in pyproject.toml, or a devfix.toml, merged under CLI flags.

Keys (kebab-case): `select`, `extend-select`, `ignore`, `exclude`, `extend-exclude`,
`unsafe-fixes`, `cache`, and one table per pass, named by its code or name, holding that pass's
options (`[tool.devfix.data-parallel] keep-per-process-batch = true`). An unknown key is an
error that names it.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from devfix.errors import DevfixError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

_LIST_KEYS = ("select", "extend-select", "ignore", "exclude", "extend-exclude")
_BOOL_KEYS = ("unsafe-fixes", "cache")


class ConfigError(DevfixError):
    """The configuration file is unreadable or holds a key or value devfix does not know."""


@dataclass(frozen=True)
class Config:
    """What a configuration file says; every field None/empty when it says nothing."""

    path: Path | None = None
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] | None = None
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    unsafe_fixes: bool | None = None
    cache: bool | None = None
    #: Pass code -> {python_parameter_name: value}.
    pass_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: The lowest torch release the project allows (its pyproject.toml dependencies or its
    #: requirements.txt), None when it declares none.
    torch_version: str | None = None

    @property
    def root(self) -> Path:
        return self.path.parent if self.path is not None else Path.cwd()


def find_config(start: Path) -> Path | None:
    """The nearest devfix.toml or pyproject.toml at or above start, whatever it holds.

    The search stops at the first folder with either (devfix.toml first), as black's does: a
    project's own pyproject.toml without [tool.devfix] means the defaults, never a parent
    folder's settings (nor an error in an unrelated parent's broken file).
    """
    directory = start.resolve()
    if directory.is_file():
        directory = directory.parent
    found = nearest_file(str(directory), ("devfix.toml", "pyproject.toml"))
    return Path(found) if found is not None else None


def nearest_file(folder: str, names: tuple[str, ...]) -> str | None:
    """The first of `names` in `folder` or the nearest folder above it that has one."""
    while True:
        for name in names:
            candidate = os.path.join(folder, name)
            if os.path.isfile(candidate):
                return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read configuration: {error.strerror}") from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path}: cannot read configuration: not valid UTF-8 (byte {error.start})"
        ) from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: cannot read configuration: {error}") from None
    except RecursionError:
        raise ConfigError(f"{path}: cannot read configuration: nested too deeply") from None


def load_config(path: Path | None) -> Config:
    """Parse and validate one configuration file (None: no configuration)."""
    if path is None:
        return Config()
    data = read_toml(path)
    if path.name == "pyproject.toml":
        tools = data.get("tool", {})
        if not isinstance(tools, dict):
            raise ConfigError(f"{path}: `tool` must be a table ([tool.NAME] sections)")
        table = tools.get("devfix", {})
    else:
        table = data
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.devfix] must be a table")
    parsed = _parse_table(path, table)
    project = data if path.name == "pyproject.toml" else None
    return replace(parsed, torch_version=declared_torch(path.parent, project))


#: `torch==2.4.1`, `torch>=2.6,<3`, `torch ~= 2.7`, `torch[opt]>=2.1`: the release a project's
#: requirement lets it go down to (an upper bound alone says nothing).
_TORCH_REQUIREMENT = re.compile(
    r"^\s*torch\s*(?:\[[^\]]*\])?\s*(?:[^;#]*?,\s*)?(?:===?|>=|~=)\s*([0-9]+(?:\.[0-9]+)*)"
)


def torch_near(start: Path) -> str | None:
    """The torch release declared by the nearest requirements.txt at or above `start` (a
    project without a pyproject.toml)."""
    directory = start.resolve()
    found = nearest_file(str(directory.parent if directory.is_file() else directory), _REQS)
    return declared_torch(Path(found).parent, None) if found is not None else None


_REQS = ("requirements.txt",)


def declared_torch(folder: Path, pyproject: Mapping[str, Any] | None) -> str | None:
    """The lowest torch release the project in `folder` allows: from `[project] dependencies`
    of its pyproject.toml (`pyproject`, already read), else from its requirements.txt."""
    lines: list[str] = []
    project = pyproject.get("project") if pyproject is not None else None
    if isinstance(project, dict) and isinstance(project.get("dependencies"), list):
        lines = [d for d in project["dependencies"] if isinstance(d, str)]
    if not any(_TORCH_REQUIREMENT.match(line) for line in lines):
        try:
            with open(folder / "requirements.txt", encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except (OSError, UnicodeDecodeError):
            return None
    for line in lines:
        found = _TORCH_REQUIREMENT.match(line)
        if found is not None:
            return found.group(1)
    return None


def _parse_table(path: Path, table: Mapping[str, Any]) -> Config:
    from devfix.registry import all_passes

    passes = {cls.CODE.upper(): cls for cls in all_passes()}
    passes.update({cls.NAME: cls for cls in all_passes()})
    values: dict[str, Any] = {}
    pass_options: dict[str, dict[str, Any]] = {}
    for key, value in table.items():
        if key in _LIST_KEYS:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{path}: `{key}` must be a list of strings")
            if key == "select" and not value:
                raise ConfigError(
                    f"{path}: `select` is empty, so it selects no rule (leave it out to run every "
                    "rule)"
                )
            values[key.replace("-", "_")] = tuple(value)
        elif key in _BOOL_KEYS:
            if not isinstance(value, bool):
                raise ConfigError(f"{path}: `{key}` must be true or false")
            values[key.replace("-", "_")] = value
        elif key.upper() in passes or key in passes:
            pass_class = passes.get(key.upper()) or passes[key]
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: `{key}` must be a table of that pass's options")
            pass_options[pass_class.CODE] = _pass_options(path, key, pass_class, value)
        else:
            raise ConfigError(f"{path}: unknown configuration key `{key}`")
    return Config(path=path, pass_options=pass_options, **values)


def _pass_options(
    path: Path, key: str, pass_class: type, value: Mapping[str, Any]
) -> dict[str, Any]:
    parameters = inspect.signature(pass_class).parameters
    accepted = {
        name: parameter
        for name, parameter in parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }
    options: dict[str, Any] = {}
    for option, option_value in value.items():
        python_name = option.replace("-", "_")
        if python_name not in accepted:
            known = ", ".join(sorted(n.replace("_", "-") for n in accepted)) or "none"
            raise ConfigError(
                f"{path}: unknown option `{option}` for `{key}` (its options: {known})"
            )
        expected = accepted[python_name].default
        if expected is not inspect.Parameter.empty and not _same_type(option_value, expected):
            raise ConfigError(
                f"{path}: option `{option}` of `{key}` must be {_type_name(expected)}, "
                f"not {option_value!r}"
            )
        options[python_name] = option_value
    return options


def _same_type(value: object, default: object) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)  # TOML's 1 is not true
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float))
    return default is None or isinstance(value, type(default))


def _type_name(default: object) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, (int, float)):
        return "a number"
    if isinstance(default, str):
        return "a string"
    return f"a {type(default).__name__}"
