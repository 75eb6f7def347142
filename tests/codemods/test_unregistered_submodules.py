"""DF104 unregistered-submodules: inline cases."""

from __future__ import annotations

import textwrap

from devfix.engine import check_source
from devfix.types import Applicability, Options
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF104"


def test_list_comprehension_of_layers_becomes_a_module_list() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch.nn as nn

        class MLP(nn.Module):
            def __init__(self, d, n):
                super().__init__()
                self.layers = [nn.Linear(d, d) for _ in range(n)]  # hidden layers
        """,
        """
        import torch.nn as nn

        class MLP(nn.Module):
            def __init__(self, d, n):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(n)])  # hidden layers
        """,
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE


def test_appended_convs_with_torch_alias() -> None:
    assert_fix(
        RULE,
        """
        import torch as t

        class Net(t.nn.Module):
            def __init__(self):
                super().__init__()
                self.convs = []
                for c in (3, 8):
                    self.convs.append(t.nn.Conv2d(c, 8, 3).to("cpu"))
                self.convs.insert(0, t.nn.Identity())
        """,
        """
        import torch as t

        class Net(t.nn.Module):
            def __init__(self):
                super().__init__()
                self.convs = t.nn.ModuleList()
                for c in (3, 8):
                    self.convs.append(t.nn.Conv2d(c, 8, 3).to("cpu"))
                self.convs.insert(0, t.nn.Identity())
        """,
        unsafe=True,
    )


def test_dict_of_local_blocks_and_from_imports() -> None:
    assert_fix(
        RULE,
        """
        from torch.nn import Linear, Module

        class Block(Module):
            def __init__(self, d):
                super().__init__()
                self.fc = Linear(d, d)

        class Heads(Module):
            def __init__(self, d):
                super().__init__()
                self.heads = {
                    "cls": Block(d),  # classification
                    "reg": Linear(d, 1),
                }
                self.heads["aux"] = Linear(d, 2)
        """,
        """
        from torch.nn import Linear, Module, ModuleDict

        class Block(Module):
            def __init__(self, d):
                super().__init__()
                self.fc = Linear(d, d)

        class Heads(Module):
            def __init__(self, d):
                super().__init__()
                self.heads = ModuleDict({
                    "cls": Block(d),  # classification
                    "reg": Linear(d, 1),
                })
                self.heads["aux"] = Linear(d, 2)
        """,
        unsafe=True,
    )


def test_local_list_assigned_to_an_attribute() -> None:
    assert_fix(
        RULE,
        """
        from torch import nn

        class Net(nn.Module):
            def __init__(self, n):
                super().__init__()
                blocks = []
                for _ in range(n):
                    blocks.append(nn.Linear(4, 4))
                self.blocks = blocks
        """,
        """
        from torch import nn

        class Net(nn.Module):
            def __init__(self, n):
                super().__init__()
                blocks = []
                for _ in range(n):
                    blocks.append(nn.Linear(4, 4))
                self.blocks = nn.ModuleList(blocks)
        """,
        unsafe=True,
    )


def test_tuple_of_layers() -> None:
    assert_fix(
        RULE,
        """
        import torch.nn as nn

        class Pair(nn.Module):
            def __init__(self):
                super().__init__()
                self.pair = nn.Linear(2, 2), nn.Linear(2, 2)
        """,
        """
        import torch.nn as nn

        class Pair(nn.Module):
            def __init__(self):
                super().__init__()
                self.pair = nn.ModuleList((nn.Linear(2, 2), nn.Linear(2, 2)))
        """,
        unsafe=True,
    )


def test_list_method_missing_on_module_list_is_declined() -> None:
    assert_declined(
        RULE,
        """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = [nn.Linear(2, 2), nn.Linear(2, 2)]
                self.layers.reverse()
        """,
        reason="`.reverse()`",
    )


def test_non_string_keys_are_declined() -> None:
    assert_declined(
        RULE,
        """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.by_size = {2: nn.Linear(2, 2), 4: nn.Linear(4, 4)}
        """,
        reason="keys must be strings",
    )


def test_mixed_contents_are_declined() -> None:
    assert_declined(
        RULE,
        """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, extra):
                super().__init__()
                self.parts = [nn.Linear(2, 2), extra]
        """,
        reason="not provably modules",
    )


def test_layer_built_in_forward_is_reported() -> None:
    assert_declined(
        RULE,
        """
        import torch.nn as nn

        class Net(nn.Module):
            def forward(self, x):
                return nn.BatchNorm2d(x.size(1))(x)
        """,
        reason="construct it once in `__init__`",
    )


def test_noops() -> None:
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, sizes):
                super().__init__()
                self.sizes = [4, 8]
                self.names = {"a": 1}
                self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
                self.first = nn.Linear(4, 4)
                self.refs = [self.first]
                layers = []
                layers.append(nn.Linear(4, 4))
                self.seq = nn.Sequential(*layers)
                self.outputs = []
                self.lazy = None
                self.parts = [nn.Linear(4, 4), nn.ReLU()]
                self.body = nn.Sequential(*self.parts)

            def forward(self, x):
                if self.lazy is None:
                    self.lazy = nn.Linear(x.size(-1), 4).to(x.device)
                x = nn.ReLU()(x)
                x = nn.functional.relu(x)
                self.outputs.append(x)
                return self.seq(x)

            def _make_layer(self, d):
                return nn.Sequential(nn.Linear(d, d), nn.BatchNorm1d(d))

        class Plain:
            def __init__(self):
                self.layers = [nn.Linear(2, 2)]
        """,
    )


def test_modules_passed_through_an_initialiser_wrapper() -> None:
    """`init_(nn.Linear(...))`, where the local `init_` hands its module to an initialiser
    that returns it: still a module construction."""
    before = """
        import torch.nn as nn
        from .util import init

        class Critic(nn.Module):
            def __init__(self, hidden, heads):
                super().__init__()
                def init_(m):
                    return init(m, nn.init.orthogonal_, lambda b: nn.init.constant_(b, 0))
                self.trunk = init_(nn.Linear(hidden, hidden))
                self.q_heads = [init_(nn.Linear(hidden, 1)) for _ in range(heads)]

            def forward(self, x):
                h = self.trunk(x).relu()
                return [q(h) for q in self.q_heads]
        """
    assert_fix(
        RULE,
        before,
        before.replace(
            "self.q_heads = [init_(nn.Linear(hidden, 1)) for _ in range(heads)]",
            "self.q_heads = nn.ModuleList([init_(nn.Linear(hidden, 1)) for _ in range(heads)])",
        ),
        unsafe=True,
    )


def test_parameters_in_plain_containers_set_by_a_helper() -> None:
    """A helper only `__init__` calls builds the gates: a list of `nn.Parameter` becomes an
    `nn.ParameterList`; a dict keyed by computed names is reported, since
    `nn.ParameterDict` needs string keys."""
    before = """
        import torch
        import torch.nn as nn

        class GatedCell(nn.Module):
            def __init__(self, sizes, out):
                super().__init__()
                self.sizes, self.out = sizes, out
                self._create_gates()

            def _create_gates(self):
                self.scales = [nn.Parameter(torch.ones(self.out)) for _ in range(3)]
                self.weights = {
                    kind: nn.Parameter(torch.empty(size, self.out))
                    for kind, size in self.sizes.items()
                }

            def forward(self, xs):
                return sum(xs[k] @ w for k, w in self.weights.items()) * self.scales[0]
        """
    assert_fix(
        RULE,
        before,
        before.replace(
            "self.scales = [nn.Parameter(torch.ones(self.out)) for _ in range(3)]",
            "self.scales = nn.ParameterList([nn.Parameter(torch.ones(self.out)) for _ in range(3)])",
        ),
        unsafe=True,
    )
    result = check_source(
        textwrap.dedent(before), options=Options(select=(RULE,), unsafe_fixes=True)
    )
    reported = [f for f in result if "self.weights" in f.message]
    assert len(reported) == 1 and not reported[0].edits
    assert "`nn.ParameterDict` keys must be strings" in reported[0].message


def test_a_wrapper_that_does_not_return_the_module_is_not_one() -> None:
    assert_noop(
        RULE,
        """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, d):
                super().__init__()
                describe = lambda m: str(m)
                self.names = [describe(nn.Linear(d, d)) for _ in range(2)]
        """,
    )
