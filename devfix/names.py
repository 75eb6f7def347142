"""File names as devfix prints them in text output: escaped as git escapes them.

A file name may hold anything but `/` and NUL: a newline would split a report line in two, an
ANSI escape sequence would recolour or erase the terminal (and `click` strips such sequences
when the output is not a terminal, so the name printed would not be the file's). Like git
(`core.quotePath=false`), a name with a control character, a double quote, a backslash or bytes
that are not UTF-8 is printed in double quotes with C escapes (`"a\\033[31m.py"`, `"\\377.py"`);
characters no terminal should interpret (C1 controls, zero-width marks) are escaped as their
UTF-8 bytes; every other name, non-ASCII letters included, is printed as it is.
"""

from __future__ import annotations

import os

_NAMED = {0x07: "a", 0x08: "b", 0x09: "t", 0x0A: "n", 0x0B: "v", 0x0C: "f", 0x0D: "r"}


def shown(path: str) -> str:
    """`path` for a line of text output (see the module's documentation)."""
    if path.isprintable() and '"' not in path and "\\" not in path:
        return path  # the usual case; a name with a byte that is not UTF-8 is not printable
    out: list[str] = []
    for character in os.fsencode(path).decode("utf-8", "surrogateescape"):
        code = ord(character)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8
            out.append(f"\\{code - 0xDC00:03o}")
        elif character in '"\\':
            out.append("\\" + character)
        elif code < 0x20 or code == 0x7F:
            out.append("\\" + _NAMED.get(code, f"{code:03o}"))
        elif not character.isprintable():  # C1 controls (U+009B starts an escape), format marks
            out.extend(f"\\{byte:03o}" for byte in character.encode("utf-8"))
        else:
            out.append(character)
    return '"' + "".join(out) + '"'


def one_line(text: str) -> str:
    """`text` (a message, a reason) for one line of text output: control characters and marks no
    terminal should interpret escaped as Python writes them (`\\n`, `\\x1b`), the rest kept."""
    if text.isprintable():
        return text
    return "".join(
        character if character.isprintable() else ascii(character)[1:-1] for character in text
    )


def headline(message: str) -> str:
    """What a finding's message says before its first top-level `; ` (outside backticks,
    quotes and brackets): the problem and why, without the advice that follows. The whole
    message when it has no such part."""
    depth = 0
    quote = ""
    for index, character in enumerate(message):
        if quote:
            if character == quote:
                quote = ""
        elif character in "`'\"" and not (
            character == "'" and message[index - 1 : index].isalpha()  # an apostrophe: `model's`
        ):
            quote = character
        elif character in "([{":
            depth += 1
        elif character in ")]}":
            depth = max(depth - 1, 0)
        elif character == ";" and depth == 0 and message[index + 1 : index + 2] == " ":
            return message[:index]
    return message
