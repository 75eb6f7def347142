"""DF207: a model left on the CPU while the inputs it is called with are moved to a device."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods.analysis.devices import Current, Literal, Named
from devfix.codemods.analysis.flow.calls import is_name
from devfix.codemods.analysis.held_models import (
    Construction,
    HeldModels,
    SiblingMove,
    built_value,
)
from devfix.codemods.analysis.modules import strip_module_methods
from devfix.codemods.analysis.moves import cuda_type
from devfix.codemods.analysis.names import call_tail, code_of, dotted_name, keyword_argument
from devfix.codemods.analysis.torch_names import (
    MODEL_MEMBERS_KEEPING_PLACE,
    MODEL_WRAPPERS,
    MODULE_SELF_METHODS,
    MOVE_METHODS,
    PLACED_AS_LOADED,
)
from devfix.types import Applicability, Edit

#: Calls that build a model: a module class, or a pretrained checkpoint.
_LOADERS = frozenset({"from_pretrained", "from_config"})
#: Methods of a model that run it on its inputs.
_RUNS = frozenset({"generate", "forward"})


class ModelNotMovedToDevice(DevicePass):
    """Model left on the CPU while the inputs it is called with are moved to a device.

    ## What it does
    Finds a model built in a script, a notebook or a training function (`model = Net()`, `model
    = AutoModel.from_pretrained(...)`) that is never moved (no `.to(...)`, `.cuda()`,
    `device_map=`, no wrapper or function it is handed to), but is called with an input the code
    moves to a device (`model(x.to(device))`, `model.generate(ids)` after `ids =
    ids.to(device)`, `model(**enc)` after `enc = tokenizer(...).to(device)` or `enc = {k:
    v.to(device) for k, v in enc.items()}`), and adds the same move for the model right after it
    is built: `model.to(device)`; where every move of those inputs runs under one `if` (`if
    args.cuda: data = data.cuda()`), the model's move goes under the same test (`if args.cuda:
    model.cuda()`), and without a fix where that test cannot be written where the model is
    built: the script's CPU run must keep working. A model handed by position to a function of
    this file that only runs it, on inputs it moves to a device the caller can name (`model =
    finetune(model, loader)`), counts as called there; the move then comes after the last
    statement that replaces one of its layers (`model.fc = nn.Linear(512, 2)`), since a head put
    in after the move would stay on the CPU. torchvision's model builders
    (`models.resnet18(...)`) and `timm.create_model` build models. An agent or trainer class
    (not a module itself) that builds several networks in one method (`self.actor = Actor(...)`,
    `self.critic = Critic(...)`), moves some of them and never another that it runs and
    optimizes (`self.critic(...)`, `Adam(self.critic.parameters())`) gets that one moved the
    same way: `self.critic.cuda()` next to `self.actor.cuda()` (under the same `if
    self.use_cuda:`), or `.to(self.device)` on its construction when its sibling is built that
    way. A copy of a network the object moves (`self.old_policy = copy.deepcopy(policy)` beside
    `self.policy = policy`), run by the object and never moved, gets the same move next to the
    original's (`self.old_policy.cuda()` after `self.policy.cuda()` in the object's own
    `cuda()`). An object that moves none of its networks, but runs one on a tensor it moves to a
    device it holds (`self.q(obs)` after `obs = torch.tensor(o).to(self.device)`; also through a
    method of the network's own class that runs it, `self.pi.dist(s)` where `dist` calls
    `self(s)`, and on what a call made on that device returns: `s, a =
    memory.batch(device=self.device)`), gets that network built on that device (`self.q =
    make_q(spec).to(self.device)`, or the value `self.device` is given later when it can be
    written there); a `copy.deepcopy` of the network made after it follows it. A checkpoint the
    object loads (`self.lm = AutoModelForCausalLM.from_pretrained(path)`, also annotated:
    `self.lm: LlamaForCausalLM = ...`) and only runs (`self.lm(**enc)`, `self.lm.generate(...)`,
    a CLIP-like model's `get_text_features` / `get_image_features` / `encode_image`, reading
    `.config` or `.eval()` aside) counts with any of its inputs moved to a device the object
    holds (`enc = self.tok(...).to(self.accelerator.device)`); of several loads of the attribute
    in one method, the one without a placement is built there when the others have one (a
    full-weight branch beside an adapter loaded onto a base model with `device_map=`). A module
    that runs itself (`self(x)`, `self.forward(x)`) on tensors it makes on a device it sets in
    `__init__` (`torch.tensor(obs, device=self.device)`), and that neither it nor this file
    moves, gets `self.to(self.device)` in `__init__`, before its parameters are read (an
    optimizer, `copy.deepcopy(self)`). A model a function is handed (`def fit(X, y, net,
    criterion, optimizer):`) and runs on inputs it moves to a device it chooses itself (`device
    = torch.device("cuda:0" if ...)`, bound once in the function's own body) gets
    `net.to(device)` right after that choice: the caller cannot have known the device. The
    current GPU (`torch.device("cuda")`, which the caller picks with
    `torch.cuda.set_device(rank)`) is the caller's choice and is left alone, as is that GPU or
    the CPU picked by a switch the caller hands in (`"cuda" if args.gpu else "cpu"`, read by the
    caller as it places the model); a device read off the model itself (`device =
    next(net.parameters()).device`) is where it already is; so is a parameter the function
    moves, rebinds, wraps or hands to another call, and one run on what a model returned (a
    loss or a metric: `criterion(net(x), y)`); reading its attributes and returning it are
    fine. The function must treat the parameter as a model (`net.train()`,
    `net.parameters()`, `net.forward(x)`, a field of its output such as `.logits`): a plain
    callable (`predict_fn(x)`) has no `.to()`.

    ## Why is this bad?
    The inputs go to the GPU and the weights stay on the CPU: the first layer fails with
    `RuntimeError: Expected all tensors to be on the same device, but found at least two
    devices, cuda:0 and cpu!` (`Input type (torch.cuda.FloatTensor) and weight type
    (torch.FloatTensor) should be the same` for a convolution). On a machine without a GPU the
    script works, so the bug shows only where it was meant to run.

    ## Example
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = T5ForConditionalGeneration.from_pretrained("t5-small")
    ids = tokenizer(prompt, return_tensors="pt").input_ids.to(device)
    out = model.generate(ids)
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = T5ForConditionalGeneration.from_pretrained("t5-small")
    model.to(device)
    ids = tokenizer(prompt, return_tensors="pt").input_ids.to(device)
    out = model.generate(ids)
    ```

    ## Fix safety
    The sibling-network move is unsafe (a judgement: the class places the networks it runs
    together); a network handed elsewhere (an EMA, a wrapper) or never run is left alone.
    The rest is safe: where the device is the CPU both moves are no-ops, and where it is a GPU
    the script failed at the model's first layer. The move goes right after the model is
    built, with the device its inputs are moved to, when that device can be named there;
    otherwise the finding says so and has no fix. A model moved anywhere, loaded with
    `device_map`, handed to another call (`accelerator.prepare(model)`,
    `nn.DataParallel(model)`, `train(model)`) or stored elsewhere is left alone: its device is
    decided there; so is a model loaded in 4 or 8 bits (`load_in_8bit`,
    `quantization_config`), which is placed as it loads and refuses `.to()`.
    """

    CODE = "DF207"
    NAME = "model-not-moved-to-device"
    MESSAGE = "model left on the CPU while its inputs are moved to a device"
    FIX_TITLE = "Move the model where its inputs go"
    APPLICABILITY = Applicability.SAFE
    REQUIRED_WORDS = ("torch",)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        """A network an agent or trainer builds beside one it moves, and never moves."""
        info = self.facts.modules.class_info(node)
        held = self.facts.own(HeldModels)
        if info.is_module:
            self._module_never_moved(node, held)
            return
        if info.is_dataset:
            return
        for left in held.left_behind(node):
            self._report_left_behind(left)
        for unplaced in held.never_placed(node):
            problem = (
                f"`self.{unplaced.attribute}` is never moved, but this object runs it on "
                f"`{unplaced.fed}`, which it moves to `{unplaced.device_attribute}`"
            )
            if unplaced.device is None:
                self.report(
                    unplaced.built,
                    message=f"{problem}; no fix: that device cannot be named where it is built",
                )
                continue
            value = built_value(unplaced.built)
            placed = cst.Call(
                func=cst.Attribute(value=value, attr=cst.Name("to")),
                args=[cst.Arg(cst.parse_expression(unplaced.device))],
            )
            self._build_placed(unplaced.built, placed, f"{problem}; build it there")

    def _module_never_moved(self, node: cst.ClassDef, held: HeldModels) -> None:
        """A module that runs itself on tensors it puts on `self.device`, never moved."""
        found = held.unmoved_module_input(node)
        if found is None:
            return
        fed, device, init = found
        body = init.body.body if isinstance(init.body, cst.IndentedBlock) else ()
        problem = (
            f"`{node.name.value}` runs itself on `{fed}`, which it puts on `{device}`, but "
            "nothing moves the module there"
        )
        point = held.move_point(init, device)
        if point is None:
            return
        set_at, at = point
        if set_at >= at:
            self.report(
                body[set_at], message=f"{problem}; no fix: `{device}` is set after it is used"
            )
            return
        moved = cst.parse_statement(f"self.to({device})\n")
        anchor = body[at - 1]
        self.report(
            body[set_at],
            message=f"{problem}; move it as `__init__` builds it: `self.to({device})`",
            fix_title=f"Add `self.to({device})`",
            edits=[Edit(anchor, cst.FlattenSentinel([anchor, moved]))],
            applicability=Applicability.UNSAFE,
        )

    def _report_left_behind(self, left: SiblingMove) -> None:
        mine = cst.parse_expression(f"self.{left.attribute}")
        func = left.move.func
        assert isinstance(func, cst.Attribute)
        moved = left.move.with_changes(func=func.with_changes(value=mine))
        shown = code_of(moved)
        copied = f", a copy of `self.{left.sibling}`," if left.copy else ""
        relation = "" if left.copy else ", built beside it,"
        problem = (
            f"`self.{left.attribute}`{copied} stays on the CPU, but `self.{left.sibling}`"
            f"{relation} is moved with `{code_of(left.move)[len(code_of(func.value)) :]}` and "
            "both are run by this object"
        )
        order = self.context.order
        if left.statement is not None:
            if order(left.built)[0] > order(left.statement)[0]:
                self.report(left.built, message=f"{problem}; no fix: it is built after that move")
                return
            added = cst.SimpleStatementLine([cst.Expr(moved)])
            self.report(
                left.built,
                message=f"{problem}; move it there too: `{shown}`",
                fix_title=f"Add `{shown}`",
                edits=[Edit(left.statement, cst.FlattenSentinel([left.statement, added]))],
                applicability=Applicability.UNSAFE,
            )
            return
        if order(left.built)[0] < order(left.move)[0]:
            self.report(left.built, message=f"{problem}; no fix: it is built before that move")
            return
        placed = left.move.with_changes(func=func.with_changes(value=built_value(left.built)))
        self._build_placed(left.built, placed, f"{problem}; build it on that device too")

    def _build_placed(self, built: Construction, placed: cst.Call, problem: str) -> None:
        """Report `built` with its value replaced by `placed`, the value moved as it is built
        (a judgement about where the object runs its networks: unsafe)."""
        self.report(
            built,
            message=f"{problem}: `{code_of(placed)}`",
            fix_title="Move it as it is built",
            edits=[Edit(built_value(built), placed)],
            applicability=Applicability.UNSAFE,
        )

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        """A model the caller hands in, run on inputs this function moves to a device it
        chooses itself, and never moved: the caller cannot know that device."""
        params = node.params
        names = [
            param.name.value
            for param in (*params.posonly_params, *params.params, *params.kwonly_params)
        ]
        for name in names:
            if name in ("self", "cls"):
                continue
            runs = self._parameter_runs(name, node)
            if runs and any(self._fed_output_of(run, names) for run in runs):
                continue  # a loss or a metric, run on what a model returned
            if not self.facts.modules.treated_as_model(name, node):
                continue  # a callable with no `.to()` to move it by (`predict_fn(x)`)
            found = next(
                (
                    (run, chosen)
                    for run in runs or ()
                    if (chosen := self._chosen_here(run, node, name)) is not None
                ),
                None,
            )
            if found is None:
                continue
            run, (device, binding) = found
            move = f"{name}.to({device})"
            added = cst.parse_statement(move + "\n", config=self.context.module.config_for_parsing)
            self.report(
                run,
                message=(
                    f"`{name}`, handed in by the caller, is never moved, but `{node.name.value}` "
                    f"runs it on inputs it moves to `{device}`, a device it chooses itself (line "
                    f"{self.facts.scopes.line_of(binding)}); move it there too: `{move}`"
                ),
                fix_title=f"Add `{move}`",
                edits=[Edit(binding, cst.FlattenSentinel([binding, added]))],
            )

    def _parameter_runs(self, name: str, function: cst.FunctionDef) -> list[cst.Call] | None:
        """The calls that run the model parameter `name`, when the function neither moves,
        rebinds, wraps nor hands it on (reading its attributes and returning it are fine)."""
        runs: list[cst.Call] = []
        for use in self.facts.scopes.find(function, cst.Name):
            if use.value != name:
                continue
            parent = self.context.parent(use)
            if isinstance(parent, cst.Param):
                continue
            run = self._run_of(use)
            if run is not None:
                runs.append(run)
                continue
            if isinstance(parent, cst.Attribute) and parent.value is use:
                method = parent.attr.value
                if method in MOVE_METHODS or method in MODULE_SELF_METHODS - {"eval", "train"}:
                    return None
                continue
            if not self._returned(use):
                return None  # rebound, wrapped, handed to a call, stored: decided elsewhere
        return runs

    def _fed_output_of(self, run: cst.Call, params: list[str]) -> bool:
        """An argument of `run` holds what a model returned: a call of one of `params` or of
        a local (`criterion(net(x), y)`), or a name bound to one (`out = model(x)`, then
        `criterion(out.view(-1), y)`); a loss or a metric, not a model."""
        values: list[cst.CSTNode] = [arg.value for arg in run.args]
        for arg in run.args:
            values.extend(
                value
                for name in self.context.of_type(arg.value, cst.Name)
                for value in self.facts.scopes.assigned_values(name.value, run)
            )
        return any(
            isinstance(call.func, cst.Name)
            and (
                call.func.value in params
                or self.facts.scopes.assigned_values(call.func.value, call) != []
            )
            for value in values
            for call in self.context.of_type(value, cst.Call)
        )

    def _run_of(self, use: cst.Name) -> cst.Call | None:
        """The call that runs the model `use` names: `model(x)`, `model.generate(ids)`."""
        parent = self.context.parent(use)
        if isinstance(parent, cst.Call) and parent.func is use:
            return parent
        if isinstance(parent, cst.Attribute) and parent.value is use and parent.attr.value in _RUNS:
            call = self.context.parent(parent)
            if isinstance(call, cst.Call) and call.func is parent:
                return call
        return None

    def _returned(self, use: cst.Name) -> bool:
        """`return model` or `return {"model": model, ...}`: handed back, not placed."""
        node: cst.CSTNode = use
        while True:
            parent = self.context.parent(node)
            if isinstance(parent, cst.Return):
                return True
            if not isinstance(
                parent, (cst.Dict, cst.DictElement, cst.Tuple, cst.List, cst.Element)
            ):
                return False
            node = parent

    def _chosen_here(
        self, run: cst.Call, function: cst.FunctionDef, model: str
    ) -> tuple[str, cst.SimpleStatementLine] | None:
        """(device, the statement of `function`'s own body that binds it) when an input of
        `run` is moved to a local device variable bound there, before the run, from anything
        but `model` itself (`device = next(model.parameters()).device` is where it already is)."""
        device = self._input_device(run)
        name = dotted_name(device[0]) if device is not None and device[0] is not None else None
        if name is None or "." in name:
            return None
        body = function.body.body if isinstance(function.body, cst.IndentedBlock) else ()
        at = self.context.order(run)[0]
        bindings = [
            statement
            for statement in body
            if isinstance(statement, cst.SimpleStatementLine)
            and name in self.facts.scopes.names_bound(statement)
            and self.context.order(statement)[1] < at
        ]
        bound_elsewhere = [
            target
            for target in self.facts.scopes.find(function, cst.Name)
            if target.value == name and isinstance(self.context.parent(target), cst.AssignTarget)
        ]
        if len(bindings) != 1 or len(bound_elsewhere) != 1:
            return None
        value = self.context.parent(bound_elsewhere[0])
        chosen = self.context.parent(value) if isinstance(value, cst.AssignTarget) else None
        if isinstance(chosen, cst.Assign) and _current_gpu(chosen.value):
            return None  # `torch.device("cuda")`: the GPU the caller made current
        if isinstance(chosen, cst.Assign) and self._callers_switch(chosen.value, function):
            return None
        if isinstance(chosen, cst.Assign) and any(
            isinstance(read, cst.Name) and read.value == model
            for read in self.context.subtree(chosen.value)
        ):
            return None
        return name, bindings[0]

    def _callers_switch(self, value: cst.BaseExpression, function: cst.FunctionDef) -> bool:
        """`"cuda" if args.gpu else "cpu"`: the current GPU or the CPU, as a switch the caller
        hands in decides; the caller reads the same switch when it places the model."""
        if (
            isinstance(value, cst.Call)
            and call_tail(value.func) == "device"
            and len(value.args) == 1
        ):
            value = value.args[0].value
        if not isinstance(value, cst.IfExp):
            return False
        branches = (value.body, value.orelse)
        if not any(_current_gpu(branch) for branch in branches) or not any(
            isinstance(branch, cst.SimpleString) and branch.evaluated_value == "cpu"
            for branch in branches
        ):
            return False
        params = {param.name.value for param in function.params.params}
        return any(
            path.split(".", 1)[0] in params for path in self.facts.scopes.read_paths(value.test)
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        if not self._builds_a_model(node.value):
            return
        name = node.targets[0].target.value
        statement = self.context.parent(node)
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return
        scope = self.facts.scopes.enclosing_scope(node)
        if isinstance(scope, cst.Lambda):
            return
        found = self._moved_input(name, scope, node)
        if found is None:
            return
        call, device, statement = found
        shown = code_of(device) if device is not None else None
        move = f"{name}.to({shown})" if shown is not None else f"{name}.cuda()"
        where = f"`{code_of(call.func)}` (line {self.facts.scopes.line_of(call)})"
        problem = (
            f"`{name}` stays on the CPU, but {where} is called with inputs moved to "
            f"{'`' + shown + '`' if shown else 'the GPU (`.cuda()`)'}"
        )
        guard = self._input_move_guard(call)
        if guard is not None and not self.facts.moves.visible_at(code_of(guard), statement):
            self.report(
                node,
                message=f"{problem} only when `{code_of(guard)}` holds, which cannot be tested "
                "where the model is built; no fix",
            )
            return
        code = move + "\n"
        if guard is not None:
            code = f"if {code_of(guard)}:\n    {move}\n"  # the inputs move only then
            move = f"if {code_of(guard)}: {move}"
        added = cst.parse_statement(code, config=self.context.module.config_for_parsing)
        if device is None or self.facts.moves.visible_at(shown or "", statement):
            self.report(
                node,
                message=f"{problem}; move it there too: `{move}`",
                fix_title=f"Add `{move}`",
                edits=[Edit(statement, cst.FlattenSentinel([statement, added]))],
            )
            return
        # Built before the device is chosen: moved at the first statement that can see it
        # (reported there: in a notebook, a later cell).
        following = self._after_device_chosen(device, statement, call)
        if following is None:
            self.report(
                node, message=f"{problem}; `{shown}` is not defined where the model is built"
            )
            return
        built_on = f"`{name}` (line {self.facts.scopes.line_of(node)}) stays"
        self.report(
            following,
            message=f"{problem.replace(f'`{name}` stays', built_on, 1)}; move it once "
            f"`{shown}` is chosen: `{move}`",
            fix_title=f"Add `{move}`",
            edits=[Edit(following, cst.FlattenSentinel([added, following]))],
        )

    def _input_move_guard(self, call: cst.Call) -> cst.BaseExpression | None:
        """The test of the `if` every move of the model's input runs under (`if args.cuda:
        data = data.cuda()`): where it fails the inputs stay on the CPU, and so must the
        model. None where some move is unconditional, or the moves sit under different tests."""
        scope = self.facts.scopes.enclosing_scope(call)
        names = {arg.value.value for arg in call.args if isinstance(arg.value, cst.Name)}
        tests: dict[str, cst.BaseExpression] = {}
        for assign in self.facts.scopes.find(scope, cst.Assign, own_scope=True):
            bound = {
                n.value
                for n in self.context.subtree(assign.targets[0].target)
                if isinstance(n, cst.Name)
            }
            if not bound & names or not any(
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in ("cuda", "to")
                for node in self.context.subtree(assign.value)
            ):
                continue
            guard = next(
                (a for a in self.context.ancestors(assign) if isinstance(a, (cst.If, type(scope)))),
                None,
            )
            if (
                not isinstance(guard, cst.If)
                or guard.orelse is not None
                or len(guard.body.body) != 1  # `if args.cuda: x = x.cuda()` guards the move
            ):
                return None
            tests[code_of(guard.test)] = guard.test
        return next(iter(tests.values())) if len(tests) == 1 else None

    def _after_device_chosen(
        self, device: cst.BaseExpression, built: cst.SimpleStatementLine, call: cst.Call
    ) -> cst.BaseStatement | None:
        """The statement, in the block that builds the model, right after the one that binds
        the device's name (the last such before the model's first call)."""
        block = self.context.parent(built)
        root = dotted_name(device)
        if root is None or not isinstance(block, (cst.Module, cst.IndentedBlock)):
            return None
        name = root.split(".")[0]
        body = list(block.body)
        start = body.index(built)
        first_call = self.context.order(call)[0]
        following: cst.BaseStatement | None = None
        for index in range(start + 1, len(body) - 1):
            statement = body[index]
            if self.context.order(statement)[0] > first_call:
                break
            if isinstance(
                statement, cst.SimpleStatementLine
            ) and name in self.facts.scopes.names_bound(statement):
                following = body[index + 1]
        return following

    # -- the shapes --------------------------------------------------------------------------

    def _builds_a_model(self, value: cst.BaseExpression) -> bool:
        if value is not strip_module_methods(value):
            return False  # `Net().to(device)`, `Net().cuda()`: placed as it is built
        if not isinstance(value, cst.Call):
            return False
        if call_tail(value.func) in _LOADERS:
            # Placed by its device map; a 4- or 8-bit model is placed as it loads and refuses
            # `.to()`.
            return not any(keyword_argument(value, k) is not None for k in PLACED_AS_LOADED)
        if self.facts.modules.in_model_method(value):
            return False  # a layer built in `forward` is DF104's
        qualified = self.facts.modules.constructed_module(value)
        # A loss module holds no weights to move unless it has class weights (DF303's).
        if qualified is None or qualified.endswith("Loss") or qualified in MODEL_WRAPPERS:
            return False  # a wrapper (DataParallel, DDP) has the device of what it wraps
        if qualified.startswith("torch.nn.") and keyword_argument(value, "device") is not None:
            return False  # `nn.LayerNorm(n, device=device)`: built where it runs
        return not any(self._holds_modules(arg, value) for arg in value.args)

    def _holds_modules(self, arg: cst.Arg, at: cst.CSTNode) -> bool:
        """`nn.Sequential(*layers)`, `Wrapper(encoder)`: a model assembled from modules made
        (and perhaps placed) before it, whose device is theirs."""
        if arg.star:
            return True
        if isinstance(arg.value, cst.Call) and self.qualified_name(arg.value.func) in (
            "copy.deepcopy",
            "copy.copy",
        ):
            return True  # a copy of a model made before
        if (
            strip_module_methods(arg.value) is not arg.value
            and self.facts.modules.constructed_module(arg.value) is not None
        ):
            return True  # `Wrapper(nn.Linear(4, 2).to(device))`: placed as it is built
        if not isinstance(arg.value, cst.Name):
            return False
        return any(
            isinstance(held, (cst.List, cst.ListComp, cst.Tuple))
            or self.facts.modules.constructed_module(held) is not None
            or (isinstance(held, cst.Call) and call_tail(held.func) in _LOADERS)
            for held in self.facts.scopes.assigned_values(arg.value.value, at)
        )

    def _moved_input(
        self, name: str, scope: cst.CSTNode, binding: cst.Assign
    ) -> tuple[cst.Call, cst.BaseExpression | None, cst.SimpleStatementLine] | None:
        """The first call of the model `name` whose input is moved to a device, that device
        (None for `.cuda()`) and the statement to move the model after (its building, or the
        last one that replaces one of its layers, `model.fc = nn.Linear(...)`), when `name` is
        used as nothing but a model that stays put: one binding, called (here, or by a
        function of this file it is handed to) or asked for its parameters, never moved,
        wrapped or handed on otherwise."""
        scopes = self.facts.scopes
        values = scopes.assigned_values(name, binding)
        if len([v for v in values if not self._hands_back(v, name)]) != 1:
            return None
        built = self.context.parent(binding)
        if not isinstance(built, cst.SimpleStatementLine):
            return None
        anchor = built
        runs: list[tuple[cst.Call, cst.CSTNode]] = []
        own = {id(use) for use in scopes.names_in(scope, name)}
        # Uses in nested functions count too: they run the same model (or move it).
        for use in self.facts.scopes.find(scope, cst.Name):
            if use.value != name:
                continue
            parent = self.context.parent(use)
            if isinstance(parent, cst.AssignTarget) and parent.target is use:
                if id(use) not in own:
                    return None  # rebound elsewhere (a `global` in a function, a shadow)
                continue
            if isinstance(parent, (cst.Param, cst.Global, cst.NameItem)):
                return None
            run = self._run_of(use)
            if run is not None:
                runs.append((run, run))
                continue
            replaced = self._replaces_a_layer(use, built)
            if replaced is not None:
                anchor = max(anchor, replaced, key=lambda s: self.context.order(s)[0])
                continue
            if self._printed(use):
                continue
            handed = self._handed_to_a_function(use)
            if handed is not None:
                runs.extend((run, handed[0]) for run in handed[1])
                continue
            if (
                isinstance(parent, cst.Attribute)
                and parent.value is use
                and parent.attr.value in MODEL_MEMBERS_KEEPING_PLACE
            ):
                continue
            return None  # moved, wrapped, handed to a call, stored: decided elsewhere
        for call, site in runs:
            if self.context.order(site)[0] < self.context.order(anchor)[1]:
                continue
            device = self._input_device(call)
            if device is not None:
                return call, device[0], anchor
        return None

    def _replaces_a_layer(
        self, use: cst.Name, built: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | None:
        """The statement, in the block that builds the model, that assigns to a part of it
        (`model.classifier[6] = nn.Linear(4096, 2)`): the model is finished there."""
        node: cst.CSTNode = use
        while isinstance(parent := self.context.parent(node), (cst.Attribute, cst.Subscript)):
            if parent.value is not node:
                return None
            node = parent
        target = self.context.parent(node)
        if node is use or not (isinstance(target, cst.AssignTarget) and target.target is node):
            return None
        assign = self.context.parent(target)
        statement = self.context.parent(assign) if assign is not None else None
        if not (
            isinstance(statement, cst.SimpleStatementLine)
            and self.context.parent(statement) is self.context.parent(built)
        ):
            return None
        return statement

    def _printed(self, use: cst.Name) -> bool:
        """`print(model)`, `print(model.classifier)`: shown, not placed."""
        node: cst.CSTNode = use
        while isinstance(parent := self.context.parent(node), cst.Attribute):
            node = parent
        arg = self.context.parent(node)
        call = self.context.parent(arg) if isinstance(arg, cst.Arg) else None
        return isinstance(call, cst.Call) and self.qualified_name(call.func) == "builtins.print"

    def _hands_back(self, value: cst.BaseExpression, name: str) -> bool:
        """`model = finetune(model, ...)`: a function of this file handed the model by
        position, whose every `return` gives that parameter back."""
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
            return False
        callee = self.facts.scopes.module_functions().get(value.func.value)
        positional = [arg for arg in value.args if arg.keyword is None]
        index = next((i for i, arg in enumerate(positional) if is_name(arg.value, name)), None)
        param = self.facts.modules.parameter_receiving(value, index) if index is not None else None
        if callee is None or param is None:
            return False
        returns = list(self.facts.scopes.find(callee.body, cst.Return, own_scope=True))
        return bool(returns) and all(
            r.value is not None and is_name(r.value, param) for r in returns
        )

    def _handed_to_a_function(self, use: cst.Name) -> tuple[cst.Call, list[cst.Call]] | None:
        """(the call, the runs of its parameter) when the model is handed by position to a
        function of this file (`train(model, loader)`) that only runs it (reading its
        attributes, `.train()`/`.eval()` and returning it are fine)."""
        arg = self.context.parent(use)
        call = self.context.parent(arg) if isinstance(arg, cst.Arg) else None
        if not (
            isinstance(arg, cst.Arg)
            and arg.keyword is None
            and not arg.star
            and isinstance(call, cst.Call)
            and isinstance(call.func, cst.Name)
        ):
            return None
        callee = self.facts.scopes.module_functions().get(call.func.value)
        position = [a for a in call.args if a.keyword is None].index(arg)
        param = self.facts.modules.parameter_receiving(call, position)
        if callee is None or param is None:
            return None
        runs = self._parameter_runs(param, callee)
        return (call, runs) if runs else None

    def _input_device(self, call: cst.Call) -> tuple[cst.BaseExpression | None] | None:
        """(device,) that an argument of `call` provably lives on (None inside: the current
        CUDA device, `.cuda()`); None when no argument is known to be on an accelerator."""
        for arg in call.args:
            placed = self.facts.devices.placed(arg.value, call)
            if isinstance(placed, Current):
                return (None,)
            if isinstance(placed, (Named, Literal)):
                text = placed.expression()
                if text is not None:
                    return (cst.parse_expression(text),)
        return None


def _current_gpu(value: cst.BaseExpression) -> bool:
    """`"cuda"` or `torch.device("cuda")`: whichever GPU the process made current (a caller's
    `torch.cuda.set_device(rank)`), not a choice of this function."""
    if isinstance(value, cst.Call) and call_tail(value.func) == "device" and len(value.args) == 1:
        value = value.args[0].value
    return cuda_type(value)
