"""Buffers: the tensors a module keeps as plain attributes, and whether `register_buffer` can
hold them.

Where a module stores state (its construction-time methods, a `train`/`eval` override), which
stored values are caches read back by other methods, which containers hold only new tensors,
and what would make `register_buffer` fail or change the program (no `super().__init__()` yet,
a class attribute of that name, a `None` or a non-tensor assigned to it elsewhere).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.modules import (
    TensorJudge,
    class_level_names,
    method,
    methods,
    self_attribute,
    self_name,
    super_init_call,
)
from devfix.codemods.analysis.moves import copies_to_host
from devfix.codemods.analysis.names import keyword_argument
from devfix.codemods.analysis.torch_names import (
    CPU_SOURCES,
    DATA_FACTORIES,
    KEEPING_AND_MEETING_NONE,
    PARAMETER,
)

#: A module method and its class.
Method = tuple[cst.FunctionDef, cst.ClassDef]

#: Methods that run while the module computes, not once on the built module.
_RUN_TIME_METHODS = frozenset({"forward", "train", "eval", "extra_repr"})
#: Calls that make a tensor from data.
_DATA_SOURCES = CPU_SOURCES | DATA_FACTORIES | {"torch.load"}

_CONTAINERS = (
    cst.List,
    cst.Tuple,
    cst.Set,
    cst.Dict,
    cst.ListComp,
    cst.SetComp,
    cst.GeneratorExp,
    cst.DictComp,
)


class Buffers(Analysis):
    """Plain tensor attributes of the file's modules and what registering them needs."""

    def construction_of(self, node: cst.CSTNode) -> Method | None:
        """The construction-time method (`__init__` or a helper only it calls) around `node`
        in an `nn.Module`, and its class."""
        function = self.facts.modules.enclosing_function(node)
        if function is None or function.owner is None or not function.owner.is_module:
            return None
        if not self.facts.modules.is_construction(function):
            return None
        return function.node, function.owner.node

    def mode_switch_of(self, node: cst.CSTNode) -> Method | None:
        """A `train(mode)` / `eval()` override of an `nn.Module` around `node`: what it stores
        on `self` is a cache the module keeps between calls of `forward`."""
        function = self.facts.modules.enclosing_function(node)
        if function is None or function.owner is None or not function.owner.is_module:
            return None
        if function.name not in ("train", "eval"):
            return None
        return function.node, function.owner.node

    def loader_of(self, node: cst.CSTNode) -> Method | None:
        """A method of an `nn.Module` around `node` that its callers run on the built module
        (`net.load_anchors(path)`): public, undecorated, not `forward` or another hook, and
        never called by the class itself."""
        function = self.facts.modules.enclosing_function(node)
        if function is None or function.owner is None or not function.owner.is_module:
            return None
        name = function.name
        if name.startswith("_") or name in _RUN_TIME_METHODS or function.node.decorators:
            return None
        if self.facts.modules.is_construction(function):
            return None
        classdef = function.owner.node
        for other in methods(classdef):
            self_var = self_name(other) or "self"
            for call in self.context.of_type(other.body, cst.Call):
                if self_attribute(call.func, self_var) == name:
                    return None
        return function.node, classdef

    def made_afresh(self, value: cst.BaseExpression) -> bool:
        """A tensor made from data (`torch.tensor(np.load(path))`, `torch.from_numpy(a).float()`,
        `torch.load(path)`), not one computed from the tensors a method is given."""
        node = value
        while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if self.names.qualified_name(node.func) in _DATA_SOURCES:
                return True
            node = node.func.value
        return isinstance(node, cst.Call) and self.names.qualified_name(node.func) in _DATA_SOURCES

    def stored_at(
        self, node: cst.CSTNode, target: cst.BaseExpression
    ) -> tuple[str, Method, bool] | None:
        """`self.<attr>` as the `target` of a store at `node` in an `nn.Module` while it is
        built (`construction_of`; then True), in a `train`/`eval` override that keeps a cache
        there (`mode_switch_of`, `is_cache`), or in a method callers run on the built module
        that loads it from data (`loader_of`: never set while built, read by another method;
        then False); the attribute and the method."""
        if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)):
            return None
        owner = self.construction_of(node)
        built = owner is not None
        owner = owner or self.mode_switch_of(node)
        if owner is None:
            return self._loaded_at(node, target)
        attr = self_attribute(target, self_name(owner[0]) or "")
        if attr is None or not (built or self.is_cache(attr, owner[1], owner[0])):
            return None
        return attr, owner, built

    def _loaded_at(
        self, node: cst.CSTNode, target: cst.BaseExpression
    ) -> tuple[str, Method, bool] | None:
        owner = self.loader_of(node)
        if owner is None or not isinstance(node, cst.Assign) or not self.made_afresh(node.value):
            return None
        attr = self_attribute(target, self_name(owner[0]) or "")
        if attr is None or not self.is_cache(attr, owner[1], owner[0]):
            return None
        construction = self.facts.modules.construction_methods(owner[1])
        if any(
            function.name.value in construction
            for function, _, _ in self.facts.modules.assignments_to(owner[1], attr)
        ):
            return None  # set while built: that assignment decides
        return attr, owner, False

    def setattr_store(
        self, call: cst.Call
    ) -> tuple[cst.BaseExpression, cst.BaseExpression, Method] | None:
        """`setattr(self, name, value)` as a statement while a module is built: the name, the
        value and the method."""
        if len(call.args) != 3 or any(a.keyword is not None or a.star for a in call.args):
            return None
        owner = self.construction_of(call)
        if owner is None or not isinstance(self.context.parent(call), cst.Expr):
            return None
        if self.names.qualified_name(call.func) not in ("builtins.setattr", None):
            return None
        receiver, name, value = (a.value for a in call.args)
        if not (isinstance(receiver, cst.Name) and receiver.value == self_name(owner[0])):
            return None
        return name, value, owner

    def stored_kind(self, value: cst.BaseExpression, attr: str | None, owner: Method) -> str | None:
        """What `self.<attr> = value` stores in `owner`: "tensors" (a container of new tensors,
        `holds_new_tensors`), "trainable" (a tensor that requires grad, or whose grad the class
        enables later), "tensor"; None for anything else and for a name the class registers
        itself."""
        writer, classdef = owner
        judge = self.facts.modules.tensor_judge(writer)
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
            # `[torch.zeros(1)] * levels`: the list repeats one tensor
            value = next((v for v in (value.left, value.right) if isinstance(v, cst.List)), value)
        if isinstance(value, _CONTAINERS):
            return "tensors" if holds_new_tensors(judge, value) else None
        if not judge.is_tensor(value):
            return None
        if attr is not None and self.facts.modules.registered_otherwise(classdef, attr):
            return None
        if judge.requires_grad(value) or (
            attr is not None and self.facts.modules.grad_enabled_later(classdef, attr)
        ):
            return "trainable"
        return "tensor"

    def is_cache(self, attr: str, classdef: cst.ClassDef, writer: cst.FunctionDef) -> bool:
        """`self.<attr>` is read back as a value by another method than `writer` (not only
        tested against `None` or deleted): a tensor kept between calls, not a value left for
        the caller."""
        for function in methods(classdef):
            if function is writer:
                continue
            self_var = self_name(function)
            if self_var is None:
                continue
            for node in self.scopes.nodes(function.body):
                if (
                    isinstance(node, cst.Attribute)
                    and self_attribute(node, self_var) == attr
                    and self._read_as_value(node)
                ):
                    return True
        return False

    def read_beside_host_copies(self, attr: str, classdef: cst.ClassDef) -> str | None:
        """Where the class uses `self.<attr>` with a tensor copied to the CPU, directly
        (`self.betas.gather(-1, t.cpu())`) or through a function of the file it hands it to
        (`extract(self.betas, t)` with `a.gather(-1, t.cpu())`): the tensor is kept on the CPU
        on purpose, and a buffer would follow the model away from those CPU tensors. None
        otherwise."""
        functions = self.scopes.module_functions()
        for function in methods(classdef):
            self_var = self_name(function)
            if self_var is None:
                continue
            for node in self.scopes.nodes(function.body):
                if not (isinstance(node, cst.Attribute) and self_attribute(node, self_var) == attr):
                    continue
                if self._meets_host_copy(node):
                    return f"`{function.name.value}` uses it with a tensor copied to the CPU"
                arg = self.context.parent(node)
                if not isinstance(arg, cst.Arg) or arg.keyword is not None:
                    continue
                call = self.context.parent(arg)
                if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name)):
                    continue
                helper = functions.get(call.func.value)
                if helper is None:
                    continue
                param = self.facts.modules.parameter_receiving(call, call.args.index(arg))
                if param is None:
                    continue
                for inner in self.scopes.nodes(helper.body):
                    if (
                        isinstance(inner, cst.Name)
                        and inner.value == param
                        and self._meets_host_copy(inner)
                    ):
                        return (
                            f"`{helper.name.value}`, which `{function.name.value}` hands it "
                            "to, uses it with a tensor copied to the CPU"
                        )
        return None

    def _methods_after_construction(
        self, classdef: cst.ClassDef
    ) -> Iterator[tuple[cst.FunctionDef, str]]:
        """The class's methods that run on the built module, with their `self` name."""
        construction = self.facts.modules.construction_methods(classdef)
        for function in methods(classdef):
            self_var = self_name(function)
            if self_var is not None and function.name.value not in construction:
                yield function, self_var

    def built_where_it_runs(self, classdef: cst.ClassDef) -> str | None:
        """Where the file builds this module, when every construction of it is inside another
        module's code that runs on inputs (`disparityregression(n)(cost)` in `forward`): an
        instance made per call, which no `model.to()` ever reaches. The dotted name of that
        method (the first), or None."""
        name = classdef.name.value
        where: str | None = None
        for call in self.scopes.find(self.context.module, cst.Call):
            if not (isinstance(call.func, cst.Name) and call.func.value == name):
                continue
            function = self.facts.modules.enclosing_function(call)
            if (
                function is None
                or function.owner is None
                or not function.owner.is_module
                or self.facts.modules.is_construction(function)
            ):
                return None
            where = where or f"{function.owner.node.name.value}.{function.name}"
        return where

    def reads_after_construction(
        self, attr: str, classdef: cst.ClassDef
    ) -> list[tuple[cst.Attribute, str]] | None:
        """Each value read of `self.<attr>` in the methods run on the built module, with the
        method's first tensor input; None where a reading method takes none."""
        found: list[tuple[cst.Attribute, str]] = []
        for function, self_var in self._methods_after_construction(classdef):
            reads = [
                node
                for node in self.scopes.nodes(function.body)
                if isinstance(node, cst.Attribute)
                and self_attribute(node, self_var) == attr
                and self._read_as_value(node)
            ]
            if not reads:
                continue
            inputs = self.facts.modules.function_info(function).tensor_params
            if not inputs and function.name.value == "forward":
                # A module's `forward` is handed its input tensors.
                inputs = [p.name.value for p in function.params.params[1:2]]
            if not inputs:
                return None
            found.extend((read, inputs[0]) for read in reads)
        return found or None

    def follows_the_inputs(self, attr: str, classdef: cst.ClassDef) -> str | None:
        """The method that re-binds `self.<attr>` to where its input is before it reads it
        (`self.mean = self.mean.type_as(x)`), where that is every method that reads it besides
        the construction code: the attribute follows the inputs in each replica and after any
        `model.to()`. None otherwise."""
        found: str | None = None
        for function, self_var in self._methods_after_construction(classdef):
            reads = [
                node
                for node in self.scopes.nodes(function.body)
                if isinstance(node, cst.Attribute) and self_attribute(node, self_var) == attr
            ]
            if not reads:
                continue
            target = self.context.parent(reads[0])
            first = self.context.parent(target) if target is not None else None
            statement = self.context.parent(first) if isinstance(first, cst.Assign) else None
            if not (
                isinstance(first, cst.Assign)
                and isinstance(statement, cst.SimpleStatementLine)
                and self.context.parent(statement) is function.body
                and self._rebinds_to_an_input(first, self_var, attr, function)
            ):
                return None
            found = found or function.name.value
        return found

    def moved_at_each_read(self, attr: str, classdef: cst.ClassDef) -> str | None:
        """The method that hands `self.<attr>` out moved to a device it is given, where every
        value read of it outside the construction code is such a move (`return
        self.mask[:n, :n].to(device)`; reads of its `.shape` or `.dtype` aside): the cached
        tensor goes where each caller asks, replica or not. None otherwise."""
        found: str | None = None
        for function, self_var in self._methods_after_construction(classdef):
            for node in self.scopes.nodes(function.body):
                if not (
                    isinstance(node, cst.Attribute)
                    and self_attribute(node, self_var) == attr
                    and self._read_as_value(node)
                ):
                    continue
                reader = self.context.parent(node)
                if isinstance(reader, cst.Attribute) and reader.attr.value in (
                    "shape",
                    "dtype",
                    "ndim",
                ):
                    continue
                if not self._moved_where_asked(node):
                    return None
                found = found or function.name.value
        return found

    def _moved_where_asked(self, read: cst.BaseExpression) -> bool:
        """`read` (through slices and reshapes: `read[:n, :n]`, `read.unsqueeze(0).expand(b,
        -1)`) is moved by `.to(x)` or `.type_as(x)` with `x` a name or an attribute (`device`,
        `x.device`), not a literal device. An index that may be a tensor (`read[timestep]`)
        meets it before the move, where it was made."""
        node: cst.CSTNode = read
        parent = self.context.parent(node)
        while isinstance(parent, cst.Subscript) and parent.value is node:
            if not all(
                isinstance(element.slice, cst.Slice)
                or (
                    isinstance(element.slice, cst.Index)
                    and isinstance(element.slice.value, (cst.Integer, cst.Ellipsis))
                )
                for element in parent.slice
            ):
                return False
            node, parent = parent, self.context.parent(parent)
        while (
            isinstance(parent, cst.Attribute)
            and parent.value is node
            and parent.attr.value in KEEPING_AND_MEETING_NONE
            and isinstance(call := self.context.parent(parent), cst.Call)
            and call.func is parent
        ):
            node, parent = call, self.context.parent(call)
        if not (
            isinstance(parent, cst.Attribute)
            and parent.value is node
            and parent.attr.value in ("to", "type_as")
        ):
            return False
        call = self.context.parent(parent)
        if not (isinstance(call, cst.Call) and call.func is parent):
            return False
        target = keyword_argument(call, "device") or next(
            (arg for arg in call.args if arg.keyword is None), None
        )  # `.to(dtype=x.dtype)` alone keeps the device
        return target is not None and isinstance(target.value, (cst.Name, cst.Attribute))

    def _rebinds_to_an_input(
        self, assign: cst.Assign, self_var: str, attr: str, function: cst.FunctionDef
    ) -> bool:
        """`self.<attr> = self.<attr>.type_as(x)` (or `.to(x)`, `.to(x.device)`) with `x` a
        parameter of `function`."""
        value = assign.value
        if not (
            len(assign.targets) == 1
            and self_attribute(assign.targets[0].target, self_var) == attr
            and isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in ("type_as", "to")
            and self_attribute(value.func.value, self_var) == attr
            and len(value.args) == 1
        ):
            return False
        target = value.args[0].value
        if isinstance(target, cst.Attribute) and target.attr.value == "device":
            target = target.value
        params = {p.name.value for p in function.params.params}
        return isinstance(target, cst.Name) and target.value in params - {self_var}

    def _meets_host_copy(self, node: cst.BaseExpression) -> bool:
        """`node` is the receiver or an operand of a tensor operation whose other side is a CPU
        copy (`node.gather(-1, t.cpu())`, `node[t.cpu()]`, `node * w.cpu()`)."""
        parent = self.context.parent(node)
        others: list[cst.CSTNode] = []
        if isinstance(parent, cst.Attribute) and parent.value is node:
            call = self.context.parent(parent)
            if isinstance(call, cst.Call) and call.func is parent:
                others = [arg.value for arg in call.args]
        elif isinstance(parent, cst.Subscript) and parent.value is node:
            others = [element.slice for element in parent.slice]
        elif isinstance(parent, cst.BinaryOperation):
            others = [parent.right if parent.left is node else parent.left]
        return any(
            isinstance(inner, cst.Call) and copies_to_host(inner)
            for other in others
            for inner in self.context.subtree(other)
        )

    def read_in_file(self, attr: str) -> bool:
        """Something in the file reads `<x>.<attr>` as a value, or names it in a string
        (`getattr(self, "attr")`): a tensor stored there can meet others."""
        if attr not in self.context.text:
            return False
        return any(
            isinstance(node, cst.Attribute)
            and node.attr.value == attr
            and self._read_as_value(node)
            for node in self.context.of_type(self.context.module, cst.Attribute)
        ) or any(
            isinstance(node, cst.SimpleString) and node.evaluated_value == attr
            for node in self.context.of_type(self.context.module, cst.SimpleString)
        )

    def _read_as_value(self, node: cst.Attribute) -> bool:
        parent = self.context.parent(node)
        if isinstance(parent, (cst.AssignTarget, cst.Del)):
            return False
        if isinstance(parent, (cst.AugAssign, cst.AnnAssign)) and parent.target is node:
            return False
        if isinstance(parent, cst.Comparison) and all(
            isinstance(c.operator, (cst.Is, cst.IsNot)) for c in parent.comparisons
        ):
            return False  # `self.x is None`
        return not (
            isinstance(parent, cst.ComparisonTarget)
            and isinstance(parent.operator, (cst.Is, cst.IsNot))
        )

    def caches_tensor(self, slot: cst.Assign, attr: str, owner: Method) -> bool:
        """`self.<attr> = None` (the `slot`) while the module is built, a tensor stored there by
        another method and read back later: a cache of a tensor that stays where it was made.
        Not when the class registers the name itself, or sets it to a value while built."""
        init, classdef = owner
        if self.facts.modules.registered_otherwise(classdef, attr):
            return False
        construction = self.facts.modules.construction_methods(classdef)
        stored = False
        for function, other, value in self.facts.modules.assignments_to(classdef, attr):
            if other is slot or value is None:
                continue
            if isinstance(value, cst.Name) and value.value == "None":
                continue
            if function.name.value in construction:
                return False  # set to a value while built: the assignment of that value decides
            if not self.facts.modules.tensor_judge(function).is_tensor(value, same_attr=attr):
                return False
            stored = True
        return stored and self.is_cache(attr, classdef, init)

    def blocker(self, node: cst.CSTNode, attr: str | None, owner: Method) -> str | None:
        """Why `register_buffer(attr, ...)` where `node` runs would fail or change the program
        (said as the reason of a finding), or None."""
        reason = self._before_super(node, owner)
        if reason is not None or attr is None:
            return reason
        writer, classdef = owner
        if attr in class_level_names(classdef):
            return f"`{attr}` is also defined in the class body, so `register_buffer` would raise"
        start = self.context.position(node).start.line
        for function in methods(classdef):
            self_var = self_name(function)
            if self_var is None:
                continue
            judge = self.facts.modules.tensor_judge(function)
            for other in self.scopes.nodes(function.body):
                if other is node or not isinstance(
                    other, (cst.Assign, cst.AnnAssign, cst.AugAssign)
                ):
                    continue
                targets = (
                    [t.target for t in other.targets]
                    if isinstance(other, cst.Assign)
                    else [other.target]
                )
                if any(isinstance(t, (cst.Tuple, cst.List)) for t in targets) and any(
                    self_attribute(t, self_var) == attr for t in _unpacked_targets(targets)
                ):
                    # `[self.P, self.Q] = pair`: an element of a sequence, not provably a tensor
                    if function is writer and self.context.position(other).start.line < start:
                        return (
                            f"`self.{attr}` is first set by unpacking (line "
                            f"{self.context.position(other).start.line}), so `register_buffer` "
                            "would raise: the attribute already exists"
                        )
                    return (
                        f"`self.{attr}` is also assigned by unpacking in "
                        f"`{function.name.value}`, and a buffer only accepts a tensor or `None`"
                    )
                if not any(self_attribute(t, self_var) == attr for t in targets):
                    continue
                value = other.value
                if isinstance(other, cst.AugAssign) or value is None:
                    continue  # `self.x += t` keeps a tensor
                if isinstance(value, cst.Name) and value.value == "None":
                    if function is writer and self.context.position(other).start.line < start:
                        return (
                            f"`self.{attr}` is first assigned `None`, so `register_buffer` "
                            "would raise"
                        )
                    continue
                if judge.is_tensor(value, same_attr=attr) or (
                    isinstance(value, cst.Call)
                    and self.names.qualified_name(value.func) in PARAMETER
                ):
                    continue  # an `nn.Parameter` takes a buffer's name over (`__setattr__`)
                place = (
                    "earlier in `__init__`" if function is writer else f"in `{function.name.value}`"
                )
                return (
                    f"`self.{attr}` is also assigned a value that is not provably a tensor "
                    f"{place}, and a buffer only accepts a tensor or `None`"
                )
        return None

    def _before_super(self, node: cst.CSTNode, owner: Method) -> str | None:
        """Why the buffer could not be registered yet where `node` runs: `__init__` has no
        `super().__init__()`, or `node` (or the call of the helper it is in) runs before it."""
        writer, classdef = owner
        if writer.name.value in ("train", "eval"):
            return None  # runs on a built module
        init = method(classdef, "__init__")
        super_call = super_init_call(init) if init is not None else None
        if init is None or super_call is None:
            return (
                "`__init__` has no top-level `super().__init__()` call, so a buffer cannot be "
                "registered"
            )
        super_line = self.context.position(super_call).start.line
        if writer is init:
            runs_at = [self.context.position(node).start.line]
        else:
            construction = self.facts.modules.construction_methods(classdef)
            self_var = self_name(init) or "self"
            runs_at = [
                self.context.position(call).start.line
                for call in self.scopes.nodes(init.body)
                if isinstance(call, cst.Call)
                and self_attribute(call.func, self_var) in construction
            ]
        if any(line < super_line for line in runs_at):
            return (
                "it is assigned before `super().__init__()`, where a buffer cannot be registered "
                "yet"
            )
        return None


def holds_new_tensors(judge: TensorJudge, value: cst.BaseExpression) -> bool:
    """A container of new tensors; one that lists attributes the module already holds
    (`[self.alphas, self.betas]`) adds nothing the attributes themselves do not."""
    if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
        return bool(value.elements) and all(
            isinstance(e, cst.Element)
            and judge.is_tensor(e.value)
            and not (isinstance(e.value, cst.Attribute) and self_attribute(e.value) is not None)
            for e in value.elements
        )
    if isinstance(value, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
        return judge.is_tensor(value.elt)
    if isinstance(value, cst.Dict):
        return bool(value.elements) and all(
            isinstance(e, cst.DictElement) and judge.is_tensor(e.value) for e in value.elements
        )
    if isinstance(value, cst.DictComp):
        return judge.is_tensor(value.value)
    return False


def _unpacked_targets(targets: Sequence[cst.BaseExpression]) -> list[cst.BaseExpression]:
    """The targets an assignment binds, the elements of `a, [b, *c] = ...` included."""
    found: list[cst.BaseExpression] = []
    for target in targets:
        if isinstance(target, (cst.Tuple, cst.List)):
            found.extend(_unpacked_targets([element.value for element in target.elements]))
        else:
            found.append(target)
    return found
