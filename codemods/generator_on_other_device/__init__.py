"""DF307: a random-number generator on another device than the numbers it draws."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import append_keyword, remove_argument
from devfix.codemods.analysis.flow.processes import DefaultDevice
from devfix.codemods.analysis.names import argument, call_tail, code_of, keyword_argument
from devfix.codemods.analysis.torch_names import (
    CUDA_SEEDING,
    MODEL_WRAPPERS,
    OWN_GENERATOR_SAMPLERS,
    RANDOM_FUNCTIONS,
    RANDOM_METHODS,
    SAMPLING_CALLS,
    tails,
)
from devfix.codemods.generator_on_other_device.facts import Generators
from devfix.context import FileContext
from devfix.types import Applicability, Edit, ImportSpec

_RANDOM_TAILS = tails(RANDOM_FUNCTIONS)
_SAMPLING_TAILS = tails(SAMPLING_CALLS)
_SEEDING_TAILS = tails(CUDA_SEEDING)
_OWN_GENERATOR_TAILS = tails(OWN_GENERATOR_SAMPLERS)
#: Factories whose output device is their `device=` (the others follow their tensor input).
_FACTORIES = frozenset({"torch.rand", "torch.randn", "torch.randint", "torch.randperm"})
_ERROR = "Expected a '{want}' device type for generator but found '{found}'"


class GeneratorOnOtherDevice(DevicePass):
    """Random-number generator on another device than the numbers it draws.

    ## What it does
    Finds a `torch.Generator` used where random numbers are drawn on another device:

    - a CPU generator (`torch.Generator()`) given to `torch.rand/randn/randint/randperm` with
      `device=` an accelerator (or a device chosen at run time), or to an in-place draw
      (`x.normal_(generator=g)`) of a tensor on one: the generator is created on that device,
      `torch.Generator(device=device)`;
    - a CUDA generator given to a factory without `device=` (which draws on the CPU): the
      factory gets `device=g.device`;
    - `DataLoader(shuffle=True)`, `random_split`, `RandomSampler` and `SubsetRandomSampler`
      after `torch.set_default_device("cuda")` (or a CUDA default tensor type): they draw their
      permutation on the default device with a CPU generator unless given one, so they get
      `generator=torch.Generator(device=torch.get_default_device())` (the device variable,
      when the default was set from one; after a CUDA default tensor type, which
      `get_default_device()` does not read, `torch.empty(0).device`); a CPU generator already
      given to them is moved there instead. `DistributedSampler`, which shuffles with a
      generator of its own and takes none, is reported;
    - a CUDA generator given to them while the default device is the CPU: it becomes a CPU
      generator (`torch.Generator()`);
    - `torch.cuda.manual_seed(seed)` in a script that drives several GPUs from one process
      (`nn.DataParallel`) or runs as several processes without `torch.cuda.set_device`: it
      seeds only the current GPU (`cuda:0`), so it becomes `torch.cuda.manual_seed_all(seed)`;
      `torch.cuda.get_rng_state(0)` / `set_rng_state(state, 0)` with a fixed GPU index there
      are reported.

    A generator also used on another device, one handed to code the pass cannot see, and a
    device that is not visible where the generator is created are reported without a fix.

    ## Why is this bad?
    A generator belongs to one device. Drawing on another fails at once:
    `RuntimeError: Expected a 'cuda' device type for generator but found 'cpu'` (or the
    reverse). The data utilities draw on the default device: after
    `torch.set_default_device("cuda")` a shuffling `DataLoader` dies in its sampler with the same
    error on its first epoch. `torch.cuda.manual_seed` seeds the current GPU only, so the
    replicas of `nn.DataParallel` (and the processes of a run that never selects its GPU) draw
    unseeded numbers: dropout masks differ from run to run.

    ## Example
    ```python
    g = torch.Generator()
    g.manual_seed(0)
    noise = torch.randn(8, 16, generator=g, device=device)
    ```

    ## Use instead
    ```python
    g = torch.Generator(device=device)
    g.manual_seed(0)
    noise = torch.randn(8, 16, generator=g, device=device)
    ```

    ## Fix safety
    Safe: the generator and the numbers it draws end up on one device, where the call already
    asked for them; on the CPU nothing changes. Seeds give other numbers on another device
    than before (each device has its own random stream). `torch.get_default_device()` needs
    PyTorch 2.3 or later. `manual_seed_all` also seeds the GPUs the current one did not.

    ## References
    - pytorch/pytorch#44714 (random_split with a CUDA generator), PR#47022 (randperm needs the
      generator on the output's device), torchfont PR#327; amdegroot/ssd.pytorch#578.
    """

    CODE = "DF307"
    NAME = "generator-on-other-device"
    MESSAGE = "a random-number generator is on another device than the numbers it draws"
    FIX_TITLE = "Create the generator on the device the numbers are drawn on"
    APPLICABILITY = Applicability.SAFE
    TRIGGER_WORDS = ("Generator", "set_default_", "manual_seed", "rng_state")
    REQUIRED_WORDS = ("torch",)

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._done: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        tail = call_tail(node.func)
        if tail in _RANDOM_TAILS or tail in RANDOM_METHODS:
            self._random(node)
        elif tail in _SAMPLING_TAILS:
            self._sampling(node)
        elif tail in _SEEDING_TAILS:
            self._seeding(node)
        elif tail in _OWN_GENERATOR_TAILS:
            self._own_generator_sampler(node)

    # -- draws with `generator=` -------------------------------------------------------------

    def _random(self, node: cst.Call) -> None:
        given = keyword_argument(node, "generator")
        if given is None:
            return
        generators = self.facts.own(Generators)
        generator = generators.generator_call(given.value, node)
        if generator is None:
            return
        kind = generators.generator_kind(generator)
        qualified = self.qualified_name(node.func)
        if qualified in _FACTORIES:
            device = keyword_argument(node, "device")
            if device is not None:
                function = self.facts.scopes.enclosing_function(node)
                if self.facts.moves.device_kind(device.value, function) in ("cpu", None):
                    return
                wanted: str | None = code_of(device.value)
            else:
                default = self.facts.flow.default_device(node)
                wanted = default.expression if default is not None else None
        elif (
            isinstance(node.func, cst.Attribute)
            and call_tail(node.func) in RANDOM_METHODS
            and not (qualified or "").startswith("torch.")  # `torch.nn.init.normal_`
        ):
            placed = self.facts.devices.placed(node.func.value, node)
            if placed is None:
                return
            move = self.facts.devices.device_move_at(placed, generator)
            if move is None or isinstance(move, str) or move.method != "to":
                wanted = None
                if kind == "cpu":
                    self.report(
                        node,
                        message=f"{self._cpu_generator(generator)} draws into a tensor on a "
                        f"device ({placed.evidence}): `{_ERROR.format(want='cuda', found='cpu')}`; "
                        "create the generator on that device",
                    )
                return
            wanted = move.code
        else:
            return
        if wanted is not None and kind == "cpu":
            self._move_generator(node, generator, wanted, f"`{self._shown(node)}`")
        elif wanted is None and kind in ("accelerator", "device") and qualified in _FACTORIES:
            self._draw_on_generator_device(node, generator, given)

    def _move_generator(self, node: cst.Call, generator: cst.Call, wanted: str, where: str) -> None:
        """`torch.Generator()` -> `torch.Generator(device=<wanted>)`, when every use agrees."""
        if id(generator) in self._done:
            return
        self._done.add(id(generator))
        generators = self.facts.own(Generators)
        problem = f"{self._cpu_generator(generator)} is used by {where}, which draws on `{wanted}`"
        error = _ERROR.format(want="cuda", found="cpu")
        uses = generators.generator_uses(generator)
        if uses is None:
            self.report(
                node,
                message=f"{problem}: `{error}`; the generator is also used elsewhere, so create "
                f"it on `{wanted}` by hand",
            )
            return
        for use in uses:
            other = self._draws_on(use)
            if other is not None and other != wanted:
                self.report(
                    node,
                    message=f"{problem}: `{error}`; it also draws on `{other}`, so one generator "
                    "cannot serve both: create one per device",
                )
                return
        if not self.facts.moves.visible_at(wanted, generator):
            self.report(
                node,
                message=f"{problem}: `{error}`; `{wanted}` is not known where the generator is "
                "created",
            )
            return
        existing = keyword_argument(generator, "device")
        value = cst.parse_expression(wanted)
        if existing is not None:
            replacement = generator.with_changes(
                args=[a.with_changes(value=value) if a is existing else a for a in generator.args]
            )
        elif generator.args and generator.args[0].keyword is None:
            first = generator.args[0]
            replacement = generator.with_changes(
                args=[first.with_changes(value=value), *generator.args[1:]]
            )
        else:
            replacement = append_keyword(generator, "device", value)
        self.report(
            node,
            message=f"{problem}: `{error}`; create it with `device={wanted}`",
            fix_title=f"Create the generator with `device={wanted}`",
            edits=[Edit(generator, replacement)],
        )

    def _draws_on(self, use: cst.Call) -> str | None:
        """The device a call that receives the generator draws on ("cpu" for the CPU)."""
        qualified = self.qualified_name(use.func)
        if qualified in _FACTORIES:
            device = keyword_argument(use, "device")
            if device is not None:
                function = self.facts.scopes.enclosing_function(use)
                if self.facts.moves.device_kind(device.value, function) == "cpu":
                    return "cpu"
                return code_of(device.value)
        elif qualified not in SAMPLING_CALLS:
            return None
        default = self.facts.flow.default_device(use)
        return default.expression if default is not None else "cpu"

    def _draw_on_generator_device(
        self, node: cst.Call, generator: cst.Call, given: cst.Arg
    ) -> None:
        """A CUDA generator given to a factory that draws on the CPU: draw on its device."""
        if any(arg.star == "**" for arg in node.args):
            return
        device = argument(generator, "device")
        assert device is not None
        if isinstance(given.value, cst.Name):
            wanted = f"{given.value.value}.device"
        else:
            wanted = code_of(device)
        error = _ERROR.format(want="cpu", found="cuda")
        self.report(
            node,
            message=f"`{self._shown(node)}` draws on the CPU with a generator on "
            f"`{code_of(device)}`: `{error}`; draw on the generator's device with "
            f"`device={wanted}`",
            fix_title=f"Add `device={wanted}`",
            edits=[Edit(node, append_keyword(node, "device", cst.parse_expression(wanted)))],
        )

    # -- data utilities that shuffle -------------------------------------------------------------

    def _sampling(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified not in SAMPLING_CALLS or any(arg.star for arg in node.args):
            return
        if SAMPLING_CALLS[qualified]:
            shuffle = argument(node, "shuffle", 2)
            if shuffle is None or (
                isinstance(shuffle, cst.Name) and shuffle.value in ("False", "None")
            ):
                return
        generators = self.facts.own(Generators)
        if call_tail(node.func) == "random_split":
            given = argument(node, "generator", 2)
        else:
            keyword = keyword_argument(node, "generator")
            given = keyword.value if keyword is not None else None
        default = self.facts.flow.default_device(node)
        shown = f"`{call_tail(node.func)}(...)`"
        if default is not None:
            if given is None:
                torch, imports = self.facts.names.torch_spelling()
                value = cst.parse_expression(f"{torch}.Generator(device={default.expression})")
                where = _default_device_words(default)
                self.report(
                    node,
                    message=f"{shown} draws its permutation on {where} with the CPU default "
                    f"generator: `{_ERROR.format(want='cuda', found='cpu')}`; give it "
                    f"`generator={code_of(value)}`",
                    fix_title=f"Add `generator={code_of(value)}`",
                    edits=[Edit(node, append_keyword(node, "generator", value))],
                    imports=imports,
                )
                return
            generator = generators.generator_call(given, node)
            if generator is not None and generators.generator_kind(generator) == "cpu":
                self._move_generator(node, generator, default.expression, shown)
            return
        if given is None:
            return
        generator = generators.generator_call(given, node)
        if generator is None or generators.generator_kind(generator) not in (
            "accelerator",
            "device",
        ):
            return
        self._cpu_generator_for_sampling(node, generator, shown)

    def _cpu_generator_for_sampling(self, node: cst.Call, generator: cst.Call, shown: str) -> None:
        if id(generator) in self._done:
            return
        self._done.add(id(generator))
        device = argument(generator, "device")
        assert device is not None
        error = _ERROR.format(want="cpu", found="cuda")
        problem = (
            f"{shown} draws its permutation on the CPU, but its generator is on "
            f"`{code_of(device)}`: `{error}`"
        )
        uses = self.facts.own(Generators).generator_uses(generator)
        if uses is None or any(self._draws_on(use) not in (None, "cpu") for use in uses):
            self.report(node, message=f"{problem}; give it a CPU generator of its own")
            return
        keyword = keyword_argument(generator, "device")
        arg = keyword if keyword is not None else generator.args[0]
        replacement = remove_argument(generator, arg)
        self.report(
            node,
            message=f"{problem}; use a CPU generator (`torch.Generator()`)",
            fix_title="Use a CPU generator",
            edits=[Edit(generator, replacement)],
        )

    def _own_generator_sampler(self, node: cst.Call) -> None:
        """`DistributedSampler(ds)` under a CUDA default device: it shuffles with a CPU
        generator of its own, and takes none."""
        if self.qualified_name(node.func) not in OWN_GENERATOR_SAMPLERS:
            return
        shuffle = argument(node, "shuffle", 3)
        if isinstance(shuffle, cst.Name) and shuffle.value in ("False", "None"):
            return
        default = self.facts.flow.default_device(node)
        if default is None:
            return
        where = _default_device_words(default)
        self.report(
            node,
            message=f"`{call_tail(node.func)}(...)` shuffles with a CPU generator of its own on "
            f"{where}: `{_ERROR.format(want='cuda', found='cpu')}` at the first epoch; it takes "
            "no generator, so keep the CPU as the default device (move tensors with `.to()`) or "
            "pass `shuffle=False` and shuffle the dataset yourself",
        )

    # -- seeding one GPU -----------------------------------------------------------------------

    def _seeding(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified not in CUDA_SEEDING:
            return
        several = self._several_gpus()
        if several is None:
            return
        if qualified == "torch.cuda.manual_seed":
            assert isinstance(node.func, (cst.Attribute, cst.Name))
            if isinstance(node.func, cst.Attribute):
                func: cst.BaseExpression = node.func.with_changes(attr=cst.Name("manual_seed_all"))
                imports: list[ImportSpec] = []
            else:
                torch, imports = self.facts.names.torch_spelling()
                func = cst.parse_expression(f"{torch}.cuda.manual_seed_all")
            self.report(
                node,
                message=f"`torch.cuda.manual_seed` seeds only the current GPU, but {several}: "
                "the other GPUs draw unseeded numbers; use `torch.cuda.manual_seed_all`",
                fix_title="Use `torch.cuda.manual_seed_all`",
                edits=[Edit(node, node.with_changes(func=func))],
                imports=imports,
            )
            return
        index = argument(node, "device", 0 if qualified.endswith("get_rng_state") else 1)
        if isinstance(index, cst.Integer):
            self.report(
                node,
                message=f"`{self._shown(node)}` reads or sets the random state of GPU "
                f"{index.value} only, but {several}; use the state of the GPU the code runs on",
            )

    def _several_gpus(self) -> str | None:
        """How the script uses several GPUs from code that `torch.cuda.manual_seed` does not
        cover, or None."""
        for call in self.context.subtree(self.context.module):
            if (
                isinstance(call, cst.Call)
                and call_tail(call.func) == "DataParallel"
                and self.qualified_name(call.func) in MODEL_WRAPPERS
            ):
                return "`nn.DataParallel` runs replicas on several GPUs from this process"
        flow = self.facts.flow
        if flow.is_distributed() and not flow.sets_current_device():
            return (
                "the script runs as several processes and never selects its GPU with "
                "`torch.cuda.set_device` (every process seeds `cuda:0`)"
            )
        return None

    # -- wording -------------------------------------------------------------------------------

    def _cpu_generator(self, generator: cst.Call) -> str:
        name = self.facts.scopes.assigned_name(generator)
        shown = f"`{self._shown(generator)}`"
        return f"the CPU generator {f'`{name}` ({shown})' if name else shown}"

    def _shown(self, node: cst.Call) -> str:
        func = code_of(node.func)
        return f"{func}()" if not node.args else f"{func}(...)"


def _default_device_words(default: DefaultDevice) -> str:
    """How a message names the default device the data utilities draw on."""
    if default.conditional:
        return "the default device (set under an `if`)"
    if default.tensor_type:
        return "the device of the CUDA default tensor type"
    return f"the default device `{default.expression}`"
