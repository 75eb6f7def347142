"""codemods.analysis.scopes: the scope walker, bound and read names, binding tables."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.names import code_of
from tests.analysis._parsed import parse

SOURCE = """
import os
device = "cuda"
if os.environ.get("X"):
    limit = 3
else:
    from math import pi

def train(model, loader):
    lr = 0.1
    def inner():
        hidden = 1
    for x, (y, *rest) in loader:
        out = model(x)
    lr = lr * 2
    return lambda q: q + lr

class Net:
    width = 4
"""


def test_the_scope_walker_yields_nested_scopes_without_entering_them() -> None:
    parsed = parse(SOURCE)
    scopes = parsed.facts.scopes
    train = parsed.function("train")
    inside = list(scopes.nodes(train))
    assert inside[0] is train
    names = {n.value for n in inside if isinstance(n, cst.Name)}
    assert {"lr", "loader", "out"} <= names
    assert "hidden" not in names and "q" not in names  # in `inner` and the lambda
    assert parsed.function("inner") in inside  # yielded, not entered
    statements = list(scopes.statements(parsed.module))
    module_level = {n.value for n in statements if isinstance(n, cst.Name)}
    assert {"device", "limit", "pi"} <= module_level
    assert "lr" not in module_level and "width" not in module_level
    assert train in statements  # top-level defs and classes: yielded, not entered


def test_names_after_a_node_are_the_later_mentions_in_its_scope() -> None:
    parsed = parse(SOURCE)
    scopes = parsed.facts.scopes
    train = parsed.function("train")
    loop = parsed.all(cst.For)[0]
    later = list(scopes.names_after(train, "lr", loop))
    # `lr = lr * 2`, target then value; not `lr = 0.1` before the loop, nor the lambda's `lr`
    # (another scope).
    assert [code_of(parsed.context.parent(n)) for n in later] == ["lr = ", "lr * 2"]
    assert list(scopes.names_after(train, "lr", later[-1])) == []
    assert list(scopes.names_after(train, "hidden", loop)) == []  # in `inner`


def test_bound_and_read_names() -> None:
    parsed = parse(SOURCE)
    scopes = parsed.facts.scopes
    loop = parsed.all(cst.For)[0]
    assert scopes.names_bound(loop) == {"x", "y", "rest", "out"}
    assert scopes.names_read(loop) >= {"loader", "model", "x"}
    assert "out" not in scopes.names_read(loop)
    imports = parsed.all(cst.SimpleStatementLine, "import os\n")[0]
    assert scopes.names_bound(imports) == {"os"}


def test_latest_binding_and_visibility_follow_source_order() -> None:
    parsed = parse(SOURCE)
    scopes = parsed.facts.scopes
    ret = parsed.all(cst.Return)[0]
    value = scopes.latest_binding("lr", ret)
    assert value is not None and code_of(value) == "lr * 2"
    first_use = parsed.all(cst.BinaryOperation, "lr * 2")[0]
    earlier = scopes.latest_binding("lr", first_use)
    assert earlier is not None and code_of(earlier) == "0.1"
    assert scopes.latest_binding("model", ret) is None  # a parameter: no assignment to read
    assert scopes.visible_name("device", ret) and scopes.visible_name("model", ret)
    assert not scopes.visible_name("hidden", ret)


def test_latest_binding_reads_statement_order_without_positions() -> None:
    # A binding in the statement that holds the use is not before it, however the statement
    # is laid out over lines; and answering needs no position metadata (a whole-file pass).
    parsed = parse(
        """
        def step(batch, scale):
            ids = batch["ids"]
            ids = normalise(
                ids, scale
            )
            return ids
        """
    )
    scopes = parsed.facts.scopes
    inner_ids = parsed.all(cst.Name, "ids")[2]  # the argument of `normalise`
    earlier = scopes.latest_binding("ids", inner_ids)
    assert earlier is not None and code_of(earlier) == 'batch["ids"]'
    later = scopes.latest_binding("ids", parsed.all(cst.Return)[0])
    assert later is not None and code_of(later).startswith("normalise(")
    assert scopes.visible_name("ids", inner_ids)
    assert not parsed.context._resolved  # no metadata provider was resolved


def test_binding_tables_record_kinds_and_module_bindings_see_into_if_blocks() -> None:
    parsed = parse(SOURCE)
    scopes = parsed.facts.scopes
    train = parsed.function("train")
    table = scopes.table(train)
    assert [b.kind for b in table.bindings["model"]] == ["param"]
    assert [b.kind for b in table.bindings["lr"]] == ["assign", "assign"]
    assert [b.kind for b in table.bindings["y"]] == ["other"]
    assert scopes.assigned_values("lr", parsed.all(cst.Return)[0]) == [
        b.value for b in table.bindings["lr"]
    ]
    assert scopes.assigned_values("x", parsed.all(cst.Return)[0]) == []  # a loop target
    module_names = scopes.module_bindings()
    assert {"os", "device", "limit", "pi"} <= set(module_names)
    assert "lr" not in module_names


def test_placements_find_the_common_body() -> None:
    parsed = parse("a = 1\nif c:\n    b = f(a)\n    d = g(b)\n")
    scopes = parsed.facts.scopes
    first, second = parsed.one(cst.Call, "f(a)"), parsed.one(cst.Call, "g(b)")
    pair = scopes.common_placement(first, second)
    assert pair is not None
    assert (pair[0].index, pair[1].index) == (0, 1)
    assert isinstance(pair[0].owner, cst.IndentedBlock)


def test_names_bound_anywhere_include_parameters_and_globals() -> None:
    parsed = parse(
        """
        import torch.nn
        from os import path as p
        def f(rank, *args, world=1, **kw):
            global counter
            [s for s in args]
            with open(p) as (a, b):
                pass
        class C:
            def g(self):
                if (n := 3):
                    pass
        """
    )
    bound = parsed.facts.scopes.names_bound_anywhere()
    assert bound == {
        "torch", "p", "f", "rank", "args", "world", "kw", "counter", "s", "a", "b", "C", "g",
        "self", "n",
    }  # fmt: skip
    assert "open" not in bound and "path" not in bound


def test_find_filters_the_subtree_or_the_scope() -> None:
    parsed = parse(SOURCE)
    scopes = parsed.facts.scopes
    train = parsed.function("train")
    everywhere = [code_of(a) for a in scopes.find(train.body, cst.Assign)]
    assert everywhere == ["lr = 0.1", "hidden = 1", "out = model(x)", "lr = lr * 2"]
    own = [code_of(a) for a in scopes.find(train.body, (cst.Assign,), own_scope=True)]
    assert own == ["lr = 0.1", "out = model(x)", "lr = lr * 2"]


def test_within_and_mentions() -> None:
    parsed = parse(SOURCE)
    scopes = parsed.facts.scopes
    loop = parsed.all(cst.For)[0]
    call = parsed.one(cst.Call, "model(x)")
    assert scopes.within(call, loop) and scopes.within(loop, loop)
    assert not scopes.within(loop, call)
    assert not scopes.within(call, loop.iter)
    train = parsed.function("train")
    # A mention is any Name spelled so: a nested scope's, an attribute's, a keyword's.
    assert scopes.mentions(train, "hidden") and scopes.mentions(train, "q")
    assert scopes.mentions(parsed.one(cst.Call, 'os.environ.get("X")'), "environ")
    assert not scopes.mentions(train, "device")


def test_starts_before_compares_source_order() -> None:
    parsed = parse(SOURCE)
    scopes = parsed.facts.scopes
    loop = parsed.all(cst.For)[0]
    call = parsed.one(cst.Call, "model(x)")
    assert scopes.starts_before(loop, call) and not scopes.starts_before(call, loop)
    assert not scopes.starts_before(loop, loop)


def test_on_every_path_through_if_chains() -> None:
    parsed = parse(
        """
        def build(kind, path):
            if kind == "a":
                net = A()
                net.to(dev)
            elif kind == "b":
                if path:
                    net = B(path)
                    net.to(dev)
                else:
                    return None
            else:
                raise ValueError(kind)
            if kind == "c":
                log("c")
                net.to(dev)
            return net
        """
    )
    moves = [parsed.context.parent(call) for call in parsed.all(cst.Call, "net.to(dev)")]
    target = moves[0]

    def same(statement: cst.BaseStatement) -> bool:
        return isinstance(statement, cst.SimpleStatementLine) and any(
            small.deep_equals(target) for small in statement.body
        )

    scopes = parsed.facts.scopes
    # The first two moves: the other branches move the same way, return or raise.
    assert scopes.on_every_path(moves[0], same)
    assert scopes.on_every_path(moves[1], same)
    # The last one: an `if` without an `else` lets the other path through.
    assert not scopes.on_every_path(moves[2], same)
    # Without the move elsewhere, the `if` branch is not covered.
    assert not scopes.on_every_path(moves[1], lambda statement: False)


def test_in_loop_counts_only_loops_of_the_nodes_own_function() -> None:
    parsed = parse(
        """
        for epoch in range(3):
            per_epoch = make()

            def helper():
                once = make()

        while running:
            step = make()
        outside = make()
        """
    )
    scopes = parsed.facts.scopes
    made = {code_of(a.targets[0].target): a.value for a in parsed.all(cst.Assign)}
    assert scopes.in_loop(made["per_epoch"]) and scopes.in_loop(made["step"])
    assert not scopes.in_loop(made["once"])  # a loop around its `def` does not run it
    assert not scopes.in_loop(made["outside"])


def test_find_in_own_scope_matches_the_scope_walker() -> None:
    parsed = parse(SOURCE)
    scopes = parsed.facts.scopes
    module = parsed.context.module
    roots = [module, parsed.function("train"), *scopes.find(module, cst.Lambda)]
    for root in roots:
        for kind in (cst.Name, (cst.Assign, cst.For, cst.FunctionDef), cst.Lambda):
            walked = [node for node in scopes.nodes(root) if isinstance(node, kind)]
            assert list(scopes.find(root, kind, own_scope=True)) == walked
            statements = [node for node in scopes.statements(root) if isinstance(node, kind)]
            assert scopes.statements_of_type(root, kind) == statements
    inner_names = {n.value for n in scopes.find(parsed.function("train"), cst.Name, own_scope=True)}
    assert "lr" in inner_names and "hidden" not in inner_names and "q" not in inner_names


def test_bound_on_every_path_needs_a_binding_on_each_path_that_goes_on() -> None:
    parsed = parse(
        """
        def step(rows, flags, extra):
            for k, row in enumerate(rows):
                if flags[k]:
                    skipped = row * 2
                    continue
                if k % 2:
                    either = row
                else:
                    either = -row
                try:
                    tried = row.sum()
                except ValueError:
                    raise
                with open("log") as handle:
                    inside = 1
                for item in row:
                    looped = item
                use(skipped, either, tried, handle, inside, looped, later, k, extra)
                later = row
        """
    )
    scopes = parsed.facts.scopes
    use = parsed.all(
        cst.Call, "use(skipped, either, tried, handle, inside, looped, later, k, extra)"
    )[0]
    bound = {
        name: scopes.bound_on_every_path(name, use)
        for name in (
            "skipped",
            "either",
            "tried",
            "handle",
            "inside",
            "looped",
            "later",
            "k",
            "extra",
        )
    }
    assert bound == {
        "skipped": False,  # only in a branch that continues
        "either": True,  # both branches
        "tried": True,  # the handler raises
        "handle": True,
        "inside": True,
        "looped": False,  # the loop body may not run
        "later": False,  # after the use (an earlier iteration's value at most)
        "k": True,  # the enclosing loop's target
        "extra": True,  # a parameter
    }
    assert not scopes.visible_name("skipped", use) and scopes.visible_name("either", use)
