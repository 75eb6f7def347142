"""Names a file both imports and binds otherwise: resolved per scope, as libcst's scope analysis
resolves them (devfix/shadowed_names.py)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, QualifiedNameProvider, QualifiedNameSource

from devfix.context import FileContext


def _reads(source: str) -> list[tuple[int, str, set[str]]]:
    """(line, dotted name, qualified names: imports by name, anything else as "<local>") of
    every outermost dotted read in `source`."""
    from libcst.metadata import PositionProvider

    module = cst.parse_module(textwrap.dedent(source))
    context = FileContext(module, "f.py", module.code)
    lines = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    found = []
    for node in context.tables.nodes:
        parent = context.parent(node)
        if not isinstance(node, (cst.Name, cst.Attribute)) or isinstance(parent, cst.Attribute):
            continue
        if not isinstance(parent, (cst.Call, cst.Expr, cst.Arg, cst.Return, cst.Annotation)):
            continue
        names = {
            q.name if q.source is not QualifiedNameSource.LOCAL else "<local>"
            for q in context.qualified_names(node)
        }
        found.append((lines[node].start.line, module.code_for_node(node), names))
    return found


def _at(source: str, line: int, code: str) -> set[str]:
    (names,) = [names for at, read, names in _reads(source) if at == line and read == code]
    return names


def test_a_function_that_rebinds_an_imported_name_reads_its_own_binding() -> None:
    source = """\
        import copy

        def snapshot(model):
            copy = model.state_dict()
            return copy.items()

        def clone(model):
            return copy.deepcopy(model)
        """
    assert _at(source, 5, "copy.items") == {"<local>"}
    assert _at(source, 8, "copy.deepcopy") == {"copy.deepcopy"}


def test_reads_before_a_module_level_rebinding_see_only_the_import() -> None:
    source = """\
        import config
        print(config.lr)
        config = config.load()
        print(config.lr)
        """
    assert _at(source, 2, "config.lr") == {"config.lr"}
    assert _at(source, 4, "config.lr") == {"config.lr", "<local>"}


def test_an_import_with_a_fallback_gives_both_names() -> None:
    source = """\
        try:
            from apex.parallel import DistributedDataParallel as DDP
        except ImportError:
            from torch.nn.parallel import DistributedDataParallel as DDP
        DDP(model)
        """
    assert _at(source, 5, "DDP") == {
        "apex.parallel.DistributedDataParallel",
        "torch.nn.parallel.DistributedDataParallel",
    }


def test_a_class_body_binding_is_not_seen_from_its_methods() -> None:
    source = """\
        import torch

        class Net:
            torch = None

            def forward(self, x):
                return torch.relu(x)
        """
    assert _at(source, 7, "torch.relu") == {"torch.relu"}


def test_decorators_defaults_and_annotations_are_read_around_the_function() -> None:
    source = """\
        import device

        def run(device=device.default()) -> device.Kind:
            return device.index
        """
    assert _at(source, 3, "device.default") == {"device.default"}
    assert _at(source, 4, "device.index") == {"<local>"}
    source = """\
        from torch import device

        class Model:
            @property
            def device(self) -> device:
                return self.weight.device
        """
    assert _at(source, 5, "device") == {"torch.device"}


def test_a_comprehension_reads_its_first_iterable_outside_and_the_rest_inside() -> None:
    source = """\
        import data
        rows = [f(data) for data in data.rows()]
        """
    reads = {code: names for _, code, names in _reads(source)}
    assert reads["data.rows"] == {"data.rows"}
    assert reads["data"] == {"<local>"}


def test_global_and_nonlocal_send_the_name_to_their_scope() -> None:
    source = """\
        import wandb

        def setup():
            global wandb
            wandb = None

        def log(x):
            wandb.log(x)
        """
    assert _at(source, 8, "wandb.log") == {"wandb.log", "<local>"}


TRICKY = """\
import copy
import torch
import torch as t
try:
    import numpy as np
except ImportError:
    np = None

def train(model, torch=None):
    copy = model
    t.zeros(3)
    torch.ones(2)
    np.mean(copy.x)

class Model:
    copy = None

    def forward(self, x, scale=copy.copy(1)):
        return copy.deepcopy(x)

    @staticmethod
    def helper(np=np.float32):
        return [np.sum(v) for v in np.arange(3)]

lambda copy: copy.x
values = {k: copy.copy(v) for k, copy in pairs(items)}
copy = copy.copy(values)
copy.move()
"""


@pytest.mark.parametrize("source", [TRICKY])
def test_same_names_as_libcst_scope_analysis(source: str) -> None:
    module = cst.parse_module(source)
    context = FileContext(module, "f.py", source)
    libcst_names = MetadataWrapper(module, unsafe_skip_copy=True).resolve(QualifiedNameProvider)

    def shown(names: object) -> set[str]:
        return {
            q.name if q.source is not QualifiedNameSource.LOCAL else "<local>"
            for q in names  # type: ignore[attr-defined]
        }

    compared = 0
    for node in context.tables.nodes:
        parent = context.parent(node)
        if not isinstance(node, (cst.Name, cst.Attribute)) or isinstance(parent, cst.Attribute):
            continue
        if not isinstance(parent, (cst.Call, cst.Expr, cst.Arg, cst.Return, cst.Param)):
            continue
        if isinstance(parent, cst.Param) and parent.name is node:
            continue
        if context.module.code_for_node(node).split(".")[0] not in {"copy", "torch", "np"}:
            continue  # not a shadowed name: answered from the import table alone
        theirs = libcst_names.get(node, ())
        theirs = theirs() if callable(theirs) else theirs
        assert shown(context.qualified_names(node)) == shown(theirs), module.code_for_node(node)
        compared += 1
    assert compared >= 10
