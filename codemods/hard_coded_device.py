"""DF304: a script that hard-codes its CUDA device (`"cuda:0"`, `.cuda(1)`, `device = "cuda"`)."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods.analysis.moves import SELECT_DEVICE, cuda_string, gpu_index, string_device
from devfix.codemods.analysis.names import call_tail, keyword_argument
from devfix.types import Applicability, Edit, ImportSpec

_HELPER = '''

def {name}() -> {torch}.device:
    """CUDA (the process's GPU under torchrun), else Apple MPS, else CPU."""
    if {torch}.cuda.is_available():
        return {torch}.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    if {torch}.backends.mps.is_available():
        return {torch}.device("mps")
    return {torch}.device("cpu")
'''


#: The name of the device variable a fix defines when the script has none.
_DEVICE_NAME = "device"


class HardCodedDevice(DevicePass):
    """Script that hard-codes a CUDA device.

    ## What it does
    In programs that train (`loss.backward()`, an optimizer's `.step()`, `trainer.fit(...)`) or
    run on several GPUs (DataParallel, DDP, torchrun, accelerate, `Trainer`), in script and
    training code (not in `nn.Module` methods or functions that take a tensor, which DF102
    handles, nor in `Dataset`s and collate functions, which DF201 handles), finds
    `torch.device("cuda:0")`, `torch.device("cuda", 1)`, `device = "cuda"`, `.to("cuda:1")`,
    `device="cuda:0"` arguments of torch functions and `.cuda(0)`, and replaces them with a
    portable device: a `select_device()` helper, added once per script after its imports, picks
    CUDA (the process's `LOCAL_RANK` GPU under torchrun, else GPU 0), then Apple `mps`, then the
    CPU. Uses after a device variable (`device = select_device()`) read that variable; a script
    without one gets `device = select_device()` once, after the helper. `torch` reached through
    `from utils import *` counts as torch.
    Shapes with a fix of their own: a selection that falls back but pins another GPU
    (`"cuda:1" if torch.cuda.is_available() else "cpu"`) keeps its fallback and loses the index
    (`"cuda"`); `torch.load(..., map_location="cuda:0")` loads to the script's device variable,
    else to the CPU; `x.to(f"cuda:{self.gpu_id}")` where the file treats `gpu_id` as possibly
    None goes to the device of the model the class moved to that id.
    `torch.cuda.amp.autocast` / `GradScaler` and `torch.autocast("cuda")` are DF308's: once the
    device is portable, DF308 makes them follow `device.type`.

    Left alone: notebooks and inference scripts that choose their GPU for themselves, library
    modules that do nothing when run (a bare `"cuda"` there is the caller's current device), a
    selection that already falls back (`"cuda:0" if torch.cuda.is_available() else "cpu"`,
    `if use_cuda:` on a variable holding that check, `if args.gpu: ... else: cpu`), a default
    `device="cuda"` that every call of the function overrides, and `"cuda"` / `.cuda()` after
    `torch.cuda.set_device(local_rank)` (the rank's GPU).

    ## Why is this bad?
    A hard-coded `cuda:0` fails on a machine without a GPU or with an Apple GPU, and under
    torchrun every process uses GPU 0 while DDP and the data sampler work on the process's own
    GPU: `RuntimeError: Expected all tensors to be on the same device, but found at least two
    devices, cuda:1 and cuda:0!`.

    ## Example
    ```python
    device = torch.device("cuda:0")
    model = Net().to(device)
    ```

    ## Use instead
    ```python
    def select_device() -> torch.device:
        if torch.cuda.is_available():
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")

    device = select_device()
    model = Net().to(device)
    ```

    ## Fix safety
    Safe on the machine the script was written for: GPU 0 stays GPU 0 outside torchrun. Unsafe
    for a script pinned to another GPU (`cuda:1`), which now starts on GPU 0 outside torchrun
    (select the GPU with `CUDA_VISIBLE_DEVICES`); so is the
    pinned fallback's `"cuda"` and `map_location="cpu"` (values used straight from the
    checkpoint then arrive on the CPU). A script that uses several GPUs on purpose (`cuda:0`
    and `cuda:1`, naive model parallelism), a pinned fallback in a DataParallel/DDP script
    (each process needs its own GPU), an id that may be None without a model moved to it, and a
    device string that the script compares as a string (`if device == "cuda":`) are reported
    without a fix.

    ## References
    - PyTorch docs, "MPS backend".
    """

    CODE = "DF304"
    NAME = "hard-coded-device"
    MESSAGE = "hard-coded CUDA device: the script fails without that GPU and under torchrun"
    FIX_TITLE = "Select the device: CUDA (LOCAL_RANK) → MPS → CPU"
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)
    TRIGGER_WORDS = ("cuda",)

    # -- matching ----------------------------------------------------------------------------

    def qualified_name(self, node: cst.CSTNode) -> str | None:
        # Scripts that get `torch` from `from utils import *` hard-code devices too.
        return self.facts.names.qualified_name_through_star(node)

    def visit_Call(self, node: cst.Call) -> None:
        tail = call_tail(node.func)
        if tail == "device":
            if self.qualified_name(node.func) == "torch.device" and _literal_cuda(node):
                self._occurrence(node, node, f"`{self._code(node)}`")
        elif tail == "to" and isinstance(node.func, cst.Attribute):
            arg = keyword_argument(node, "device") or next(
                (a for a in node.args if a.keyword is None and not a.star), None
            )
            if arg is not None and cuda_string(arg.value):
                self._occurrence(arg.value, node, f"`.to({self._code(arg.value)})`")
            elif arg is not None and _cuda_fstring(arg.value) is not None:
                self._formatted_device(arg.value, node)
        elif tail == "load" and self.qualified_name(node.func) == "torch.load":
            arg = keyword_argument(node, "map_location")
            if arg is not None and cuda_string(arg.value):
                self._map_location(arg.value, node)
        elif tail == "cuda" and isinstance(node.func, cst.Attribute):
            self._check_cuda_method(node)
        else:
            arg = keyword_argument(node, "device")
            if arg is not None and cuda_string(arg.value):
                qualified = self.qualified_name(node.func)
                if qualified is not None and qualified.startswith("torch."):
                    self._occurrence(arg.value, node, f"`device={self._code(arg.value)}`")

    def visit_IfExp(self, node: cst.IfExp) -> None:
        # `"cuda:1" if torch.cuda.is_available() else "cpu"`: a fallback pinned to one GPU.
        if cuda_string(node.body) and gpu_index(node.body):
            self._occurrence(node.body, node.body, f"`{self._code(node.body)}`")

    def visit_Assign(self, node: cst.Assign) -> None:
        if (
            len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
            and "dev" in node.targets[0].target.value.lower()
            and cuda_string(node.value)
        ):
            self._occurrence(node.value, node.value, f"`{self._code(node.value)}`")

    def _check_cuda_method(self, node: cst.Call) -> None:
        index = keyword_argument(node, "device") or next(
            (a for a in node.args if a.keyword is None and not a.star), None
        )
        if index is None or not isinstance(index.value, cst.Integer):
            return  # a bare `.cuda()` is "the current device"; DF102/DF201 judge it
        shown = f"`.cuda({self._code(index.value)})`"
        if self._offloads_to_other_gpu(node, int(index.value.value), shown, node):
            return
        if self._out_of_scope(node) or self.facts.flow.guarded_by_cuda_check(node):
            return
        assert isinstance(node.func, cst.Attribute)
        reason = self._decline_reason(node, None)
        if reason is not None:
            self.report(node, message=f"{shown}: {self.MESSAGE}; {reason}")
            return
        device, edits, imports = self._device_for(node)
        rest = [a for a in node.args if a is not index]
        new_args = [cst.Arg(device), *rest]
        new_args = [
            arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            if position < len(new_args) - 1
            else arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)
            for position, arg in enumerate(new_args)
        ]
        replacement = node.with_changes(
            func=node.func.with_changes(attr=cst.Name("to")), args=new_args
        )
        self._report_fix(node, shown, device, [Edit(node, replacement), *edits], imports)

    # -- the rewrite ---------------------------------------------------------------------------

    def _occurrence(self, target: cst.BaseExpression, anchor: cst.CSTNode, shown: str) -> None:
        if self._offloads_to_other_gpu(anchor, gpu_index(target), shown, target):
            return
        if self._out_of_scope(anchor):
            return
        index = gpu_index(target)
        flow = self.facts.flow
        if flow.guarded_by_cuda_check(anchor):
            if index:
                self._pinned_in_fallback(target, anchor, shown, index)
                return
            if not flow.is_distributed() or (index is None and flow.sets_current_device()):
                return  # a selection that already falls back
            # One process per GPU: `"cuda:0"` is rank 0's GPU even where CUDA is checked.
        if index is None and (
            self.facts.flow.sets_current_device() or not self.facts.flow.runs_as_script()
        ):
            return  # bare "cuda": the current device, which the script (or its caller) sets
        if self.facts.flow.overridden_default(target):
            return  # every call passes its own device
        assign = self._assignment_of(target)
        if assign is not None and self.facts.flow.falls_back_in_else(assign):
            return  # `if args.cuda: device = "cuda:0"` / `else: device = "cpu"`
        reason = self._decline_reason(anchor, assign)
        if reason is not None:
            self.report(target, message=f"{shown}: {self.MESSAGE}; {reason}")
            return
        if assign is not None:
            device, edits, imports = self._helper_call(target)
        else:
            device, edits, imports = self._device_for(target)
        self._report_fix(target, shown, device, [Edit(target, device), *edits], imports)

    def _report_fix(
        self,
        node: cst.CSTNode,
        shown: str,
        device: cst.BaseExpression,
        edits: list[Edit],
        imports: list[ImportSpec],
    ) -> None:
        text = self._code(device)
        other_gpu = self.facts.moves.explicit_gpu_indices() - {0}
        note = (
            f"; outside torchrun this moves the script from cuda:{min(other_gpu)} to GPU 0 "
            "(select the GPU with CUDA_VISIBLE_DEVICES)"
            if other_gpu
            else ""
        )
        self.report(
            node,
            message=(
                f"{shown}: {self.MESSAGE}; use `{text}` "
                f"(CUDA with the process's LOCAL_RANK, else MPS, else CPU){note}"
            ),
            fix_title=f"Use `{text}`",
            edits=edits,
            imports=imports,
            applicability=Applicability.UNSAFE if other_gpu else Applicability.SAFE,
        )

    def _assignment_of(self, value: cst.CSTNode) -> cst.Assign | None:
        parent = self.context.parent(value)
        if (
            isinstance(parent, cst.Assign)
            and parent.value is value
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
        ):
            return parent
        return None

    def _device_for(
        self, node: cst.CSTNode
    ) -> tuple[cst.BaseExpression, list[Edit], list[ImportSpec]]:
        """A device variable in scope, else one defined once after the helper
        (`device = select_device()`), else a call of the helper."""
        name = self._device_variable(node, torch_device_only=False)
        if name is not None:
            return cst.Name(name), [], []
        if not self.facts.names.bound_anywhere(_DEVICE_NAME):
            edits, imports = self._helper_edits(define=_DEVICE_NAME)
            return cst.Name(_DEVICE_NAME), edits, imports
        return self._helper_call(node)

    def _helper_call(
        self, node: cst.CSTNode
    ) -> tuple[cst.BaseExpression, list[Edit], list[ImportSpec]]:
        call = cst.Call(func=cst.Name(SELECT_DEVICE))
        edits, imports = self._helper_edits()
        return call, edits, imports

    def _helper_edits(self, define: str | None = None) -> tuple[list[Edit], list[ImportSpec]]:
        """The helper after the imports (once), and `<define> = select_device()` after it."""
        module = self.context.module
        definition = (
            cst.parse_statement(f"{define} = {SELECT_DEVICE}()\n") if define is not None else None
        )
        for statement in module.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == SELECT_DEVICE:
                if definition is None:
                    return [], []
                return [Edit(statement, cst.FlattenSentinel([statement, definition]))], []
        if self.facts.names.binds_from_import(SELECT_DEVICE):
            if definition is None:
                return [], []
            anchor = self.facts.names.import_block_end()
            if anchor is None:
                return [Edit(module.body[0], cst.FlattenSentinel([definition, module.body[0]]))], []
            return [Edit(anchor, cst.FlattenSentinel([anchor, definition]))], []
        alias = self.facts.names.torch_alias()
        imports = [ImportSpec("os")]
        if alias is None:
            alias = "torch"
            imports.append(ImportSpec("torch"))
        helper = cst.parse_statement(_HELPER.format(name=SELECT_DEVICE, torch=alias))
        anchor = self.facts.names.import_block_end()
        position = next(
            (i + 1 for i, statement in enumerate(module.body) if statement is anchor), 0
        )
        following = module.body[position] if position < len(module.body) else None
        blank = sum(
            1
            for line in (following.leading_lines if following is not None else ())
            if line.comment is None
        )
        assert isinstance(helper, cst.FunctionDef) and isinstance(helper.body, cst.IndentedBlock)
        footer = 2 if definition is not None else max(0, 2 - blank)
        helper = helper.with_changes(
            leading_lines=[cst.EmptyLine(indent=False)] * (2 if anchor is not None else 0),
            body=helper.body.with_changes(footer=[cst.EmptyLine(indent=False)] * footer),
        )
        added: list[cst.BaseStatement] = [helper]
        if definition is not None:
            added.append(definition)
        if anchor is None:
            first = module.body[0]
            return [Edit(first, cst.FlattenSentinel([*added, first]))], imports
        return [Edit(anchor, cst.FlattenSentinel([anchor, *added]))], imports

    def _device_variable(self, node: cst.CSTNode, *, torch_device_only: bool) -> str | None:
        """A name in scope holding the script's (portable) device."""
        own = self._assignment_of(node)
        for name in self.facts.moves.device_names(node):
            if own is not None and own.targets[0].target.value == name:  # type: ignore[attr-defined]
                continue
            value = self.facts.scopes.latest_binding(name, node)
            if value is None:
                value = self._module_binding(name)
            if value is None:
                continue
            if isinstance(value, cst.Call) and not _names_other_device(value):
                return name
            if (
                isinstance(value, cst.IfExp)
                and not torch_device_only
                and any(
                    cuda_string(n)
                    for n in self.context.subtree(value)
                    if isinstance(n, cst.SimpleString)
                )
            ):
                return name
            if (
                cuda_string(value)
                and "dev" in name.lower()
                and not self.facts.moves.compared_as_string(name)
            ):
                # A hard-coded device string that this pass turns into `select_device()`.
                return name
        return None

    def _module_binding(self, name: str) -> cst.BaseExpression | None:
        values = self.facts.scopes.simple_assignments(self.context.module, name)
        return values[0] if values else None

    # -- shapes with a fix of their own --------------------------------------------------------

    def _pinned_in_fallback(
        self, target: cst.BaseExpression, anchor: cst.CSTNode, shown: str, index: int
    ) -> None:
        """`torch.device("cuda:1" if torch.cuda.is_available() else "cpu")`: the selection falls
        back to the CPU, but a machine with one GPU has no `cuda:1`."""
        reason = self._decline_reason(anchor, None)
        message = f"{shown}: the selection falls back to the CPU but pins GPU {index}, which a "
        if reason is not None:
            self.report(target, message=f"{message}machine with fewer GPUs lacks; {reason}")
            return
        if not isinstance(target, cst.SimpleString) or self.facts.flow.runs_on_several_gpus():
            self.report(
                target,
                message=f"{message}machine with fewer GPUs lacks; select each process's GPU "
                "(`LOCAL_RANK`) by hand",
            )
            return
        quote = target.quote
        self.report(
            target,
            message=f"{message}machine with fewer GPUs lacks; use `{quote}cuda{quote}` (choose "
            "the GPU with CUDA_VISIBLE_DEVICES)",
            fix_title=f"Use `{quote}cuda{quote}`",
            edits=[Edit(target, target.with_changes(value=f"{target.prefix}{quote}cuda{quote}"))],
            applicability=Applicability.UNSAFE,
        )

    def _map_location(self, value: cst.BaseExpression, load: cst.Call) -> None:
        """`torch.load(path, map_location="cuda:0")`: the script's device, else the CPU."""
        flow = self.facts.flow
        if self._out_of_scope(load):
            return
        index = gpu_index(value)
        if index is None and flow.sets_current_device():
            return
        if flow.guarded_by_cuda_check(load) and not (flow.is_distributed() or index):
            return
        shown = f"`map_location={self._code(value)}`"
        reason = self._decline_reason(load, None)
        if reason is not None:
            self.report(value, message=f"{shown}: {self.MESSAGE}; {reason}")
            return
        names = self.facts.moves.device_names(load)
        quote = value.quote if isinstance(value, cst.SimpleString) else '"'
        target: cst.BaseExpression = (
            cst.Name(names[0]) if names else cst.SimpleString(f"{quote}cpu{quote}")
        )
        where = (
            f"`{names[0]}`, the script's device"
            if names
            else "the CPU (`load_state_dict` places the values on the parameters' devices)"
        )
        problem = (
            "every process loads the checkpoint onto that one GPU, where tensors used straight "
            "from it meet the process's own GPU"
            if flow.is_distributed()
            else "the checkpoint cannot be loaded where that GPU is missing"
        )
        self.report(
            value,
            message=f"{shown}: {problem}; load it to {where}",
            fix_title=f"Use `map_location={self._code(target)}`",
            edits=[Edit(value, target)],
            applicability=(
                Applicability.SAFE
                if names or flow.feeds_only_state_dicts(load)
                else Applicability.UNSAFE
            ),
        )

    def _formatted_device(self, value: cst.BaseExpression, move: cst.Call) -> None:
        """`x.to(f"cuda:{self.gpu_id}")` where `self.gpu_id` may be None (a single-process run):
        `"cuda:None"` is no device. The model the class moved to that id knows its device."""
        if self._out_of_scope(move):
            return
        expression = _cuda_fstring(value)
        assert expression is not None
        text = self._code(expression)
        if not self.facts.moves.compared_with_none(text):
            return
        shown = f"`{self._code(value)}`"
        message = (
            f"{shown}: `{text}` may be None (the script checks it), and `cuda:None` is no device"
        )
        model = self.facts.flow.model_attribute_moved_to(move, text)
        if model is None:
            self.report(value, message=f"{message}; move to the model's device by hand")
            return
        device = cst.parse_expression(f"next(self.{model}.parameters()).device")
        self.report(
            value,
            message=f"{message}; use the device of `self.{model}`, which was moved to `{text}`",
            fix_title=f"Use `next(self.{model}.parameters()).device`",
            edits=[Edit(value, device)],
            applicability=Applicability.SAFE,
        )

    # -- scope and declines --------------------------------------------------------------------

    def _out_of_scope(self, node: cst.CSTNode) -> bool:
        """Notebooks and programs that neither train nor use several GPUs (an inference script
        that picks its GPU), model code (DF101/DF102) and data pipelines (DF201)."""
        flow = self.facts.flow
        if flow.is_notebook() or not (flow.runs_on_several_gpus() or flow.trains()):
            return True
        code = self.facts.modules
        function = code.enclosing_function(node)
        if function is not None and function.is_model_code:
            return True
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                info = code.function_info(ancestor)
                if info.owner is not None and (info.owner.is_module or info.owner.is_dataset):
                    return True
            if isinstance(ancestor, cst.ClassDef) and code.class_info(ancestor).is_module:
                return True
        return self.facts.flow.in_data_pipeline(node)

    def _offloads_to_other_gpu(
        self, anchor: cst.CSTNode, index: int | None, shown: str, target: cst.CSTNode
    ) -> bool:
        """A deliberate offload to a second GPU (analysis.devices.deliberate_offload): a machine
        with fewer GPUs lacks it, and whether it should fall back to the script's device or to
        GPU 0 is a choice: report it without a fix."""
        function = self.facts.devices.deliberate_offload(anchor, index)
        if function is None:
            return False
        self.report(
            target,
            message=(
                f"{shown}: {self.MESSAGE}; `{function.name}` offloads its own work to "
                f"cuda:{index} on purpose, which a machine with fewer GPUs lacks; choose its "
                f"device by hand (e.g. cuda:{index} only when torch.cuda.device_count() > "
                f"{index}, else the script's device)"
            ),
        )
        return True

    def _decline_reason(self, node: cst.CSTNode, assign: cst.Assign | None) -> str | None:
        indices = self.facts.flow.gpus_used()
        if len(indices) > 1:
            shown = ", ".join(f"cuda:{i}" for i in sorted(indices))
            return (
                f"the script places work on several GPUs on purpose ({shown}); choose its "
                "devices by hand"
            )
        if assign is not None and cuda_string(assign.value):
            name = assign.targets[0].target
            assert isinstance(name, cst.Name)
            if self.facts.moves.compared_as_string(name.value):
                return f"`{name.value}` is compared as a string; a `torch.device` would not match"
        return None

    def _code(self, node: cst.CSTNode) -> str:
        return self.context.module.code_for_node(node)


def _names_other_device(call: cst.Call) -> bool:
    """`torch.device("cpu")`, `torch.device("mps")`: not the script's accelerator."""
    first = call.args[0].value if call.args else None
    value = string_device(first) if first is not None else None
    return value is not None and not value.startswith("cuda")


def _literal_cuda(call: cst.Call) -> bool:
    """`torch.device("cuda:0")`, `torch.device("cuda")`, `torch.device("cuda", 1)`."""
    if not call.args or any(arg.star for arg in call.args):
        return False
    first = call.args[0]
    if first.keyword is not None and first.keyword.value != "type":
        return False
    if not cuda_string(first.value):
        return False
    return all(isinstance(arg.value, cst.Integer) for arg in call.args[1:])


def _cuda_fstring(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """`f"cuda:{expr}"` -> `expr`."""
    if not isinstance(node, cst.FormattedString) or len(node.parts) != 2:
        return None
    text, expression = node.parts
    if (
        isinstance(text, cst.FormattedStringText)
        and text.value == "cuda:"
        and isinstance(expression, cst.FormattedStringExpression)
        and expression.format_spec is None
        and expression.conversion is None
    ):
        return expression.expression
    return None
