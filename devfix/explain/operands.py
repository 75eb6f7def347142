"""The operands at a line of the user's code and where each one's device came from, from
devfix's static device inference (:mod:`devfix.codemods.analysis.devices`).

For the statement at a traceback's line, every value it reads (a name, an attribute chain such
as ``self.scale``, a layer it calls such as ``self.embed``) is an operand. For each: the
device the analysis proves it is on (``placed``: moved with ``.to(device)``, the output of a
model moved there, created with ``device=``), or that it is on the CPU (``on_cpu``: a factory
without ``device=``, ``.cpu()``), else unknown; and its origin: the line that last bound it
before the statement (its assignment, the attribute set in ``__init__``), or, for a parameter
of the function, that it is one (the caller's line then tells, one frame out).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from devfix.codemods.analysis import FileFacts
from devfix.codemods.analysis.devices import CPU, Device
from devfix.codemods.analysis.names import code_of, dotted_name
from devfix.context import FileContext
from devfix.parsing import parse

#: names that are never operands: builtins a line calls
_BUILTINS = frozenset(
    {"len", "range", "print", "int", "float", "str", "list", "dict", "tuple", "zip", "sum",
     "min", "max", "enumerate", "isinstance", "super", "getattr", "setattr", "type", "bool",
     "abs", "round", "sorted", "map", "filter", "any", "all", "iter", "next", "open", "repr",
     "None", "True", "False", "self"}
)  # fmt: skip


@dataclass(frozen=True)
class Operand:
    """One value a statement reads, and what devfix's analysis knows of its device."""

    #: the expression as written (``self.scale``, ``input_ids``)
    text: str
    #: ``cpu``, ``device`` (a device that is not the CPU, named in ``device_expression`` when
    #: the code names it), or ``unknown``
    placement: str
    #: why, in a few words (``moved with `.to(device)```, ``created without device=``)
    evidence: str
    #: the expression that names its device where it is (``device``, ``self.emb.weight.device``)
    device_expression: str | None
    #: the line that put the value there (its last binding, the attribute's assignment), if any
    origin_line: int | None
    #: the code of that line, stripped
    origin: str
    #: a parameter of the enclosing function: its caller decides
    parameter: bool = False
    #: a layer or model the statement calls (its parameters are the operand)
    called: bool = False
    #: the other lines that set it (an attribute's other assignments in its class)
    other_lines: tuple[int, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "expression": self.text,
            "placement": self.placement,
            "evidence": self.evidence,
            "device": self.device_expression,
            "origin_line": self.origin_line,
            "origin": self.origin,
            "parameter": self.parameter,
            "called": self.called,
        }


class LineOperands:
    """The device inference of one file, asked about lines of it."""

    def __init__(self, code: str, path: str) -> None:
        self.code = code
        self.lines = code.splitlines()
        module = parse(code, path)
        self.context = FileContext(module, path, code)
        self.facts = FileFacts.of(self.context)

    def statement_span(self, line: int) -> tuple[int, int] | None:
        """The first and last line of the innermost statement at ``line`` (a compound
        statement's header line alone)."""
        found = self._statement(line)
        if found is None:
            return None
        node, header = found
        if header:
            return line, line
        position = self.context.position(node)
        return position.start.line, position.end.line

    def _statement(self, line: int) -> tuple[cst.CSTNode, bool] | None:
        best: tuple[cst.CSTNode, bool] | None = None
        best_size = 1 << 30
        module = self.context.module
        for node in self.context.of_type(
            module, (cst.SimpleStatementLine, cst.BaseCompoundStatement)
        ):
            position = self.context.position(node)
            if not position.start.line <= line <= position.end.line:
                continue
            header = (
                isinstance(node, cst.BaseCompoundStatement)
                and _header_line(self.context, node) == line
            )
            if isinstance(node, cst.BaseCompoundStatement) and not header:
                continue
            size = position.end.line - position.start.line
            if header:
                size = 0
            if size < best_size:
                best, best_size = (node, header), size
        return best

    def operands(self, line: int, *, devices: bool = False) -> list[Operand]:
        """The values the statement at ``line`` reads, with their devices and origins (with
        ``devices``, the device values it reads too: ``device``, ``args.device``)."""
        found = self._statement(line)
        if found is None:
            return []
        statement, header = found
        seen: set[str] = set()
        out: list[Operand] = []
        nodes: list[cst.Name | cst.Attribute] = self.context.of_type(
            statement, (cst.Name, cst.Attribute)
        )
        for node in nodes:
            if header and self.context.position(node).start.line != line:
                continue
            if not self._is_operand(node):
                continue
            text = code_of(node)
            if text in seen:
                continue
            seen.add(text)
            function = self.facts.scopes.enclosing_function(node)
            if (
                not devices
                and not isinstance(self.context.parent(node), cst.BinaryOperation)
                and self.facts.moves.device_kind(node, function) is not None
            ):
                continue  # a device, not a tensor: `device`, `args.device`
            out.append(self._describe(node, text, statement))
        return out

    def feeds_batches(self, line: int) -> bool:
        """The statement at ``line`` builds a DataLoader or loops over one: its batches come
        from the file's data pipeline."""
        found = self._statement(line)
        if found is None:
            return False
        node, _ = found
        if isinstance(node, cst.For):
            return True
        return any(
            (dotted_name(call.func) or "").endswith("DataLoader")
            for call in self.context.of_type(node, cst.Call)
        )

    def pipeline_spans(self) -> list[tuple[int, int]]:
        """The lines of the file's data-pipeline functions (Dataset methods, collate functions,
        functions handed to ``.map``)."""
        spans: list[tuple[int, int]] = []
        for function in self.context.of_type(self.context.module, cst.FunctionDef):
            if self.facts.flow.in_data_pipeline(function.body):
                position = self.context.position(function)
                spans.append((position.start.line, position.end.line))
        return spans

    def sources(self, line: int) -> list[int]:
        """The lines where the values the statement at ``line`` reads got theirs: one step
        further back than :meth:`operands` (``model = Net().to(device)`` -> where ``device``
        was chosen)."""
        found = self.operands(line, devices=True)
        return [o.origin_line for o in found if o.origin_line is not None]

    def _is_operand(self, node: cst.Name | cst.Attribute) -> bool:
        parent = self.context.parent(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            # part of a longer chain, which is the operand; but the receiver of a method call
            # (`ema_p.mul_(...)`, `trainer.train()`) is one itself
            holder = self.context.parent(parent)
            if not (isinstance(holder, cst.Call) and holder.func is parent):
                return False
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            return False
        if isinstance(parent, (cst.Arg,)) and parent.keyword is node:
            return False
        if isinstance(parent, (cst.AssignTarget, cst.Param, cst.ImportAlias, cst.Decorator)):
            return False
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
            return False
        name = dotted_name(node)
        if name is None or (name.split(".")[0] in _BUILTINS and "." not in name):
            return False
        if name == "self" or name.endswith((".shape", ".device", ".dtype", ".size")):
            return False
        if self.facts.names.qualified_name(node) is not None and not self._is_local(node):
            return False  # torch.arange, F.relu: an imported name
        return not (
            isinstance(parent, cst.Call)
            and parent.func is node
            and not self._callable_operand(node)
        )

    def _is_local(self, node: cst.CSTNode) -> bool:
        name = dotted_name(node) or ""
        root = name.split(".")[0]
        return root == "self" or (
            self.facts.scopes.binding_before(root, node) is not None
            and (root not in self._imported())
        )

    def _imported(self) -> set[str]:
        found: set[str] = set()
        imports: list[cst.Import | cst.ImportFrom] = self.context.of_type(
            self.context.module, (cst.Import, cst.ImportFrom)
        )
        for node in imports:
            names = node.names
            if isinstance(names, cst.ImportStar):
                continue
            for alias in names:
                bound = alias.asname.name if alias.asname is not None else alias.name
                text = code_of(bound) if isinstance(bound, (cst.Name, cst.Attribute)) else ""
                found.add(text.split(".")[0])
        return found

    def _callable_operand(self, node: cst.Name | cst.Attribute) -> bool:
        """A call of a layer or model (``self.embed(x)``, ``model(**inputs)``): its parameters
        are operands of what it computes. A plain function's is not."""
        name = dotted_name(node) or ""
        if name.startswith("self.") and name.count(".") == 1:
            return True  # a submodule of the model the method belongs to
        if self.facts.flow.model_device(node, node) is not None or self._module_built(node):
            return True
        # a called local (a loop's `layer`, a `criterion`) is an object; a `def` is not
        scopes = self.facts.scopes
        defined = set(scopes.module_functions()) | set(scopes.module_classes())
        return (
            isinstance(node, cst.Name)
            and node.value not in defined
            and (
                self._loop_binding(node, node.value) is not None
                or scopes.binding_before(node.value, node) is not None
            )
        )

    def _module_built(self, node: cst.CSTNode) -> bool:
        if not isinstance(node, cst.Name):
            return False
        binding = self.facts.scopes.binding_before(node.value, node)
        if binding is None or not isinstance(binding[1], cst.Call):
            return False
        callee = binding[1].func
        while isinstance(callee, cst.Attribute) and isinstance(callee.value, cst.Call):
            callee = callee.value.func
        text = dotted_name(callee) or ""
        return text[:1].isupper() or text.rsplit(".", 1)[-1][:1].isupper()

    def _describe(
        self, node: cst.Name | cst.Attribute, text: str, statement: cst.CSTNode
    ) -> Operand:
        parent = self.context.parent(node)
        called = isinstance(parent, cst.Call) and parent.func is node
        devices = self.facts.devices
        placed = devices.placed(node, node)
        origin_line: int | None = None
        origin = ""
        parameter = False
        root = text.split(".")[0]
        function = self.facts.scopes.enclosing_function(node)
        # the binding before the statement (`x = f(x)` reads the previous `x`)
        binding = self.facts.scopes.binding_before(text if root == "self" else root, statement)
        value = binding[1] if binding is not None else None
        if binding is not None and root != "self":
            after = self.context.order(statement)[0]
            bound = binding[1]
            if bound is not None and self.context.order(bound)[0] >= after:
                binding, value = None, None  # no binding before the statement in its scope
        parameter = (binding is None and function is not None and root in _params(function)) or (
            binding is not None and binding[0] == "param"
        )
        if value is not None:
            origin_line = self.context.position(value).start.line
            origin = self._line(origin_line)
            if placed is None and root == "self":
                placed = devices.placed(value, value)
        elif not parameter:
            loop = self._loop_binding(node, root)
            if loop is not None:
                origin_line = self.context.position(loop).start.line
                origin = self._line(origin_line)
        on_cpu = placed is None and (
            devices.on_cpu(node, node) or (value is not None and devices.on_cpu(value, value))
        )
        model = self.facts.flow.model_device(node, node) if root != "self" else None
        device: Device | None = placed
        if device is not None:
            evidence = device.evidence or "placed on a device"
            expression = device.expression()
            placement = "device"
            if isinstance(device, CPU):
                placement, expression = "cpu", None
        elif model is not None and model.move is not None:
            placement, expression = "device", model.move.code
            evidence = f"a model moved to {model.move.describe()}"
        elif on_cpu:
            placement, evidence, expression = "cpu", _cpu_evidence(value), None
        else:
            placement, expression = "unknown", None
            evidence = (
                "a parameter: its caller decides"
                if parameter
                else "nothing in the code says where it is"
            )
        return Operand(
            text,
            placement,
            evidence,
            expression,
            origin_line,
            origin,
            parameter,
            called,
            self._attribute_lines(text, function, origin_line) if root == "self" else (),
        )

    def _attribute_lines(
        self, text: str, function: cst.FunctionDef | None, seen: int | None
    ) -> tuple[int, ...]:
        """The lines of the class's other assignments of ``self.<attr>``."""
        table, _ = self.facts.scopes.lookup(text, function)
        lines = []
        for binding in table.bindings.get(text, []):
            if binding.value is not None:
                line = self.context.position(binding.value).start.line
                if line != seen and line not in lines:
                    lines.append(line)
        return tuple(lines)

    def _loop_binding(self, node: cst.CSTNode, name: str) -> cst.For | None:
        """The ``for`` loop around ``node`` whose target binds ``name``."""
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.For):
                targets = self.context.of_type(ancestor.target, cst.Name)
                if any(t.value == name for t in targets):
                    return ancestor
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return None
        return None

    def _line(self, line: int) -> str:
        return self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""


def _cpu_evidence(value: cst.BaseExpression | None) -> str:
    if value is None:
        return "on the CPU"
    func = value.func if isinstance(value, cst.Call) else None
    if isinstance(func, cst.Attribute) and func.attr.value == "cpu":
        return "moved to the CPU with `.cpu()`"
    return f"made on the CPU by `{_short(code_of(value))}` (no device= or move)"


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def _params(function: cst.FunctionDef) -> set[str]:
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    names = {p.name.value for p in every}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    return names


def _header_line(context: FileContext, node: cst.BaseCompoundStatement) -> int:
    """The line of a compound statement's keyword (after its decorators)."""
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return context.position(node.name).start.line
    return context.position(node).start.line
