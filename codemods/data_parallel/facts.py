"""The script's output: which statements print or log (`print`, `logging.info`, a logger bound
with `logging.getLogger`), which the conversion guards so that only rank 0 writes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.names import call_tail, statement_call
from devfix.codemods.analysis.torch_names import LOGGING_METHODS

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts


class ScriptOutput(Analysis):
    """The statements of a file that print or log, and the loggers they use."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        self._loggers: set[str] | None = None

    def logs(self, statement: cst.BaseStatement) -> bool:
        """`print(...)`, `logging.info(...)` or `logger.info(...)` alone on its line."""
        call = statement_call(statement)
        if call is None:
            return False
        qualified = self.names.qualified_name(call.func) or ""
        if qualified in ("builtins.print", "print") or (
            qualified.startswith("logging.") and call_tail(call.func) in LOGGING_METHODS
        ):
            return True
        if (
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value in LOGGING_METHODS
            and isinstance(call.func.value, cst.Name)
        ):
            return call.func.value.value in self.loggers()
        return False

    def in_log_statement(self, node: cst.CSTNode) -> bool:
        """`node` is part of a statement that :meth:`logs` (a string that is printed)."""
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.SimpleStatementLine):
                return self.logs(ancestor)
        return False

    def loggers(self) -> set[str]:
        """Names bound to `logging.getLogger(...)` anywhere in the file."""
        if self._loggers is None:
            self._loggers = set()
            for assign in self.scopes.find(self.context.module, cst.Assign):
                if (
                    isinstance(assign.value, cst.Call)
                    and self.names.qualified_name(assign.value.func) == "logging.getLogger"
                ):
                    for target in assign.targets:
                        if isinstance(target.target, cst.Name):
                            self._loggers.add(target.target.value)
        return self._loggers
