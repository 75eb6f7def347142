"""What DF401's planners know about the script: names, imports, the wrapped models, where the
training runs. Built once per file from the file's context (never from the pass)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import libcst as cst

from devfix.codemods._edits import call_tail, keyword_argument
from devfix.codemods._tree import walk
from devfix.context import FileContext, children_view

DATA_PARALLEL = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
    }
)
DISTRIBUTED_DATA_PARALLEL = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
    }
)
DATA_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
LOG_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "critical", "exception", "log"}
)

#: The rank-0 condition inside the code that runs the training (where `rank` is bound) ...
RANK0 = "rank == 0"
#: ... and anywhere else (helpers, callers): torchrun sets RANK for every process.
RANK0_ANYWHERE = 'os.environ.get("RANK", "0") == "0"'

_N = TypeVar("_N", bound=cst.CSTNode)


class Decline(Exception):
    """The script cannot be converted safely; the message says why."""


@dataclass
class Wrap:
    """One `target = nn.DataParallel(inner, ...)` of the script."""

    call: cst.Call
    statement: cst.SimpleStatementLine
    target: str
    inner: cst.BaseExpression
    #: The statement holding the wrap at the level of the block that runs the training: the
    #: wrap itself, or the outermost `if` around it.
    unit: cst.BaseStatement
    #: The `if` statements between the unit and the wrap, outermost first.
    guards: list[cst.If] = field(default_factory=list)
    #: An optimizer steps its parameters (False: a frozen model, e.g. a teacher).
    trained: bool = True

    @property
    def names(self) -> set[str]:
        """The wrapped model's names: the target, and the inner model's when it is a name."""
        names = {self.target}
        if isinstance(self.inner, cst.Name):
            names.add(self.inner.value)
        return names


@dataclass
class RunScope:
    """Where the training runs: the statements that run it and where setup/teardown go."""

    #: The module-level function that wraps the model (None: module level or main block).
    function: cst.FunctionDef | None
    #: The top-level statements that run the training (the function, the main block, or the
    #: module statements that move under a new main block).
    statements: list[cst.BaseStatement]
    #: The block that gets the setup at its start (None: the new main block).
    block: cst.IndentedBlock | None
    #: A flat script: the module statement from which the rest moves under a main block.
    main_from: cst.BaseStatement | None = None
    #: The statement after which teardown goes when the function returns early (else: the
    #: end of `block`).
    teardown_after: cst.BaseStatement | None = None
    #: The function that wraps the model when it is not `function`: a factory the training
    #: code calls (`model = build_model(args)`), where `local_rank` and friends are not bound.
    wrapper: cst.FunctionDef | None = None


class Script:
    """One file, as the planners see it."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self.module = context.module
        self.path = context.path
        self.bound = bound_names(self.module)
        self.imports = module_imports(self.module)
        torch_names = [local for local, qualified in self.imports.items() if qualified == "torch"]
        self.torch = torch_names[0] if torch_names else "torch"
        self.wraps: list[Wrap] = []
        self.run: RunScope | None = None
        self._loggers: set[str] | None = None

    # -- names -----------------------------------------------------------------------------

    def qualified(self, node: cst.CSTNode) -> str | None:
        """The single fully resolved dotted name of `node`, or None if absent or ambiguous."""
        names = {qn.name for qn in self.context.qualified_names(node)}
        return names.pop() if len(names) == 1 else None

    def t(self, code: str) -> str:
        """A template with `torch.` spelled as the script spells it."""
        return code.replace("torch.", f"{self.torch}.")

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def line(self, node: cst.CSTNode) -> int:
        return self.context.position(node).start.line

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.context.parent(node)

    def ancestors(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        return self.context.ancestors(node)

    # -- where the training runs -----------------------------------------------------------

    @property
    def scope(self) -> RunScope:
        assert self.run is not None, "the entry point is planned first"
        return self.run

    def in_run(self, node: cst.CSTNode) -> bool:
        """Inside the statements that run the training, outside any other function."""
        run = self.scope
        for ancestor in [node, *self.ancestors(node)]:
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return ancestor is run.function
            if any(ancestor is s for s in run.statements):
                return run.function is None
        return False

    def in_helper(self, node: cst.CSTNode) -> bool:
        """Inside a module-level function other than the one that runs the training."""
        function = None
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
                return False
            if isinstance(ancestor, cst.FunctionDef):
                function = ancestor
        return (
            function is not None
            and function is not self.scope.function
            and self.parent(function) in (self.module, *self.scope.statements)
        )

    def function_named(self, name: str) -> cst.FunctionDef | None:
        """The module-level function `name` (the last definition wins, as at run time)."""
        found = None
        for statement in self.module.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
                found = statement
        return found

    # -- output ----------------------------------------------------------------------------

    def is_log_statement(self, statement: cst.BaseStatement) -> bool:
        """`print(...)`, `logging.info(...)` or `logger.info(...)` alone on its line."""
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        call = statement_call(statement)
        if call is None:
            return False
        qualified = self.qualified(call.func) or ""
        if qualified in ("builtins.print", "print") or (
            qualified.startswith("logging.") and call_tail(call.func) in LOG_METHODS
        ):
            return True
        if (
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value in LOG_METHODS
            and isinstance(call.func.value, cst.Name)
        ):
            return call.func.value.value in self.loggers()
        return False

    def loggers(self) -> set[str]:
        """Names bound to `logging.getLogger(...)`."""
        if self._loggers is None:
            self._loggers = set()
            for assign in nodes_of(self.module, cst.Assign):
                if (
                    isinstance(assign.value, cst.Call)
                    and self.qualified(assign.value.func) == "logging.getLogger"
                ):
                    for target in assign.targets:
                        if isinstance(target.target, cst.Name):
                            self._loggers.add(target.target.value)
        return self._loggers

    def in_log_call(self, node: cst.CSTNode) -> bool:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.SimpleStatementLine):
                return self.is_log_statement(ancestor)
        return False


# -- tree helpers (DF401's own until the shared analysis layer offers them) -------------------


def nodes_of(
    root: cst.CSTNode, kind: type[_N] | tuple[type[_N], ...], *, skip_defs: bool = False
) -> Iterator[_N]:
    """Every node of type `kind` under `root` (with `skip_defs`, not inside nested defs)."""
    if not skip_defs:
        for node in walk(root):
            if isinstance(node, kind):
                yield node
        return
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, kind):
            yield node
        if node is not root and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(reversed(children_view(node)))


def statement_call(statement: cst.SimpleStatementLine) -> cst.Call | None:
    """The call of a statement that is one call expression."""
    if len(statement.body) != 1:
        return None
    small = statement.body[0]
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        return small.value
    return None


def is_main_guard(node: cst.CSTNode) -> bool:
    """`if __name__ == "__main__":` (either operand order)."""
    if not isinstance(node, cst.If):
        return False
    test = node.test
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    parts = [test.left, test.comparisons[0].comparator]
    names = [p for p in parts if isinstance(p, cst.Name) and p.value == "__name__"]
    strings = [
        p for p in parts if isinstance(p, cst.SimpleString) and p.evaluated_value == "__main__"
    ]
    return bool(names and strings) and isinstance(test.comparisons[0].operator, cst.Equal)


def calls_name(root: cst.CSTNode, name: str) -> bool:
    return any(
        isinstance(call.func, cst.Name) and call.func.value == name
        for call in nodes_of(root, cst.Call)
    )


def has_backward(root: cst.CSTNode, module: cst.Module, depth: int = 0) -> bool:
    """A `.backward()` call under `root`, or in a module-level function it calls (two steps)."""
    for call in nodes_of(root, cst.Call):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward":
            return True
        if depth < 2 and isinstance(call.func, cst.Name):
            for statement in module.body:
                if (
                    isinstance(statement, cst.FunctionDef)
                    and statement.name.value == call.func.value
                    and statement.body is not root
                    and has_backward(statement.body, module, depth + 1)
                ):
                    return True
    return False


def contains(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    return any(candidate is node for candidate in walk(root))


def mentions(root: cst.CSTNode, name: str) -> bool:
    return any(n.value == name for n in nodes_of(root, cst.Name))


def wrapped_argument(call: cst.Call) -> cst.BaseExpression | None:
    """The model argument of `DataParallel(model, ...)` / `DataParallel(module=model)`."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if positional:
        return positional[0].value
    keyword = keyword_argument(call, "module")
    return keyword.value if keyword is not None else None


def bound_names(module: cst.Module) -> set[str]:
    """Every name the file binds anywhere (assignments, defs, parameters, imports, ...)."""
    names: set[str] = set()
    for node in walk(module):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Param)):
            names.add(node.name.value)
        elif isinstance(
            node,
            (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr),
        ):
            names |= _target_names(node.target)
        elif isinstance(node, cst.AsName):
            names |= _target_names(node.name)
        elif isinstance(node, cst.ImportAlias) and node.asname is None:
            names.add(cst.Module([]).code_for_node(node.name).split(".")[0])
        elif isinstance(node, cst.Global):
            names |= {n.name.value for n in node.names}
    return names


def _target_names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        found: set[str] = set()
        for element in target.elements:
            found |= _target_names(element.value)
        return found
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return set()


def module_imports(module: cst.Module) -> dict[str, str]:
    """Local name -> qualified name for the module-level imports."""
    found: dict[str, str] = {}
    code = cst.Module([]).code_for_node
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    dotted = code(alias.name)
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        found[alias.asname.name.value] = dotted
                    else:
                        top = dotted.split(".")[0]
                        found[top] = top
            elif (
                isinstance(small, cst.ImportFrom)
                and small.module is not None
                and not small.relative
            ):
                if isinstance(small.names, cst.ImportStar):
                    continue
                base = code(small.module)
                for alias in small.names:
                    local = alias.asname.name if alias.asname is not None else alias.name
                    if isinstance(local, cst.Name):
                        found[local.value] = f"{base}.{code(alias.name)}"
    return found


def replace_node(
    root: cst.BaseExpression, old: cst.CSTNode, new: cst.BaseExpression
) -> cst.BaseExpression:
    """`root` with `old` (a node under it) replaced by `new`; only the nodes on the path from
    `root` to `old` are rebuilt, every other node is kept (so edits inside them still apply)."""
    if root is old:
        return new
    path = _path(root, old)
    if path is None:
        raise ValueError("the node is not under the root")
    node: cst.CSTNode = new
    for parent, child in zip(reversed(path[:-1]), reversed(path[1:])):
        node = _with_child(parent, child, node)
    assert isinstance(node, cst.BaseExpression)
    return node


def _path(root: cst.CSTNode, target: cst.CSTNode) -> list[cst.CSTNode] | None:
    if root is target:
        return [root]
    for child in children_view(root):
        found = _path(child, target)
        if found is not None:
            return [root, *found]
    return None


def _with_child(parent: cst.CSTNode, child: cst.CSTNode, new: cst.CSTNode) -> cst.CSTNode:
    for name in parent.__dataclass_fields__:
        value = getattr(parent, name)
        if value is child:
            return parent.with_changes(**{name: new})
        if isinstance(value, (tuple, list)) and any(item is child for item in value):
            return parent.with_changes(**{name: [new if item is child else item for item in value]})
    raise ValueError("not a child of its parent")
