"""Parsing a file's code: libcst's tree, refused where Python itself refuses the code.

Errors are :class:`InputError` with Python's own account of the problem (clearer positions than
libcst's). Deeply nested code is parsed and walked under a raised recursion limit.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

import libcst as cst

from devfix import indentation, limits
from devfix.errors import InputError, MixedIndentation


def parse(text: str, path: str) -> cst.Module:
    # Cheap refusals first (devfix.limits): libcst can crash or take minutes on what they catch.
    limits.check_parsable(text)
    _reject_what_python_rejects(text, path)
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        mixed = indentation.first_mixed_line(text)
        if mixed is not None:
            raise MixedIndentation(
                f"indents with tabs and spaces mixed (line {mixed}), which libcst cannot read"
            ) from None
        raise InputError(_describe_syntax_error(text, path, error)) from None
    except RecursionError:
        raise InputError("nested too deeply to parse") from None
    return module


def _reject_what_python_rejects(text: str, path: str) -> None:
    """libcst accepts some code Python 3 does not (`except E, e:`); such a file is not rewritten."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        raise InputError(
            f"does not parse (line {error.lineno}, column {error.offset}): {error.msg}"
        ) from None
    except (ValueError, RecursionError):
        raise InputError("nested too deeply to parse") from None


def _describe_syntax_error(text: str, path: str, error: cst.ParserSyntaxError) -> str:
    """Python's own account of the error when it has one (clearer positions than libcst's)."""
    try:
        compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as python_error:
        return (
            f"does not parse (line {python_error.lineno}, column {python_error.offset}): "
            f"{python_error.msg}"
        )
    except (ValueError, RecursionError, MemoryError):
        pass
    return (
        f"does not parse (line {error.raw_line}, column {error.raw_column + 1}): "
        f"{error.message.splitlines()[0]}"
    )


@contextlib.contextmanager
def deep_recursion() -> Iterator[None]:
    """Let libcst's recursive visitors walk deeply nested code (long `+` chains of strings).

    Since Python 3.11, Python-to-Python calls no longer use the C stack, so a high limit is
    safe there; older interpreters keep a modest one.
    """
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, 20_000 if sys.version_info >= (3, 11) else 4_000))
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


F = TypeVar("F", bound=Callable[..., Any])


def with_deep_recursion(function: F) -> F:
    """Run `function` under :func:`deep_recursion` (parse, passes, rewrite and code output)."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with deep_recursion():
            return function(*args, **kwargs)

    return cast(F, wrapper)
