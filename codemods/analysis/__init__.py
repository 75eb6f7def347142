"""The one place for facts about a file; every pass asks here and keeps no tables of its own.

Layers, each built on first use and kept for the file (`FileFacts.of(context)`):

- `torch_names`: the one table of PyTorch names (factories, dtypes, layers, losses, loaders...).
- `names`: qualified names and the top-level import table (how the file spells `torch.nn`).
- `scopes`: the one scope walker, bound/read names, per-scope binding tables.
- `modules`: `nn.Module`/Dataset classes, their layers and submodules, model-code functions.
- `moves`: `.to`/`.cuda` moves, device values and the names that hold a device.
- `flow`: the script around the model: model moves, DataLoader loops, data pipelines,
  multi-process markers.
- `buffers`: plain tensor attributes of a module, the caches among them, and what would make
  `register_buffer` fail.
- `script_device`: the CUDA device a training script hard-codes, the variable that holds its
  device, and where that choice is the script's own.
- `values`: what a name holds where it is used: a tensor, or an object whose `.to()` works in
  place (a module, a `BatchEncoding`), with the evidence.
- `devices`: device inference, a small symbolic value with its evidence (CPU, ParamsOf, SameAs,
  Named, Literal, Current, OneOf, Unknown).
- `submodules`: plain containers of submodules (their contents and keys) and layers built in
  `forward` (where they could be built once).
- `reorder`: moving statements of one block past a later one: what must move along, what
  stops it, where the moved statements go.
- `companions`: objects that live beside the model and do not follow `model.to()`: metric
  modules, model copies (EMA), generators and the default device, AMP objects.

Analyses take the file's context (never a pass) and hold it through a weak proxy: the context
keeps them in `context.shared`, so a file's tree is freed by reference counting alone.
"""

from __future__ import annotations

import weakref

from devfix.codemods.analysis.buffers import Buffers
from devfix.codemods.analysis.companions import Companions
from devfix.codemods.analysis.devices import DeviceInference
from devfix.codemods.analysis.flow import ScriptFlow
from devfix.codemods.analysis.modules import ModuleFacts
from devfix.codemods.analysis.moves import Moves
from devfix.codemods.analysis.names import Names
from devfix.codemods.analysis.reorder import Reordering
from devfix.codemods.analysis.scopes import Scopes
from devfix.codemods.analysis.script_device import ScriptDevice
from devfix.codemods.analysis.submodules import Submodules
from devfix.codemods.analysis.values import HeldValues
from devfix.context import FileContext

_KEY = "analysis"


class FileFacts:
    """Every analysis of one file, each created when a pass first asks for it."""

    def __init__(self, context: FileContext) -> None:
        proxy: FileContext = weakref.proxy(context)
        self.context = proxy
        self.names = Names(proxy)
        self.scopes = Scopes(proxy)
        self._modules: ModuleFacts | None = None
        self._moves: Moves | None = None
        self._flow: ScriptFlow | None = None
        self._devices: DeviceInference | None = None
        self._values: HeldValues | None = None
        self._companions: Companions | None = None
        self._submodules: Submodules | None = None
        self._buffers: Buffers | None = None
        self._script_device: ScriptDevice | None = None
        self._reorder: Reordering | None = None

    @classmethod
    def of(cls, context: FileContext) -> FileFacts:
        facts = context.shared.get(_KEY)
        if not isinstance(facts, FileFacts):
            facts = cls(context)
            context.shared[_KEY] = facts
        return facts

    @property
    def modules(self) -> ModuleFacts:
        if self._modules is None:
            self._modules = ModuleFacts(self.context, self.names, self.scopes)
        return self._modules

    @property
    def moves(self) -> Moves:
        if self._moves is None:
            self._moves = Moves(self.context, self.names, self.scopes)
        return self._moves

    @property
    def flow(self) -> ScriptFlow:
        if self._flow is None:
            self._flow = ScriptFlow(self.context, self.names, self.scopes, self.moves, self.modules)
        return self._flow

    @property
    def devices(self) -> DeviceInference:
        if self._devices is None:
            self._devices = DeviceInference(
                self.context, self.names, self.scopes, self.modules, self.moves, self.flow
            )
        return self._devices

    @property
    def values(self) -> HeldValues:
        if self._values is None:
            self._values = HeldValues(self.context, self.names, self.scopes, self.modules)
        return self._values

    @property
    def reorder(self) -> Reordering:
        if self._reorder is None:
            self._reorder = Reordering(self.context, self.scopes)
        return self._reorder

    @property
    def submodules(self) -> Submodules:
        if self._submodules is None:
            self._submodules = Submodules(self.context, self.names, self.scopes, self.modules)
        return self._submodules

    @property
    def companions(self) -> Companions:
        if self._companions is None:
            self._companions = Companions(
                self.context,
                self.names,
                self.scopes,
                self.modules,
                self.moves,
                self.flow,
                self.devices,
            )
        return self._companions

    @property
    def buffers(self) -> Buffers:
        if self._buffers is None:
            self._buffers = Buffers(self.context, self.scopes, self.modules)
        return self._buffers

    @property
    def script_device(self) -> ScriptDevice:
        if self._script_device is None:
            self._script_device = ScriptDevice(
                self.context, self.scopes, self.modules, self.moves, self.flow
            )
        return self._script_device
