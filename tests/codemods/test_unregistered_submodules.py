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
    `nn.ParameterList`, a dict keyed by computed names an `nn.ParameterDict` (unsafe: a key
    that is not a string fails when the dict is built), and `self.weights[k]` still indexes."""
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
                self.bias = {kind: nn.Parameter(torch.zeros(1, self.out))
                             for kind in self.sizes}

            def forward(self, xs):
                return {k: x @ self.weights[k] + self.bias[k] for k, x in xs.items()}
        """
    findings = assert_fix(
        RULE,
        before,
        before.replace(
            "self.scales = [nn.Parameter(torch.ones(self.out)) for _ in range(3)]",
            "self.scales = nn.ParameterList([nn.Parameter(torch.ones(self.out)) for _ in range(3)])",
        )
        .replace("self.weights = {", "self.weights = nn.ParameterDict({")
        .replace("            }\n", "            })\n")
        .replace(
            """self.bias = {kind: nn.Parameter(torch.zeros(1, self.out))
                             for kind in self.sizes}""",
            """self.bias = nn.ParameterDict(
                    {kind: nn.Parameter(torch.zeros(1, self.out))
                             for kind in self.sizes}
                )""",
        ),
        unsafe=True,
    )
    computed = [f for f in findings if "keys are computed" in f.message]
    assert len(computed) == 2
    assert all(f.applicability is Applicability.UNSAFE for f in computed)


def test_module_dict_filled_under_computed_names() -> None:
    before = """
        from torch import nn

        class MultiHead(nn.Module):
            def __init__(self, dim, tasks):
                super().__init__()
                self.heads = {}
                for task, classes in tasks.items():
                    self.heads[task] = nn.Linear(dim, classes)

            def forward(self, h):
                return {task: head(h) for task, head in self.heads.items()}
        """
    assert_fix(
        RULE,
        before,
        before.replace("self.heads = {}", "self.heads = nn.ModuleDict()"),
        unsafe=True,
    )


def test_keys_counted_by_range_or_enumerate_are_declined() -> None:
    for source in (
        """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.blocks = {i: nn.Linear(4, 4) for i in range(n)}
        """,
        """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, sizes):
                super().__init__()
                self.blocks = {}
                for i, size in enumerate(sizes):
                    self.blocks[i] = nn.Linear(size, size)
        """,
    ):
        assert_declined(RULE, source, reason="a key is not a string")


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


def test_norm_layers_built_in_forward_are_built_once_in_init() -> None:
    """Each construction becomes its own layer, built after the attributes its arguments read
    and after the layers `__init__` already builds (so a weight-init loop reaches it too)."""
    before = """
        import torch.nn as nn

        class ConvBlock(nn.Module):
            def __init__(self, c_in, c_out):
                super(ConvBlock, self).__init__()
                self.width = c_out
                self.first = nn.Conv2d(c_in, c_out, 3, padding=1)
                self.second = nn.Conv2d(c_out, c_out, 3, padding=1)
                for m in self.modules():
                    if isinstance(m, nn.Conv2d):
                        nn.init.kaiming_normal_(m.weight)

            def forward(self, x):
                x = self.first(x)
                x = nn.BatchNorm2d(self.width, momentum=0.05)(x)  # normalise
                x = nn.ReLU()(x)
                x = nn.BatchNorm2d(num_features=self.width)(self.second(x))
                return nn.ReLU()(x)
        """
    after = """
        import torch.nn as nn

        class ConvBlock(nn.Module):
            def __init__(self, c_in, c_out):
                super(ConvBlock, self).__init__()
                self.width = c_out
                self.first = nn.Conv2d(c_in, c_out, 3, padding=1)
                self.second = nn.Conv2d(c_out, c_out, 3, padding=1)
                self.bn1 = nn.BatchNorm2d(self.width, momentum=0.05)
                self.bn2 = nn.BatchNorm2d(num_features=self.width)
                for m in self.modules():
                    if isinstance(m, nn.Conv2d):
                        nn.init.kaiming_normal_(m.weight)

            def forward(self, x):
                x = self.first(x)
                x = self.bn1(x)  # normalise
                x = nn.ReLU()(x)
                x = self.bn2(self.second(x))
                return nn.ReLU()(x)
        """
    findings = assert_fix(RULE, before, after, unsafe=True)
    assert {f.applicability for f in findings} == {Applicability.UNSAFE}


def test_one_layer_built_in_forward_with_torch_alias_and_constant_size() -> None:
    before = """
        import torch as t

        class Head(t.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = t.nn.Linear(16, 16)

            def forward(self, h):
                return t.nn.LayerNorm(16)(self.proj(h))
        """
    after = """
        import torch as t

        class Head(t.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = t.nn.Linear(16, 16)
                self.ln = t.nn.LayerNorm(16)

            def forward(self, h):
                return self.ln(self.proj(h))
        """
    assert_fix(RULE, before, after, unsafe=True)
    # Without --unsafe-fixes the text stays as it is.
    assert_fix_skipped = check_source(
        textwrap.dedent(before), options=Options(select=(RULE,), unsafe_fixes=False)
    )
    assert [f.applicability for f in assert_fix_skipped] == [Applicability.UNSAFE]


def test_layers_in_forward_that_cannot_be_built_in_init_are_reported() -> None:
    cases = {
        "`x.size(1)`, known only in `forward`": """
            def forward(self, x):
                return nn.BatchNorm1d(x.size(1))(x)
            """,
        "under a condition, in a loop": """
            def forward(self, x):
                for _ in range(2):
                    x = nn.BatchNorm1d(self.width)(x)
                return x
            """,
        "not called where it is built": """
            def forward(self, x):
                norm = nn.BatchNorm1d(self.width)
                return norm(x)
            """,
        "`self.scale` is not assigned once": """
            def forward(self, x):
                return nn.BatchNorm1d(self.width * self.scale)(x)
            """,
    }
    for reason, forward in cases.items():
        source = """
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self, width, scale=None):
                    super().__init__()
                    self.width = width
                    if scale:
                        self.scale = scale
            """ + textwrap.indent(textwrap.dedent(forward), " " * 16)
        assert_declined(RULE, source, reason=reason)


def test_layers_built_by_a_method_called_after_the_move_are_built_first() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch.nn as tnn

        class Graph(tnn.Module):
            def __init__(self, nodes):
                super().__init__()
                self.nodes = nodes

            def build(self):
                self.embedding = tnn.Embedding(self.nodes, 16)

        def load(device):
            model = Graph(8).cuda(device)
            model.build()  # lazy layers
            return model
        """,
        """
        import torch.nn as tnn

        class Graph(tnn.Module):
            def __init__(self, nodes):
                super().__init__()
                self.nodes = nodes

            def build(self):
                self.embedding = tnn.Embedding(self.nodes, 16)

        def load(device):
            model = Graph(8)
            model.build()  # lazy layers
            model = model.cuda(device)
            return model
        """,
        unsafe=True,
    )
    assert "builds layers after `model` was moved" in findings[0].message


def test_a_method_that_builds_nothing_or_runs_before_the_move_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch.nn as nn

        class Graph(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)

            def build(self):
                self.fc = nn.Linear(2, 2)

            def reset(self):
                self.fc.reset_parameters()

        model = Graph()
        model.build()
        model = model.to("cuda")
        moved = Graph().to("cuda")
        moved.reset()
        """,
    )


def test_a_list_whose_modules_a_loop_registers_one_by_one_is_left_alone() -> None:
    # `add_module` registers each layer as "0", "1": an `nn.ModuleList` would register them a
    # second time as "layers.0", and the state_dict of released checkpoints would no longer load.
    for register in ("self.add_module(str(i), layer)", 'setattr(self, f"stage{i}", layer)'):
        assert_noop(
            RULE,
            f"""
import torch
from torch import nn


class PoolingBlock(nn.Module):
    def __init__(self, scale: int, channels: int) -> None:
        super().__init__()
        self.layers = [
            nn.AdaptiveAvgPool2d(scale),
            nn.Conv2d(channels, channels, kernel_size=1),
        ]
        for i, layer in enumerate(self.layers):
            {register}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x
""",
        )
