"""DF304: a script that hard-codes its CUDA device (`"cuda:0"`, `.cuda(1)`, `device = "cuda"`)."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import (
    accelerator_selection,
    append_keyword,
    defined_after,
    rebuilt_call,
    select_device_edits,
)
from devfix.codemods.analysis.handed_models import HandedModel, HandedModels
from devfix.codemods.analysis.moves import SELECT_DEVICE, cuda_string, gpu_index
from devfix.codemods.analysis.names import (
    argument_of,
    call_tail,
    keyword_argument,
    string_value,
)
from devfix.codemods.hard_coded_device.facts import (
    ScriptDevice,
    cuda_fstring,
    literal_cuda_device,
    release_at_least,
)
from devfix.context import FileContext
from devfix.types import Applicability, Edit, ImportSpec

#: The name of the device variable a fix defines when the script has none.
_DEVICE_NAME = "device"
#: A device for the fix, the edits that define it, and the imports they need.
Fix = tuple[cst.BaseExpression, list[Edit], list[ImportSpec]]


class HardCodedDevice(DevicePass):
    """Script that hard-codes a CUDA device.

    ## What it does
    In programs that train (`loss.backward()`, an optimizer's `.step()`, `trainer.fit(...)`) or
    run on several GPUs (DataParallel, DDP, torchrun, accelerate, `Trainer`), in script and
    training code (not in `nn.Module` methods or functions that take a tensor, which DF102
    handles, nor in `Dataset`s and collate functions, which DF201 handles), finds
    `torch.device("cuda:0")`, `torch.device("cuda", 1)`, `device = "cuda"`, `.to("cuda:1")`,
    `device="cuda:0"` arguments of torch functions and `.cuda(0)`, and replaces them with a
    portable device: the accelerator torch finds (CUDA, Apple `mps`, XPU, ...; the process's
    `LOCAL_RANK` device under torchrun, else device 0), else the CPU. Where the project's torch
    is 2.6 or newer, that is PyTorch's own API, written in place:
    `torch.device(torch.accelerator.current_accelerator().type, int(os.environ.get("LOCAL_RANK",
    0))) if torch.accelerator.is_available() else torch.device("cpu")`. For older torch, a
    `select_device()` helper, added once per script after its imports, picks CUDA, then `mps`,
    then the CPU. The project's torch is the lowest release its `pyproject.toml` dependencies or
    its `requirements.txt` allow, else the installed one; `torch-version = "2.4"` under
    `[tool.devfix.hard-coded-device]` sets it. Uses after a device variable read that variable;
    a script without one gets `device = ...` once, after its imports. `torch` reached through
    `from utils import *` counts as torch.
    Shapes with a fix of their own: a function that takes a device parameter it never reads
    (`def infer(model, prompt, device):`) and moves to a CUDA literal instead uses that
    parameter, in any program (an unsafe fix: the caller names the device); a selection that
    falls back but pins another GPU
    (`"cuda:1" if torch.cuda.is_available() else "cpu"`) keeps its fallback and loses the index
    (`"cuda"`); `torch.load(..., map_location="cuda:0")` loads to the script's device variable,
    else to the CPU; `x.to(f"cuda:{self.gpu_id}")` where the file treats `gpu_id` as possibly
    None goes to the device of the model the class moved to that id.
    Inputs sent to a literal GPU (`ids = ids.to("cuda")`, `.cuda()`, `.cuda(0)`, also one
    numbered by a setting: `f"cuda:{rank}"`, `"cuda:{}".format(rank)`) for a model the code was
    handed, in any program, library code included: a parameter
    (`def generate(model, tokenizer, prompt):`) or `self.model` set from a constructor's
    parameter (the class's, or that of a class of the file it derives from), run on them
    directly (`model(ids)`, `self.model.generate(ids)`, `model.predict(batch["input_ids"])`),
    through a helper of the file handed both, or through a method of the class's family that
    runs `self.model` on what it is given (a runner's `self.inference_step(batch)`, defined in a
    subclass), go to that model's device instead: `model.device` for a model that generates
    (Hugging Face), else `next(model.parameters()).device` (an unsafe fix). The code must treat
    the callable as a model (a run method, `model.eval()`, a field of a model output such as
    `.logits`), or a caller that hands it over must; the inputs may reach it through names
    computed from them (`x = x / 255`, `x = normalize(x).unsqueeze(0)`); left alone are a model
    a caller in the file placed itself (moved, or loaded with a `device_map`, on every path to
    the call or under the test the inputs' move is under, also handed down through other
    functions; one moved only `if args.cuda:` while its inputs always go to the GPU is not
    placed: they meet it on the CPU without the flag), a callable run on a model's output (a
    loss, a metric), a device variable (`.cuda(local_rank)`), and a bare GPU in a script that
    sets the current device.
    Likewise, in a function that runs such a model and does not move it itself, a literal GPU
    handed straight to a move or a factory of its other tensors (`torch.tensor(ys,
    device="cuda")` for the targets, `labels.cuda()`) goes to that model's device (unsafe); a
    device the function binds to a name or takes as a default is its own choice, left alone.
    A call there that leaves a helper's device parameter at its literal GPU default
    (`prepare_batch(batch)`, with `def prepare_batch(batch, device=torch.device("cuda:0"))`
    moving what it gets to `device`) passes that model's device instead (unsafe).
    Anywhere, `.cuda(device)` with a device that may be the CPU and is never None (a tensor's
    or model's `.device`, a `torch.device(...)`, a parameter named for a device with no `None`
    default) becomes `.to(device)`: the same move on a GPU, where `.cuda` raises "Invalid
    device, must be cuda device" for the CPU (a safe fix; `.cuda(None)` is the current GPU but
    `.to(None)` stays put, so a device that may be None is left; so is a parameter that every
    call in the file hands a GPU: an index, `"cuda:N"`, or the process's rank, such as the
    index `mp.spawn` gives its worker, also through `args.gpu = gpu`). In model code too, where
    DF102 leaves such a move: `x.device` is the input's own device.
    In any program or notebook (model code and data pipelines aside), a bare `.cuda()` where
    the script's own device falls back to the CPU (`device = torch.device("cuda:0" if
    torch.cuda.is_available() else "cpu")`, or `"cpu"` and `"cuda"` set in the branches of `if
    args.cpu:`) becomes `.to(device)`: the one move that raises on the machine the fallback is
    for. Left alone there: a move under a test of that device, of the selection's switch, of
    CUDA or of a name that names a device (`if use_gpu:`), and a script that sets the current
    GPU while its device pins one.
    `torch.cuda.amp.autocast` / `GradScaler` and `torch.autocast("cuda")` are DF308's: once the
    device is portable, DF308 makes them follow `device.type`.

    Left alone: notebooks and inference scripts that choose their GPU for themselves (one they
    pin past the first GPU, `"cuda:1"`, `.cuda(2)`, is reported without a fix: a machine with
    fewer GPUs lacks it; so is `torch.cuda.set_device(1)` in any program), library
    modules that do nothing when run (a bare `"cuda"` there is the caller's current device), a
    selection that already falls back (`"cuda:0" if torch.cuda.is_available() else "cpu"`,
    `if use_cuda:` on a variable holding that check, `if args.gpu: ... else: cpu`), a default
    `device="cuda"` that every call of the function overrides, `"cuda"` / `.cuda()` after
    `torch.cuda.set_device(local_rank)` (the rank's GPU), and `"cuda:0"` / `.cuda(0)` in code
    that only rank 0 runs (`if rank == 0:`, or a function called only there) in a script that
    gives each process its GPU with `torch.cuda.set_device(rank)`.

    Anywhere, model code included, a device spelled from a tensor's `is_cuda`
    (`torch.device("cuda" if x.is_cuda else "cpu")`, used as a device) becomes `x.device`:
    `"cuda"` is the current GPU, not necessarily `x`'s (a device *type*, as `torch.autocast`
    takes, is left alone).

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
    accelerator = torch.accelerator.current_accelerator()  # devfix writes this inline
    device = (
        torch.device(accelerator.type, int(os.environ.get("LOCAL_RANK", 0)))
        if torch.accelerator.is_available()
        else torch.device("cpu")
    )
    model = Net().to(device)
    ```
    With torch older than 2.6:
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
    Safe on the machine the script was written for: GPU 0 stays GPU 0 outside torchrun. A bare
    `.cuda()` moved to the script's fallback device is safe where that device's GPU is the
    current one (`"cuda"`, `"cuda:0"`) and the function binds the device itself; unsafe for a
    pinned GPU and for a function reading a device that only the entry point defines (imported
    elsewhere, it finds none). Unsafe
    for a script pinned to another GPU (`cuda:1`), which now starts on GPU 0 outside torchrun
    (select the GPU with `CUDA_VISIBLE_DEVICES`); so is the
    pinned fallback's `"cuda"` and `map_location="cpu"` (values used straight from the
    checkpoint then arrive on the CPU). A script that uses several GPUs on purpose (`cuda:0`
    and `cuda:1`, naive model parallelism), a pinned fallback in a DataParallel/DDP script
    (each process needs its own GPU), an id that may be None without a model moved to it, and a
    device string that the script compares as a string (`if device == "cuda":`) are reported
    without a fix.

    ## References
    - PyTorch docs, "MPS backend"; `torch.accelerator` (added in torch 2.6) and the tutorials'
      `torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"`.
    """

    CODE = "DF304"
    NAME = "hard-coded-device"
    MESSAGE = "hard-coded CUDA device: the script fails without that GPU and under torchrun"
    FIX_TITLE = "Select the device: the accelerator (LOCAL_RANK), else the CPU"
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)
    TRIGGER_WORDS = ("cuda",)

    def __init__(self, context: FileContext, *, torch_version: str = "") -> None:
        super().__init__(context)
        #: The torch release the project declares, else the installed one ("": not known, so
        #: the helper that works on every release).
        self.accelerator_api = release_at_least(torch_version, (2, 6))

    # -- matching ----------------------------------------------------------------------------

    def qualified_name(self, node: cst.CSTNode) -> str | None:
        # Scripts that get `torch` from `from utils import *` hard-code devices too.
        return self.facts.names.qualified_name_through_star(node)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name):
            self._helper_left_at_a_gpu_default(node, node.func.value)
        tail = call_tail(node.func)
        if tail == "device":
            if self.qualified_name(node.func) == "torch.device" and literal_cuda_device(node):
                self._occurrence(node, node, f"`{self._code(node)}`")
        elif tail == "to" and isinstance(node.func, cst.Attribute):
            arg = argument_of(node, "device")
            if arg is not None and cuda_string(arg.value):
                self._occurrence(arg.value, node, f"`.to({self._code(arg.value)})`")
            elif arg is not None and cuda_fstring(arg.value) is not None:
                self._formatted_device(arg.value, node)
        elif tail == "load" and self.qualified_name(node.func) == "torch.load":
            arg = keyword_argument(node, "map_location")
            if arg is not None and cuda_string(arg.value):
                self._map_location(arg.value, node)
        elif tail == "cuda" and isinstance(node.func, cst.Attribute):
            self._check_cuda_method(node, node.func)
        elif tail == "set_device" and self.qualified_name(node.func) == "torch.cuda.set_device":
            self._pinned_current_gpu(node)
        else:
            arg = keyword_argument(node, "device")
            qualified = self.qualified_name(node.func) if arg is not None else None
            if (
                arg is not None
                and cuda_string(arg.value)
                and (qualified or "").startswith("torch.")
            ):
                self._occurrence(arg.value, node, f"`device={self._code(arg.value)}`")

    def visit_IfExp(self, node: cst.IfExp) -> None:
        # `"cuda:1" if torch.cuda.is_available() else "cpu"`: a fallback pinned to one GPU.
        if cuda_string(node.body) and gpu_index(node.body):
            self._occurrence(node.body, node.body, f"`{self._code(node.body)}`")
        tensor = _is_cuda_tested(node)
        if tensor is not None:
            self._device_type_of(node, tensor)

    def _device_type_of(self, node: cst.IfExp, tensor: cst.BaseExpression) -> None:
        """`"cuda" if x.is_cuda else "cpu"` (or `torch.device(...)` of it) names the current
        GPU, not `x`'s: `x.device` is the one meant, wherever the code runs."""
        target: cst.BaseExpression = node
        parent = self.context.parent(node)
        call = self.context.parent(parent) if isinstance(parent, cst.Arg) else None
        if (
            isinstance(call, cst.Call)
            and len(call.args) == 1
            and self.qualified_name(call.func) == "torch.device"
        ):
            target = call
        elif not self._used_as_device(node):
            return  # a device *type* (`torch.autocast(...)`), where "cuda" is the right word
        device = cst.Attribute(value=tensor.deep_clone(), attr=cst.Name("device"))
        shown = self._code(target)
        self.report(
            target,
            message=f"`{shown}` names the current GPU, not the one `{self._code(tensor)}` is on "
            f"(with it on `cuda:1`, this is `cuda:0`); use `{self._code(device)}`",
            fix_title=f"Use `{self._code(device)}`",
            edits=[Edit(target, device)],
            applicability=Applicability.SAFE,
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        name = self.facts.scopes.assigned_name(node.value)
        if name is not None and "dev" in name.lower() and cuda_string(node.value):
            self._occurrence(node.value, node.value, f"`{self._code(node.value)}`")

    def _used_as_device(self, value: cst.BaseExpression) -> bool:
        """`value` is a `device=` argument or `.to(...)`'s, or is bound to a name used so."""
        parent = self.context.parent(value)
        if isinstance(parent, cst.Arg):
            call = self.context.parent(parent)
            keyword = parent.keyword.value if parent.keyword is not None else None
            return keyword == "device" or (
                isinstance(call, cst.Call) and call_tail(call.func) == "to" and keyword is None
            )
        name = self.facts.scopes.assigned_name(value)
        if name is None:
            return False
        scope = self.facts.scopes.enclosing_scope(value)
        return any(self._used_as_device(use) for use in self.facts.scopes.names_in(scope, name))

    def _check_cuda_method(self, node: cst.Call, func: cst.Attribute) -> None:
        index = argument_of(node, "device")
        literal = index is None or isinstance(index.value, cst.Integer)
        if literal and self._moved_for_a_handed_model(
            node, index.value if index is not None else None
        ):
            return
        if index is not None and self.facts.moves.device_that_may_be_the_cpu(index.value):
            self._cuda_of_a_device(node, func, index.value)
            return
        if index is None:
            self._bare_cuda_beside_a_fallback(node, func)
            return  # else "the current device"; DF102/DF201 judge it
        if not isinstance(index.value, cst.Integer):
            return
        shown = f"`.cuda({self._code(index.value)})`"
        if self._offloads_to_other_gpu(node, int(index.value.value), shown, node):
            return
        number = int(index.value.value)
        if self.facts.flow.guarded_by_cuda_check(node) or self._chosen_for_itself(
            node, shown, index=number
        ):
            return
        if self.facts.own(ScriptDevice).runs_only_on_rank(node, int(index.value.value)):
            return  # rank 0's own GPU, in code only rank 0 runs
        reason = self.facts.own(ScriptDevice).chosen_by_hand(None)
        if reason is not None:
            self.report(node, message=f"{shown}: {self.MESSAGE}; {reason}")
            return
        device, edits, imports = self._device_for(node)
        rest = [arg for arg in node.args if arg is not index]
        new = rebuilt_call(node, func.with_changes(attr=cst.Name("to")), [cst.Arg(device)], rest)
        self._report_fix(node, shown, device, [Edit(node, new), *edits], imports)

    def _cuda_of_a_device(
        self, node: cst.Call, func: cst.Attribute, device: cst.BaseExpression
    ) -> None:
        """`.cuda(device)` with a device that may be the CPU raises there; `.to(device)` moves
        to the same GPU (an index, a string or a `torch.device`) and to the CPU too."""
        shown = f"`.cuda({self._code(device)})`"
        rest = [arg for arg in node.args if arg.value is not device]
        new = rebuilt_call(node, func.with_changes(attr=cst.Name("to")), [cst.Arg(device)], rest)
        self.report(
            node,
            message=(
                f'{shown} raises "Invalid device, must be cuda device" when '
                f"`{self._code(device)}` is the CPU; use `.to({self._code(device)})`, the same "
                "move on a GPU"
            ),
            fix_title=f"Use `.to({self._code(device)})`",
            edits=[Edit(node, new)],
            applicability=Applicability.SAFE,
        )

    def _bare_cuda_beside_a_fallback(self, node: cst.Call, func: cst.Attribute) -> None:
        """`x.cuda()` in a program whose own device falls back to the CPU: on the machine the
        selection is there for, this one move raises. Left to their own test: a move under a
        test of the device, of the selection's switch or of CUDA."""
        script = self.facts.own(ScriptDevice)
        if not script.in_script_code(node, any_program=True):
            return
        fallback = script.fallback_variable(node)
        if fallback is None:
            return
        name, gpus, switches = fallback
        if gpus != {None} and self.facts.flow.sets_current_device():
            return  # `.cuda()` is the process's GPU, `"cuda:0"` is not
        for test in self.facts.scopes.conditions(node):
            read = self.facts.scopes.read_paths(test)
            if read & (switches | {name}) or any(_names_a_device_switch(path) for path in read):
                return
        read_global = self.facts.scopes.enclosing_function(node) is not None and (
            not self.facts.scopes.simple_assignments(self.facts.scopes.enclosing_scope(node), name)
        )
        current = gpus <= {None, 0}
        to = func.with_changes(attr=cst.Name("to"))
        new = rebuilt_call(node, to, [cst.Arg(cst.Name(name))], node.args)
        self.report(
            node,
            message=(
                f"`.cuda()` raises where `{name}`, the script's own device, is the CPU (no GPU, "
                f"or the script's switch); use `.to({name})`"
                + ("" if current else f", the same move only where `{name}` is the current GPU")
            ),
            fix_title=f"Use `.to({name})`",
            edits=[Edit(node, new)],
            applicability=(
                Applicability.SAFE if current and not read_global else Applicability.UNSAFE
            ),
        )

    # -- the rewrite ---------------------------------------------------------------------------

    def _which_gpu(self, device: cst.BaseExpression | None) -> str:
        """The GPU a literal names, for messages."""
        index = gpu_index(device) if device is not None else None
        if index is not None:
            return f"GPU {index}"
        numbered = cuda_fstring(device) if device is not None else None
        if numbered is not None:
            return f"the GPU `{self._code(numbered)}` numbers"
        return "the current GPU"

    def _moved_for_a_handed_model(self, move: cst.Call, device: cst.BaseExpression | None) -> bool:
        """`ids = ids.to("cuda")` / `.cuda()` for a model the code was handed (a parameter,
        or `self.model` from the constructor): the inputs go where the caller put the model."""
        if not isinstance(move.func, cst.Attribute):
            return False
        if (device is None or not gpu_index(device)) and self.facts.flow.sets_current_device():
            return False  # the current GPU is the process's own, the model's under DDP
        handed = self.facts.own(HandedModels).fed_by(move)
        if handed is None:
            return call_tail(move.func) == "cuda" and self._used_with_a_handed_model(
                move, move, device
            )
        method = call_tail(move.func)
        shown = f"`.{method}({self._code(device) if device is not None else ''})`"
        self._follow_handed_model(
            move,
            f"{shown} puts the inputs of `{handed.model}`",
            handed,
            device,
            _moved_to(move, device, handed.device),
            f"Use `.to({handed.device})`",
        )
        return True

    def _helper_left_at_a_gpu_default(self, call: cst.Call, name: str) -> None:
        """`prepare_batch(batch)`, whose `device=torch.device("cuda:0")` default is where it
        moves the batch, in a function that runs a model it was handed: the batch goes to that
        fixed GPU wherever the caller put the model."""
        helper = self.facts.scopes.module_functions().get(name)
        found = self.facts.own(ScriptDevice).gpu_default(helper) if helper else None
        if found is None or any(arg.star for arg in call.args):
            return
        param, index, default = found
        positional = [arg for arg in call.args if arg.keyword is None]
        if len(positional) > index or keyword_argument(call, param) is not None:
            return
        function = self.facts.scopes.enclosing_function(call)
        handed = self.facts.own(HandedModels).run_by(function, call) if function else None
        if handed is None:
            return
        self._follow_handed_model(
            call,
            f"`{self._code(call)}` leaves `{param}` at its default, which puts the inputs of "
            f"`{handed.model}`",
            handed,
            default,
            append_keyword(call, param, cst.parse_expression(handed.device)),
            f"Pass `{param}={handed.device}`",
        )

    def _follow_handed_model(
        self,
        target: cst.CSTNode,
        what: str,
        handed: HandedModel,
        device: cst.BaseExpression | None,
        new: cst.CSTNode,
        fix_title: str,
    ) -> None:
        line = self.facts.scopes.line_of(handed.run)
        self.report(
            target,
            message=(
                f"{what} (line {line}) on {self._which_gpu(device)}, but the caller chose that "
                f"model's device; use `{handed.device}`"
            ),
            fix_title=fix_title,
            edits=[Edit(target, new)],
            applicability=Applicability.UNSAFE,
        )

    def _argument_for_a_handed_model(self, anchor: cst.CSTNode, target: cst.BaseExpression) -> bool:
        """A literal GPU handed straight to a move or a factory (`.to("cuda")`,
        `device="cuda"`) for a model the code was handed. A device bound to a name or given
        as a default is the function's own choice (which DF207 holds the model to)."""
        if not isinstance(anchor, cst.Call) or anchor is target:
            return False
        if any(isinstance(node, cst.Param) for node in self.context.ancestors(anchor)):
            return False
        if call_tail(anchor.func) == "to" and self._moved_for_a_handed_model(anchor, target):
            return True
        return self._used_with_a_handed_model(anchor, target, target)

    def _used_with_a_handed_model(
        self, anchor: cst.CSTNode, target: cst.CSTNode, device: cst.BaseExpression | None
    ) -> bool:
        """A literal GPU (`torch.tensor(ys, device="cuda")`, `labels.cuda()`) in a function
        that runs a model it was handed and does not move itself: what the function puts
        there meets that model's work, on the device the caller chose for it."""
        if (device is None or not gpu_index(device)) and self.facts.flow.sets_current_device():
            return False
        function = self.facts.scopes.enclosing_function(anchor)
        if function is None or self.facts.flow.in_data_pipeline(anchor):
            return False
        if self.facts.modules.function_info(function).is_model_code:
            return False  # DF102's
        handed = self.facts.own(HandedModels).run_by(function, anchor)
        if handed is None:
            return False
        new: cst.CSTNode
        if isinstance(target, cst.Call) and call_tail(target.func) == "cuda":
            new = _moved_to(target, device, handed.device)
            shown = f"`.cuda({self._code(device) if device else ''})`"
        else:
            new = cst.parse_expression(handed.device)
            shown = f"`{self._code(target)}`"
        self._follow_handed_model(
            target,
            f"{shown} puts a tensor that `{function.name.value}` uses with `{handed.model}`",
            handed,
            device,
            new,
            f"Use `{handed.device}`",
        )
        return True

    def _occurrence(self, target: cst.BaseExpression, anchor: cst.CSTNode, shown: str) -> None:
        ignored = self.facts.own(ScriptDevice).ignored_device_parameter(anchor)
        if ignored is None and self._argument_for_a_handed_model(anchor, target):
            return
        if ignored is not None:
            self.report(
                target,
                message=f"{shown}: {self.MESSAGE}, though the function takes `{ignored}`, "
                f"which it never reads; use `{ignored}`",
                fix_title=f"Use `{ignored}`",
                edits=[Edit(target, cst.Name(ignored))],
                applicability=Applicability.UNSAFE,
            )
            return
        index = gpu_index(target)
        if self._offloads_to_other_gpu(anchor, index, shown, target):
            return
        if self._chosen_for_itself(anchor, shown, target, index):
            return
        flow = self.facts.flow
        script = self.facts.own(ScriptDevice)
        if flow.guarded_by_cuda_check(anchor):
            if index:
                self._pinned_in_fallback(target, anchor, shown, index)
                return
            if not flow.is_distributed() or (index is None and flow.sets_current_device()):
                return  # a selection that already falls back
            # One process per GPU: `"cuda:0"` is rank 0's GPU even where CUDA is checked.
        if index is None and (flow.sets_current_device() or not script.runs_as_script()):
            return  # bare "cuda": the current device, which the script (or its caller) sets
        if script.overridden_default(target):
            return  # every call passes its own device
        if index is not None and script.runs_only_on_rank(anchor, index):
            return  # `"cuda:0"` in code only rank 0 runs, each process on its own GPU
        assign = script.assignment_of(target)
        if assign is not None and script.falls_back_in_else(assign):
            return  # `if args.cuda: device = "cuda:0"` / `else: device = "cpu"`
        reason = script.chosen_by_hand(assign)
        if reason is not None:
            self.report(target, message=f"{shown}: {self.MESSAGE}; {reason}")
            return
        device, edits, imports = (
            self._helper_call() if assign is not None else self._device_for(target)
        )
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
        if "\n" in text or len(text) > 60:  # the selection written in place
            text = "torch.accelerator.current_accelerator() ... else cpu"
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
                f"(the accelerator, on the process's LOCAL_RANK device, else the CPU){note}"
            ),
            fix_title=f"Use `{text}`",
            edits=edits,
            imports=imports,
            applicability=Applicability.UNSAFE if other_gpu else Applicability.SAFE,
        )

    def _device_for(self, node: cst.CSTNode) -> Fix:
        """A device variable in scope, else one defined once after the imports (`device =
        select_device()` after the helper, or PyTorch's own selection), else the selection."""
        name = self.facts.own(ScriptDevice).variable(node)
        if name is not None:
            return cst.Name(name), [], []
        if self.facts.names.bound_anywhere(_DEVICE_NAME):
            return self._helper_call()
        if self.accelerator_api:
            value, imports = accelerator_selection(self.facts.names.torch_alias())
            end = self.facts.names.import_block_end()
            edit = defined_after(self.context.module, end, _DEVICE_NAME, value)
            return cst.Name(_DEVICE_NAME), [edit], imports
        return cst.Name(_DEVICE_NAME), *self._helper_edits(define=_DEVICE_NAME)

    def _helper_call(self) -> Fix:
        """The selection as an expression: PyTorch's own (torch 2.6 and newer), else a call of
        the helper, which is added once."""
        if self.accelerator_api:
            value, imports = accelerator_selection(self.facts.names.torch_alias())
            return value, [], imports
        return cst.Call(func=cst.Name(SELECT_DEVICE)), *self._helper_edits()

    def _helper_edits(self, define: str | None = None) -> tuple[list[Edit], list[ImportSpec]]:
        names = self.facts.names
        return select_device_edits(
            self.context.module,
            names.import_block_end(),
            name=SELECT_DEVICE,
            torch=names.torch_alias(),
            imported=names.binds_from_import(SELECT_DEVICE),
            define=define,
        )

    # -- shapes with a fix of their own --------------------------------------------------------

    def _pinned_in_fallback(
        self, target: cst.BaseExpression, anchor: cst.CSTNode, shown: str, index: int
    ) -> None:
        """`torch.device("cuda:1" if torch.cuda.is_available() else "cpu")`: the selection falls
        back to the CPU, but a machine with one GPU has no `cuda:1`."""
        reason = self.facts.own(ScriptDevice).chosen_by_hand(None)
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
        if not self._in_scope(load):
            return
        index = gpu_index(value)
        if index is None and flow.sets_current_device():
            return
        if flow.guarded_by_cuda_check(load) and not (flow.is_distributed() or index):
            return
        shown = f"`map_location={self._code(value)}`"
        reason = self.facts.own(ScriptDevice).chosen_by_hand(None)
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
        if self._argument_for_a_handed_model(move, value):
            return
        if not self._in_scope(move):
            return
        expression = cuda_fstring(value)
        assert expression is not None
        text = self._code(expression)
        if not self.facts.moves.compared_with_none(text):
            return
        shown = f"`{self._code(value)}`"
        message = (
            f"{shown}: `{text}` may be None (the script checks it), and `cuda:None` is no device"
        )
        model = self.facts.own(ScriptDevice).model_attribute_moved_to(move, text)
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

    def _pinned_current_gpu(self, node: cst.Call) -> None:
        """`torch.cuda.set_device(1)`: a literal GPU past the first, for the whole process."""
        index = argument_of(node, "device")
        number = int(index.value.value) if index and isinstance(index.value, cst.Integer) else 0
        script = self.facts.own(ScriptDevice)
        if (
            number
            and not self.facts.flow.guarded_by_cuda_check(node)
            and script.in_script_code(node, any_program=True)
        ):
            self.report(
                node,
                message=f"`{self._code(node)}` pins GPU {number}, which a machine with fewer "
                "GPUs lacks (and every torchrun process would share); no fix: select it "
                "with `CUDA_VISIBLE_DEVICES`, or each process's with `LOCAL_RANK`",
            )

    def _chosen_for_itself(
        self,
        anchor: cst.CSTNode,
        shown: str,
        target: cst.BaseExpression | None = None,
        index: int | None = None,
    ) -> bool:
        """Out of this rule's scope: a notebook or a program that neither trains nor uses
        several GPUs chooses its GPU for itself. One it pins to a GPU past the first (`"cuda:1"`,
        `.cuda(1)`) is reported without a fix: a machine with fewer GPUs lacks it."""
        if self._in_scope(anchor):
            return False
        if index is None and target is not None:
            index = gpu_index(target)
        script = self.facts.own(ScriptDevice)
        if (
            index
            and script.in_script_code(anchor, any_program=True)
            and not self.facts.flow.guarded_by_cuda_check(anchor)
        ):
            self.report(
                target or anchor,
                message=f"{shown}: pins GPU {index}, which a machine with fewer GPUs lacks; "
                "no fix: the program chooses its own GPU (select it with "
                '`CUDA_VISIBLE_DEVICES`, or use `"cuda"`)',
            )
        return True

    def _in_scope(self, node: cst.CSTNode) -> bool:
        """Script and training code of programs that train or use several GPUs (not an
        inference script that picks its GPU, not a notebook); model code is DF101/DF102's, data
        pipelines DF201's."""
        return self.facts.own(ScriptDevice).in_script_code(node)

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

    def _code(self, node: cst.CSTNode) -> str:
        return self.context.module.code_for_node(node)


def _is_cuda_tested(node: cst.IfExp) -> cst.BaseExpression | None:
    """The tensor of `"cuda" if x.is_cuda else "cpu"` (or `"cpu" if not x.is_cuda else
    "cuda"`), else None."""
    test, body, orelse = node.test, string_value(node.body), string_value(node.orelse)
    negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
    if negated:
        assert isinstance(test, cst.UnaryOperation)
        test, body, orelse = test.expression, orelse, body
    if (body, orelse) != ("cuda", "cpu"):
        return None
    if isinstance(test, cst.Attribute) and test.attr.value == "is_cuda":
        return test.value
    return None


def _names_a_device_switch(name: str) -> bool:
    """`use_cuda`, `args.gpu`, `no_cpu`: a name that says which device the code runs on."""
    lowered = name.lower()
    return any(word in lowered for word in ("cuda", "gpu", "cpu", "device"))


def _moved_to(move: cst.Call, device: cst.BaseExpression | None, target: str) -> cst.Call:
    """`move` (`.cuda(...)`, `.to(...)`) rewritten as `.to(<target>)`, its other arguments
    (`non_blocking=True`) kept."""
    assert isinstance(move.func, cst.Attribute)
    kept = [arg for arg in move.args if device is None or arg.value is not device]
    to = move.func.with_changes(attr=cst.Name("to"))
    return rebuilt_call(move, to, [cst.Arg(cst.parse_expression(target))], kept)
