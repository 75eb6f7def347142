"""Submodules a module class fails to register: what a plain container assigned to an attribute
holds, how its keys are spelled, and where a layer built inside `forward` could be built once.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.modules import (
    AttributeUses,
    class_level_names,
    method,
    self_attribute,
    self_name,
    super_init_call,
    valid_module_key,
)
from devfix.codemods.analysis.names import code_of, is_constant
from devfix.codemods.analysis.scopes import target_names
from devfix.codemods.analysis.torch_names import (
    LAYER_ATTRIBUTE_STEMS,
    MODULE_SELF_METHODS,
    STATEFUL_LAYERS,
)

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts

LIST_MUTATORS = frozenset({"append", "insert", "extend"})

#: What a container of modules or parameters holds: ("list" | "dict", modules and parameters
#: constructed, other values), or None when it is not such a container.
Contents = tuple[str, Counter[str], int]


@dataclass(frozen=True)
class Hoist:
    """How a layer built inside `forward` is built once instead: `self.<name> = <construction>`
    after `anchor` (a top-level statement of `__init__`), and `self.<name>` where it was built."""

    name: str
    anchor: cst.SimpleStatementLine
    statement: cst.SimpleStatementLine
    #: What replaces the construction in `forward` (`self.<name>`).
    reference: cst.Attribute


@dataclass(frozen=True)
class PlainContainer:
    """`self.<attr> = <plain list/dict/tuple>` in a module's construction code, holding
    submodules (`member` "module") or parameters ("parameter") that nothing registers."""

    attr: str
    kind: str  # "list" | "dict"
    member: str
    #: Values not provably of the `member` kind (then there is no fix).
    unknown: int
    #: Why the container cannot become the `nn` container, or None.
    blocker: str | None
    #: How a dict's keys are spelled ("literal" | "computed"); "literal" for a list.
    keys: str

    @property
    def container_class(self) -> str:
        """`ModuleList`, `ModuleDict`, `ParameterList` or `ParameterDict`."""
        prefix = "Module" if self.member == "module" else "Parameter"
        return prefix + ("List" if self.kind == "list" else "Dict")

    @property
    def members(self) -> str:
        return "modules" if self.member == "module" else "parameters"


#: What a plain container can be written as, before it is known to hold modules.
_CONTAINER_VALUES = (
    cst.List,
    cst.Tuple,
    cst.ListComp,
    cst.GeneratorExp,
    cst.Dict,
    cst.DictComp,
    cst.BinaryOperation,
    cst.Name,
)


class Submodules(Analysis):
    """Containers of submodules and layers built in `forward`, for one file."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        self._attributes: frozenset[str] | None = None

    # -- plain containers --------------------------------------------------------------------

    def plain_container(self, node: cst.Assign) -> PlainContainer | None:
        """What `self.<attr> = <value>` in the construction code of a module (`__init__` and
        the helpers only it calls) keeps in a plain container, counting what other methods add
        to it; None when it holds no modules or parameters, or when they are registered
        elsewhere (`nn.Sequential(*self.layers)`). One container class holds one kind: the
        parameters beside modules count as unknown."""
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Attribute):
            return None
        value = node.value
        if not isinstance(value, _CONTAINER_VALUES):
            return None
        function = self.facts.modules.enclosing_function(node)
        if function is None or function.owner is None or not function.owner.is_module:
            return None
        if not self.facts.modules.is_construction(function):
            return None
        self_var = self_name(function.node)
        attr = self_attribute(node.targets[0].target, self_var or "")
        if attr is None or self_var is None:
            return None
        contents = self.contents(value, node, function.node)
        if contents is None:
            return None
        kind, held, unknown = contents
        uses = AttributeUses.collect(self.facts.modules, function.owner.node, attr, node)
        if uses.registered_elsewhere:
            return None
        held = Counter(held)
        held["module"] += uses.added_modules
        held["parameter"] += uses.added_parameters
        unknown += uses.added_unknown
        if held["module"] and held["parameter"]:
            unknown += held["parameter"]
            held["parameter"] = 0
        member = "module" if held["module"] else "parameter"
        if held[member] == 0:
            return None
        keys = self.dict_keys(value, uses) if kind == "dict" else "literal"
        found = PlainContainer(attr, kind, member, unknown, uses.blocker(kind), keys)
        if found.blocker is None and keys == "invalid":
            return dataclasses.replace(
                found,
                blocker=f"a key is not a string (`nn.{found.container_class}` keys must be "
                "strings without a dot)",
            )
        return found

    def built_in_forward(self, node: cst.Call) -> str | None:
        """The qualified name of the stateful layer (one with parameters or buffers, or a local
        module class that builds layers) `node` constructs inside a module's `forward` and does
        not keep on `self` (`self.fc = nn.Linear(...)` there is lazy initialisation,
        registered once); None otherwise."""
        if not isinstance(node.func, (cst.Name, cst.Attribute)):
            return None
        tail = node.func.attr.value if isinstance(node.func, cst.Attribute) else node.func.value
        if not tail[:1].isupper():
            return None
        qualified = self.facts.modules.constructed_module(node)
        if qualified is None:
            return None
        function = self.facts.modules.enclosing_function(node)
        if function is None or function.name != "forward":
            return None
        if function.owner is None or not function.owner.is_module:
            return None
        if self._kept_on_self(node, function.node):
            return None
        local = self.facts.modules.local_module_class(qualified)
        if local is not None:
            return qualified if self.facts.modules.class_info(local).layers else None
        return qualified if qualified in STATEFUL_LAYERS else None

    def _kept_on_self(self, node: cst.Call, function: cst.FunctionDef) -> bool:
        """`self.x = node`, also through module methods (`nn.Linear(...).to(d)`)."""
        current: cst.CSTNode = node
        parent = self.context.parent(current)
        while (
            isinstance(parent, cst.Attribute)
            and parent.value is current
            and parent.attr.value in MODULE_SELF_METHODS
        ):
            call = self.context.parent(parent)
            if not isinstance(call, cst.Call):
                return False
            current, parent = call, self.context.parent(call)
        if isinstance(parent, cst.Assign):
            self_var = self_name(function) or ""
            return any(self_attribute(t.target, self_var) is not None for t in parent.targets)
        return False

    def contents(
        self, value: cst.BaseExpression, origin: cst.Assign, function: cst.FunctionDef
    ) -> Contents | None:
        """What `self.<attr> = value` (in `function`) stores: a literal or comprehension, or a
        local list filled before it is assigned."""
        if isinstance(value, cst.Name):
            return self._local_list(value.value, origin, function)
        return self._literal(value)

    def _literal(self, value: cst.BaseExpression) -> Contents | None:
        held: Counter[str] = Counter()
        kind_of = self.facts.modules.held_kind
        if isinstance(value, (cst.List, cst.Tuple, cst.Dict)):
            unknown = 0
            for element in value.elements:
                if isinstance(element, (cst.Element, cst.DictElement)):
                    found = kind_of(element.value)
                else:
                    found = None  # `*rest`, `**more`
                if found is None:
                    unknown += 1
                else:
                    held[found] += 1
            return ("dict" if isinstance(value, cst.Dict) else "list"), held, unknown
        if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            found = kind_of(value.elt)
            return ("list", Counter({found: 1}), 0) if found else None
        if isinstance(value, cst.DictComp):
            found = kind_of(value.value)
            return ("dict", Counter({found: 1}), 0) if found else None
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
            # `[nn.Linear(d, d)] * n`: one module repeated (shared weights), still unregistered.
            for side, other in ((value.left, value.right), (value.right, value.left)):
                if isinstance(side, cst.List) and isinstance(other, (cst.Name, cst.Integer)):
                    return self._literal(side)
        return None

    def _local_list(
        self, name: str, origin: cst.Assign, function: cst.FunctionDef
    ) -> Contents | None:
        """`layers = []; layers.append(nn.Linear(...)); self.layers = layers`: the local list's
        contents, when its only uses are those (so its modules are registered nowhere else)."""
        bound: list[cst.Assign] = []
        held: Counter[str] = Counter()
        unknown = 0
        allowed: set[int] = {id(origin.value)}  # the uses of `name` that are no other read
        for node in self.scopes.find(
            function.body,
            (cst.Assign, cst.AugAssign, cst.For, cst.CompFor, cst.AnnAssign, cst.Call),
            own_scope=True,
        ):
            if isinstance(node, cst.Assign) and node is not origin:
                for target in node.targets:
                    for sub in target_names(target.target):
                        if sub.value == name:
                            bound.append(node)
                            allowed.add(id(sub))
            elif isinstance(node, (cst.AugAssign, cst.For, cst.CompFor, cst.AnnAssign)):
                if name in {n.value for n in target_names(node.target)}:
                    return None
            elif (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and isinstance(node.func.value, cst.Name)
                and node.func.value.value == name
            ):
                if node.func.attr.value not in LIST_MUTATORS or not node.args:
                    return None
                allowed.add(id(node.func.value))
                added = node.args[-1].value
                if node.func.attr.value != "extend":
                    values: list[cst.BaseExpression | None] = [added]
                elif isinstance(added, (cst.List, cst.Tuple)):
                    values = [e.value for e in added.elements]
                else:
                    values = [None]
                for added_value in values:
                    found = (
                        self.facts.modules.held_kind(added_value)
                        if added_value is not None
                        else None
                    )
                    if found is None:
                        unknown += 1
                    else:
                        held[found] += 1
        if len(bound) != 1 or not isinstance(bound[0].value, (cst.List, cst.ListComp)):
            return None
        # Every other read of the name (`nn.Sequential(*layers)`, `return layers`) disqualifies it.
        skipped: set[int] = set()
        for node in self.scopes.nodes(function.body):
            if isinstance(node, cst.Attribute):
                skipped.add(id(node.attr))
            elif isinstance(node, cst.Arg) and node.keyword is not None:
                skipped.add(id(node.keyword))
        for node in self.scopes.nodes(function.body):
            if (
                isinstance(node, cst.Name)
                and node.value == name
                and id(node) not in skipped
                and id(node) not in allowed
            ):
                return None
        first = self._literal(bound[0].value)
        if first is None:
            return None
        return first[0], held + first[1], unknown + first[2]

    # -- dict keys ---------------------------------------------------------------------------

    def dict_keys(self, value: cst.BaseExpression, uses: AttributeUses) -> str:
        """How the keys of a dict of modules or parameters are spelled: "literal" (string
        literals `nn.ModuleDict` accepts), "computed" (names, calls, f-strings: strings at run
        time, as far as can be seen), or "invalid" (a number, a tuple, a dotted or empty
        string, an index from `range` or `enumerate`)."""
        keys: list[cst.BaseExpression] = list(uses.keys)
        if isinstance(value, cst.Dict):
            keys += [e.key for e in value.elements if isinstance(e, cst.DictElement)]
        elif isinstance(value, cst.DictComp):
            keys.append(value.key)
        kinds = {self.key_kind(key) for key in keys}
        if uses.bad_keys:
            kinds.add("invalid")
        for kind in ("invalid", "computed"):
            if kind in kinds:
                return kind
        return "literal"

    def key_kind(self, key: cst.BaseExpression) -> str:
        """ "literal", "computed" or "invalid" for one key (see :meth:`dict_keys`)."""
        if isinstance(key, cst.SimpleString):
            return "literal" if valid_module_key(key) else "invalid"
        if isinstance(key, (cst.FormattedString, cst.ConcatenatedString)):
            return "computed"
        if is_constant(key) or isinstance(key, (cst.Tuple, cst.List, cst.UnaryOperation)):
            return "invalid"
        if isinstance(key, cst.Name) and self._counts(key):
            return "invalid"
        return "computed"

    def _counts(self, key: cst.Name) -> bool:
        """`key` is bound by the loop around it to the numbers of `range(...)` or to the index
        of `enumerate(...)`."""
        for ancestor in self.context.ancestors(key):
            loops: list[cst.CompFor | cst.For] = []
            if isinstance(ancestor, cst.For):
                loops = [ancestor]
            elif isinstance(ancestor, (cst.DictComp, cst.ListComp, cst.GeneratorExp)):
                loop: cst.CompFor | None = ancestor.for_in
                while loop is not None:
                    loops.append(loop)
                    loop = loop.inner_for_in
            for loop_node in loops:
                iterated = loop_node.iter
                if not isinstance(iterated, cst.Call):
                    continue
                source = self.names.qualified_name(iterated.func)
                target = loop_node.target
                if source == "builtins.range" and _is_name(target, key.value):
                    return True
                if (
                    source == "builtins.enumerate"
                    and isinstance(target, cst.Tuple)
                    and target.elements
                    and _is_name(target.elements[0].value, key.value)
                ):
                    return True
            if isinstance(ancestor, cst.FunctionDef):
                break
        return False

    # -- layers built in forward -------------------------------------------------------------

    def hoist(self, construction: cst.Call, forward: cst.FunctionDef) -> Hoist | str:
        """Where the layer `construction` (built in `forward`) can be built once, in
        `__init__`, or why it cannot: it must be called where it is built, be built
        unconditionally once per call, read only constants and attributes `__init__` assigns
        at its top level, and a free attribute name must exist."""
        parent = self.context.parent(construction)
        if not (isinstance(parent, cst.Call) and parent.func is construction):
            return "it is not called where it is built"
        statement = self._top_level_statement(construction, forward)
        if statement is None:
            return "it is built under a condition, in a loop or in a nested expression"
        classdef = self.scopes.class_of(forward)
        init = method(classdef, "__init__") if classdef is not None else None
        if classdef is None or init is None:
            return "the class has no `__init__` of its own"
        init_self, forward_self = self_name(init), self_name(forward)
        super_call = super_init_call(init)
        if (
            init_self is None
            or forward_self is None
            or super_call is None
            or not isinstance(init.body, cst.IndentedBlock)
        ):
            return "its `__init__` does not call `super().__init__()` first"
        body = list(init.body.body)
        anchor = self._statement_index(body, super_call) or 0  # a top-level call (see above)
        read: set[str] = set()
        for arg in construction.args:
            if arg.star or not self._fixed_value(arg.value, forward_self, read):
                return f"its arguments read `{code_of(arg.value)}`, known only in `forward`"
        for attr in sorted(read):
            places = [
                self._statement_index(body, node) if function is init else None
                for function, node, _value in self.facts.modules.assignments_to(classdef, attr)
            ]
            if not places or any(place is None for place in places):
                return f"`{forward_self}.{attr}` is not assigned once, at the top of `__init__`"
            anchor = max(anchor, *(place for place in places if place is not None))
        # After the other layers `__init__` builds (an initialisation loop after them then
        # reaches this one too), and after the attributes the arguments read.
        for index, line in enumerate(body):
            if index > anchor and self._builds_submodule(line, init_self):
                anchor = index
        target = body[anchor]
        assert isinstance(target, cst.SimpleStatementLine)  # every index above is one's
        name = self._free_name(construction, forward, classdef)
        if init_self != forward_self:
            return f"`__init__` calls its instance `{init_self}`, `forward` `{forward_self}`"
        line = cst.parse_statement(f"{init_self}.{name} = {code_of(construction)}\n")
        assert isinstance(line, cst.SimpleStatementLine)
        reference = cst.Attribute(value=cst.Name(forward_self), attr=cst.Name(name))
        return Hoist(name, target, line, reference)

    def _top_level_statement(
        self, node: cst.CSTNode, function: cst.FunctionDef
    ) -> cst.SimpleStatementLine | None:
        """The statement of `function`'s own body that holds `node`, when nothing between them
        makes the evaluation conditional or repeated."""
        conditional = (
            cst.IfExp,
            cst.BooleanOperation,
            cst.Lambda,
            cst.ListComp,
            cst.SetComp,
            cst.DictComp,
            cst.GeneratorExp,
        )
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, conditional):
                return None
            if isinstance(ancestor, cst.SimpleStatementLine):
                owner = self.context.parent(ancestor)
                return ancestor if owner is function.body else None
        return None

    def _statement_index(self, body: list[cst.BaseStatement], node: cst.CSTNode) -> int | None:
        """The index in `body` of the simple statement that holds `node`; None when that
        statement is not one of `body`'s own (it sits in an `if`, a loop, ...)."""
        for ancestor in (node, *self.context.ancestors(node)):
            if isinstance(ancestor, cst.SimpleStatementLine):
                return next((i for i, line in enumerate(body) if line is ancestor), None)
        return None

    def _fixed_value(self, value: cst.BaseExpression, self_var: str, read: set[str]) -> bool:
        """A constant, `self.<attr>`, a torch name (`torch.float16`), or arithmetic of those:
        a value `__init__` can compute as well."""
        if is_constant(value):
            return True
        attr = self_attribute(value, self_var)
        if attr is not None:
            read.add(attr)
            return True
        if isinstance(value, cst.BinaryOperation):
            return self._fixed_value(value.left, self_var, read) and self._fixed_value(
                value.right, self_var, read
            )
        if isinstance(value, cst.UnaryOperation):
            return self._fixed_value(value.expression, self_var, read)
        if isinstance(value, (cst.Tuple, cst.List)):
            return all(
                isinstance(e, cst.Element) and self._fixed_value(e.value, self_var, read)
                for e in value.elements
            )
        if isinstance(value, cst.Attribute):
            return (self.names.qualified_name(value) or "").startswith("torch.")
        return False

    def _builds_submodule(self, line: cst.BaseStatement, self_var: str) -> bool:
        """`self.<attr> = <module construction>` as one statement."""
        if not isinstance(line, cst.SimpleStatementLine):
            return False
        return any(
            isinstance(small, cst.Assign)
            and any(self_attribute(t.target, self_var) is not None for t in small.targets)
            and self.facts.modules.constructed_module(small.value) is not None
            for small in line.body
        )

    def _free_name(
        self, construction: cst.Call, forward: cst.FunctionDef, classdef: cst.ClassDef
    ) -> str:
        """`bn` for a `BatchNorm2d`, numbered (`bn1`, `bn2`) when `forward` builds several of
        the stem or one is numbered already; never an attribute name the file uses."""
        stem = self._stem(construction)
        taken = self._attribute_names() | class_level_names(classdef)
        siblings = [
            call
            for call in self.scopes.find(forward.body, cst.Call)
            if self.facts.modules.constructed_module(call) is not None and self._stem(call) == stem
        ]
        numbered = any(re.fullmatch(rf"{re.escape(stem)}\d+", name) for name in taken)
        if len(siblings) == 1 and not numbered and stem not in taken:
            return stem
        position = next(
            (index for index, call in enumerate(siblings, 1) if call is construction), 1
        )
        number = position
        while f"{stem}{number}" in taken:
            number += 1
        return f"{stem}{number}"

    def _stem(self, construction: cst.Call) -> str:
        qualified = self.facts.modules.constructed_module(construction) or "layer"
        short = qualified.rsplit(".", 1)[-1]
        stem = LAYER_ATTRIBUTE_STEMS.get(qualified)
        if stem is None:
            stem = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", short).lower()
        return stem

    def _attribute_names(self) -> frozenset[str]:
        """Every `<x>.<name>` the file spells: a new attribute must be none of them."""
        if self._attributes is None:
            self._attributes = frozenset(
                node.attr.value
                for node in self.context.subtree(self.context.module)
                if isinstance(node, cst.Attribute)
            )
        return self._attributes


def _is_name(node: cst.BaseExpression, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name
