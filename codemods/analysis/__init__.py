"""The one place for facts about a file; every pass asks here and keeps no tables of its own.

Layers, each built on first use and kept for the file (`FileFacts.of(context)`):

- `torch_names`: the one table of PyTorch names (factories, dtypes, layers, losses, loaders...).
- `names`: qualified names and the top-level import table (how the file spells `torch.nn`).
- `scopes`: the scope walker, bound/read names, per-scope binding tables. The scoping rules
  they follow (which nodes open a scope, which names a node binds) are the engine's
  (`devfix/scopes.py`, asked in its coarse view: which function's code a node is); a pass that
  needs another view asks the engine, never writes its own rules.
- `modules`: `nn.Module`/Dataset classes, their layers and submodules, model-code functions.
- `moves`: `.to`/`.cuda` moves, device values and the names that hold a device, and whether
  an expression can be written at a node (`visible_at`).
- `flow`: the script around the model, one module per concept (`flow/`): model placement,
  DataLoader and batch-loop plans, data functions, process and GPU topology (with the default
  device `torch.set_default_device` sets), training objects and the script's role, model calls
  and token ids, checkpoints.
- `devices`: device inference, a small symbolic value with its evidence (CPU, ParamsOf, SameAs,
  Named, Literal, Current, OneOf, Unknown).
- `cpu_only`: the arguments that must stay on the CPU (`pack_padded_sequence`'s lengths,
  sampler weights, `.numpy()` receivers), which every move of batches or labels leaves alone,
  and where a tensor handed to one is (host, device, or a tensor its callers place).

A fact only one rule needs lives with that rule (`codemods/<rule>/facts.py`, reached as
`self.facts.own(TheirAnalysis)`): DF102's one-device script, DF103's tensor attributes, DF104's
submodule containers, DF106's aligned loss targets, DF205's metrics, DF206's held values,
DF301's optimizer state and statement reordering, DF304's script device, DF305's sharded model,
DF306's model copies (EMA), DF307's generators, DF308's AMP objects, DF401's output.

Analyses take the file's `FileFacts` (never a pass; `base.Analysis`) and hold it and the context
through weak proxies: the context keeps the facts in `context.shared`, and the facts keep the
analyses, so a file's tree is freed by reference counting alone.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar, overload

from devfix.codemods.analysis.cpu_only import CpuOnlyArguments
from devfix.codemods.analysis.devices import DeviceInference
from devfix.codemods.analysis.flow import ScriptFlow
from devfix.codemods.analysis.modules import ModuleFacts
from devfix.codemods.analysis.moves import Moves
from devfix.codemods.analysis.names import Names
from devfix.codemods.analysis.scopes import Scopes
from devfix.context import FileContext

_KEY = "analysis"
_A = TypeVar("_A")


class _BuiltOnFirstUse(Generic[_A]):
    """A `FileFacts` attribute whose analysis is built when a pass first reads it, then kept
    as the instance's own attribute (this descriptor defines no `__set__`, so the instance's
    attribute is found first: every later read is a plain attribute read)."""

    def __init__(self, build: Callable[[FileFacts], _A]) -> None:
        self.build = build
        self.name = ""

    def __set_name__(self, owner: type[FileFacts], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, facts: None, owner: type[FileFacts]) -> _BuiltOnFirstUse[_A]: ...

    @overload
    def __get__(self, facts: FileFacts, owner: type[FileFacts] | None = None) -> _A: ...

    def __get__(
        self, facts: FileFacts | None, owner: type[FileFacts] | None = None
    ) -> _A | _BuiltOnFirstUse[_A]:
        if facts is None:  # read on the class (help(), inspect): the descriptor itself
            return self
        built = self.build(facts)
        facts.__dict__[self.name] = built
        return built


class FileFacts:
    """Every analysis of one file, each created when a pass first asks for it."""

    modules = _BuiltOnFirstUse(ModuleFacts)
    moves = _BuiltOnFirstUse(Moves)
    flow = _BuiltOnFirstUse(ScriptFlow)
    devices = _BuiltOnFirstUse(DeviceInference)
    cpu_only = _BuiltOnFirstUse(CpuOnlyArguments)

    def __init__(self, context: FileContext) -> None:
        proxy: FileContext = weakref.proxy(context)
        self.context = proxy
        self.names = Names(proxy)
        self.scopes = Scopes(proxy)

    def own(self, analysis: Callable[[FileFacts], _A]) -> _A:
        """A rule's private facts (`codemods/<rule>/facts.py`), built on first use and kept for
        the file like the shared ones: what one rule alone needs stays with that rule."""
        key = f"own:{analysis.__module__}.{getattr(analysis, '__qualname__', '')}"
        built = self.__dict__.get(key)
        if built is None:
            built = analysis(self)
            self.__dict__[key] = built
        return built

    @classmethod
    def of(cls, context: FileContext) -> FileFacts:
        facts = context.shared.get(_KEY)
        if not isinstance(facts, FileFacts):
            facts = cls(context)
            context.shared[_KEY] = facts
        return facts
