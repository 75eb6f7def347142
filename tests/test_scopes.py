"""devfix/scopes.py: the rules of Python scoping, in the exact view (which binding a read sees)
and the coarse one (which function's code a node is)."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import GlobalScope, MetadataWrapper, ScopeProvider

from devfix.scopes import ScopeRules, bound_by, declared_names, import_bindings
from devfix.tree import TreeTables, build_tables

SOURCE = textwrap.dedent(
    """\
    import torch

    def deco(f):
        return f

    class Base:
        pass

    x = 1

    @deco
    def train(model, device=torch.device("cpu"), *args, scale: float = x, **kw) -> torch.Tensor:
        y = [x for x in range(x) if x]
        pairs = {k: v for k, v in model.items()}
        sums = (a + b for a in y for b in pairs)
        last = [(seen := i) for i in y]

        def inner():
            nonlocal y
            global x
            y = x

        class Local(Base, metaclass=type):
            attr = y

            def method(self, value=attr):
                nonlocal last
                return attr, value, seen

        return lambda p, r=y: p + r + sums
    """
)


class Parsed:
    def __init__(self, source: str = SOURCE) -> None:
        self.module = cst.parse_module(source)
        self.tables: TreeTables = build_tables(self.module)
        self.exact = ScopeRules(self.tables, comprehensions=True, headers=True)
        self.coarse = ScopeRules(self.tables, comprehensions=False, headers=False)

    def names(self, value: str) -> list[cst.Name]:
        """The `Name` nodes spelled `value`, in source order."""
        return [n for n in self.tables.nodes if isinstance(n, cst.Name) and n.value == value]

    def one(self, kind: type[cst.CSTNode], code: str | None = None) -> cst.CSTNode:
        (found,) = [
            node
            for node in self.tables.nodes
            if type(node) is kind and (code is None or self.module.code_for_node(node) == code)
        ]
        return found

    def definition(self, name: str) -> cst.FunctionDef | cst.ClassDef:
        return next(
            node
            for node in self.tables.nodes
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and node.name.value == name
        )


def test_the_exact_view_puts_every_name_where_libcst_scope_analysis_does() -> None:
    parsed = Parsed()
    theirs = MetadataWrapper(parsed.module, unsafe_skip_copy=True).resolve(ScopeProvider)
    compared = 0
    for node, scope in theirs.items():
        if not isinstance(node, cst.Name) or scope is None:
            continue
        expected = parsed.module if isinstance(scope, GlobalScope) else scope.node
        parent = parsed.tables.parents[id(node)]
        if isinstance(parent, cst.Param) and parent.name is node:
            ours = parsed.exact.binding_scope(parent)  # a parameter binds in its function
        else:
            ours = parsed.exact.scope_of(node)
        assert ours is expected, (node.value, type(parent).__name__)
        compared += 1
    assert compared > 50


def test_a_name_rebound_in_a_comprehension_is_the_comprehensions_own() -> None:
    parsed = Parsed()
    train = parsed.definition("train")
    squares = parsed.one(cst.ListComp, "[x for x in range(x) if x]")
    element, target, first_iterable, condition = parsed.names("x")[2:6]
    # The first iterable is read before the comprehension's scope exists: `range(x)` reads the
    # module's `x`; the element and the condition read the comprehension's.
    assert parsed.exact.scope_of(first_iterable) is train
    assert parsed.exact.scope_of(element) is squares
    assert parsed.exact.scope_of(condition) is squares
    loop = parsed.tables.parents[id(target)]
    assert parsed.exact.binding_scope(loop) is squares
    # The coarse view: the comprehension is part of `train`, its target one of `train`'s names.
    assert parsed.coarse.scope_of(element) is train
    assert parsed.coarse.binding_scope(loop) is train
    # A later `for` of a generator is inside it, the first iterable is not.
    sums = parsed.one(cst.GeneratorExp)
    y_read, pairs_read = parsed.names("y")[1], parsed.names("pairs")[1]
    assert parsed.exact.scope_of(y_read) is train
    assert parsed.exact.scope_of(pairs_read) is sums


def test_walrus_in_a_comprehension_binds_in_the_function_around_it() -> None:
    parsed = Parsed()
    train = parsed.definition("train")
    walrus = parsed.one(cst.NamedExpr)
    assert parsed.exact.scope_of(walrus) is parsed.one(cst.ListComp, "[(seen := i) for i in y]")
    assert parsed.exact.binding_scope(walrus) is train
    assert parsed.coarse.binding_scope(walrus) is train


def test_a_class_body_is_passed_by_the_functions_in_it() -> None:
    parsed = Parsed()
    train, method = parsed.definition("train"), parsed.definition("method")
    local = parsed.definition("Local")
    attr_in_body, attr_in_default, attr_in_method = parsed.names("attr")
    assert parsed.exact.scope_of(attr_in_body) is local
    # `return attr` in the method reads the method's scope, then past the class to `train`.
    assert parsed.exact.scope_of(attr_in_method) is method
    assert parsed.exact.outer_scope(method) is local
    assert parsed.exact.function_of(attr_in_method) is method
    assert parsed.exact.function_of(method) is train
    # Code in the class body belongs to the function around the class.
    assert parsed.exact.function_of(attr_in_body) is train
    assert parsed.coarse.function_of(attr_in_body) is train
    # A default value of a method is read in the class body (exact), but is the method's code.
    assert parsed.exact.scope_of(attr_in_default) is local
    assert parsed.coarse.scope_of(attr_in_default) is method


def test_a_definitions_header_is_read_in_the_scope_around_it() -> None:
    parsed = Parsed()
    train = parsed.definition("train")
    module = parsed.module
    decorator = parsed.names("deco")[1]
    default = parsed.one(cst.Call, 'torch.device("cpu")')
    annotation = parsed.names("float")[0]
    returned = parsed.one(cst.Attribute, "torch.Tensor")
    for header in (decorator, default, annotation, returned):
        assert parsed.exact.scope_of(header) is module
    for header in (default, annotation, returned):
        assert parsed.coarse.scope_of(header) is train  # the coarse view: `train`'s code
    # A decorator runs before `train` exists: no view counts it as `train`'s code.
    assert parsed.coarse.scope_of(decorator) is module
    assert parsed.exact.scope_of(train) is module
    assert parsed.coarse.scope_of(train) is module  # the definition itself is in the module
    base = parsed.names("Base")[1]
    assert parsed.exact.scope_of(base) is train
    # A lambda's default is read around the lambda, its parameters bind in it.
    lambda_ = parsed.one(cst.Lambda)
    y_default = parsed.names("y")[-1]
    assert parsed.exact.scope_of(y_default) is train
    assert parsed.coarse.scope_of(y_default) is lambda_
    parameter = next(p for p in lambda_.params.params if p.name.value == "p")
    assert parsed.exact.binding_scope(parameter) is lambda_
    # A `def` name binds in the scope around the definition.
    assert parsed.exact.binding_scope(parsed.definition("inner")) is train


def test_global_and_nonlocal_send_their_names_to_the_module_and_the_function_around() -> None:
    parsed = Parsed()
    train = parsed.definition("train")
    in_inner = parsed.one(cst.Nonlocal, "nonlocal y")
    in_method = parsed.one(cst.Nonlocal, "nonlocal last")
    declared = parsed.one(cst.Global)
    assert declared_names(in_inner) == ["y"]
    assert parsed.exact.declared_scope(in_inner) is train
    assert parsed.exact.declared_scope(declared) is parsed.module
    # From a method, `nonlocal` passes the class body: classes hold no function locals.
    assert parsed.exact.declared_scope(in_method) is train


def _bound(source: str, kind: type[cst.CSTNode], **options: bool) -> list[str]:
    parsed = Parsed(textwrap.dedent(source))
    return [
        name.value
        for node in parsed.tables.nodes
        if type(node) is kind
        for name in bound_by(node, **options)
    ]


def test_what_each_node_binds() -> None:
    assert _bound("a, (b, *c) = d[0] = self.e = f\n", cst.AssignTarget) == ["a", "b", "c"]
    assert _bound("x: int = 1\nx += 2\n", cst.AnnAssign) == ["x"]
    assert _bound("[i for i, j in z]\n", cst.CompFor) == ["i", "j"]
    assert _bound("[i for i in z]\n", cst.CompFor, comprehensions=False) == []
    assert _bound("with a as (b, c), d as e:\n    pass\n", cst.WithItem) == ["b", "c", "e"]
    assert _bound("with a as b:\n    pass\n", cst.AsName) == ["b"]
    assert _bound("try:\n    pass\nexcept E as err:\n    pass\n", cst.ExceptHandler) == ["err"]
    assert _bound("def f(a, /, b, *c, d, **e):\n    pass\n", cst.Param) == list("abcde")
    assert _bound("def f():\n    pass\n", cst.FunctionDef) == ["f"]
    captures = "match v:\n    case [x, *rest] as whole:\n        pass\n"
    assert _bound(captures, cst.MatchAs) == ["whole", "x"]  # the outer pattern first
    assert _bound("match v:\n    case [x, *rest]:\n        pass\n", cst.MatchStar) == ["rest"]
    assert _bound("import os.path, numpy as np\n", cst.ImportAlias) == ["os"]  # np: its AsName
    assert _bound("import numpy as np\n", cst.AsName) == ["np"]


def test_what_an_import_binds_and_refers_to() -> None:
    def bindings(source: str) -> list[tuple[str, str]]:
        statement = cst.parse_statement(source).body[0]  # type: ignore[attr-defined]
        return [(b.name, b.target) for b in import_bindings(statement)]

    assert bindings("import os.path, numpy as np") == [("os", "os"), ("np", "numpy")]
    assert bindings("from torch.nn import Linear, ReLU as Act") == [
        ("Linear", "torch.nn.Linear"),
        ("Act", "torch.nn.ReLU"),
    ]
    assert bindings("from . import utils") == [("utils", ".utils")]
    assert bindings("from ..data import load") == [("load", "..data.load")]
    assert bindings("from torch import *") == []
