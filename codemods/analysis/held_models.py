"""Models an object holds as attributes, and which of them it places.

An agent or trainer (`class A2C:`) builds its networks in one method (`self.actor =
Actor(...)`, `self.critic = Critic(...)`), hands their parameters to optimizers, and moves
some of them (`if self.use_cuda: self.actor.cuda()`, `self.q1 = QNet(...).to(self.device)`).
A network built beside a moved one and never moved itself stays on the CPU while the object
feeds it the same device tensors it feeds its siblings.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Union, cast

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.modules import method as method_named
from devfix.codemods.analysis.modules import methods, names_a_device, self_attribute
from devfix.codemods.analysis.names import code_of, dotted_name, keyword_argument
from devfix.codemods.analysis.torch_names import (
    CLIP_ENCODERS,
    MODEL_MEMBERS_KEEPING_PLACE,
    MOVE_METHODS,
    PLACED_AS_LOADED,
)

#: A statement that builds a held network: `self.q = Q(...)` or `self.q: Q = Q(...)`.
Construction = Union[cst.Assign, cst.AnnAssign]


def built_value(statement: Construction) -> cst.BaseExpression:
    """What a construction assigns (an annotated one is one only with a value)."""
    value = statement.value
    assert value is not None
    return value


def _loads_pretrained(value: cst.BaseExpression) -> bool:
    """`AutoModel.from_pretrained(...)`: a model, by construction."""
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value == "from_pretrained"
    )


def _placed_as_loaded(value: cst.BaseExpression) -> bool:
    return _loads_pretrained(value) and any(
        keyword_argument(cast(cst.Call, value), word) is not None for word in PLACED_AS_LOADED
    )


@dataclass(frozen=True)
class SiblingMove:
    """`attribute` is built by `built` and never moved; `move` moves a network built in the
    same method: a statement (`self.actor.cuda()`), or the construction's own `.to(...)`."""

    attribute: str
    built: Construction
    sibling: str
    move: cst.Call
    #: The move is a statement of its own (`self.actor.cuda()`), not part of a construction.
    statement: cst.SimpleStatementLine | None
    #: `attribute` is a `copy.deepcopy` of `sibling` (an older policy, a target network).
    copy: bool = False


@dataclass(frozen=True)
class UnplacedNetwork:
    """`attribute`, built by `built`, is moved nowhere, and the object feeds it `fed`, a
    tensor it moved to `device_attribute`; `device` names that device where `built` runs
    (None when it cannot be named there)."""

    attribute: str
    built: Construction
    fed: str
    device_attribute: str
    device: str | None


class HeldModels(Analysis):
    """The networks a class that is not a module holds, moves and leaves behind."""

    def never_placed(self, classdef: cst.ClassDef) -> list[UnplacedNetwork]:
        """Networks of an object that moves none of them, though it runs them on tensors it
        moves to a device it holds (`self.q(obs)` after `obs = torch.tensor(o).to(self.device)`).
        A network copied with `copy.deepcopy(self.q)` still counts: the copy follows it."""
        if self._moves(classdef):
            return []  # `left_behind`'s: the object places some network itself
        found: list[UnplacedNetwork] = []
        for method in methods(classdef):
            built = self._built(method)
            for attribute, assign in self._loaded_unplaced(method).items():
                built.setdefault(attribute, assign)
            for attribute, assign in built.items():
                if not (
                    self._used_as_network(classdef, attribute, copies=True)
                    or (
                        _loads_pretrained(built_value(assign))
                        and not self._placed_as_loaded(built_value(assign), assign)
                        and self._only_run(classdef, attribute)
                    )
                ):
                    continue
                fed = self._fed_moved_input(classdef, attribute)
                if fed is None:
                    continue
                name, device_attribute = fed
                device = self._device_at(method, device_attribute, assign)
                found.append(UnplacedNetwork(attribute, assign, name, device_attribute, device))
        return found

    def unmoved_module_input(
        self, classdef: cst.ClassDef
    ) -> tuple[str, str, cst.FunctionDef] | None:
        """(input, `self.<device>`, `__init__`) for a module that runs itself (`self(x)`,
        `self.forward(x)`) on a tensor it makes on or moves to a device it holds, sets that
        device in `__init__` and never moves itself (`self.to(...)`, `self.cuda()`) nor is
        moved where this file builds it (`Agent(...).to(device)`)."""
        init = method_named(classdef, "__init__")
        if init is None:
            return None
        fed = self._fed_moved_input(classdef, None)
        if fed is None or self._set_in(init, fed[1]) is None:
            return None  # checked first: the rest reads the whole file
        for call in self.scopes.find(classdef.body, cst.Call):
            func = call.func
            if self_attribute(func) in ("to", "cuda"):
                return None
        instances = {
            name.value
            for assign in self.scopes.find(self.context.module, cst.Assign)
            if isinstance(assign.value, cst.Call)
            and dotted_name(assign.value.func) == classdef.name.value
            for target in assign.targets
            if isinstance(name := target.target, cst.Name)
        }
        for call in self.scopes.find(self.context.module, cst.Call):
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda")):
                continue
            built = func.value
            if (isinstance(built, cst.Call) and dotted_name(built.func) == classdef.name.value) or (
                isinstance(built, cst.Name) and built.value in instances
            ):
                return None  # `Agent(...).to(device)`, `agent = Agent(...); agent.cuda()`
        return fed[0], fed[1], init

    def move_point(self, init: cst.FunctionDef, device: str) -> tuple[int, int] | None:
        """Where `__init__` can move its module to `device`: (the index of the statement of
        its body that sets `device`, the index of the first one that reads the parameters:
        `self.parameters()`, `copy.deepcopy(self)`; the body's length when none does)."""
        body = init.body.body if isinstance(init.body, cst.IndentedBlock) else ()
        assigned = self._set_in(init, device)
        holds = [i for i, s in enumerate(body) if assigned is not None and self._holds(s, assigned)]
        if not holds:
            return None
        uses = (i for i, statement in enumerate(body) if self._reads_parameters(statement))
        return holds[0], next(uses, len(body))

    def _holds(self, statement: cst.CSTNode, node: cst.CSTNode) -> bool:
        return any(a is statement for a in self.context.ancestors(node)) or statement is node

    def _reads_parameters(self, statement: cst.CSTNode) -> bool:
        for call in self.scopes.find(statement, cst.Call):
            func = call.func
            if self_attribute(func) in ("parameters", "named_parameters"):
                return True
            if (
                self.names.qualified_name(func) == "copy.deepcopy"
                and call.args
                and isinstance(call.args[0].value, cst.Name)
                and call.args[0].value.value == "self"
            ):
                return True
        return False

    def _set_in(self, function: cst.FunctionDef, device: str) -> cst.Assign | None:
        """The first `self.<device> = ...` of `function`."""
        return next(iter(self._assignments(function, device)), None)

    def _assignments(self, function: cst.FunctionDef, device: str) -> list[cst.Assign]:
        # `self.accelerator.device` is set where `self.accelerator` is.
        attribute = device.removeprefix("self.").split(".", 1)[0]
        return [
            assign
            for assign in self.scopes.find(function.body, cst.Assign, own_scope=True)
            if len(assign.targets) == 1 and self_attribute(assign.targets[0].target) == attribute
        ]

    def _fed_moved_input(
        self, classdef: cst.ClassDef, attribute: str | None
    ) -> tuple[str, str] | None:
        """(input, `self.<device>`) for a call `self.<attribute>(x)` (also `.generate(...)`;
        with None: `self(x)` or `self.forward(x)`) whose first argument `x` (for a model the
        object loads: any argument, `**inputs` too) the calling method moved to, or made on, a
        device the object holds (`self.device`, `self.accelerator.device`)."""
        for call in self.scopes.find(classdef.body, cst.Call):
            callee = self_attribute(call.func)
            if attribute is None:
                runs_itself = callee == "forward" or (
                    isinstance(call.func, cst.Name) and call.func.value == "self"
                )
                if not runs_itself:
                    continue
                arguments = call.args[:1]
            elif callee == attribute:
                arguments = call.args if self._loaded(classdef, attribute) else call.args[:1]
            elif (
                isinstance(call.func, cst.Attribute)
                and attribute is not None
                and self_attribute(call.func.value) == attribute
                and (
                    call.func.attr.value in ("generate", "forward")
                    or (call.func.attr.value in CLIP_ENCODERS and self._loaded(classdef, attribute))
                    or self._runs_itself(classdef, attribute, call.func.attr.value)
                )
            ):
                arguments = call.args
            else:
                continue
            for arg in arguments:
                fed = self._moved_to_held_device(arg.value, call, classdef)
                if fed is not None:
                    return fed
        return None

    def _moved_to_held_device(
        self, argument: cst.BaseExpression, call: cst.Call, classdef: cst.ClassDef
    ) -> tuple[str, str] | None:
        value = (
            self.scopes.value_at(argument.value, call)
            if isinstance(argument, cst.Name)
            else argument
        )
        if value is None and isinstance(argument, cst.Name):
            # `obs, actions = self.buffer.sample(device=self.device)`: made on that device.
            bound = self.scopes.binding_before(argument.value, call)
            value = bound[1] if bound is not None and bound[0] == "unpack" else None
        while isinstance(value, cst.Call):
            target = keyword_argument(value, "device")
            if isinstance(value.func, cst.Attribute) and value.func.attr.value == "to":
                target = target or (value.args[0] if value.args else None)
            device = dotted_name(target.value) if target is not None else None
            if device is not None and self._held_device(device, classdef):
                return code_of(argument), device
            if not isinstance(value.func, cst.Attribute):
                break
            value = value.func.value
        return None

    def _held_device(self, device: str, classdef: cst.ClassDef) -> bool:
        """`self.device`, or the device of an object the class holds that is none of its
        layers (`self.accelerator.device`); not a layer's own (`self.head.weight.device`)."""
        parts = device.split(".")
        if parts[0] != "self":
            return False
        if len(parts) == 2:
            return names_a_device(parts[1])
        return (
            len(parts) == 3
            and parts[2] == "device"
            and parts[1] not in self.facts.modules.class_info(classdef).layers
        )

    def _loaded(self, classdef: cst.ClassDef, attribute: str) -> bool:
        """`self.<attribute>` is assigned a pretrained checkpoint somewhere in the class."""
        return any(
            attr == attribute and _loads_pretrained(built_value(assign))
            for method in methods(classdef)
            for attr, assign in self._attribute_assignments(method)
        )

    def _loaded_unplaced(self, method: cst.FunctionDef) -> dict[str, Construction]:
        """`self.<attr> = X.from_pretrained(...)` of `method` where every other assignment of
        the attribute there loads it placed (`device_map=`, quantized): the one left on the
        CPU (a full-weight branch beside a LoRA one loaded with a device map)."""
        by_attribute: dict[str, list[Construction]] = {}
        for attribute, assign in self._attribute_assignments(method):
            by_attribute.setdefault(attribute, []).append(assign)
        found: dict[str, Construction] = {}
        for attribute, assigns in by_attribute.items():
            if not all(isinstance(a.value, cst.Call) for a in assigns):
                continue
            placed = [a for a in assigns if self._placed_as_loaded(built_value(a), a)]
            unplaced = [a for a in assigns if _loads_pretrained(built_value(a)) and a not in placed]
            if len(unplaced) == 1 and len(unplaced) + len(placed) == len(assigns):
                found[attribute] = unplaced[0]
        return found

    def _placed_as_loaded(self, value: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """A load given a placement (`device_map=`, quantized), or an adapter loaded onto a
        base model that was (`PeftModel.from_pretrained(base, path)`)."""
        if _placed_as_loaded(value):
            return True
        if not (_loads_pretrained(value) and isinstance(value, cst.Call) and value.args):
            return False
        base = value.args[0].value
        loaded = self.scopes.value_at(base.value, at) if isinstance(base, cst.Name) else None
        return loaded is not None and _placed_as_loaded(loaded)

    def _reads(
        self, classdef: cst.ClassDef, attribute: str
    ) -> Iterator[tuple[cst.Attribute, cst.CSTNode | None]]:
        """Each `self.<attribute>` of the class that is not assigned to, with its parent."""
        for node in self.scopes.find(classdef.body, cst.Attribute):
            if self_attribute(node) != attribute:
                continue
            parent = self.context.parent(node)
            if isinstance(parent, cst.AssignTarget) or (
                isinstance(parent, cst.AnnAssign) and parent.target is node
            ):
                continue
            yield node, parent

    def _only_run(self, classdef: cst.ClassDef, attribute: str) -> bool:
        """`self.<attribute>` is run (`self.rm(**inputs)`, `.generate(...)`) and otherwise only
        read for its members (`.config`, `.eval()`, `.parameters()`): never handed to a call,
        wrapped, stored elsewhere or moved."""
        run = False
        for node, parent in self._reads(classdef, attribute):
            if isinstance(parent, cst.Call) and parent.func is node:
                run = True
                continue
            if isinstance(parent, cst.Attribute) and parent.value is node:
                if parent.attr.value in MOVE_METHODS:
                    return False
                grand = self.context.parent(parent)
                run |= (
                    isinstance(grand, cst.Call)
                    and grand.func is parent
                    and (
                        parent.attr.value in ("generate", "forward")
                        or parent.attr.value in CLIP_ENCODERS
                    )
                )
                continue
            return False
        return run

    def _device_at(self, method: cst.FunctionDef, device: str, built: Construction) -> str | None:
        """`device` where `built` runs: itself when the method sets it before (or another
        method does), else the value the method assigns it later when that can be written at
        `built` (`self.device = torch.device(device)` gives `torch.device(device)`)."""
        assigned = self._assignments(method, device)
        if not assigned or any(
            self.context.order(a)[0] < self.context.order(built)[0] for a in assigned
        ):
            return device
        later = code_of(assigned[0].value)
        return later if self.facts.moves.visible_at(later, built) else None

    def left_behind(self, classdef: cst.ClassDef) -> list[SiblingMove]:
        """Networks built in a method next to a sibling that method (or the class) moves,
        used only as networks (called, asked for their parameters), never moved."""
        members = methods(classdef)
        found: list[SiblingMove] = []
        moves = self._moves(classdef) if members else []
        for method in members:
            built = self._built(method)
            movers = [(attr, call, line) for attr, call, line in moves if attr in built]
            for attribute, assign in built.items():
                if any(attr == attribute for attr, _, _ in moves):
                    continue
                copied = self._copied_attribute(assign, method)
                original = [m for m in moves if m[0] == copied]
                if original and self._runs(classdef, attribute):
                    sibling, move, line = self._best_mover(assign, original)
                    found.append(SiblingMove(attribute, assign, sibling, move, line, copy=True))
                    continue
                if not movers:
                    continue
                if not self._used_as_network(classdef, attribute):
                    continue
                sibling, move, line = self._best_mover(assign, movers)
                found.append(SiblingMove(attribute, assign, sibling, move, line))
        return found

    def _copied_attribute(self, assign: Construction, method: cst.FunctionDef) -> str | None:
        """`self.<x>` that `assign` copies: `copy.deepcopy(self.x)`, or `copy.deepcopy(p)`
        where the method also sets `self.x = p`."""
        value = built_value(assign)
        if not (
            isinstance(value, cst.Call)
            and len(value.args) == 1
            and self.names.qualified_name(value.func) == "copy.deepcopy"
        ):
            return None
        source = value.args[0].value
        attribute = self_attribute(source)
        if attribute is not None or not isinstance(source, cst.Name):
            return attribute
        for other in self.scopes.find(method.body, cst.Assign, own_scope=True):
            if (
                len(other.targets) == 1
                and isinstance(other.value, cst.Name)
                and other.value.value == source.value
            ):
                target = self_attribute(other.targets[0].target)
                if target is not None:
                    return target
        return None

    def _runs(self, classdef: cst.ClassDef, attribute: str) -> bool:
        """`self.<attribute>(...)` or `self.<attribute>.forward(...)` somewhere in the class."""
        for call in self.scopes.find(classdef.body, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "forward":
                func = func.value
            if self_attribute(func) == attribute:
                return True
        return False

    def _best_mover(
        self,
        built: Construction,
        movers: list[tuple[str, cst.Call, cst.SimpleStatementLine | None]],
    ) -> tuple[str, cst.Call, cst.SimpleStatementLine | None]:
        """The sibling move a fix can copy: a move statement after `built` (the network
        exists there), else a construction's move before it (its device is set there), else
        the last move."""
        at = self.context.order(built)[0]
        after = [m for m in movers if m[2] is not None and self.context.order(m[2])[0] > at]
        before = [m for m in movers if m[2] is None and self.context.order(m[1])[0] < at]
        return after[0] if after else before[-1] if before else movers[-1]

    def _built(self, method: cst.FunctionDef) -> dict[str, Construction]:
        """`self.<attr> = Something(...)` statements of `method`, one per attribute."""
        built: dict[str, Construction] = {}
        for attribute, assign in self._attribute_assignments(method):
            if not isinstance(assign.value, cst.Call):
                continue
            if attribute in built:
                built.pop(attribute)
                continue
            built[attribute] = assign
        return built

    def _attribute_assignments(self, method: cst.FunctionDef) -> Iterator[tuple[str, Construction]]:
        """`self.<attr> = value` and `self.<attr>: T = value` statements of `method`."""
        for node in self.scopes.find(method.body, (cst.Assign, cst.AnnAssign), own_scope=True):
            target: cst.BaseExpression | None = None
            if isinstance(node, cst.Assign) and len(node.targets) == 1:
                target = node.targets[0].target
            elif isinstance(node, cst.AnnAssign) and node.value is not None:
                target = node.target
            attribute = self_attribute(target) if target is not None else None
            if attribute is not None and isinstance(node, (cst.Assign, cst.AnnAssign)):
                yield attribute, node

    def _moves(
        self, classdef: cst.ClassDef
    ) -> list[tuple[str, cst.Call, cst.SimpleStatementLine | None]]:
        """Every move of a held attribute in the class: `self.x.cuda()` / `self.x =
        self.x.to(d)` statements, and constructions ending in `.to(d)` / `.cuda()`."""
        moves: list[tuple[str, cst.Call, cst.SimpleStatementLine | None]] = []
        for call in self.scopes.find(classdef.body, cst.Call):
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda")):
                continue
            attribute = self_attribute(func.value)
            parent = self.context.parent(call)
            line = self.context.parent(parent) if parent is not None else None
            if attribute is not None:
                statement = line if isinstance(line, cst.SimpleStatementLine) else None
                moves.append((attribute, call, statement))
            elif isinstance(parent, cst.Assign) and len(parent.targets) == 1:
                target = self_attribute(parent.targets[0].target)
                if target is not None and isinstance(func.value, cst.Call):
                    moves.append((target, call, None))
        return moves

    def _used_as_network(
        self, classdef: cst.ClassDef, attribute: str, *, copies: bool = False
    ) -> bool:
        """`self.<attribute>` is called and asked for its parameters, and used no other way
        (not handed to a call, wrapped, stored or read for its attributes; with `copies`,
        `copy.deepcopy(self.<attribute>)` aside)."""
        called = parameters = False
        for node, parent in self._reads(classdef, attribute):
            if copies and isinstance(parent, cst.Arg):
                call = self.context.parent(parent)
                if (
                    isinstance(call, cst.Call)
                    and self.names.qualified_name(call.func) == "copy.deepcopy"
                ):
                    continue
            if isinstance(parent, cst.Call) and parent.func is node:
                called = True
                continue
            if isinstance(parent, cst.Attribute) and parent.value is node:
                grand = self.context.parent(parent)
                method = parent.attr.value
                runs = method == "forward" or self._runs_itself(classdef, attribute, method)
                keeps = method in MODEL_MEMBERS_KEEPING_PLACE or runs
                if keeps and isinstance(grand, cst.Call) and grand.func is parent:
                    called |= runs
                    parameters |= method in ("parameters", "named_parameters")
                    continue
            return False
        return called and parameters

    def _runs_itself(self, classdef: cst.ClassDef, attribute: str, method: str) -> bool:
        """`method` is a method of the file's module class that `self.<attribute>` is built
        from, and it runs the module (`self.forward(x)`, `self(x)`): `policy.distribution(obs)`
        runs the policy network."""
        built = [
            assign.value
            for assign in self.scopes.find(classdef.body, cst.Assign)
            if len(assign.targets) == 1 and self_attribute(assign.targets[0].target) == attribute
        ]
        if len(built) != 1:
            return False
        network = self.facts.modules.local_module_class(
            self.facts.modules.constructed_module(built[0])
        )
        defined = method_named(network, method) if network is not None else None
        if defined is None or defined.name.value.startswith("__"):
            return False
        self_var = defined.params.params[0].name.value if defined.params.params else None
        return self_var is not None and any(
            (isinstance(call.func, cst.Name) and call.func.value == self_var)
            or self_attribute(call.func, self_var) == "forward"
            for call in self.scopes.find(defined.body, cst.Call)
        )
