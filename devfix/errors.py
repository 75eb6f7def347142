"""Errors, split as isort does: the user's input was broken vs. devfix broke something."""

from __future__ import annotations


class DevfixError(Exception):
    """Base of every error devfix raises on purpose."""


class InputError(DevfixError):
    """The file cannot be handled as given (does not parse, cannot be decoded or read)."""


class MixedIndentation(InputError):
    """Valid Python indented with tabs and spaces mixed (see :mod:`devfix.indentation`), which
    libcst cannot read as it is; the fix loop handles it through an expanded copy."""


class UnknownRuleError(DevfixError):
    """`--select` / `--ignore` named no known pass."""


class InternalError(DevfixError):
    """devfix produced output that does not parse, or whose fixes do not converge.

    Nothing is written when this happens; the message asks for a bug report.
    """
