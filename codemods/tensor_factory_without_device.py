"""DF101: tensor factories in model code that create their tensor on the CPU."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import append_keyword, made_on, method_call
from devfix.codemods.analysis.devices import Unknown, instance_name
from devfix.codemods.analysis.modules import FunctionInfo
from devfix.codemods.analysis.moves import states_device
from devfix.codemods.analysis.names import call_tail, code_of, dotted_name, keyword_argument
from devfix.codemods.analysis.torch_names import (
    DATA_FACTORIES,
    LEGACY_CONSTRUCTORS,
    TENSOR_FACTORIES,
    tails,
)
from devfix.types import Applicability, Edit

_CANDIDATE_TAILS = tails(TENSOR_FACTORIES, LEGACY_CONSTRUCTORS) | {"from_numpy"}


class TensorFactoryWithoutDevice(DevicePass):
    """Tensor created inside model code without `device=`.

    ## What it does
    Finds `torch.arange`, `zeros`, `ones`, `full`, `empty`, `eye`, `linspace`, `logspace`,
    `rand`, `randn`, `randint`, `randperm`, `tensor`, `as_tensor`, the signal windows
    (`hann_window`, `hamming_window`, ...), `tril_indices`/`triu_indices` and the legacy
    constructors (`torch.Tensor(...)`, `torch.FloatTensor(...)`, `torch.LongTensor(...)`, ...),
    also through an attribute `__init__` stores them in (`self.win = torch.hann_window`, then
    `self.win(n)`; `self.Tensor = tensor` for a parameter `tensor=torch.FloatTensor`), called
    without `device=` inside model code: every method of an `nn.Module` subclass (`forward`,
    `init_hidden`, mask builders, loss modules; OpenMMLab models, whose `forward` is in their
    base class, with `forward_train` / `forward_test` and parts built from config registries),
    the loss and prediction steps of a Hugging Face / TRL `Trainer` subclass (`compute_loss`,
    `prediction_step`, `training_step`: what they make meets the outputs of the model the
    Trainer placed), and every function that takes a tensor argument.
    `__init__` is left to DF103, which registers such tensors as buffers so `model.to()` moves
    them, except a factory shaped after a tensor the module adopts from its caller
    (`nn.Parameter(torch.randn(r, base.weight.shape[1]))` in a LoRA or adapter wrapper, also
    through `self.weight = base.weight` or `self.register_parameter("weight", base.weight)`):
    the wrapper is often built around a layer of a model already on a GPU, so the new tensor
    gets `device=` of the adopted one (safe: on the CPU nothing changes). In script code (module
    level, notebook cells, and the script's own functions around its models: a training or
    acting loop, a solver's methods), a new tensor (`torch.randn(64, 100)`, also inside
    `Variable(...)`, or data: `torch.tensor(batch)`, `torch.from_numpy(obs)`, a legacy
    constructor) fed straight to a model the script moved to a device is found too: directly,
    through one of the model's submodules (`vae.decoder(z)`), or through a method of an object
    that hands it to a model it holds (`agent.act(obs)` with `return self.q_net(obs)`, the model
    moved as `agent.q_net.to(args.device)` where the function's caller can see it), or that
    meets that model's output there (`agent.learn(s, a, r)` with `self.q(s).gather(1,
    a.unsqueeze(1))` and `r + gamma * next_q`). A tensor such an object stores
    (`self.action_scale = torch.FloatTensor(...)`) that meets, in any of its methods, the output
    of a model it moved as it built it (`self.policy = Policy().to(self.device)`, then `mean *
    self.action_scale`) gets that device where it is made, once the device is set there. A
    loss's targets and lengths are not model input and are left alone, as are lengths that reach
    `pack_padded_sequence` (even through `.to("cpu")`), and tensors that meet a host copy
    (`probs = logits.softmax(-1).cpu()` then `probs * torch.linspace(...)`): the CPU is where
    they are needed. A module-level lambda that moves its argument (`Variable = lambda *a:
    autograd.Variable(*a).cuda() if USE_CUDA else autograd.Variable(*a)`) is the script's move
    helper, like a `def`.

    ## Why is this bad?
    A factory without `device=` makes a CPU tensor. As soon as the model runs on a GPU, the first
    operation that combines it with an activation fails with
    `RuntimeError: Expected all tensors to be on the same device, but found at least two
    devices, cuda:0 and cpu!` (for RNN hidden states: `Input and hidden tensors are not at the
    same device`). A tensor made on a fixed device instead breaks under `nn.DataParallel`,
    whose replicas run on `cuda:1`, `cuda:2`, ...

    ## Example
    ```python
    class Encoder(nn.Module):
        def forward(self, src):
            pos = torch.arange(0, src.shape[1]).unsqueeze(0).repeat(src.shape[0], 1)
            return self.tok_embedding(src) + self.pos_embedding(pos)
    ```

    ## Use instead
    ```python
    class Encoder(nn.Module):
        def forward(self, src):
            device = self.pos_embedding.weight.device
            pos = torch.arange(0, src.shape[1], device=device).unsqueeze(0).repeat(src.shape[0], 1)
            return self.tok_embedding(src) + self.pos_embedding(pos)
    ```
    (devfix writes `device=self.pos_embedding.weight.device` inline; the local name above only
    keeps this example short.) The device is read from the code that uses the new tensor: the
    tensor it meets in an operation (`x + t`, `torch.cat([x, t])`,
    `scores.masked_fill(t, ...)`), a tensor that indexes it (`eye[labels]`, `mask[y > 0] = 0`: a
    CPU tensor indexed from a GPU fails; indices on the host say nothing), or the layer it is
    fed to (`self.pos_embedding(t)` gives `self.pos_embedding.weight.device`; an `nn.Sequential`
    that opens with such a layer gives `self.encoder[0].weight.device`). A tensor it meets that
    is bound only later (`scores = torch.mm(q, k.T) / t` after the mask) is named by the operand
    of the torch function that computes it, which shares its device (`device=q.device`). Legacy
    constructors cannot take `device=`, so they get `.to(<device>)` instead. `dtype` and every
    other argument are kept. Zero-dimensional scalars such as `torch.tensor(2.0)` are legal next
    to CUDA tensors and are left alone, unless the code writes into them: an accumulator
    `total = torch.tensor(0.0)` updated with `total += loss` fails once `loss` is on a GPU, so
    it is made where what is added to it is (the tensors handed to the class's own method or the
    file's function that computes it, a judgement).

    ## Fix safety
    Safe when the tensor provably meets the device it is given (the fix is a no-op on CPU and
    removes the error on GPUs). Unsafe when the only evidence is that the function has a tensor
    argument: the fix then uses the first such argument's device; when the function gives its
    other factories `device=` of one of its inputs (`torch.ones(6, device=targets.device)`, at
    least twice), that input's device, before the device of a tensor the new one is shaped
    after or takes the dtype of (`torch.zeros(n, dtype=scores.dtype)`; it may be a module
    attribute left elsewhere); and when a module's method
    has nothing else to go by: the device of one of the module's own layers
    (`self.conv.weight.device`), since its work runs where its parameters are, in each replica
    and after `model.to()` (never in a module that puts its layers on devices by hand). When
    nothing in scope can supply a device, the finding is reported without a fix, with the
    reason. In script code the
    device is the model's move (`device=device` after `model.to(device)`); a model moved only
    under `if torch.cuda.is_available():` gets the file's own move helper (`to_var(...)`) when
    it has exactly one, and is reported without a fix otherwise. Outside model code, a new
    tensor (a factory, `torch.from_numpy`) that meets a tensor on a device in arithmetic or a
    comparison, also a few steps later through the names and operations it flows into (`keep =
    torch.arange(n) < sizes`, then `hidden * keep.float().unsqueeze(-1)`, where `hidden` is a
    moved model's output), is made on that tensor's device; a reduction to a 0-dim value on
    the way (`sizes.sum()`) ends the trail, since such a value meets tensors anywhere.
    `self.device` is never invented, and `next(self.parameters())` is never used (it is
    empty on DataParallel replicas).

    ## References
    - PyTorch docs, "Tensor Creation Ops" (`device` argument); "CUDA semantics".
    - pytorch/pytorch PR#85609 (`generate_square_subsequent_mask` gained `device`).
    """

    CODE = "DF101"
    NAME = "tensor-factory-without-device"
    MESSAGE = "tensor created in model code without `device=`"
    FIX_TITLE = "Pass `device=` of the tensor it meets"
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)

    def visit_Call(self, node: cst.Call) -> None:
        qualified: str | None = None
        if call_tail(node.func) in _CANDIDATE_TAILS or (
            isinstance(node.func, cst.Name)
            and node.func.value in self.facts.names.imported_aliases("torch")
        ):
            qualified = self.qualified_name(node.func)
        if qualified is None or not qualified.startswith("torch."):
            # `self.win = torch.hann_window` in `__init__`, then `self.win(n)`.
            qualified = self.facts.modules.stored_function(node)
            if qualified is None:
                return
        if qualified in TENSOR_FACTORIES:
            self._check(node, qualified, legacy=False)
        elif qualified in LEGACY_CONSTRUCTORS:
            self._check(node, qualified, legacy=True)
        elif qualified == "torch.from_numpy":
            function = self.facts.modules.enclosing_function(node)
            if function is None or self._in_script_function(function):
                self._check_script_tensor(node, qualified, moved=True)
            elif not function.is_model_code and not self.facts.flow.in_data_pipeline(function.node):
                self._meets_a_placed_operand(node, node, qualified, moved=True)

    def _is_a_loss(self, call: cst.Call) -> bool:
        if self.facts.modules.loss_kind(call) is not None:
            return True
        if not isinstance(call.func, cst.Name):
            return False
        built = self.facts.flow.built_by(call.func.value, call)
        qualified = self.qualified_name(built.func) if built is not None else None
        return (
            qualified is not None
            and qualified.startswith("torch.nn.")
            and qualified.endswith("Loss")
        )

    def _in_script_function(self, function: FunctionInfo) -> bool:
        """A function of the script around its models (a training or acting loop, a solver's
        method): neither model code nor data preparation."""
        if function.owner is not None and not function.owner.drives_models:
            return False
        if function.is_model_code and not (function.owner and function.owner.drives_models):
            return False
        return not self.facts.flow.in_data_pipeline(function.node)

    def _check(self, node: cst.Call, qualified: str, *, legacy: bool) -> None:
        if not legacy and states_device(node):
            return
        function = self.facts.modules.enclosing_function(node)
        if function is None and not legacy:
            self._check_script_tensor(node, qualified)
            return
        if function is not None and self._in_script_function(function):
            self._check_script_tensor(node, qualified, moved=legacy)
            return
        if function is None:
            return
        if not function.is_model_code:
            if not self.facts.flow.in_data_pipeline(function.node):
                self._meets_a_placed_operand(node, node, qualified, moved=legacy)
            return
        if self.facts.modules.is_construction(function):
            adopted = self.facts.modules.adopted_tensor_shaping(node, function)
            if adopted is not None and not legacy:
                self._follow_adopted(node, qualified, adopted)
            return  # tensors built in __init__ (or its helpers) are DF103's: register them
        if qualified in DATA_FACTORIES and not self.facts.devices.makes_data_tensor(node, function):
            return  # a 0-dim scalar: legal next to CUDA tensors
        if self.facts.devices.moved_when_made(node, function):
            return
        needed = self.facts.devices.needed_by(node, function)
        expression = needed.expression()
        if isinstance(needed, Unknown) and (needed.as_index or needed.on_host):
            return  # an index, or a tensor that meets host copies: the CPU is right
        if not needed.proof and self.facts.devices.moved_before_it_meets_a_tensor(node, function):
            return  # `t = t.to(x.device)` before `t` meets anything: placed by its author
        if expression is None:
            self.report(
                node,
                message=(
                    f"`{qualified}` creates a CPU tensor in `{function.name}`; no tensor or layer "
                    "in scope tells which device it needs"
                ),
            )
            return
        device = cst.parse_expression(expression)
        replacement = made_on(node, device, takes_device=not legacy)
        fix = f"`.to({expression})`" if legacy else f"`device={expression}`"
        self.report(
            node,
            message=(
                f"`{qualified}` creates a CPU tensor in `{function.name}`; it needs {fix} "
                f"({needed.evidence})"
            ),
            fix_title=f"Use {fix}",
            edits=[Edit(node, replacement)],
            applicability=Applicability.SAFE if needed.proof else Applicability.UNSAFE,
        )

    def _follow_adopted(self, node: cst.Call, qualified: str, adopted: str) -> None:
        """`torch.randn(r, self.weight.shape[1])` in the `__init__` of a wrapper that adopts
        `base.weight`: the new tensor meets the adopted one, which may already be on a GPU when
        the wrapper is built (layers swapped into a moved model)."""
        if keyword_argument(node, "device") is not None:
            return
        device = cst.parse_expression(f"{adopted}.device")
        self.report(
            node,
            message=f"`{qualified}` creates a CPU tensor shaped after `{adopted}`, which this "
            f"module adopts from its caller and which may already be on a device (a layer "
            f"swapped into a moved model); it needs `device={adopted}.device`",
            fix_title=f"Use `device={adopted}.device`",
            edits=[Edit(node, append_keyword(node, "device", device))],
        )

    def _check_attribute_tensor(self, node: cst.Call, qualified: str, *, moved: bool) -> None:
        """`self.action_scale = torch.FloatTensor(...)` in a class that drives models, met in
        another method by a tensor on the models' device (`mean * self.action_scale`)."""
        function = self.facts.modules.enclosing_function(node)
        assign = self.context.parent(node)
        if function is None or function.owner is None or not isinstance(assign, cst.Assign):
            return
        if len(assign.targets) != 1 or assign.value is not node:
            return
        target = dotted_name(assign.targets[0].target)
        self_name = instance_name(function)
        if target is None or not target.startswith(f"{self_name}."):
            return
        if qualified in DATA_FACTORIES and not self.facts.devices.makes_data_tensor(node, function):
            return  # a 0-dim scalar: legal next to CUDA tensors
        attribute = target[len(self_name) + 1 :]
        needed = self.facts.devices.attribute_meets(function, attribute)
        expression = needed.expression() if needed is not None else None
        if needed is None or expression is None:
            return
        if not self._attribute_ready(expression, function, assign):
            self.report(
                node,
                message=f"`{qualified}` creates a CPU tensor for `{target}`, which meets tensors "
                f"on `{expression}` ({needed.evidence}); no fix: `{expression}` is not set "
                "where it is made",
            )
            return
        device = cst.parse_expression(expression)
        fix = f"`.to({expression})`" if moved else f"`device={expression}`"
        self.report(
            node,
            message=f"`{qualified}` creates a CPU tensor for `{target}`, which meets tensors on "
            f"`{expression}` ({needed.evidence}); it needs {fix}",
            fix_title=f"Use {fix}",
            edits=[Edit(node, made_on(node, device, takes_device=not moved))],
            applicability=Applicability.SAFE if needed.proof else Applicability.UNSAFE,
        )

    def _attribute_ready(
        self, expression: str, function: FunctionInfo, statement: cst.CSTNode
    ) -> bool:
        """`expression` (`self.device`, `device`) can be read at `statement`: its names are
        visible, and a `self.<attr>` it reads is assigned earlier in this method."""
        if not self.facts.moves.visible_at(expression, statement):
            return False
        root = dotted_name(cst.parse_expression(expression))
        if root is None or not root.startswith(f"{instance_name(function)}."):
            return True
        attribute = "self." + root.split(".")[1]
        assert function.owner is not None
        start = self.facts.scopes.statement_start(statement)
        first, last = self.context.order(function.node)
        bindings = self.facts.scopes.table(function.owner.node).bindings.get(attribute, [])
        # Set earlier in this method, or in another one (which runs first: `__init__`).
        return any(not first <= b.position <= last or b.position < start for b in bindings)

    def _meets_a_placed_operand(
        self, node: cst.Call, value: cst.BaseExpression, qualified: str, *, moved: bool
    ) -> bool:
        """`torch.tensor(weights) * loss`, `loss` computed from a moved model's output: the new
        tensor goes where `loss` is. True when reported."""
        function = self.facts.modules.enclosing_function(node)
        if function is None or (
            qualified in DATA_FACTORIES and not self.facts.devices.makes_data_tensor(node, function)
        ):
            return False  # a 0-dim scalar: legal next to CUDA tensors
        operand = self.facts.devices.operand_on_a_device(value)
        if operand is None:
            return False
        if not self.facts.moves.visible_at(operand, node):
            self.report(
                node,
                message=f"`{qualified}` creates a CPU tensor that later meets `{operand}` in "
                f"arithmetic, which is on a device; no fix: `{operand}` is not set where it is "
                "made",
            )
            return True
        device = cst.parse_expression(f"{operand}.device")
        fix = f"`.to({operand}.device)`" if moved else f"`device={operand}.device`"
        self.report(
            node,
            message=f"`{qualified}` creates a CPU tensor that meets `{operand}` in arithmetic, "
            f"which is on a device; it needs {fix}",
            fix_title=f"Use {fix}",
            edits=[Edit(node, made_on(node, device, takes_device=not moved))],
        )
        return True

    def _check_script_tensor(self, node: cst.Call, qualified: str, *, moved: bool = False) -> None:
        """Script code (a notebook cell, a module-level loop): a new tensor (`torch.randn(n, z)`)
        fed straight to a model the script moved to a GPU, through `Variable(...)` at most."""
        if qualified in DATA_FACTORIES and self.facts.flow.token_id_tensor(node):
            return  # token ids for a model: DF202's
        value = self.facts.names.through_variable(node)
        found = self.facts.flow.model_call_fed(value, submodules=True)
        if found is None and self._meets_a_placed_operand(node, value, qualified, moved=moved):
            return
        if found is None:
            self._check_attribute_tensor(node, qualified, moved=moved)
            return
        model_call, model = found
        if self._is_a_loss(model_call):
            return  # a loss's target or lengths (CTC's may stay on the CPU): not model input
        kept = self.facts.cpu_only.use_of(self.facts.scopes.assigned_name(value), value, model_call)
        if kept is not None:
            return  # it reaches an argument that stays on the CPU (packed lengths)
        line = self.context.position(model_call).start.line
        where = f"`{qualified}` creates a CPU tensor that `{model.model}` (line {line}) reads"
        if model.move is not None and not model.move.conditional_line:
            device = model.move.as_to_argument()
        elif model.pretrained:
            device = cst.parse_expression(f"{model.model}.device")
        else:
            helper = self.facts.moves.move_helper()
            if helper is None:
                reason = model.reason or (
                    f"`{model.model}` moves to {model.move.describe()} only under a condition"
                    if model.move is not None
                    else "its device is not known"
                )
                self.report(node, message=f"{where} on its device; no fix: {reason}")
                return
            wrapped = cst.Call(func=cst.Name(helper), args=[cst.Arg(node)])
            self.report(
                node,
                message=f"{where} on its device; the script moves its tensors with `{helper}`",
                fix_title=f"Wrap it in `{helper}(...)`",
                edits=[Edit(node, wrapped)],
            )
            return
        shown = code_of(device)
        if moved:
            self.report(
                node,
                message=f"{where} on `{shown}`; it needs `.to({shown})`",
                fix_title=f"Use `.to({shown})`",
                edits=[Edit(node, method_call(node, "to", device))],
            )
            return
        self.report(
            node,
            message=f"{where} on `{shown}`; it needs `device={shown}`",
            fix_title=f"Use `device={shown}`",
            edits=[Edit(node, append_keyword(node, "device", device))],
        )
