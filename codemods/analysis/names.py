"""Imports and qualified names: what a name in the file refers to, and how the file spells a
torch object (`t.zeros` after `import torch as t`, `nn.ModuleList` after `from torch import nn`).

Qualified names come from the file's context (its import table, libcst's scope analysis for the
ambiguous rest); the top-level import statements are read once, here, for the spelling
questions the fixes ask.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from devfix.codemods.analysis.torch_names import TORCH_DTYPES, VARIABLE
from devfix.context import FileContext
from devfix.tree import dotted_name as dotted_name  # the engine's; re-exported for the passes
from devfix.types import ImportSpec


def call_tail(func: cst.BaseExpression) -> str | None:
    """The last name of a called expression: `torch.nn.functional.pad` -> `pad`."""
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def is_method_call(node: cst.BaseExpression, method: str) -> bool:
    """`node` is a call of `.method(...)` on some receiver."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == method
    )


def root_name(node: cst.BaseExpression) -> str | None:
    """The name an expression starts from, through attributes, subscripts and called
    expressions: `model.module.parameters()` -> "model"; `x[0].y` -> "x"; `f(x)` -> "f"."""
    while True:
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        elif isinstance(node, cst.Call):
            node = node.func
        else:
            return None


def receiver_root(node: cst.BaseExpression) -> str | None:
    """The name a tensor expression is computed from through attributes, subscripts and method
    calls: `x.transpose(1, 2)[0]` -> "x"; a plain call `f(x)` has none."""
    while True:
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        else:
            return None


def is_main_guard(node: cst.CSTNode) -> bool:
    """`if __name__ == "__main__":` (either operand order): the script's entry point."""
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


def indexed_by_a_string(node: cst.BaseExpression) -> bool:
    """`batch["x"]`: a subscript by a string literal, which reads a mapping's entry (a tensor
    is never indexed so)."""
    return (
        isinstance(node, cst.Subscript)
        and len(node.slice) == 1
        and isinstance(node.slice[0].slice, cst.Index)
        and isinstance(node.slice[0].slice.value, (cst.SimpleString, cst.ConcatenatedString))
    )


def keyword_argument(call: cst.Call, keyword: str) -> cst.Arg | None:
    """The argument passed as `keyword=...`, if any."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg
    return None


def argument(call: cst.Call, keyword: str, index: int = 0) -> cst.BaseExpression | None:
    """The value passed as `keyword=...`, else the `index`-th plain positional argument."""
    found = argument_of(call, keyword, index)
    return found.value if found is not None else None


def argument_of(call: cst.Call, keyword: str, index: int = 0) -> cst.Arg | None:
    """The argument passed as `keyword=...`, else the `index`-th plain positional one."""
    found = keyword_argument(call, keyword)
    if found is not None:
        return found
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[index] if index < len(positional) else None


def has_star_kwargs(call: cst.Call) -> bool:
    """`f(**kwargs)`: any keyword may hide in it."""
    return any(arg.star == "**" for arg in call.args)


_CONSTANTS = (
    cst.Integer,
    cst.Float,
    cst.Imaginary,
    cst.SimpleString,
    cst.ConcatenatedString,
    cst.FormattedString,
    cst.Lambda,
)


def is_constant(node: cst.BaseExpression) -> bool:
    """A literal (number, string, lambda) or `None`/`True`/`False`: never a tensor."""
    return isinstance(node, _CONSTANTS) or (
        isinstance(node, cst.Name) and node.value in ("None", "True", "False")
    )


def is_number(node: cst.BaseExpression) -> bool:
    """A number literal, signed or not: `3`, `0.5`, `-1`."""
    if isinstance(node, cst.UnaryOperation):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float))


def statement_call(statement: cst.BaseStatement) -> cst.Call | None:
    """The call of a statement that is one call expression (`print(x)`, `torch.save(...)`)."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        return small.value
    return None


def name_assignment(statement: cst.BaseStatement) -> cst.Assign | None:
    """The assignment of a statement that is one `name = value` (a plain name target)."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
    ):
        return small
    return None


def is_docstring(statement: cst.BaseStatement) -> bool:
    """A statement that is one string expression (a docstring where it comes first)."""
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def string_value(node: cst.BaseExpression) -> str | None:
    """The text of a plain string literal (`"x"`, `'x'`), else None."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def code_of(node: cst.CSTNode) -> str:
    """The source text of a node (of this file or built by a fix)."""
    return cst.Module(body=[]).code_for_node(node)


def parsed_expression(text: str) -> cst.BaseExpression:
    """The expression `text` spells (the inverse of `code_of`), or the placeholder `_` when it
    spells none: text that does not parse names no device, no call, nothing a caller looks for."""
    try:
        return cst.parse_expression(text)
    except cst.ParserSyntaxError:
        return cst.Name("_")


@dataclass(frozen=True)
class ImportRecord:
    """One name bound by a top-level import: `import a.b as c` -> ("a.b", None, "c")."""

    module: str
    #: The imported member of `from module import name`; None for `import module`.
    name: str | None
    #: The local name; None for `import a.b` (which binds `a`).
    bound: str | None
    #: `from .module import name`: `module` is relative to the file's package.
    relative: bool = False


class Names:
    """Qualified names of the file's expressions and the top-level import table."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._imports: list[ImportRecord] | None = None
        self._aliases: dict[tuple[str, ...], frozenset[str]] = {}
        self._table: dict[str, str] | None = None
        self._code: str | None = None

    def mentions(self, words: tuple[str, ...]) -> bool:
        """The file's text holds one of `words` (as a pass's trigger words are matched)."""
        if self._code is None:
            self._code = self.context.module.code
        return any(word in self._code for word in words)

    def qualified_name(self, node: cst.CSTNode) -> str | None:
        """The single fully resolved dotted name of `node`, or None if absent or ambiguous."""
        names = {qn.name for qn in self.context.qualified_names(node)}
        return names.pop() if len(names) == 1 else None

    def qualified_name_through_star(self, node: cst.CSTNode) -> str | None:
        """`qualified_name`, and for `torch.x.y` (or `nn.x`) in a file that binds `torch` (or
        `nn`) nowhere but has a top-level `from helpers import *` (which brings the helpers'
        `import torch` / `import torch.nn as nn` along): "torch.x.y" ("torch.nn.x"). Scripts
        and model files written against a star-importing utility module spell torch so."""
        found = self.qualified_name(node)
        if found is not None:
            return found
        dotted = dotted_name(node)
        head = dotted.split(".")[0] if dotted is not None else None
        if dotted is None or head not in ("torch", "nn") or not self.has_star_import():
            return None
        if head in self._module_level_names():
            return None
        return dotted if head == "torch" else f"torch.{dotted}"

    def through_variable(self, node: cst.BaseExpression) -> cst.BaseExpression:
        """`Variable(node)` where that call wraps `node` alone (the value a script passes on),
        else `node`."""
        holder = self.context.parent(node)
        if isinstance(holder, cst.Arg):
            wrapper = self.context.parent(holder)
            if (
                isinstance(wrapper, cst.Call)
                and len(wrapper.args) == 1
                and self.qualified_name(wrapper.func) in VARIABLE
            ):
                return wrapper
        return node

    def has_star_import(self) -> bool:
        """A top-level `from module import *`."""
        return any(
            isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar)
            for line in self.context.module.body
            if isinstance(line, cst.SimpleStatementLine)
            for small in line.body
        )

    def bound_anywhere(self, name: str) -> bool:
        """The file binds `name` somewhere (an import, an assignment, a def, a parameter)."""
        return name in self._module_level_names()

    def _module_level_names(self) -> frozenset[str]:
        """Every name the file binds anywhere (imports, assignments, defs, parameters)."""
        cached = self.context.shared.get("names.bound_anywhere")
        if isinstance(cached, frozenset):
            return cached
        bound: set[str] = set()
        for node in self.context.subtree(self.context.module):
            if isinstance(node, cst.ImportAlias):
                target: cst.BaseExpression = (
                    node.asname.name if node.asname is not None else node.name
                )
                while isinstance(target, cst.Attribute):
                    target = target.value
                if isinstance(target, cst.Name):
                    bound.add(target.value)
            elif isinstance(node, cst.Param):
                bound.add(node.name.value)
            elif isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name):
                bound.add(node.target.value)
            elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                bound.add(node.name.value)
        result = frozenset(bound)
        self.context.shared["names.bound_anywhere"] = result
        return result

    def is_dtype(self, node: cst.BaseExpression) -> bool:
        """`torch.float16`, `t.long`: a dtype (`.to(dtype)` changes no device)."""
        return isinstance(node, (cst.Name, cst.Attribute)) and (
            self.qualified_name(node) in TORCH_DTYPES
        )

    # -- the top-level import table ----------------------------------------------------------

    def imports(self) -> list[ImportRecord]:
        if self._imports is None:
            records: list[ImportRecord] = []
            for line in self.context.module.body:
                if not isinstance(line, cst.SimpleStatementLine):
                    continue
                for small in line.body:
                    if isinstance(small, cst.Import):
                        for alias in small.names:
                            module = dotted_name(alias.name) or ""
                            bound = alias.asname.name if alias.asname else None
                            records.append(
                                ImportRecord(
                                    module,
                                    None,
                                    bound.value if isinstance(bound, cst.Name) else None,
                                )
                            )
                    elif isinstance(small, cst.ImportFrom) and not isinstance(
                        small.names, cst.ImportStar
                    ):
                        source = dotted_name(small.module) if small.module is not None else None
                        for alias in small.names:
                            bound_node = alias.asname.name if alias.asname else alias.name
                            records.append(
                                ImportRecord(
                                    source or "",
                                    dotted_name(alias.name),
                                    bound_node.value if isinstance(bound_node, cst.Name) else None,
                                    bool(small.relative),
                                )
                            )
            self._imports = records
        return self._imports

    def import_table(self) -> dict[str, str]:
        """Local name -> the dotted name a top-level absolute import binds it to (`import a.b`
        binds `a` to `a`; a later import of the same name wins, as at run time)."""
        if self._table is None:
            table: dict[str, str] = {}
            for record in self.imports():
                if record.relative:
                    continue
                if record.name is None:
                    top = record.module.split(".")[0]
                    table[record.bound or top] = record.module if record.bound else top
                elif record.bound is not None and record.module:
                    table[record.bound] = f"{record.module}.{record.name}"
            self._table = table
        return self._table

    def imported_aliases(self, *modules: str) -> frozenset[str]:
        """Local names bound by top-level `from <module> import x [as y]` for the given modules:
        a cheap way to recognise `from torch import zeros as z; z(3)` before resolving names."""
        cached = self._aliases.get(modules)
        if cached is None:
            cached = frozenset(
                record.bound
                for record in self.imports()
                if record.name is not None
                and record.bound is not None
                and any(record.module == m or record.module.startswith(m + ".") for m in modules)
            )
            self._aliases[modules] = cached
        return cached

    def relative_import_source(self, name: str) -> str | None:
        """The module a top-level relative import binds `name` from, without its dots:
        `from ...modeling_utils import PreTrainedModel` -> "modeling_utils"; None otherwise."""
        for line in self.context.module.body:
            if not isinstance(line, cst.SimpleStatementLine):
                continue
            for small in line.body:
                if (
                    isinstance(small, cst.ImportFrom)
                    and small.relative
                    and not isinstance(small.names, cst.ImportStar)
                ):
                    for alias in small.names:
                        bound = alias.asname.name if alias.asname else alias.name
                        if isinstance(bound, cst.Name) and bound.value == name:
                            return dotted_name(small.module) if small.module else ""
        return None

    def binds_from_import(self, name: str) -> bool:
        """A top-level `from ... import name` binds `name`."""
        return any(r.name is not None and r.bound == name for r in self.imports())

    def torch_alias(self) -> str | None:
        """The name a top-level `import torch [as t]` binds, if any."""
        for record in self.imports():
            if record.name is None and record.module == "torch":
                return record.bound or "torch"
        return None

    def torch_spelling(self) -> tuple[str, list[ImportSpec]]:
        """How to write `torch` here, with the import that needs (if any)."""
        alias = self.torch_alias()
        return (alias, []) if alias is not None else ("torch", [ImportSpec("torch")])

    def nn_reference(self, name: str) -> tuple[str, tuple[ImportSpec, ...]]:
        """How this file can spell `torch.nn.<name>`, and the import that needs (if any)."""
        spelled: str | None = None
        for record in self.imports():
            if record.name is None:
                if record.module == "torch.nn" and record.bound:
                    return f"{record.bound}.{name}", ()
                if record.module == "torch" and record.bound:
                    spelled = spelled or f"{record.bound}.nn.{name}"
                elif record.module in ("torch", "torch.nn") and record.bound is None:
                    spelled = spelled or f"torch.nn.{name}"
            elif record.bound is not None:
                if record.module == "torch" and record.name == "nn":
                    return f"{record.bound}.{name}", ()
                if record.module == "torch.nn" and record.name == name:
                    return record.bound, ()
        if spelled is not None:
            return spelled, ()
        return name, (ImportSpec("torch.nn", name),)

    def import_block_end(self) -> cst.BaseStatement | None:
        """The statement after which code can use the script's imports: the last line of the
        leading import block (or the docstring), moved down past a later `import torch` or
        `import os` (scripts that set up `sys.path` first); None for the very top."""
        return _import_block_end(self.context.module)


def _is_import_line(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
    )


def _import_block_end(module: cst.Module) -> cst.BaseStatement | None:
    """The last import of the script's leading import block (after its docstring)."""
    anchor: cst.BaseStatement | None = None
    for index, statement in enumerate(module.body):
        if _is_import_line(statement):
            anchor = statement
            continue
        is_docstring = (
            index == 0
            and isinstance(statement, cst.SimpleStatementLine)
            and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr)
            and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
        )
        if is_docstring:
            anchor = statement  # no imports yet: the helper goes after the docstring
            continue
        break
    # `import torch` / `import os` further down (after `sys.path` set-up): the helper needs them.
    for statement in module.body:
        if (
            isinstance(statement, cst.SimpleStatementLine)
            and _is_import_line(statement)
            and any(
                isinstance(small, cst.Import)
                and any(
                    isinstance(alias.name, cst.Name) and alias.name.value in ("torch", "os")
                    for alias in small.names
                )
                for small in statement.body
            )
        ):
            later = [s for s in module.body if s is statement or s is anchor]
            if later and later[-1] is statement:
                anchor = statement
    return anchor
