"""DF102: model code that moves tensors to a device fixed outside the call."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import as_call_of, method_call, move_to, replace_argument
from devfix.codemods.analysis.devices import Literal, Named, ParamsOf, Unknown
from devfix.codemods.analysis.handed_models import HandedModels
from devfix.codemods.analysis.modules import FunctionInfo, names_a_device
from devfix.codemods.analysis.names import (
    argument_of,
    call_tail,
    code_of,
    dotted_name,
    is_number,
    keyword_argument,
)
from devfix.codemods.analysis.torch_names import (
    CPU_SOURCES,
    CUDA_LEGACY_CONSTRUCTORS,
    LEGACY_CONSTRUCTORS,
    LEGACY_DTYPES,
    SAME_DEVICE_METHODS,
    TENSOR_FACTORIES,
    tails,
)
from devfix.codemods.device_fixed_at_construction.facts import (
    OneDeviceScript,
    guarded_by_is_cuda,
    layer_called,
    legacy_factory,
    lone_is_cuda_branch,
)
from devfix.codemods.device_fixed_at_construction.globals import ImportTimeTensors
from devfix.codemods.device_fixed_at_construction.layers import LayersBuiltOnAGpu
from devfix.codemods.device_fixed_at_construction.local_choice import LocalDeviceChoices
from devfix.context import FileContext
from devfix.types import Applicability, Edit

_FACTORY_TAILS = tails(TENSOR_FACTORIES)
_CUDA_CONSTRUCTOR_TAILS = tails(CUDA_LEGACY_CONSTRUCTORS)


class DeviceFixedAtConstruction(DevicePass):
    """Model code that puts tensors on a device chosen outside the forward pass.

    ## What it does
    Inside the methods of an `nn.Module` (other than `__init__`) and functions that take a
    tensor argument, finds `.to(device)`, `.to(self.device)`, `.cuda()` and `device=` arguments
    whose device is a module-level global, an attribute stored in `__init__` (`self.device =
    device`) or a literal CUDA device (`"cuda:0"`, `torch.device("cuda")`, also through a local
    the function sets to one: `device = torch.device("cuda")`, or to the default GPU when there
    is one: `"cuda" if torch.cuda.is_available() else "cpu"`), or a local a function of the
    project sets, called with no arguments (`_device = get_device()`: it picks one device for
    the whole program and sees none of the call's tensors), and rewrites them to the device
    of the tensor the value meets. A local bound once to such a choice is rewritten itself
    (`device = emissions.device`) when a tensor its moves meet is known where it is bound, so
    every move to it follows. DataParallel-era device ids inside a module or a loss
    (`.cuda(self.device_ids[0])`, `.cuda(0)`, a head that gathers its logits on
    `self.device_id[0]`): an input a replica received (labels scattered into the gathered
    one-hot) goes to the device of the tensor it meets (`label.to(one_hot.device)`); the
    module's own placement stays. A plain function of a training script that offloads its own
    work to a literal second GPU (`.to("cuda:1")`) is DF304's (a deliberate choice, reported
    without a fix); a function that sends its inputs to the GPU under a test of where one of them
    is (`if not blocks.is_cuda and torch.cuda.is_available(): blocks = blocks.cuda()`) keeps
    its move. A cast to another tensor's type name, `t.type(x.type())`, is a move
    too: the name (`torch.cuda.FloatTensor`) holds no GPU index, so the copy lands on the
    current CUDA device; it becomes `t.to(x)`, which takes `x`'s dtype and its device. A cast to
    a CPU type name, `g.type(torch.LongTensor)`, copies the tensor to the CPU: it becomes the
    dtype cast alone, `g.to(torch.int64)` (unsafe: code after it that wanted the CPU copy gets
    the tensor where it was). A legacy constructor
    spelled through a type chosen by a tensor's `is_cuda` (`FloatTensor = torch.cuda.FloatTensor
    if x.is_cuda else torch.FloatTensor`, then `FloatTensor(n, 4)`) becomes the factory on that
    tensor's device (`torch.empty(n, 4, dtype=torch.float32, device=x.device)`). In a library
    file (one that neither trains nor uses several GPUs), a literal GPU in a method of a plain
    class that takes tensors (a loss or a sampler built around a model) is rewritten too; where
    nothing the value meets names a device, the device the class reads elsewhere
    (`self.model.device`, or `targets.device` for a tensor argument the method takes too) is
    used, as an unsafe fix. A tensor made once at import (`CORNERS = torch.tensor(...,
    device="cuda")`, or a CPU constant such as `MEAN = torch.tensor([...])` read in a module's
    method) that model code combines with its own tensors (`index.unsqueeze(1) + CORNERS`) gets
    `.to(index.device)` where it is read; where the other operand is not known to be a tensor of
    the function, the finding says so and has no fix. A plain object (a loss or a sampler, not a
    module or a dataset) that makes a CPU tensor in its `__init__` (`self.quantiles =
    torch.Tensor(levels)`, its one assignment in the class) and combines it with the tensors a
    method is given (`self.quantiles * err`) gets `self.quantiles.to(err.device)` there: no
    `model.to()` moves a plain object's tensors. A 0-dim scalar is left alone. Such a table
    (also one computed from others there: `self.alpha_bars = torch.cumprod(1 - self.betas, 0)`,
    or returned by a method of the object: `self.keep = self.keep_table(rates)`)
    indexed by a value (`self.alpha_bars[t]`) in a method that is given a tensor becomes
    `self.alpha_bars.to(images.device)[t]` (unsafe, a judgement: the tensor the method is
    given), since a CPU table indexed on a GPU fails. A bare `.cuda()` that brings back what a
    host fallback computed (the same block first copies a tensor of the function to the CPU:
    `host = boxes.cpu().float()`, then `picked = picked.cuda()`) goes to that tensor's device
    (`picked.to(boxes.device)`, unsafe: a judgement) where nothing the value meets names one.
    A bare `.cuda()` of a name the function
    has just moved to a device it was given (`batch = ids.to(device)`, then
    `model(batch.cuda())`) is dropped: the tensor is where the caller asked for it (an unsafe
    fix: the model is on that device only if the caller put it there too). In a module's
    `__init__`, a layer built straight onto a literal GPU (`self.head = Head(dims).to("cuda")`,
    `.cuda()`) is built in place instead: a layer is a known module class or an attribute the
    class calls (`self.head(x)`), so layers of a star import count; `__init__` placing layers on
    two GPUs is model parallelism, left alone, and so is a layer moved to a device the
    constructor is given. A literal GPU or a bare `.cuda()` in a function that runs a model it
    was handed (`def compute(model, tok, v: torch.Tensor)`, `model(**ids).logits`), where
    nothing the value meets names a device, goes to that model's device (`model.device` for a
    Hugging Face model, else `next(model.parameters()).device`; unsafe). A tensor a factory
    makes and moves at once to a device parameter of the function (`def mask(labels, device):
    torch.eye(n).to(device)`) goes to the device of the tensor argument it then meets in an
    operation (`labels.device`, also through a comparison bound later: `same =
    labels.unsqueeze(0) == labels.unsqueeze(1)`), safe since the operation fails on any other
    device. Left to the callers: a parameter without such a meeting, a factory's `device=`
    (the function's API), and one the function brings its inputs to itself
    (`labels.reshape(-1).to(device)`). A literal GPU in such a function, beside the values it
    brings to its device parameter (`x.to("cuda")` next to `y.to(device)` in a batch sampler
    given `device`), goes to that parameter where nothing the value meets names a device
    (unsafe: a judgement, the caller's device).

    ## Why is this bad?
    The device was fixed when the script started or when the module was built. Under
    `nn.DataParallel` every replica runs the same `forward` on its own GPU, so a tensor sent to
    the global `cuda:0` meets activations on `cuda:1`:
    `RuntimeError: Expected all tensors to be on the same device, but found at least two
    devices, cuda:1 and cuda:0!`. The same code breaks after `model.to("cpu")`, on a machine
    whose only GPU is not `cuda:0`, and on CPU-only machines. A bare `.cuda()` means "the
    current CUDA device", which is `cuda:0` unless `torch.cuda.set_device` was called.

    ## Example
    ```python
    device = torch.device("cuda:0")

    class Decoder(nn.Module):
        def forward(self, x):
            h = torch.zeros(1, x.shape[0], 32).to(device)
            return self.rnn(x, h)
    ```

    ## Use instead
    ```python
    class Decoder(nn.Module):
        def forward(self, x):
            h = torch.zeros(1, x.shape[0], 32).to(x.device)
            return self.rnn(x, h)
    ```

    ## Fix safety
    Safe when the value provably meets the tensor (or the layer) whose device replaces the fixed
    one: on a single device nothing changes, and under DataParallel or after `model.to` the
    error goes away. Unsafe when the only evidence is that the function has a tensor argument,
    or, in a module's method with nothing else to go by, that one of the module's own layers
    holds parameters (`self.conv.weight.device`: its work runs where they are). When nothing in
    scope can supply a device, the finding has no fix. A `device` property of the class
    (Lightning's and Hugging Face's `self.device`, or one you define) is correct and left alone;
    so are `.to("cpu")` and `.cpu()`, which are deliberate. A stored device is reported even in
    a script that runs on that one device today (a latent hazard: the message says so), and so
    is a device read from an options object the constructor keeps (`self.opt.device`) or a
    global one (`args.device`); a tensor moved on at once to another tensor's device
    (`.to(x.device)`) is left alone. A move of what one of the module's own layers returned
    (`self.embedding(ids).to(self.device)`, also a module the constructor is given, `self.inner
    = inner`, that the class calls and reads parameters of) is dropped: safe, the output is
    already on that layer's device. A helper of the project handed the stored device
    (`BeamSearch(..., device=self.device)`, or by position to a function or method of the file
    whose parameter names a device: `make_mask(n, device)` with the module-level `device`) gets
    the device of the method's one tensor argument (unsafe), or is reported when several could
    be meant. A move under `if x.is_cuda:` goes to
    `x.device` (safe: the branch runs only when `x` is on a GPU, and it is that one); where
    that branch is one assignment with no `else` (`if x.is_cuda: grid = grid.cuda()`), the
    `if` goes too: on the CPU the name was left unbound, and `grid.to(x.device)` is right
    there as well. A move
    under a flag (`mask.cuda() if self.use_gpu else mask`) replaces the whole conditional: the
    tensor's device is right whether the flag is set or not. A layer built in place instead of
    on a literal GPU is unsafe: nothing changes where the caller moves the model
    (`model.to(device)` places every layer), but a caller that relied on the constructor's move
    now finds that layer on the CPU. `t.type(x.type())` to `t.to(x)`: safe, the same dtype, and
    the same device wherever `x` is on the current CUDA device or the CPU.

    ## References
    - `torch.nn.DataParallel` docs ("any updates to the running module in forward will be lost").
    - thunlp/OpenPrompt PR#161 (a bare `.cuda()` meant `cuda:0`).
    """

    CODE = "DF102"
    NAME = "device-fixed-at-construction"
    MESSAGE = "model code moves a tensor to a device fixed outside the call"
    FIX_TITLE = "Use the device of the tensor it meets"
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)
    TRIGGER_WORDS = ("torch",)

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        #: local device bindings already rewritten (every move to one reports through it)
        self._rebound: set[int] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        """A method that spreads its work over the module's own devices (model parallelism):
        its moves stay; an input that meets a value it placed goes to that value's device."""
        function = self.facts.modules.function_info(node)
        owner = self.facts.devices.spread_devices(function) if function.is_model_code else None
        if owner is None:
            return
        for value, placed in self.facts.devices.inputs_meeting_placed(function):
            device = f"{placed}.device"
            shown = self.context.module.code_for_node(value)
            self.report(
                value,
                message=(
                    f"`{function.name}` spreads its work over the module's devices (`{owner}`); "
                    f"`{shown}` comes from an input, on the caller's device (under DataParallel, "
                    f"each replica's GPU), and meets `{placed}`, which is on one of them: move it "
                    f"with `.to({device})`"
                ),
                fix_title=f"Use `.to({device})`",
                edits=[Edit(value, move_to(value, cst.parse_expression(device)))],
            )

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        """A tensor made at import (`OFFSETS = torch.tensor(..., device="cuda")`) met by model
        code's own tensors: it follows them with `.to(x.device)` where it is read."""
        for mine, other in ((node.left, node.right), (node.right, node.left)):
            if isinstance(mine, cst.Attribute):
                self._check_attribute_made_at_construction(node, mine, other)
                continue
            if not isinstance(mine, cst.Name):
                continue
            function = self.facts.modules.enclosing_function(node)
            if function is None or not function.is_model_code:
                return
            tensors = self.facts.own(ImportTimeTensors)
            made = tensors.made_at_import(mine, function)
            if made is None or self.facts.flow.in_data_pipeline(function.node):
                continue
            named_gpu = tensors.on_a_named_gpu(made)
            if not named_gpu and not (function.owner is not None and function.owner.is_module):
                continue  # a CPU constant in a helper may meet CPU tensors only
            where = "a GPU named at import" if named_gpu else "the CPU, made at import"
            met = tensors.tensor_met(other, function)
            problem = f"`{function.name}` reads the global tensor `{mine.value}`, on {where}"
            self._report_following(mine, problem, met)
            return

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """`self.alpha_bars[t]` in a plain object's method, with the table made on the CPU in
        `__init__`: indexing it with `t` on a GPU fails, so it moves to the device of a tensor
        the method is given first."""
        table = node.value
        if not isinstance(table, cst.Attribute) or len(node.slice) != 1:
            return
        index = node.slice[0].slice
        if not isinstance(index, cst.Index) or is_number(index.value):
            return
        function = self.facts.modules.enclosing_function(node)
        if function is None or not function.tensor_params:
            return
        tensors = self.facts.own(ImportTimeTensors)
        if tensors.made_at_construction(table, function) is None or (
            self.facts.flow.in_data_pipeline(function.node)
        ):
            return
        read = self.facts.scopes.names_read(index.value)
        inputs = [name for name in function.tensor_params if name not in read]
        if not read or not inputs:
            return
        shown = code_of(table)
        device = f"{inputs[0]}.device"
        self.report(
            table,
            message=(
                f"`{function.name}` indexes `{shown}`, a table the object made on the CPU in "
                f'`__init__`, with `{code_of(index.value)}`: an index on a GPU fails ("indices '
                f'should be either on cpu or on the same device"); move the table to '
                f"`{device}` (a judgement: the tensor the method is given)"
            ),
            fix_title=f"Use `{shown}.to({device})`",
            edits=[Edit(table, method_call(table, "to", cst.parse_expression(device)))],
            applicability=Applicability.UNSAFE,
        )

    def _check_attribute_made_at_construction(
        self, node: cst.BinaryOperation, mine: cst.Attribute, other: cst.BaseExpression
    ) -> None:
        """`self.quantiles * err` in a plain object's method, with `self.quantiles =
        torch.Tensor(levels)` made in `__init__`: it follows `err` with `.to(err.device)`."""
        function = self.facts.modules.enclosing_function(node)
        if function is None or not function.tensor_params:
            return
        tensors = self.facts.own(ImportTimeTensors)
        if tensors.made_at_construction(mine, function) is None or self.facts.flow.in_data_pipeline(
            function.node
        ):
            return
        # `(1 - self.q) * err`: a constant beside it says nothing; the operation it is part of
        # meets `err`.
        operation: cst.CSTNode = node
        met = tensors.tensor_met(other, function)
        while met is None and isinstance(
            grand := self.context.parent(operation), cst.BinaryOperation
        ):
            other = grand.right if grand.left is operation else grand.left
            operation = grand
            met = tensors.tensor_met(other, function)
        shown = code_of(mine)
        problem = (
            f"`{function.name}` reads `{shown}`, a tensor the object made on the CPU in "
            "`__init__` (no `model.to()` moves a plain object's tensors)"
        )
        self._report_following(mine, problem, met)

    def _report_following(self, mine: cst.BaseExpression, problem: str, met: str | None) -> None:
        """`mine` (a tensor made once) gets `.to(<met>.device)`, the tensor it meets; without
        one, the finding has no fix."""
        if met is None:
            self.report(
                mine, message=f"{problem}; no tensor it meets tells which device it should follow"
            )
            return
        device = f"{met}.device"
        shown = code_of(mine)
        self.report(
            mine,
            message=f"{problem}; it meets `{met}`: use `{shown}.to({device})`",
            fix_title=f"Use `{shown}.to({device})`",
            edits=[Edit(mine, method_call(mine, "to", cst.parse_expression(device)))],
        )

    def visit_Call(self, node: cst.Call) -> None:
        tail = call_tail(node.func)
        if tail in ("to", "cuda") and isinstance(node.func, cst.Attribute):
            if self._check_layer_built_on_a_gpu(node):
                return
            # Moving modules (`self.head.to(...)`, `Net(...).cuda()`) is DF105's business; a
            # move whose result is thrown away (`t.cuda()` as a statement) changes nothing.
            if self.facts.modules.is_module_expression(node.func.value) or isinstance(
                self.context.parent(node), cst.Expr
            ):
                return
            if tail == "to":
                device_arg = argument_of(node, "device")
                if device_arg is not None:
                    self._check_argument(node, device_arg, offload=True)
            elif not any(a.keyword for a in node.args):
                index = node.args[0].value if node.args else None
                if index is not None and self.facts.moves.device_that_may_be_the_cpu(index):
                    return  # `.cuda(x.device)`: DF304 makes it `.to(x.device)`
                function = self.facts.devices.model_code_moving(node, offload_to=index)
                rebuild = partial(method_call, node.func.value, "to")
                if function is not None:
                    self._fix(
                        node, function, "`.cuda()` (the current CUDA device)", rebuild, literal=True
                    )
        elif tail in _FACTORY_TAILS:
            device_arg = keyword_argument(node, "device")
            if device_arg is not None and self.qualified_name(node.func) in TENSOR_FACTORIES:
                self._check_argument(node, device_arg, offload=False)
        elif tail in _CUDA_CONSTRUCTOR_TAILS:
            self._check_cuda_constructor(node)
        elif tail == "type" and isinstance(node.func, cst.Attribute):
            self._check_type_of_other(node, node.func)
        else:
            self._check_helper_device(node)

    def _check_layer_built_on_a_gpu(self, node: cst.Call) -> bool:
        """`self.head = Head(dims).to("cuda")` in a module's `__init__`: built in place
        instead, for the caller's `model.to(device)` to place with the rest."""
        layer = self.facts.own(LayersBuiltOnAGpu).placed(node)
        if layer is None:
            return False
        gpu = layer.gpu if layer.gpu.startswith("`") else f"`{layer.gpu}`"
        self.report(
            node,
            message=(
                f"`__init__` builds `self.{layer.attribute}` on {gpu}: the module cannot be "
                "built without that GPU, and its layers may sit on different devices until "
                "its caller moves it; build the layer in place and let `model.to(device)` "
                "place every layer"
            ),
            fix_title="Drop the move",
            edits=[Edit(node, layer.built)],
            applicability=Applicability.UNSAFE,
        )
        return True

    def _check_helper_device(self, node: cst.Call) -> None:
        """`Beam(..., device=self.device)` in `forward`, or `make_mask(n, device)` with the
        module-level `device`: a helper handed the device stored at construction (or chosen
        by the script) places its tensors there, not where the inputs are."""
        if (self.qualified_name(node.func) or "").startswith("torch"):
            return
        keyword = keyword_argument(node, "device")
        candidates = (
            [keyword]
            if keyword is not None
            else [
                arg
                for index, arg in enumerate(node.args)
                if arg.keyword is None
                and not arg.star
                and isinstance(arg.value, (cst.Name, cst.Attribute))
                and names_a_device(self.facts.modules.parameter_receiving(node, index) or "")
            ]
        )
        found = None
        for device_arg in candidates:
            found = self.facts.devices.fixed_move(node, device_arg.value, offload=False)
            if found is not None:
                break
        if found is None:
            return
        function, fixed = found
        if isinstance(fixed, Literal):
            return  # `check_device(t, device="cuda")`: a literal may be what the helper tests
        callee = code_of(node.func)
        moves = f"`{function.name}` hands `{callee}` {fixed.evidence} as its device"
        inputs = function.tensor_params
        if len(inputs) != 1:
            self.report(
                node,
                message=f"{moves}; pass the device of the tensors it works on (no single "
                "tensor argument tells which)",
            )
            return
        device = cst.parse_expression(f"{inputs[0]}.device")
        self.report(
            node,
            message=f"{moves}; pass `{inputs[0]}.device` (a judgement: the one tensor argument)",
            fix_title=f"Pass `device={inputs[0]}.device`",
            edits=[Edit(device_arg, device_arg.with_changes(value=device))],
            applicability=Applicability.UNSAFE,
        )

    # -- the shapes --------------------------------------------------------------------------

    def _check_cuda_constructor(self, node: cst.Call) -> None:
        """`torch.cuda.FloatTensor(n, c)` allocates on the current CUDA device: a factory with
        the dtype and the device of the tensor it meets instead."""
        qualified = self.qualified_name(node.func)
        tested = None
        if qualified not in CUDA_LEGACY_CONSTRUCTORS and isinstance(node.func, cst.Name):
            # `FloatTensor = torch.cuda.FloatTensor if x.is_cuda else torch.FloatTensor`: the
            # type follows `x`, and so does the factory that replaces it.
            chosen = self._type_chosen_by_is_cuda(node.func, node)
            if chosen is not None:
                qualified, tested = chosen
        if qualified not in CUDA_LEGACY_CONSTRUCTORS:
            return
        function = self.facts.modules.model_code_after_construction(node)
        if function is None or any(arg.keyword or arg.star for arg in node.args):
            return
        factory = legacy_factory(self.context, node)
        if factory is not None and tested is not None:
            name, target = factory
            torch, _ = self.facts.names.torch_spelling()
            dtype = cst.parse_expression(f"{torch}.{LEGACY_DTYPES[qualified.rsplit('.', 1)[1]]}")
            device = cst.parse_expression(f"{tested}.device")
            replacement = as_call_of(node, f"{torch}.{name}", dtype=dtype, device=device)
            self.report(
                node,
                message=(
                    f"`{code_of(node.func)}` is `{qualified}` when `{tested}.is_cuda`: the "
                    f"current CUDA device, not necessarily `{tested}`'s; use `{torch}.{name}` "
                    f"with `device={tested}.device`"
                ),
                fix_title=f"Use `{torch}.{name}(..., device={tested}.device)`",
                edits=[Edit(target, replacement)],
            )
            return
        if factory is None:
            where = f"`{qualified}` allocates on the current CUDA device in `{function.name}`"
            rewrite = "its arguments may be sizes or data, so it is left for you to rewrite"
            self.report(node, message=f"{where}; {rewrite}")
            return
        name, target = factory
        torch, _ = self.facts.names.torch_spelling()
        dtype = cst.parse_expression(f"{torch}.{LEGACY_DTYPES[qualified.rsplit('.', 1)[1]]}")
        self._fix(
            node,
            function,
            f"`{qualified}` (the current CUDA device)",
            lambda device: as_call_of(node, f"{torch}.{name}", dtype=dtype, device=device),
            target,
        )

    def _type_chosen_by_is_cuda(self, name: cst.Name, at: cst.CSTNode) -> tuple[str, str] | None:
        """(the CUDA type, the tensor tested) for a local bound once to
        `torch.cuda.XTensor if x.is_cuda else torch.XTensor`."""
        values = self.facts.scopes.assigned_values(name.value, at)
        if len(values) != 1 or not isinstance(values[0], cst.IfExp):
            return None
        choice = values[0]
        test = choice.test
        cuda_type = self.qualified_name(choice.body)
        if (
            cuda_type not in CUDA_LEGACY_CONSTRUCTORS
            or self.qualified_name(choice.orelse) != cuda_type.replace("torch.cuda.", "torch.")
            or not (isinstance(test, cst.Attribute) and test.attr.value == "is_cuda")
        ):
            return None
        tested = dotted_name(test.value)
        return (cuda_type, tested) if tested is not None else None

    def _check_type_of_other(self, node: cst.Call, method: cst.Attribute) -> None:
        """`t.type(x.type())`: the type's name (`torch.cuda.FloatTensor`) holds no GPU index, so
        the copy lands on the current CUDA device, not on `x`'s; `t.to(x)` takes `x`'s dtype
        and its device."""
        if len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
            return
        other = node.args[0].value
        if self.qualified_name(other) in LEGACY_CONSTRUCTORS:
            self._check_cast_to_a_cpu_type(node, method, other)
            return
        if not (
            isinstance(other, cst.Call)
            and not other.args
            and isinstance(other.func, cst.Attribute)
            and other.func.attr.value == "type"
        ):
            return
        if self.facts.modules.is_module_expression(method.value):
            return
        function = self.facts.modules.model_code_after_construction(node)
        if function is None:
            return
        source = other.func.value
        shown = code_of(source)
        self.report(
            node,
            message=f"`{function.name}` casts with `.type({shown}.type())`: a CUDA type name "
            f"holds no GPU index, so the tensor lands on the current CUDA device, not on "
            f"`{shown}`'s; use `.to({shown})` (its dtype and its device)",
            fix_title=f"Use `.to({shown})`",
            edits=[Edit(node, method_call(method.value, "to", source))],
        )

    def _check_cast_to_a_cpu_type(
        self, node: cst.Call, method: cst.Attribute, cpu_type: cst.BaseExpression
    ) -> None:
        """`g.type(torch.LongTensor)` in model code: a CPU type name, so the copy goes to the
        CPU, away from the inputs and weights; the dtype alone is `g.to(torch.int64)`."""
        dtype = LEGACY_DTYPES.get(code_of(cpu_type).rsplit(".", 1)[-1])
        torch_name = self.facts.names.torch_alias()
        if dtype is None or self.facts.modules.is_module_expression(method.value):
            return
        function = self.facts.modules.model_code_after_construction(node)
        if function is None:
            return
        shown = code_of(cpu_type)
        what = (
            f"`{function.name}` casts with `.type({shown})`, a CPU tensor type: the tensor goes "
            "to the CPU, away from the inputs and weights the model code computes with"
        )
        if torch_name is None:
            self.report(node, message=f"{what}; cast the dtype alone (`torch` is not imported)")
            return
        cast_to = f"{torch_name}.{dtype}"
        self.report(
            node,
            message=f"{what}; cast the dtype alone: `.to({cast_to})`",
            fix_title=f"Use `.to({cast_to})`",
            edits=[Edit(node, method_call(method.value, "to", cst.parse_expression(cast_to)))],
            applicability=Applicability.UNSAFE,
        )

    def _check_argument(self, node: cst.Call, device_arg: cst.Arg, *, offload: bool) -> None:
        """`.to(<device>)` / `device=<device>`: rewritten when the device is fixed outside."""
        found = self.facts.devices.fixed_move(node, device_arg.value, offload=offload)
        if found is None:
            self._check_device_parameter(node, device_arg)
        else:
            function, fixed = found
            if isinstance(device_arg.value, cst.Name) and self._rebind_local_choice(
                device_arg.value.value, function, fixed.evidence
            ):
                return
            rebuild = partial(replace_argument, node, device_arg)
            literal = isinstance(fixed, Literal)
            self._fix(node, function, fixed.evidence, rebuild, literal=literal)

    def _check_device_parameter(self, node: cst.Call, device_arg: cst.Arg) -> None:
        """`torch.eye(n).to(device)` in model code handed `device` by its callers, where the
        value then meets a tensor argument in an operation: that tensor's device is the one
        the operation needs, so callers that pass another device (or keep a `"cpu"` default)
        make it fail. Only where the meeting proves the device."""
        value = device_arg.value
        if not (isinstance(value, cst.Name) and names_a_device(value.value)):
            return
        if call_tail(node.func) != "to" or not self._made_here(node):
            return  # `device=device`, a move of an input: the function's purpose, its API
        function = self.facts.devices.model_code_moving(node)
        if function is None or value.value not in function.params:
            return
        if value.value in function.bindings:
            return  # rebound in the body: not the callers' value any more
        if self._brings_inputs_to(value.value, function):
            return  # the function gathers its inputs there: the parameter is its target
        needed = self.facts.devices.needed_by(node, function)
        expression = needed.expression()
        if not needed.proof or isinstance(needed, Unknown) or expression is None:
            return
        self.report(
            node,
            message=(
                f"`{function.name}` moves a tensor to its parameter `{value.value}`, which its "
                f"callers must keep in step with the tensors it meets; use `{expression}` "
                f"({needed.evidence})"
            ),
            fix_title=f"Use `{expression}`",
            edits=[
                Edit(node, replace_argument(node, device_arg, cst.parse_expression(expression)))
            ],
            applicability=Applicability.SAFE,
        )

    def _brings_inputs_to(self, device: str, function: FunctionInfo) -> bool:
        """`labels.reshape(-1).to(device)`: the function moves a value it did not just make
        with a factory to `device`, so inputs may arrive elsewhere and `device` is where the
        function means to bring them together."""
        for call in self.context.of_type(function.node.body, cst.Call):
            if call_tail(call.func) != "to" or not isinstance(call.func, cst.Attribute):
                continue
            target = argument_of(call, "device")
            if not (isinstance(target, cst.Arg) and dotted_name(target.value) == device):
                continue
            if not self._made_here(call):
                return True
        return False

    def _made_here(self, move: cst.Call) -> bool:
        """`torch.eye(n).bool().to(d)`: the receiver of `move` is a tensor a torch factory
        makes right there, on the CPU."""
        node: cst.BaseExpression = move.func.value if isinstance(move.func, cst.Attribute) else move
        while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if self.qualified_name(node.func) in CPU_SOURCES:
                return True
            node = node.func.value
        return isinstance(node, cst.Call) and self.qualified_name(node.func) in CPU_SOURCES

    def _rebind_local_choice(self, name: str, function: FunctionInfo, fixed: str) -> bool:
        """A local the method binds once to a GPU of its choosing: the binding is rewritten
        to the device of a tensor its moves meet (once; every move then follows it)."""
        choice = self.facts.own(LocalDeviceChoices).choice(name, function)
        if choice is None:
            return False
        if id(choice.binding) in self._rebound:
            return True
        self._rebound.add(id(choice.binding))
        value = choice.binding.value
        self.report(
            value,
            message=(
                f"`{function.name}` chooses its own device, {fixed}, whatever device its "
                f"tensors are on; use `{choice.expression}` ({choice.evidence})"
            ),
            fix_title=f"Use `{choice.expression}`",
            edits=[Edit(value, cst.parse_expression(choice.expression))],
            applicability=Applicability.SAFE if choice.proof else Applicability.UNSAFE,
        )
        return True

    def _moved_on(self, node: cst.Call) -> bool:
        """The tensor is moved again at once to a device that is not fixed outside
        (`torch.arange(n, device=self.device).to(x.device)`): where it is made first costs a
        copy, but it works on every device, so there is nothing to fix."""
        current: cst.BaseExpression = node
        while True:
            method = self.context.parent(current)
            call = self.context.parent(method) if method is not None else None
            if not (
                isinstance(method, cst.Attribute)
                and method.value is current
                and isinstance(call, cst.Call)
                and call.func is method
            ):
                return False
            if method.attr.value == "to":
                device = argument_of(call, "device")
                return (
                    device is not None
                    and isinstance(device.value, cst.Attribute)
                    and device.value.attr.value == "device"  # another tensor's: `x.device`
                    and self.facts.devices.fixed_move(call, device.value, offload=True) is None
                )
            if method.attr.value not in SAME_DEVICE_METHODS:
                return False
            current = call

    # -- deciding --------------------------------------------------------------------------

    def _drop_move(
        self,
        move: cst.Call,
        why: str,
        function: FunctionInfo,
        fixed: str,
        *,
        applicability: Applicability = Applicability.SAFE,
    ) -> None:
        """Report a move whose tensor is already where it is needed, with the move dropped."""
        receiver = move.func.value if isinstance(move.func, cst.Attribute) else move
        self.report(
            move,
            message=f"`{function.name}` moves a tensor to {fixed}; {why}: drop the move",
            fix_title="Drop the move",
            edits=[Edit(move, receiver)],
            applicability=applicability,
        )

    def _fix(
        self,
        node: cst.Call,
        function: FunctionInfo,
        fixed: str,
        rebuild: Callable[[cst.BaseExpression], cst.CSTNode],
        target: cst.Call | None = None,
        *,
        literal: bool = False,
    ) -> None:
        if self._moved_on(node):
            return
        receiver = node.func.value if isinstance(node.func, cst.Attribute) else node
        owner = function.owner
        handed = self.facts.modules.handed_layers(owner.node) if owner else frozenset()
        layer = layer_called(node, function, handed)
        if layer is not None and target is None:
            self._drop_move(
                node,
                f"it is what `{layer}` returned, already on that layer's device",
                function,
                fixed,
            )
            return
        already = self.facts.moves.moved_there_already(node) if target is None else None
        if already is not None and not node.args:
            self._drop_move(
                node,
                f"`{code_of(receiver)}` is already on `{already}`, where it was moved before",
                function,
                fixed,
                applicability=Applicability.UNSAFE,
            )
            return
        guard = guarded_by_is_cuda(node, self.context.ancestors(node))
        needed = (
            Named(f"the move runs only when `{guard}.is_cuda`", proof=True, name=f"{guard}.device")
            if guard is not None
            else self.facts.devices.needed_by(target or node, function)
        )
        if (
            needed.expression() is None
            or isinstance(needed, Unknown)
            or (isinstance(needed, ParamsOf) and not needed.proof)
        ):
            # The input the moved tensor is made for beats a guess at the module's weights.
            needed = self.facts.devices.made_for(node, function) or needed
        if literal and (needed.expression() is None or isinstance(needed, Unknown)):
            # A literal GPU is wrong on every other device; where the class reads one, that
            # is the better judgement.
            needed = (
                self.facts.devices.device_the_class_reads(function, target or node)
                or self.facts.devices.copied_back(node)
                or self._handed_model_device(function)
                or self._gathering_parameter(function)
                or needed
            )
        expression = needed.expression()
        moves = f"`{function.name}` moves a tensor to {fixed}"
        if self.facts.own(OneDeviceScript).runs_on_one_device():
            moves += (
                " (right on the script's one device today; a DataParallel replica or a later "
                "`model.to()` breaks it)"
            )
        if expression is None or isinstance(needed, Unknown):
            unknown = "no tensor or layer in scope tells which device it should follow"
            self.report(node, message=f"{moves}; {unknown}")
            return
        flagged = self._flagged_move(target or node)
        replacement = rebuild(cst.parse_expression(expression))
        edit = Edit(flagged, replacement)
        branch = next((a for a in self.context.ancestors(node) if isinstance(a, cst.If)), None)
        alone = lone_is_cuda_branch(node, branch) if guard is not None else None
        if branch is not None and alone is not None and flagged is node:
            # The `if` goes too: the move to the guarding tensor's device is right on the CPU.
            moved = alone.deep_replace(flagged, replacement)
            assert isinstance(moved, cst.SimpleStatementLine)
            edit = Edit(branch, moved.with_changes(leading_lines=branch.leading_lines))
            needed = dataclasses.replace(
                needed, evidence=f"{needed.evidence}; the `if` goes, right on the CPU too"
            )
        self.report(
            node,
            message=f"{moves}; use `{expression}` ({needed.evidence})",
            fix_title=f"Use `{expression}`",
            edits=[edit],
            applicability=Applicability.SAFE if needed.proof else Applicability.UNSAFE,
        )

    def _handed_model_device(self, function: FunctionInfo) -> Named | None:
        """The device of a model `function` was handed and runs (`def compute(model, tok,
        v: Tensor)`): a judgement, for a literal GPU the function's own tensors meet that
        model's work on."""
        handed = self.facts.own(HandedModels).run_by(function.node, function.node)
        if handed is None:
            return None
        line = self.facts.scopes.line_of(handed.run)
        return Named(
            f"a judgement: `{function.name}` runs `{handed.model}` (line {line}), which the "
            "caller placed",
            proof=False,
            name=handed.device,
        )

    def _gathering_parameter(self, function: FunctionInfo) -> Named | None:
        """`def get_batch(data, device)` that moves what it builds to `device`: the parameter
        is where the function brings its values together, so a literal GPU beside it (`x` to
        `"cuda"`, `y` to `device`) parts them when the caller picks another device."""
        for param in function.params:
            if (
                names_a_device(param)
                and param not in function.bindings
                and self._brings_inputs_to(param, function)
            ):
                return Named(
                    f"a judgement: `{function.name}` brings its other values to its "
                    f"parameter `{param}`",
                    proof=False,
                    name=param,
                )
        return None

    def _flagged_move(self, move: cst.BaseExpression) -> cst.BaseExpression:
        """`mask.cuda() if self.use_gpu else mask`: the whole conditional, which the move to
        the tensor's device replaces (right with the flag set or not); else `move` itself."""
        parent = self.context.parent(move)
        func = move.func if isinstance(move, cst.Call) else None
        if (
            isinstance(parent, cst.IfExp)
            and parent.body is move
            and isinstance(func, cst.Attribute)
            and parent.orelse.deep_equals(func.value)
        ):
            return parent
        return move
