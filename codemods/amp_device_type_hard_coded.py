"""DF308: AMP objects (autocast, GradScaler) hard-coded to CUDA in a script whose device may not
be CUDA."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods.analysis.companions import AmpDevice
from devfix.codemods.analysis.moves import string_device
from devfix.codemods.analysis.names import argument, call_tail, code_of, keyword_argument
from devfix.codemods.analysis.torch_names import (
    AUTOCASTS,
    DEPRECATED_CUDA_AMP,
    GRAD_SCALER_DEFAULTS,
)
from devfix.types import Applicability, Edit, ImportSpec

#: `torch.cuda.amp.autocast(enabled, dtype, cache_enabled)`: the old API's positional order.
_AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")
#: Where `enabled` sits among the positional arguments of each GradScaler spelling.
_SCALER_ENABLED_INDEX = {"deprecated": 4, "generic": 5}
_EQUAL = cst.AssignEqual(
    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
)
_AUTOCAST_WARNING = "CUDA is not available or torch_xla is imported. Disabling autocast."
_SCALER_WARNING = "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling."


class AmpDeviceTypeHardCoded(DevicePass):
    """AMP objects hard-coded to CUDA in a script whose device may be MPS or the CPU.

    ## What it does
    In training code (not in model code, where `autocast(enabled=False)` blocks are
    deliberate), finds `torch.autocast("cuda")`, `torch.amp.autocast("cuda")`,
    `torch.cuda.amp.autocast()`, `torch.amp.GradScaler("cuda")` (and `torch.amp.GradScaler()`,
    whose default is CUDA) and `torch.cuda.amp.GradScaler()` in a script whose device is chosen
    at run time (`"cuda" if torch.cuda.is_available() else "cpu"`, a `--device` option, a
    device helper), and gives them the script's device type: a device-type variable it keeps
    (`device_type`), else `device.type` for a `torch.device` (`torch.device(device).type` for a
    device string or a value of unknown kind). GradScaler stays enabled only on CUDA:
    `torch.amp.GradScaler(device.type, enabled=... and device.type == "cuda")`. A device type
    computed by hand that knows only CUDA and the CPU (`device_type = "cuda" if "cuda" in device
    else "cpu"`, which turns `mps` into `cpu`) becomes `torch.device(device).type`. In a script
    that always runs on CUDA, only the deprecated `torch.cuda.amp.*` spellings are rewritten, to
    `torch.autocast(device_type="cuda", ...)` and `torch.amp.GradScaler("cuda", ...)`. An object
    already enabled only on CUDA (`enabled=device.type == "cuda"`, under
    `if torch.cuda.is_available():`) keeps its device type.

    ## Why is this bad?
    It does not crash: on a machine without CUDA, or with an Apple GPU, the CUDA-only objects
    warn and switch themselves off. `torch.autocast("cuda")` prints `UserWarning: CUDA is not
    available or torch_xla is imported. Disabling autocast.` and the model trains in float32;
    the GradScaler prints `UserWarning: torch.cuda.amp.GradScaler is enabled, but CUDA is not
    available.  Disabling.` Mixed precision is silently lost on the devices the script was
    written to support, and `torch.cuda.amp.*` is deprecated (`FutureWarning`).

    ## Example
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    scaler = torch.cuda.amp.GradScaler()
    with torch.cuda.amp.autocast():
        loss = model(x.to(device)).sum()
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    scaler = torch.amp.GradScaler(device.type, enabled=device.type == "cuda")
    with torch.autocast(device_type=device.type):
        loss = model(x.to(device)).sum()
    ```

    ## Fix safety
    GradScaler and the deprecated spellings in CUDA-only scripts: safe, nothing changes on CUDA
    and the scaler stays off elsewhere (without the warning). Autocast with the script's device
    type, and a device type that now says `mps` instead of `cpu`: unsafe, because on the CPU
    and on MPS autocast now runs in lower precision (bfloat16 on the CPU by default) where it
    was switched off. `enabled` given by position, `*args` in a deprecated spelling, and a
    script device the call cannot see are reported without a fix; `torch.autocast(*args)`, whose
    device type is not in sight, is left alone.

    ## References
    - `torch.amp` docs (`torch.cuda.amp.autocast(args...)` is deprecated);
      karpathy/nanoGPT#654 and PR#698; mlfoundations/open_clip PR#654.
    """

    CODE = "DF308"
    NAME = "amp-device-type-hard-coded"
    MESSAGE = "an AMP object is hard-coded to CUDA in a script whose device may not be CUDA"
    FIX_TITLE = "Use the script's device type"
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)
    TRIGGER_WORDS = ("autocast", "GradScaler", "amp")
    REQUIRED_WORDS = ("torch",)

    def visit_Call(self, node: cst.Call) -> None:
        tail = call_tail(node.func)
        if tail == "autocast":
            qualified = self.qualified_name(node.func)
            if qualified in AUTOCASTS and AUTOCASTS[qualified] != "cpu":
                self._autocast(node, qualified)
        elif tail == "GradScaler":
            qualified = self.qualified_name(node.func)
            if qualified in GRAD_SCALER_DEFAULTS:
                self._scaler(node, qualified)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        device = self.facts.companions.hand_made_device_type(node)
        if device is None or self._out_of_scope(node) or not self._used_by_amp(node):
            return
        fixed = self.facts.companions.device_type_of(device, node)
        imports: list[ImportSpec] = []
        if fixed.startswith("torch.") and self.facts.names.torch_alias() is None:
            imports = [ImportSpec("torch")]
        self.report(
            node,
            message=f"`{code_of(node)}` knows only CUDA and the CPU: on `mps` (or `xpu`) the AMP "
            f"objects get `cpu` and autocast is skipped; use `{fixed}`",
            fix_title=f"Use `{fixed}`",
            edits=[Edit(node, cst.parse_expression(fixed))],
            imports=imports,
            applicability=Applicability.UNSAFE,
        )

    # -- autocast ------------------------------------------------------------------------------

    def _autocast(self, node: cst.Call, qualified: str) -> None:
        if self._out_of_scope(node):
            return
        deprecated = qualified in DEPRECATED_CUDA_AMP
        given = None if deprecated else argument(node, "device_type", 0)
        if not deprecated and (given is None or not self._is_cuda(given)):
            return  # `torch.autocast(*args)`: its device type is not in sight (it has no default)
        what = f"`{code_of(node.func)}({'' if deprecated else code_of(given or node)})`"
        if any(arg.star for arg in node.args):
            self.report(node, message=f"{what} is CUDA-only; rewrite its `*args` by hand")
            return
        enabled = argument(node, "enabled", 0) if deprecated else keyword_argument(node, "enabled")
        enabled_value = enabled.value if isinstance(enabled, cst.Arg) else enabled
        amp = self._amp_device(node, enabled_value)
        if amp is None or (amp.cuda_only and not deprecated):
            return
        torch, imports = self.facts.names.torch_spelling()
        device_type = amp.expression if not amp.cuda_only else '"cuda"'
        assert device_type is not None
        value = cst.parse_expression(device_type)
        if deprecated:
            positional = [arg for arg in node.args if arg.keyword is None]
            if len(positional) > len(_AUTOCAST_POSITIONAL):
                return
            args = [cst.Arg(value, keyword=cst.Name("device_type"), equal=_EQUAL)]
            for index, arg in enumerate(node.args):
                if arg.keyword is None:
                    arg = arg.with_changes(
                        keyword=cst.Name(_AUTOCAST_POSITIONAL[index]), equal=_EQUAL
                    )
                args.append(arg)
            replacement = node.with_changes(
                func=cst.parse_expression(f"{torch}.autocast"), args=_commas(args, node)
            )
        else:
            replacement = node.with_changes(
                args=[
                    arg.with_changes(value=value) if arg.value is given else arg
                    for arg in node.args
                ]
            )
            imports = []
        shown = f"{code_of(replacement.func)}(device_type={device_type}, ...)"
        self._report_amp(
            node,
            amp,
            replacement,
            imports,
            deprecated=f"{what} is deprecated; the script runs on CUDA, so use `{shown}`",
            off_cuda=f"{what} is CUDA-only, but the script's device (`{amp.device}`) may not be "
            f"CUDA: there autocast warns `{_AUTOCAST_WARNING}` and trains in float32; "
            f"use `{shown}`",
            shown=shown,
            # On CPU and MPS autocast now runs in lower precision instead of switching off.
            applicability=Applicability.UNSAFE,
        )

    def _report_amp(
        self,
        node: cst.Call,
        amp: AmpDevice,
        replacement: cst.Call,
        imports: list[ImportSpec],
        *,
        deprecated: str,
        off_cuda: str,
        shown: str,
        applicability: Applicability,
    ) -> None:
        """The deprecation alone (safe) when the object is CUDA-only on purpose, else the
        device-type fix at `applicability`."""
        cuda_only = amp.cuda_only
        self.report(
            node,
            message=deprecated if cuda_only else off_cuda,
            fix_title=f"Use `{shown}`",
            edits=[Edit(node, replacement)],
            imports=imports,
            applicability=Applicability.SAFE if cuda_only else applicability,
        )

    # -- GradScaler ----------------------------------------------------------------------------

    def _scaler(self, node: cst.Call, qualified: str) -> None:
        if self._out_of_scope(node):
            return
        deprecated = qualified in DEPRECATED_CUDA_AMP
        given = None if deprecated else argument(node, "device", 0)
        if given is not None and not self._is_cuda(given):
            return
        what = f"`{code_of(node.func)}({'' if given is None else code_of(given)})`"
        if any(arg.star for arg in node.args):
            self.report(node, message=f"{what} is CUDA-only; rewrite its `*args` by hand")
            return
        index = _SCALER_ENABLED_INDEX["deprecated" if deprecated else "generic"]
        positional = [arg for arg in node.args if arg.keyword is None]
        enabled = keyword_argument(node, "enabled")
        if enabled is None and len(positional) > index:
            self.report(node, message=f"{what} gets `enabled` by position; rewrite it by hand")
            return
        amp = self._amp_device(node, enabled.value if enabled is not None else None)
        if amp is None or (amp.cuda_only and not deprecated):
            return
        torch, imports = self.facts.names.torch_spelling()
        device_type = amp.expression if not amp.cuda_only else '"cuda"'
        assert device_type is not None
        rest = [arg for arg in node.args if arg is not (_arg_of(node, given))]
        if not amp.cuda_only:
            on_cuda = f'{device_type} == "cuda"'
            new_rest: list[cst.Arg] = []
            for arg in rest:
                if arg is enabled:
                    value = code_of(arg.value)
                    if isinstance(arg.value, (cst.Name, cst.Attribute, cst.Call)):
                        combined = f"{value} and {on_cuda}"
                    else:
                        combined = (
                            f"({value}) and {on_cuda}"
                            if not _parenthesized(arg.value)
                            else f"{value} and {on_cuda}"
                        )
                    arg = arg.with_changes(value=cst.parse_expression(combined))
                new_rest.append(arg)
            if enabled is None:
                new_rest.append(
                    cst.Arg(
                        cst.parse_expression(on_cuda), keyword=cst.Name("enabled"), equal=_EQUAL
                    )
                )
            rest = new_rest
        args = [cst.Arg(cst.parse_expression(device_type)), *rest]
        func = cst.parse_expression(f"{torch}.amp.GradScaler") if deprecated else node.func
        replacement = node.with_changes(func=func, args=_commas(args, node))
        if not deprecated:
            imports = []
        shown = f"{code_of(replacement.func)}({device_type}, ...)"
        self._report_amp(
            node,
            amp,
            replacement,
            imports,
            deprecated=f"{what} is deprecated; the script runs on CUDA, so use `{shown}`",
            off_cuda=f"{what} is CUDA-only, but the script's device (`{amp.device}`) may not be "
            f"CUDA: there it warns `{_SCALER_WARNING}`; use `{shown}`, enabled only on CUDA",
            shown=shown,
            applicability=Applicability.SAFE,
        )

    # -- deciding ------------------------------------------------------------------------------

    def _amp_device(self, node: cst.Call, enabled: cst.BaseExpression | None) -> AmpDevice | None:
        """The script's device type at `node`; only the deprecation when the object is already
        enabled on CUDA alone (or runs under a CUDA check)."""
        amp = self.facts.companions.amp_device(node)
        if amp is None:
            return None
        if not amp.cuda_only and (
            (enabled is not None and self._mentions_device_type(enabled))
            or self.facts.flow.guarded_by_cuda_check(node)
            or self._under_device_type_check(node)
        ):
            return AmpDevice(None, "cuda", cuda_only=True)
        return amp

    def _mentions_cuda(self, test: cst.BaseExpression) -> bool:
        """A test that holds only on CUDA: `x == "cuda"`, `"cuda" in x`, `is_available()` (not
        a negated one: `x != "cuda"` holds everywhere else)."""
        for inner in self.context.subtree(test):
            if isinstance(inner, (cst.NotEqual, cst.NotIn, cst.IsNot, cst.Not)):
                return False
            if isinstance(inner, cst.SimpleString) and (string_device(inner) or "").startswith(
                "cuda"
            ):
                return True
            if isinstance(inner, (cst.Name, cst.Attribute)) and call_tail(inner) in (
                "is_available",
                "is_cuda",
            ):
                return True
        return False

    def _mentions_device_type(self, value: cst.BaseExpression) -> bool:
        for inner in self.context.subtree(value):
            if isinstance(inner, cst.SimpleString) and string_device(inner) is not None:
                return True
            if isinstance(inner, (cst.Name, cst.Attribute)) and call_tail(inner) in (
                "is_available",
                "type",
                "device_type",
                "is_cuda",
            ):
                return True
        return False

    def _under_device_type_check(self, node: cst.CSTNode) -> bool:
        """`if device.type == "cuda":` / `... if device_type == "cuda" else ...` around
        `node`: it runs on CUDA only."""
        current: cst.CSTNode = node
        for ancestor in self.context.ancestors(node):
            if (
                isinstance(ancestor, (cst.If, cst.IfExp))
                and current is ancestor.body
                and self._mentions_cuda(ancestor.test)
            ):
                return True
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return False
            current = ancestor
        return False

    def _used_by_amp(self, node: cst.IfExp) -> bool:
        """The hand-made device type reaches an autocast or a GradScaler (directly, or through
        the name it is bound to) that may run off CUDA: one behind `if device_type ==
        "cuda"` is CUDA-only on purpose, and the other devices' type does not matter to it."""
        parent = self.context.parent(node)
        if isinstance(parent, cst.Arg):
            call = self.context.parent(parent)
            return isinstance(call, cst.Call) and self._amp_off_cuda(call)
        name = self.facts.scopes.assigned_name(node)
        if name is None:
            return False
        for inner in self.context.subtree(self.context.module):
            if not (isinstance(inner, cst.Name) and inner.value == name):
                continue
            parent = self.context.parent(inner)
            if isinstance(parent, cst.Arg):
                call = self.context.parent(parent)
                if isinstance(call, cst.Call) and self._amp_off_cuda(call):
                    return True
            elif self._chooses_amp(inner):
                return True
        return False

    def _chooses_amp(self, use: cst.Name) -> bool:
        """`nullcontext() if device_type == "cpu" else torch.cuda.amp.autocast()`: the device
        type decides whether an AMP object is used at all."""
        current: cst.CSTNode = use
        for ancestor in self.context.ancestors(use):
            if isinstance(ancestor, (cst.IfExp, cst.If)) and current is ancestor.test:
                return any(
                    isinstance(call, cst.Call) and self._amp_off_cuda(call)
                    for branch in (ancestor.body, ancestor.orelse)
                    if branch is not None
                    for call in self.context.subtree(branch)
                )
            if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
            current = ancestor
        return False

    def _amp_off_cuda(self, call: cst.Call) -> bool:
        return (
            call_tail(call.func) in ("autocast", "GradScaler")
            and not self._under_device_type_check(call)
            and not self.facts.flow.guarded_by_cuda_check(call)
        )

    def _is_cuda(self, value: cst.BaseExpression | None) -> bool:
        if value is None:
            return True  # the default of `torch.amp.GradScaler()` is CUDA
        return isinstance(value, cst.SimpleString) and value.evaluated_value == "cuda"

    def _out_of_scope(self, node: cst.CSTNode) -> bool:
        """Model code (the methods of a module, where AMP blocks are part of the model) and
        data pipelines."""
        if self.facts.modules.in_model_method(node):
            return True
        modules = self.facts.modules
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.ClassDef) and modules.class_info(ancestor).is_dataset:
                return True
        return self.facts.flow.in_data_pipeline(node)


def _arg_of(call: cst.Call, value: cst.BaseExpression | None) -> cst.Arg | None:
    if value is None:
        return None
    return next((arg for arg in call.args if arg.value is value), None)


def _parenthesized(node: cst.BaseExpression) -> bool:
    return bool(getattr(node, "lpar", ()))


def _commas(args: list[cst.Arg], original: cst.Call) -> list[cst.Arg]:
    """Comma-separate rebuilt arguments; keep a trailing comma if the call had one."""
    trailing = bool(original.args) and isinstance(original.args[-1].comma, cst.Comma)
    result = []
    for index, arg in enumerate(args):
        if index < len(args) - 1:
            comma = (
                arg.comma
                if isinstance(arg.comma, cst.Comma)
                else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
            result.append(arg.with_changes(comma=comma))
        else:
            result.append(
                arg.with_changes(comma=arg.comma if trailing else cst.MaybeSentinel.DEFAULT)
            )
    return result
