"""DF103: a plain tensor attribute on an nn.Module, which `model.to()` never moves."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods.analysis.modules import (
    TensorJudge,
    class_level_names,
    method,
    methods,
    self_attribute,
    self_name,
    super_init_call,
)
from devfix.codemods.analysis.names import code_of
from devfix.types import Applicability, Edit

_CONTAINERS = (cst.List, cst.Tuple, cst.Set, cst.ListComp, cst.SetComp, cst.GeneratorExp)


class TensorAttributeNotBuffer(DevicePass):
    """Tensor stored as a plain attribute of an `nn.Module` in `__init__`.

    ## What it does
    Finds `self.x = <tensor>` (and `setattr(self, name, <tensor>)`) in the `__init__` of an
    `nn.Module` subclass, where the value is provably a tensor: a factory (`torch.zeros`,
    `torch.arange`, `torch.tensor([...])`), a legacy constructor (`torch.FloatTensor([...])`),
    torch math on tensors (`torch.exp`, `torch.sin`, `torch.sqrt`, ...), a tensor method or a
    local name built from them (a sinusoidal positional table, a causal mask, class weights of
    a custom loss).

    ## Why is this bad?
    `model.to(device)`, `model.cuda()` and `model.half()` only walk parameters, buffers and
    submodules; a plain tensor attribute stays on the CPU, and the first operation that combines
    it with an activation fails with `Expected all tensors to be on the same device, but found at
    least two devices, cuda:0 and cpu!`. A tensor put on a device in `__init__`
    (`.to(device)`) breaks under `nn.DataParallel` instead: replicas on `cuda:1` still read the
    `cuda:0` copy (`cuda:1 and cuda:0!`), because `replicate` only copies parameters and buffers.

    ## Example
    ```python
    class CustomLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.Tensor([1.0, 2.0])
    ```

    ## Use instead
    ```python
    class CustomLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("weight", torch.Tensor([1.0, 2.0]), persistent=False)
    ```
    The buffer is non-persistent, so `state_dict()` keeps its keys and existing checkpoints still
    load with `strict=True`. Reading and re-assigning `self.weight` works as before (assigning a
    tensor to a buffer's name updates the buffer). A `.to(device)` or `.cuda()` at the end of the
    value is kept: it is redundant once `model.to()` moves the buffer, but it keeps a module that
    is used without being moved (a loss created next to the model) on the device it had.

    Not rewritten, only reported: a tensor with `requires_grad=True` (or `Variable(...,
    requires_grad=True)`, or `.requires_grad_()`) must become `nn.Parameter`, which changes
    `model.parameters()` and what the optimizer trains; tensors held in a list or dict cannot be
    registered as they are (register each, or stack them); an annotated assignment; a name that
    is also a class attribute or is assigned a non-tensor elsewhere (a buffer only accepts a
    tensor or `None`); an assignment before `super().__init__()`.

    ## Fix safety
    Unsafe: besides following `model.to(device)`, a buffer follows `model.half()` /
    `model.double()` (a float table changes dtype with the model), appears in `named_buffers()`
    and is broadcast by `DistributedDataParallel` (`broadcast_buffers=True`). Code that relied on
    the tensor staying on the CPU (calling `.numpy()` on it) would change.

    ## References
    - PyTorch docs, `torch.nn.Module.register_buffer` (`persistent`).
    - lyuwenyu/RT-DETR#677; Lightning-AI/pytorch-lightning#3674; lucidrains/ema-pytorch PR#31.
    """

    CODE = "DF103"
    NAME = "tensor-attribute-not-buffer"
    MESSAGE = "tensor stored as a plain module attribute; `model.to()` does not move it"
    FIX_TITLE = "Register it with `self.register_buffer(name, tensor, persistent=False)`"
    APPLICABILITY = Applicability.UNSAFE

    # -- matching --------------------------------------------------------------------------

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Attribute):
            return
        target = node.targets[0].target
        if not isinstance(target.value, cst.Name):
            return
        init, classdef = self._init_of(node)
        if init is not None and classdef is not None:
            attr = self_attribute(target, self_name(init) or "")
            if attr is None:
                return
            if isinstance(node.value, cst.Name) and node.value.value == "None":
                self._check_cache_slot(node, attr, init, classdef)
            else:
                self._check(node, attr, node.value, init, classdef, setattr_call=None)
            return
        switch, classdef = self._mode_switch_of(node)
        if switch is not None and classdef is not None:
            attr = self_attribute(target, self_name(switch) or "")
            if attr is not None and self._is_cache(attr, classdef, switch):
                self._check(node, attr, node.value, switch, classdef, setattr_call=None)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is None or not isinstance(node.target, cst.Attribute):
            return
        init, classdef = self._init_of(node)
        if init is None or classdef is None:
            return
        attr = self_attribute(node.target, self_name(init) or "")
        if attr is None or not self._judge(init).is_tensor(node.value):
            return
        self.report(
            node,
            message=(
                f"`self.{attr}` holds a tensor that `model.to()` does not move; the annotated "
                "assignment is left for you to turn into `self.register_buffer(...)`"
            ),
        )

    def visit_Call(self, node: cst.Call) -> None:
        if not (isinstance(node.func, cst.Name) and node.func.value == "setattr"):
            return
        if len(node.args) != 3 or any(a.keyword is not None or a.star for a in node.args):
            return
        init, classdef = self._init_of(node)
        if init is None or classdef is None:
            return
        statement = self.context.parent(node)
        if not isinstance(statement, cst.Expr):
            return
        if self.qualified_name(node.func) not in ("builtins.setattr", None):
            return
        receiver, name, value = (a.value for a in node.args)
        if not (isinstance(receiver, cst.Name) and receiver.value == self_name(init)):
            return
        attr = _literal_string(name)
        self._check(node, attr, value, init, classdef, setattr_call=node)

    # -- deciding --------------------------------------------------------------------------

    def _init_of(self, node: cst.CSTNode) -> tuple[cst.FunctionDef | None, cst.ClassDef | None]:
        """The construction-time method (`__init__` or a helper only it calls) around `node`
        in an `nn.Module`, and its class."""
        function = self.facts.modules.enclosing_function(node)
        if function is None or function.owner is None or not function.owner.is_module:
            return None, None
        if not self.facts.modules.is_construction(function):
            return None, None
        return function.node, function.owner.node

    def _mode_switch_of(
        self, node: cst.CSTNode
    ) -> tuple[cst.FunctionDef | None, cst.ClassDef | None]:
        """A `train(mode)` / `eval()` override of an `nn.Module` around `node`: what it stores
        on `self` is a cache the module keeps between calls of `forward`."""
        function = self.facts.modules.enclosing_function(node)
        if function is None or function.owner is None or not function.owner.is_module:
            return None, None
        if function.name not in ("train", "eval"):
            return None, None
        return function.node, function.owner.node

    def _is_cache(self, attr: str, classdef: cst.ClassDef, writer: cst.FunctionDef) -> bool:
        """`self.<attr>` is read back as a value by another method (not only tested against
        `None` or deleted): a tensor kept between calls, not a value left for the caller."""
        for function in methods(classdef):
            if function is writer:
                continue
            self_var = self_name(function)
            if self_var is None:
                continue
            for node in self.facts.scopes.nodes(function.body):
                if (
                    isinstance(node, cst.Attribute)
                    and self_attribute(node, self_var) == attr
                    and self._read_as_value(node)
                ):
                    return True
        return False

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

    def _check_cache_slot(
        self, node: cst.Assign, attr: str, init: cst.FunctionDef, classdef: cst.ClassDef
    ) -> None:
        """`self.cache = None` while the module is built, a tensor stored there by another
        method (`forward`) and read back later: the cached tensor stays wherever it was made
        (`model.to()` never moves it, DataParallel replicas all read the first device's copy).
        A buffer registered as `None` holds the tensor assigned to it later, and moves."""
        modules = self.facts.modules
        if modules.registered_otherwise(classdef, attr):
            return
        construction = modules.construction_methods(classdef)
        stored = False
        for function, other, value in modules.assignments_to(classdef, attr):
            if other is node or value is None:
                continue
            if isinstance(value, cst.Name) and value.value == "None":
                continue
            if function.name.value in construction:
                return  # set to a value while built as well: the assignment of that value decides
            if not self._judge(function).is_tensor(value, same_attr=attr):
                return
            stored = True
        if not stored or not self._is_cache(attr, classdef, init):
            return
        reason = self._blocker(node, attr, init, classdef)
        if reason is not None:
            self.report(
                node,
                message=f"`self.{attr}` caches a tensor that `model.to()` does not move; {reason}",
            )
            return
        call = _register_buffer(
            self_name(init) or "self", cst.SimpleString(f'"{attr}"'), node.value
        )
        self.report(
            node,
            message=(
                f"`self.{attr}` caches a tensor made in another method; `model.to()` never moves "
                "it and DataParallel replicas read the first device's copy; register the slot as "
                "a non-persistent buffer"
            ),
            edits=[Edit(node, cst.Expr(value=call, semicolon=node.semicolon))],
        )

    def _judge(self, function: cst.FunctionDef) -> TensorJudge:
        return self.facts.modules.tensor_judge(function)

    def _check(
        self,
        node: cst.Assign | cst.Call,
        attr: str | None,
        value: cst.BaseExpression,
        init: cst.FunctionDef,
        classdef: cst.ClassDef,
        *,
        setattr_call: cst.Call | None,
    ) -> None:
        judge = self._judge(init)
        if attr is not None:
            shown = f"self.{attr}"
        else:
            shown = (
                "setattr(self, " + code_of(node.args[1].value) + ", ...)"
                if isinstance(node, cst.Call)
                else "the attribute"
            )
        if isinstance(value, (cst.Dict, cst.DictComp, *_CONTAINERS)):
            if _holds_tensors(judge, value):
                self.report(
                    node,
                    message=(
                        f"`{shown}` holds tensors in a plain container that `model.to()` does not "
                        "move; register each tensor as a buffer (or stack them into one)"
                    ),
                )
            return
        if not judge.is_tensor(value):
            return
        modules = self.facts.modules
        if attr is not None and modules.registered_otherwise(classdef, attr):
            return
        if _placed(value) and self.facts.flow.runs_on_one_device():
            return  # put on the script's one device: right where nothing else runs
        if judge.requires_grad(value) or (
            attr is not None and modules.grad_enabled_later(classdef, attr)
        ):
            self.report(
                node,
                message=(
                    f"`{shown}` is a trainable tensor that `model.to()` does not move and the "
                    "optimizer never sees; make it `nn.Parameter(...)` (this changes "
                    "`model.parameters()`, so it is not rewritten)"
                ),
            )
            return
        reason = self._blocker(node, attr, init, classdef)
        if reason is not None:
            self.report(
                node,
                message=f"`{shown}` holds a tensor that `model.to()` does not move; {reason}",
            )
            return
        name_node: cst.BaseExpression
        if setattr_call is not None:
            name_node = setattr_call.args[1].value
        else:
            name_node = cst.SimpleString(f'"{attr}"')
        call = _register_buffer(self_name(init) or "self", name_node, value)
        if setattr_call is not None:
            edit = Edit(setattr_call, call)
        else:
            assert isinstance(node, cst.Assign)
            edit = Edit(node, cst.Expr(value=call, semicolon=node.semicolon))
        self.report(
            node,
            message=(
                f"`{shown}` holds a tensor that `model.to()`, `.cuda()` and DataParallel replicas "
                "never move; register it as a non-persistent buffer"
            ),
            edits=[edit],
        )

    def _before_super(
        self, node: cst.CSTNode, method_node: cst.FunctionDef, classdef: cst.ClassDef
    ) -> str | None:
        """Why the buffer could not be registered yet where `node` runs: `__init__` has no
        `super().__init__()`, or `node` (or the call of the helper it is in) runs before it."""
        if method_node.name.value in ("train", "eval"):
            return None  # runs on a built module
        init = method(classdef, "__init__")
        super_call = super_init_call(init) if init is not None else None
        if init is None or super_call is None:
            return (
                "`__init__` has no top-level `super().__init__()` call, so a buffer cannot be "
                "registered"
            )
        super_line = self.context.position(super_call).start.line
        if method_node is init:
            runs_at = [self.context.position(node).start.line]
        else:
            construction = self.facts.modules.construction_methods(classdef)
            self_var = self_name(init) or "self"
            runs_at = [
                self.context.position(call).start.line
                for call in self.facts.scopes.nodes(init.body)
                if isinstance(call, cst.Call)
                and self_attribute(call.func, self_var) in construction
            ]
        if any(line < super_line for line in runs_at):
            return (
                "it is assigned before `super().__init__()`, where a buffer cannot be registered "
                "yet"
            )
        return None

    def _blocker(
        self,
        node: cst.Assign | cst.Call,
        attr: str | None,
        init: cst.FunctionDef,
        classdef: cst.ClassDef,
    ) -> str | None:
        """Why `register_buffer` would fail or change the program, or None."""
        start = self.context.position(node).start.line
        reason = self._before_super(node, init, classdef)
        if reason is not None:
            return reason
        if attr is None:
            return None
        if attr in class_level_names(classdef):
            return f"`{attr}` is also defined in the class body, so `register_buffer` would raise"
        for function in methods(classdef):
            self_var = self_name(function)
            if self_var is None:
                continue
            other_judge = self._judge(function)
            for other in self.facts.scopes.nodes(function.body):
                if other is node or not isinstance(
                    other, (cst.Assign, cst.AnnAssign, cst.AugAssign)
                ):
                    continue
                targets = (
                    [t.target for t in other.targets]
                    if isinstance(other, cst.Assign)
                    else [other.target]
                )
                if not any(self_attribute(t, self_var) == attr for t in targets):
                    continue
                other_value = other.value
                if isinstance(other, cst.AugAssign) or other_value is None:
                    continue  # `self.x += t` keeps a tensor
                if isinstance(other_value, cst.Name) and other_value.value == "None":
                    if function is init and self.context.position(other).start.line < start:
                        return (
                            f"`self.{attr}` is first assigned `None`, so `register_buffer` "
                            "would raise"
                        )
                    continue
                if other_judge.is_tensor(other_value, same_attr=attr):
                    continue
                place = (
                    "earlier in `__init__`" if function is init else f"in `{function.name.value}`"
                )
                return (
                    f"`self.{attr}` is also assigned a value that is not provably a tensor "
                    f"{place}, and a buffer only accepts a tensor or `None`"
                )
        return None


def _placed(value: cst.BaseExpression) -> bool:
    """`<tensor>.to(device)` / `.cuda()` at the end of the value."""
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in ("to", "cuda")
    )


def _literal_string(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _holds_tensors(judge: TensorJudge, value: cst.BaseExpression) -> bool:
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


def _register_buffer(
    self_var: str, name: cst.BaseExpression, value: cst.BaseExpression
) -> cst.Call:
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return cst.Call(
        func=cst.Attribute(value=cst.Name(self_var), attr=cst.Name("register_buffer")),
        args=[
            cst.Arg(value=name, comma=space),
            cst.Arg(value=value, comma=space),
            cst.Arg(
                value=cst.Name("False"),
                keyword=cst.Name("persistent"),
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""),
                    whitespace_after=cst.SimpleWhitespace(""),
                ),
            ),
        ],
    )
