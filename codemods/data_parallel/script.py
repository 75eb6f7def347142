"""What DF401's planners know about the script: the wrapped models and where the training runs,
on top of the file's facts (`codemods.analysis`). Built once per file from the file's context
(never from the pass)."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from devfix.codemods.analysis import FileFacts
from devfix.codemods.data_parallel.facts import ScriptOutput
from devfix.context import FileContext

#: The rank-0 condition inside the code that runs the training (where `rank` is bound) ...
RANK0 = "rank == 0"
#: ... and anywhere else (helpers, callers): torchrun sets RANK for every process.
RANK0_ANYWHERE = 'os.environ.get("RANK", "0") == "0"'


class Decline(Exception):
    """The script cannot be converted safely; the message says why."""


@dataclass
class Wrap:
    """One `target = nn.DataParallel(inner, ...)` of the script."""

    call: cst.Call
    statement: cst.SimpleStatementLine
    target: str
    inner: cst.BaseExpression
    #: The statement holding the wrap at the level of the block that runs the training: the
    #: wrap itself, or the outermost `if` around it.
    unit: cst.BaseStatement
    #: The `if` statements between the unit and the wrap, outermost first.
    guards: list[cst.If] = field(default_factory=list)
    #: An optimizer steps its parameters (False: a frozen model, e.g. a teacher).
    trained: bool = True

    @property
    def names(self) -> set[str]:
        """The wrapped model's names: the target, and the inner model's when it is a name."""
        names = {self.target}
        if isinstance(self.inner, cst.Name):
            names.add(self.inner.value)
        return names


@dataclass
class RunScope:
    """Where the training runs: the statements that run it and where setup/teardown go."""

    #: The module-level function that wraps the model (None: module level or main block).
    function: cst.FunctionDef | None
    #: The top-level statements that run the training (the function, the main block, or the
    #: module statements that move under a new main block).
    statements: list[cst.BaseStatement]
    #: The block that gets the setup at its start (None: the new main block).
    block: cst.IndentedBlock | None
    #: A flat script: the module statement from which the rest moves under a main block.
    main_from: cst.BaseStatement | None = None
    #: The statement after which teardown goes when the function returns early (else: the
    #: end of `block`).
    teardown_after: cst.BaseStatement | None = None
    #: The function that wraps the model when it is not `function`: a factory the training
    #: code calls (`model = build_model(args)`), where `local_rank` and friends are not bound.
    wrapper: cst.FunctionDef | None = None


class Script:
    """One file, as the planners see it."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self.module = context.module
        self.path = context.path
        facts = FileFacts.of(context)
        self.names = facts.names
        self.scopes = facts.scopes
        self.flow = facts.flow
        self.output = facts.own(ScriptOutput)
        #: Every name the file binds anywhere (names the conversion adds must be new).
        self.bound = self.scopes.names_bound_anywhere()
        #: Local name -> qualified name, for the top-level imports.
        self.imports = self.names.import_table()
        torch_names = [local for local, qualified in self.imports.items() if qualified == "torch"]
        self.torch = torch_names[0] if torch_names else "torch"
        self.wraps: list[Wrap] = []
        self.run: RunScope | None = None

    def t(self, code: str) -> str:
        """A template with `torch.` spelled as the script spells it."""
        return code.replace("torch.", f"{self.torch}.")

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.context.parent(node)

    def ancestors(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        return self.context.ancestors(node)

    # -- where the training runs -----------------------------------------------------------

    @property
    def scope(self) -> RunScope:
        assert self.run is not None, "the entry point is planned first"
        return self.run

    def in_run(self, node: cst.CSTNode) -> bool:
        """Inside the statements that run the training, outside any other function."""
        run = self.scope
        for ancestor in [node, *self.ancestors(node)]:
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return ancestor is run.function
            if any(ancestor is s for s in run.statements):
                return run.function is None
        return False

    def in_helper(self, node: cst.CSTNode) -> bool:
        """Inside a module-level function other than the one that runs the training."""
        function = None
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
                return False
            if isinstance(ancestor, cst.FunctionDef):
                function = ancestor
        return (
            function is not None
            and function is not self.scope.function
            and self.parent(function) in (self.module, *self.scope.statements)
        )
