"""What devfix refuses to parse, decided cheaply before libcst sees a text.

libcst's native parser recurses once per level of nesting: a few thousand nested brackets, or
a chain of thousands of `and`s, overflows its stack (the process dies with SIGSEGV), and well
before that its time grows with the square of the depth (a chain of 2,000 subscripts
`a[0][0]...` takes half a minute). Python itself refuses more than 200 nested brackets; long
operator chains it accepts. So every text is measured here first (:func:`nesting_depth`: the
brackets and chained operators of each statement, strings and comments skipped), and one
deeper than :data:`MAX_NESTING` levels is refused with one line.

The memory a parse needs grows with the number of tokens, not bytes (a docstring costs little,
`[1, 1, 1, ...]` a lot): :func:`estimated_memory` counts them, and a text whose parse would
need more than the budget is refused before it is parsed. The budget is also enforced on each
worker process (devfix.isolation), so a text the estimate misjudges stops with a MemoryError
in its worker, never by the system's out-of-memory killer.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from devfix.errors import InputError
from devfix.positions import module_code

if TYPE_CHECKING:
    import libcst as cst

    from devfix.types import Finding

#: Largest source devfix parses: a `.py` file this big is generated data, and parsing it would
#: take minutes and gigabytes (the largest file of torch or the standard library is 1.4 MB).
#: The code cells of a notebook count as one source.
MAX_SOURCE_BYTES = 10 * 2**20

#: Largest notebook file devfix reads: outputs (images) weigh, its code obeys MAX_SOURCE_BYTES.
MAX_NOTEBOOK_BYTES = 100 * 2**20

#: Deepest nesting devfix parses: brackets plus operator chains in one statement. libcst dies
#: near 2,000 nested brackets or 10,000 chained `and`s and needs seconds from 1,000 levels;
#: the deepest file of torch, the standard library, timm and transformers measures 67
#: (docs/robustness.md).
MAX_NESTING = 1000

#: Default memory budget of one file's parse and fixes, in MiB (`--max-memory`). The largest
#: source file of torch (1.4 MB) peaks at 1.3 GB for `apply`.
DEFAULT_MAX_MEMORY_MIB = 2048

#: Bytes one token (outside strings and comments) costs at most once parsed, analysed and
#: fixed: torch's largest file needs 6,864 for `apply`, dense generated code 2,600 to 3,600
#: (docs/robustness.md).
BYTES_PER_TOKEN = 7000

#: Default CPU seconds for one file (`--timeout-per-file`): torch's largest file needs about
#: 100 s of CPU for `apply`.
DEFAULT_TIMEOUT_SECONDS = 300.0

_STRING_OR_COMMENT = re.compile(
    r"'''(?:[^'\\]|\\.|'(?!''))*'''"
    r'|"""(?:[^"\\]|\\.|"(?!""))*"""'
    r"|'(?:[^'\\\r\n]|\\.)*'"
    r'|"(?:[^"\\\r\n]|\\.)*"'
    r"|#[^\r\n]*",
    re.DOTALL,
)
#: `and`, `or`, `not`, `if`/`else` and `await` chain; `lambda x, y:` is one link (its commas
#: and colon end no element). Each alternative starts with its letter, so that the regex engine
#: skips the other characters quickly (a leading look-behind would be tried everywhere).
_CHAINING_WORD = re.compile(
    r"l(?<![\w.]l)ambda(?!\w)[^:\n]*:"
    r"|a(?<![\w.]a)(?:nd|wait)(?!\w)"
    r"|o(?<![\w.]o)r(?!\w)"
    r"|n(?<![\w.]n)ot(?!\w)"
    r"|i(?<![\w.]i)f(?!\w)"
    r"|e(?<![\w.]e)lse(?!\w)"
)
#: A bracket right after an atom opens a call or a subscript: one more link (`f()()`, `a[0]`).
_TRAILER = re.compile(r"([(\[])(?<=[\w)\]}\x01][(\[])")
#: All but brackets, separators and operators; also `==` and the like (comparisons are flat in
#: libcst: `a < b < c` is one node) and a backslash that joins two lines (the run of other
#: characters stops before a backslash, so that the line break after it is taken with it).
_NOT_STRUCTURE = re.compile(r"[=!<>]=|\\\r?\n|\\|[^(\[{)\]},;:=\n.+\-*/%@&|^~\\]+")
_CHAIN_CHARACTERS = "([{.+-*/%@&|^~"
_CHAIN_WORDS = ("and", "or", "not", "if", "else", "lambda", "await")
_TOKEN_SHAPE = bytes(
    ord("a")
    if chr(byte).isalnum() or byte == ord("_") or byte >= 0x80  # UTF-8 letters too
    else ord(" ")
    if chr(byte).isspace()
    else ord(".")
    for byte in range(256)
)
_LONE_CR = re.compile(r"\r(?!\n)")

#: The memory budget (MiB, 0: none) of parses in this process; a worker sets its own.
memory_budget_mib = DEFAULT_MAX_MEMORY_MIB


def check_parsable(text: str) -> None:
    """Raise InputError for a text devfix will not give to libcst (too big, deep or costly)."""
    if len(text) > MAX_SOURCE_BYTES:  # characters: a notebook's cells, stdin
        raise InputError(
            f"has {len(text) / 2**20:.1f} MiB of code; devfix parses up to "
            f"{MAX_SOURCE_BYTES // 2**20} MiB"
        )
    check_memory(text, memory_budget_mib)
    check_nesting(text)


def _chain_bound(text: str) -> int:
    """An upper bound of :func:`nesting_depth` from character counts (C speed)."""
    bound = sum(map(text.count, _CHAIN_CHARACTERS)) + text.count("(") + text.count("[")
    return bound + sum(map(text.count, _CHAIN_WORDS))


def _structure(text: str) -> str:
    """`text` reduced to one character per bracket, separator and chaining operator."""
    code = _STRING_OR_COMMENT.sub("\x01", text)
    code = _CHAINING_WORD.sub("~", code)
    code = _TRAILER.sub(r".\1", code)
    return _NOT_STRUCTURE.sub("", code)


def nesting_depth(text: str, stop_at: int | None = None) -> int:
    """The deepest nesting of one statement: open brackets plus the operators chained inside
    each (`a + b + c` is 2 levels, `f(g(x))` 4: two calls, two brackets); a comma, colon or
    `=` starts a new element. Strings and comments are skipped. A text whose character counts
    show that it cannot be deeper than `stop_at` is not scanned (0 is returned)."""
    if stop_at is not None and _chain_bound(text) <= stop_at:
        return 0
    counters = [0]  # per open bracket (and the statement itself): operators chained so far
    depth = deepest = 0
    for character in _structure(text):
        if character in "([{":
            counters.append(0)
            depth += 1
        elif character in ")]}":
            if len(counters) > 1:
                depth -= 1 + counters.pop()
            continue
        elif character in ",;:=" or (character == "\n" and len(counters) == 1):
            depth -= counters[-1]
            counters[-1] = 0
            continue
        elif character == "\n":
            continue
        else:
            counters[-1] += 1
            depth += 1
        if depth > deepest:
            deepest = depth
    return deepest


def check_nesting(text: str) -> None:
    """Refuse text nested deeper than :data:`MAX_NESTING` (before libcst can crash on it)."""
    depth = nesting_depth(text, stop_at=MAX_NESTING)
    if depth > MAX_NESTING:
        raise InputError(f"too deeply nested for devfix ({depth:,} levels)")


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_JSON_BRACKET = re.compile(r"[^\[\]{}]+")
_JSON_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def check_json_nesting(text: str) -> None:
    """Refuse JSON (a notebook) nested deeper than :data:`MAX_NESTING` before it is decoded."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return
    brackets = _NOT_JSON_BRACKET.sub("", _JSON_STRING.sub("", text))
    depth = max(itertools.accumulate(map(_JSON_STEP.__getitem__, brackets)), default=0)
    if depth > MAX_NESTING:
        raise InputError(f"too deeply nested for devfix ({depth:,} levels)")


def estimated_memory(text: str) -> int:
    """Bytes a parse of `text` with the passes and fixes may need: its tokens outside strings
    and comments (runs of word characters, and each other character but spaces) times
    :data:`BYTES_PER_TOKEN`."""
    code = _STRING_OR_COMMENT.sub(" ", text).encode("utf-8", "surrogatepass")
    shape = code.translate(_TOKEN_SHAPE)  # word bytes -> "a", spaces -> " ", the rest -> "."
    tokens = shape.count(b".") + len(shape.replace(b".", b" ").split())
    return tokens * BYTES_PER_TOKEN


def check_memory(text: str, budget_mib: int) -> None:
    """Refuse text whose parse would need more than `budget_mib` MiB (0: no budget)."""
    budget = budget_mib * 2**20
    if budget <= 0 or len(text) * BYTES_PER_TOKEN <= budget:
        return  # fewer tokens than characters: cannot be over, not worth counting
    needed = estimated_memory(text)
    if needed > budget:
        raise InputError(
            f"would need about {needed / 2**20:,.0f} MiB to parse, over the memory budget of "
            f"{budget_mib:,} MiB per file (--max-memory)"
        )


def mark_unfixable(module: cst.Module, text: str, findings: Sequence[Finding]) -> list[Finding]:
    """`check` offers no fix that `apply` would refuse to write: when libcst does not give the
    text back byte for byte (a file with CR-only line endings), fixes become display-only."""
    from devfix.types import Applicability  # devfix.types takes its defaults from here

    if not any(finding.has_fix for finding in findings) or module_code(module) == text:
        return list(findings)
    reason = (
        "CR-only line endings"
        if _LONE_CR.search(text)
        else "libcst does not reproduce it byte for byte"
    )
    return [
        dataclasses.replace(
            finding,
            applicability=Applicability.DISPLAY_ONLY,
            edits=(),
            imports=(),
            text_edits=(),
            message=f"{finding.message}; devfix cannot rewrite this file ({reason})",
        )
        if finding.has_fix
        else finding
        for finding in findings
    ]
