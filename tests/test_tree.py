"""devfix.tree reads children from node fields and traverses without libcst's rebuild: both must
give exactly what libcst gives, on every kind of node."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import libcst as cst
import pytest

from devfix.tree import (
    LAYOUT_CLASSES,
    LIBCST_CHILDREN,
    Dispatcher,
    build_tables,
    children_of,
    code_children_of,
    spans_with_layout,
    visit_all,
)

REPO = Path(__file__).resolve().parent.parent

#: Syntax that the golden scripts may not contain: every statement and expression form.
EVERY_FORM = '''
# -*- coding: utf-8 -*-
"""doc"""
from __future__ import annotations
import a.b as c, d
from .. import (e as f, g,)
from h import *
x: int = 1; y = z = 2
x += 1
del x, y
global q
@dec
@dec2(1)
async def fn(a, /, b: int = 2, *args, c, d=3, **kw) -> "T":
    nonlocal_ = lambda p, *q, r=1, **s: p
    async with open(a) as f, open(b):
        pass
    async for i in aiter():
        await i
    yield from g
    return (yield)
class K(Base, metaclass=M):
    v: list[int]
    def m(self): ...
try:
    pass
except (E, F) as err:
    raise X from err
else:
    pass
finally:
    pass
try:
    pass
except* G:
    pass
while not a and b or c:
    break
else:
    continue
if a if b else c: pass
elif d: pass
else: pass
for i, (j, *k) in enumerate(z):
    pass
with a as (b, c):
    pass
assert a, "msg"
print(f"{a!r:>{w}} {b=} {{}}", rb'raw', "implicit" 'concat', 1_000j, 0x1F, 1.5e-3, ...)
t = [*a, *b], {**c, 'd': 1}, {1, 2}, (1,), ()
comp = [i for i in x if i for j in y], {k: v for k, v in d.items()}, {s for s in t}, (g for g in h)
s = a[1:2:3, ..., None], a[::], b[c][d]
w = (n := 10) > 5 >= 4 != 3 is not None in a not in b
u = -a + ~b * c @ d / e // f % g ** -h << i >> j & k ^ l | m
match command.split():
    case [action, obj] if obj:
        pass
    case Point(x=0, y=0) | None:
        pass
    case {"k": v, **rest}:
        pass
    case [1, *others]:
        pass
    case str() as s:
        pass
    case _:
        pass
type Alias[T: int, *Ts, **P] = list[T]
def generic[T](a: T) -> T: return a
x = \\
    1
'''


def _sample_sources() -> list[tuple[str, str]]:
    sources = [("every-form", EVERY_FORM), ("crlf-tabs", "if a:\r\n\tb = (1,\r\n\t\t2)\r\n")]
    for path in sorted((REPO / "golden").rglob("*.py")) + sorted((REPO / "examples").glob("*.py")):
        sources.append((path.name, path.read_text(encoding="utf-8")))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for name in ("argparse.py", "dataclasses.py", "typing.py", "asyncio/base_events.py"):
        sources.append((name, (stdlib / name).read_text(encoding="utf-8")))
    return sources


SOURCES = _sample_sources()
#: Every syntax form, and the standard library's files.
LARGE_SOURCES = SOURCES[:1] + SOURCES[-4:]


@pytest.mark.parametrize("name,source", SOURCES, ids=[name for name, _ in SOURCES])
def test_children_match_libcst_on_every_node(name: str, source: str) -> None:
    module = cst.parse_module(source)
    stack: list[cst.CSTNode] = [module]
    checked = 0
    while stack:
        node = stack.pop()
        expected = list(LIBCST_CHILDREN(node))
        got = children_of(node)
        assert [id(kid) for kid in got] == [id(kid) for kid in expected], (name, type(node))
        # The tables' children: the same without layout, which holds nothing but layout.
        code = [id(kid) for kid in expected if not isinstance(kid, LAYOUT_CLASSES)]
        assert [id(kid) for kid in code_children_of(node)] == code, (name, type(node))
        if isinstance(node, LAYOUT_CLASSES):
            assert all(isinstance(kid, LAYOUT_CLASSES) for kid in expected), (name, type(node))
        checked += 1
        stack.extend(expected)
    assert checked > 10


class _Recorder(cst.CSTVisitor):
    def __init__(self, skip: type[cst.CSTNode] | None = None) -> None:
        super().__init__()
        self.events: list[tuple[str, int]] = []
        self.skip = skip

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.events.append(("visit", id(node)))
        return self.skip is None or not isinstance(node, self.skip)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.events.append(("leave", id(original_node)))


class _TypedRecorder(cst.CSTVisitor):
    """Typed hooks, as passes write them: names seen, calls left, function bodies skipped."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, int]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.events.append(("def", id(node)))
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.events.append(("name", id(node)))

    def leave_Call(self, original_node: cst.Call) -> None:
        self.events.append(("left call", id(original_node)))


@pytest.mark.parametrize("skip", [None, cst.FunctionDef, cst.Call])
def test_the_pass_loop_calls_hooks_as_libcst_does(skip: type[cst.CSTNode] | None) -> None:
    module = cst.parse_module(EVERY_FORM)
    alone, beside_typed = _Recorder(skip), _Recorder(skip)
    typed, typed_by_libcst = _TypedRecorder(), _TypedRecorder()
    by_libcst = _Recorder(skip)
    module.visit(by_libcst)
    module.visit(typed_by_libcst)
    Dispatcher([alone]).run(module)
    Dispatcher([beside_typed, typed]).run(module)
    assert alone.events == by_libcst.events
    assert beside_typed.events == by_libcst.events
    assert typed.events == typed_by_libcst.events
    assert len(by_libcst.events) > 1000 and len(typed.events) > 50


def test_tables_give_parents_and_source_order() -> None:
    module = cst.parse_module("a = f(x)\nb = g(y)\n")
    tables = build_tables(module)
    calls = [node for node in tables.nodes if isinstance(node, cst.Call)]
    assert [cst.Module([]).code_for_node(call) for call in calls] == ["f(x)", "g(y)"]
    first, second = calls
    assert tables.order[id(first)][1] < tables.order[id(second)][0]
    statement = module.body[0]
    assert tables.parents[id(statement)] is module
    start, end = tables.order[id(statement)]
    inside = [node for node in tables.nodes if start <= tables.order[id(node)][0] <= end]
    assert first in inside and second not in inside


def test_tables_leave_out_layout_and_edit_spans_keep_it() -> None:
    source = "x = f(a,  # why\n      b)\n\n# note\ny = 2\n"
    module = cst.parse_module(source)
    tables = build_tables(module)
    assert not any(isinstance(node, LAYOUT_CLASSES) for node in tables.nodes)
    assert [type(node).__name__ for node in tables.nodes if isinstance(node, cst.Name)] == [
        "Name"
    ] * 5
    spans = spans_with_layout(module)
    every: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        every.append(node)
        stack.extend(reversed(LIBCST_CHILDREN(node)))
    assert [spans[id(node)][0] for node in every] == list(range(len(every)))
    comment = next(node for node in every if isinstance(node, cst.Comment))
    assert id(comment) in spans and id(comment) not in tables.order
    # A code node's subtree in the tables is its subtree in the full spans, less the layout.
    call = next(node for node in tables.nodes if isinstance(node, cst.Call))
    first, last = spans[id(call)]
    assert [n for n in every[first : last + 1] if not isinstance(n, LAYOUT_CLASSES)] == (
        tables.nodes[tables.order[id(call)][0] : tables.order[id(call)][1] + 1]
    )


class _CommentRecorder(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.comments: list[str] = []

    def visit_Comment(self, node: cst.Comment) -> None:
        self.comments.append(node.value)


def test_the_pass_loop_shows_layout_to_a_visitor_that_hooks_it() -> None:
    module = cst.parse_module("x = f(a,  # why\n      b)\n\n# note\ny = 2  # end\n")
    by_libcst, through_loop = _CommentRecorder(), _CommentRecorder()
    module.visit(by_libcst)
    visit_all(module, [through_loop, _TypedRecorder()], build_tables(module))
    assert through_loop.comments == by_libcst.comments == ["# why", "# note", "# end"]


LIBCST_UNTOUCHED = """
import gc, weakref
import libcst
classes = [libcst.CSTNode, *[c for c in vars(libcst).values() if isinstance(c, type) and issubclass(c, libcst.CSTNode)]]
before = {cls: dict(vars(cls)) for cls in classes}
children = libcst.CSTNode.__dict__["children"]
import devfix
from devfix.engine import fix_source
from devfix.types import Options
source = (
    "import torch\\nimport torch.nn as nn\\n"
    "class M(nn.Module):\\n"
    "    def forward(self, x):\\n"
    "        return x * torch.ones(x.shape[-1])\\n"
)
result = fix_source(source, Options(unsafe_fixes=True))
assert "device=x.device" in result.output, result.output
assert libcst.CSTNode.__dict__["children"] is children
for cls in classes:
    assert dict(vars(cls)) == before[cls], cls
print("untouched")
"""


@pytest.mark.slow  # a fresh interpreter
def test_importing_devfix_and_fixing_leaves_libcst_classes_untouched() -> None:
    import subprocess
    import sys

    completed = subprocess.run(
        [sys.executable, "-c", LIBCST_UNTOUCHED], capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "untouched"


def test_a_file_tree_is_freed_without_the_garbage_collector() -> None:
    """Passes and analyses form no reference cycle with the file's context: once the engine
    drops it, reference counting alone frees the tree, the context, the passes and the facts
    (the collector finds none of them; the standard library's `ast.literal_eval` leaves a few
    closures of its own)."""
    import gc

    from devfix.codemods._base import DevicePass
    from devfix.context import FileContext
    from devfix.fix_loop import _run_passes
    from devfix.settings import Settings

    source = (
        "import torch\nimport torch.nn as nn\n"
        "class M(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x + torch.zeros(3)\n"
        "model = M().to('cuda')\n"
        "for x in loader:\n"
        "    model(x)\n"
    )
    _run_passes(cst.parse_module(source), source, "<string>", Settings.resolve())  # warm caches
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        findings = _run_passes(cst.parse_module(source), source, "<string>", Settings.resolve())
        assert [f.code for f in findings if f.code == "DF101"] == ["DF101"]
        del findings
        gc.collect()
        cyclic = [
            o
            for o in gc.garbage
            if isinstance(o, (cst.CSTNode, FileContext, DevicePass))
            or type(o).__module__.startswith("devfix")
        ]
        assert not cyclic, cyclic[:5]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


@pytest.mark.parametrize("name,source", LARGE_SOURCES, ids=[name for name, _ in LARGE_SOURCES])
def test_the_class_index_finds_what_a_walk_with_isinstance_finds(name: str, source: str) -> None:
    module = cst.parse_module(source)
    tables = build_tables(module)
    kinds: list[type[cst.CSTNode] | tuple[type[cst.CSTNode], ...]] = [
        cst.Call,
        cst.BaseExpression,  # an abstract base: every concrete expression class
        (cst.Name, cst.Attribute, cst.FunctionDef),
        cst.BaseCompoundStatement,
    ]
    subtrees = [module, *(n for n in tables.nodes if isinstance(n, cst.FunctionDef))][:25]
    for root in subtrees:
        first, last = tables.order[id(root)]
        inside = tables.nodes[first : last + 1]
        for kind in kinds:
            expected = [node for node in inside if isinstance(node, kind)]
            assert tables.of_type(first, last, kind) == expected, (name, kind)


class _Skipper(_TypedRecorder):
    """The typed recorder, also leaving defs and classes and seeing calls."""

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.events.append(("left def", id(original_node)))

    def visit_Call(self, node: cst.Call) -> None:
        self.events.append(("call", id(node)))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.events.append(("left class", id(original_node)))


@pytest.mark.parametrize("name,source", LARGE_SOURCES, ids=[name for name, _ in LARGE_SOURCES])
def test_the_indexed_pass_loop_calls_typed_hooks_as_libcst_does(name: str, source: str) -> None:
    module = cst.parse_module(source)
    tables = build_tables(module)
    skipper, typed = _Skipper(), _TypedRecorder()
    skipper_by_libcst, typed_by_libcst = _Skipper(), _TypedRecorder()
    module.visit(skipper_by_libcst)
    module.visit(typed_by_libcst)
    Dispatcher([skipper, typed]).run_indexed(tables)
    assert skipper.events == skipper_by_libcst.events
    assert typed.events == typed_by_libcst.events
    assert skipper.events and typed.events
