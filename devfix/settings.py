"""What a run was asked for, resolved once: the passes to run, their options, the fix policy.

The command line (or a library caller) describes a run with :class:`devfix.types.Options`;
:meth:`Settings.resolve` turns it into the passes it selects (selectors are checked here, once)
and the one rule for which fixes are written. Everything below the command line reads a
:class:`Settings`, never the raw selectors or the `unsafe_fixes` flag.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from importlib import metadata
from typing import TYPE_CHECKING, Any, Union

from devfix.registry import select_passes
from devfix.types import Applicability, Finding, Fixability, Options, RunOptions

if TYPE_CHECKING:
    from devfix.rule import Rule


@dataclass(frozen=True)
class Settings(RunOptions):
    """A run's resolved options; plain data, so it crosses process boundaries. The options of
    `RunOptions` are the user's as given."""

    #: The selected passes, sorted by code (a default only because the inherited fields have
    #: one: `resolve` always selects).
    passes: tuple[type[Rule], ...] = ()
    #: Write (and count as fixable) the fixes marked unsafe too.
    unsafe_fixes: bool = False
    #: Pass code -> keyword options for that pass's constructor.
    pass_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def resolve(cls, options: Options | Settings | None = None) -> Settings:
        """The settings for `options`; raises UnknownRuleError for an unknown selector."""
        if isinstance(options, Settings):
            return options
        options = options or Options()
        if options.jobs < 0:
            raise ValueError(f"jobs must be 0 (one per core) or more, not {options.jobs}")
        as_asked = {run.name: getattr(options, run.name) for run in fields(RunOptions)}
        passes = select_passes(options.select, options.ignore)
        return cls(
            passes=passes,
            unsafe_fixes=options.unsafe_fixes,
            pass_options=_with_torch_version(
                options.pass_options, passes, options.torch_version or installed_torch()
            ),
            **as_asked,
        )

    def only(self, pass_class: type[Rule]) -> Settings:
        """The same run with one pass (one commit per rule)."""
        return replace(self, passes=(pass_class,))

    @property
    def workers(self) -> int:
        """Worker processes for the run: `--jobs`, at most one per core this process may use
        (more only share the cores and cost memory)."""
        return min(self.jobs or usable_cores(), usable_cores())

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(pass_class.CODE for pass_class in self.passes)

    def fixability(self, finding: Finding) -> Fixability:
        """Whether this run writes the finding's fix, would with `--unsafe-fixes`, or has none."""
        return self.fixability_of(finding.has_fix, finding.applicability)

    def fixability_of(self, has_fix: bool, applicability: Applicability) -> Fixability:
        """:meth:`fixability` for a finding known only by whether it has a fix and its level
        (a finding read back from JSON, as `verify --fix` gets them from the script's run)."""
        if not has_fix or applicability is Applicability.DISPLAY_ONLY:
            return Fixability.NO_FIX
        if applicability is Applicability.UNSAFE and not self.unsafe_fixes:
            return Fixability.NEEDS_UNSAFE
        return Fixability.FIXABLE

    def writes(self, finding: Finding) -> bool:
        """Whether `apply` with these settings writes the finding's fix."""
        return self.fixability(finding) is Fixability.FIXABLE


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(len(os.sched_getaffinity(0)), 1)
    return os.cpu_count() or 1  # pragma: no cover - macOS and Windows


#: What the engine's entry points accept: a caller's Options, or Settings already resolved.
OptionsLike = Union[Options, Settings, None]


@functools.cache
def installed_torch() -> str | None:
    """The version of the torch this Python would import (read from its metadata, not by
    importing it), None without one."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def _with_torch_version(
    asked: Mapping[str, Mapping[str, Any]],
    passes: tuple[type[Rule], ...],
    version: str | None,
) -> Mapping[str, Mapping[str, Any]]:
    """The passes' options, with the project's torch version handed to every pass whose
    constructor takes `torch_version` and whose options do not set it already."""
    if version is None:
        return asked
    merged = {code: dict(values) for code, values in asked.items()}
    for pass_class in passes:
        if _takes_torch_version(pass_class):
            merged.setdefault(pass_class.CODE, {}).setdefault("torch_version", version)
    return merged


@functools.cache
def _takes_torch_version(pass_class: type[Rule]) -> bool:
    parameter = inspect.signature(pass_class).parameters.get("torch_version")
    return parameter is not None and parameter.kind is inspect.Parameter.KEYWORD_ONLY
