"""DF103: a plain tensor attribute on an nn.Module, which `model.to()` never moves."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import method_call, register_buffer_for
from devfix.codemods.analysis.modules import self_name
from devfix.codemods.analysis.names import code_of, string_value
from devfix.codemods.tensor_attribute_not_buffer.facts import Buffers, Method
from devfix.types import Applicability, Edit


class TensorAttributeNotBuffer(DevicePass):
    """Tensor stored as a plain attribute of an `nn.Module` in `__init__`.

    ## What it does
    Finds `self.x = <tensor>` (and `setattr(self, name, <tensor>)`) in the `__init__` of an
    `nn.Module` subclass, where the value is provably a tensor: a factory (`torch.zeros`,
    `torch.arange`, `torch.tensor([...])`), a legacy constructor (`torch.FloatTensor([...])`), a
    sparse tensor (`torch.sparse_coo_tensor(...)`, `torch.sparse.FloatTensor(...)`), torch math
    on tensors (`torch.exp`, `torch.sin`, `torch.sqrt`, ...), a tensor method or a local name
    built from them (a sinusoidal positional table, a causal mask, class weights of a custom
    loss), or a call of a function of the file that returns one (every `return` a tensor, or
    annotated `-> Tensor` and making no `nn.Parameter`). Also a tensor made from data
    (`torch.tensor(np.load(path))`, `torch.from_numpy(a).float()`, `torch.load(path)`) in a
    public method that callers run on the built module (`net.load_anchors(path)`: not `forward`,
    not decorated, never called by the class itself), stored under a name no construction-time
    method sets and read by another method: a later `model.to()` leaves it behind just the same.

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

    A module the file only ever builds inside another module's running code
    (`disparityregression(maxdisp)(cost)` in `forward`) is a new instance per call that no
    `model.to()` reaches, so a buffer would not move either: each read in its own methods
    follows that method's input instead (`self.disp.to(x.device)`), and a bare `.cuda()` in the
    value goes (it fails on a host without a GPU; unsafe).

    Not rewritten, only reported: a tensor that nothing in the file reads (no `x.<name>`, no
    `getattr(..., "<name>")`): it cannot meet another tensor here, and registering it would only
    add a buffer; a tensor the class uses with CPU copies, directly or through a function of
    the file it hands it to (`extract(self.betas, t)` with `a.gather(-1, t.cpu())`): it is kept
    on the CPU on purpose, and a buffer would follow the model away from them; a tensor that
    every method reading it first re-binds to where its input is (`self.mean =
    self.mean.type_as(x)` at the top of `forward`), or that every read hands out moved to the
    device its caller names (a cache read back as `self.mask[:n, :n].to(device)`, a table as
    `self.ids.unsqueeze(0).expand(b, -1).to(self.embed.weight.device)`): it follows the
    inputs; a tensor with `requires_grad=True` (or `Variable(..., requires_grad=True)`, or
    `.requires_grad_()`) must become `nn.Parameter`, which changes `model.parameters()` and
    what the optimizer trains; tensors held in a list or dict cannot be registered as they are
    (register each, or stack them); an annotated assignment; a name that
    is also a class attribute or is assigned a non-tensor elsewhere (a buffer only accepts a
    tensor or `None`), or by unpacking (`[self.P, self.Q] = pair`: set first, the attribute
    exists and `register_buffer` raises); an assignment before `super().__init__()`.

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
        if len(node.targets) != 1:
            return
        store = self.facts.own(Buffers).stored_at(node, node.targets[0].target)
        if store is None:
            return
        attr, owner, built = store
        if built and isinstance(node.value, cst.Name) and node.value.value == "None":
            self._check_cache_slot(node, attr, owner)
        else:
            self._check(node, attr, node.value, owner)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        store = self.facts.own(Buffers).stored_at(node, node.target)
        if node.value is None or store is None or not store[2]:
            return
        attr, (writer, _), _ = store
        if not self.facts.modules.tensor_judge(writer).is_tensor(node.value):
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
        store = self.facts.own(Buffers).setattr_store(node)
        if store is not None:
            name, value, owner = store
            self._check(node, string_value(name), value, owner, name=name)

    # -- deciding --------------------------------------------------------------------------

    def _check_cache_slot(self, node: cst.Assign, attr: str, owner: Method) -> None:
        """`self.cache = None` while the module is built, a tensor stored there by another
        method (`forward`) and read back later: the cached tensor stays wherever it was made
        (`model.to()` never moves it, DataParallel replicas all read the first device's copy).
        A buffer registered as `None` holds the tensor assigned to it later, and moves."""
        if not self.facts.own(Buffers).caches_tensor(node, attr, owner):
            return
        holds = f"`self.{attr}` caches a tensor that `model.to()` does not move"
        fixed = (
            f"`self.{attr}` caches a tensor made in another method; `model.to()` never moves it "
            "and DataParallel replicas read the first device's copy; register the slot as a "
            "non-persistent buffer"
        )
        slot = cst.SimpleString(f'"{attr}"')
        self._register(node, attr, owner, slot, node.value, holds=holds, fixed=fixed)

    def _check(
        self,
        node: cst.Assign | cst.Call,
        attr: str | None,
        value: cst.BaseExpression,
        owner: Method,
        name: cst.BaseExpression | None = None,
    ) -> None:
        """`self.<attr> = value`, or `setattr(self, name, value)` (`attr` None where `name` is
        not a string literal)."""
        name = name or cst.SimpleString(f'"{attr}"')
        shown = f"self.{attr}" if attr is not None else f"setattr(self, {code_of(name)}, ...)"
        kind = self.facts.own(Buffers).stored_kind(value, attr, owner)
        if kind == "tensors":
            self.report(
                node,
                message=(
                    f"`{shown}` holds tensors in a plain container that `model.to()` does not "
                    "move; register each tensor as a buffer (or stack them into one)"
                ),
            )
            return
        if kind is None:
            return
        if kind == "trainable":
            self.report(
                node,
                message=(
                    f"`{shown}` is a trainable tensor that `model.to()` does not move and the "
                    "optimizer never sees; make it `nn.Parameter(...)` (this changes "
                    "`model.parameters()`, so it is not rewritten)"
                ),
            )
            return
        holds = f"`{shown}` holds a tensor that `model.to()` does not move"
        fixed = (
            f"`{shown}` holds a tensor that `model.to()`, `.cuda()` and DataParallel replicas "
            "never move; register it as a non-persistent buffer"
        )
        self._register(node, attr, owner, name, value, holds=holds, fixed=fixed)

    def _register(
        self,
        node: cst.Assign | cst.Call,
        attr: str | None,
        owner: Method,
        name: cst.BaseExpression,
        value: cst.BaseExpression,
        *,
        holds: str,
        fixed: str,
    ) -> None:
        """`holds` and why a buffer cannot be registered, else `fixed` with the fix."""
        buffers = self.facts.own(Buffers)
        reason = buffers.blocker(node, attr, owner)
        if reason is None and attr is not None and not buffers.read_in_file(attr):
            reason = (
                "nothing in this file reads it, so it is left as it is: register it as a buffer "
                "if code elsewhere uses it beside the model's tensors"
            )
        kept = buffers.read_beside_host_copies(attr, owner[1]) if attr and not reason else None
        if kept is not None:
            reason = f"it is kept on the CPU on purpose: {kept}, so it is left as it is"
        follower = buffers.follows_the_inputs(attr, owner[1]) if attr and not reason else None
        if follower is not None:
            reason = (
                f"`{follower}` re-binds it to its input's device before reading it, so it "
                "follows the inputs in every replica and is left as it is"
            )
        handed = buffers.moved_at_each_read(attr, owner[1]) if attr and not reason else None
        if handed is not None:
            reason = (
                f"`{handed}` hands it out moved to the device its caller names, so it follows "
                "the inputs in every replica and is left as it is"
            )
        if reason is not None:
            self.report(node, message=f"{holds}; {reason}")
            return
        if attr is not None and self._follow_inputs_per_call(node, attr, owner, value, holds):
            return
        new = register_buffer_for(node, self_name(owner[0]) or "self", name, value)
        self.report(node, message=fixed, edits=[Edit(node, new)])

    def _follow_inputs_per_call(
        self, node: cst.CSTNode, attr: str, owner: Method, value: cst.BaseExpression, holds: str
    ) -> bool:
        """A module the file builds inside another one's `forward` (`disparityregression(n)(x)`)
        is never moved: a buffer would not help. Each read follows the method's input instead
        (`self.disp.to(x.device)`), and a `.cuda()` ending the value goes (it fails on a host
        without a GPU and picks the current GPU on the others)."""
        buffers = self.facts.own(Buffers)
        where = buffers.built_where_it_runs(owner[1])
        reads = buffers.reads_after_construction(attr, owner[1]) if where else None
        if where is None or reads is None:
            return False
        edits = [
            Edit(read, method_call(read, "to", cst.parse_expression(f"{source}.device")))
            for read, source in reads
        ]
        placed = _without_cuda(value)
        if placed is not value:
            edits.append(Edit(value, placed))
        self.report(
            node,
            message=f"{holds}; the file builds this module inside `{where}`, where no "
            f"`model.to()` reaches it: each read follows the input instead "
            f"(`self.{attr}.to({reads[0][1]}.device)`)",
            fix_title=f"Read `self.{attr}` on the input's device",
            edits=edits,
            applicability=Applicability.UNSAFE,
        )
        return True


def _without_cuda(value: cst.BaseExpression) -> cst.BaseExpression:
    """`value` with a bare `.cuda()` in its method chain taken out (`t.cuda().requires_grad_(
    False)` gives `t.requires_grad_(False)`); `value` itself when it has none."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
        return value
    if value.func.attr.value == "cuda" and not value.args:
        return value.func.value
    inner = _without_cuda(value.func.value)
    if inner is value.func.value:
        return value
    return value.with_changes(func=value.func.with_changes(value=inner))
