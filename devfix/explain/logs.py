"""Reading a pasted traceback or log: its frames, the error, and what the error says.

A log is whatever a user copies from a terminal, a CI job or a notebook: Python tracebacks
(``File "x.py", line 3, in f``), IPython's (``Cell In[3], line 5``, ``<ipython-input-3-...>``,
``File /path/x.py:12, in f(a)``), chained tracebacks, DataParallel's ``Original Traceback``,
lines prefixed by ``torchrun`` (``[rank0]:``) or by CI timestamps, and colour codes. Nothing
here reads a source file or imports torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from devfix.vgpu.diagnose import devices_in, is_device_mismatch

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: what CI systems and launchers put before each line of a program's output
_PREFIX = re.compile(
    r"^(?:\d{4}-\d\d-\d\d[T ][\d:.,]+Z?\s+|\[(?:rank|default)\d+\]:\s?|\s*\d+\s*\|\s)+"
)
_TRACEBACK = re.compile(r"(?:^|\s)Traceback \(most recent call last\)")
#: `File "path", line N, in name` (Python) and `File path:N, in name(args)` (IPython 8)
_PY_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?$')
_IPY_FILE = re.compile(r"^\s*File (?P<path>[^\s\"].*?):(?P<line>\d+)(?:, in (?P<func>.+))?$")
#: `Cell In[3], line 5` (IPython 8) and `<ipython-input-3-6d1c...> in <module>` (older)
_IPY_CELL = re.compile(
    r"^\s*Cell In\s?\[(?P<count>\d*)\], line (?P<line>\d+)(?:, in (?P<func>.+))?$"
)
_IPY_INPUT = re.compile(r"^\s*<ipython-input-(?P<count>\d+)-[0-9a-f]+> in (?P<func>.+)$")
#: an old IPython library frame: `/path/to/module.py in _call_impl(self, *input)`
_IPY_OLD_FILE = re.compile(r"^\s*(?P<path>(?:/|~|[A-Za-z]:\\)\S+\.py) in (?P<func>.+)$")
#: IPython's context lines: `----> 5 y = model(x)` marks the frame's line, `      4 x = 1` others
_ARROW = re.compile(r"^\s*-+>\s*(?P<line>\d+)\s?(?P<code>.*)$")
_CONTEXT = re.compile(r"^\s*(?P<line>\d+)\s(?P<code>.*)$")
_ERROR = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt|Exit)\w*)(?::\s?(?P<message>.*))?$"
)
_CHAIN = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)


@dataclass(frozen=True)
class Frame:
    """One frame of a traceback, as the log shows it."""

    #: the file as the log names it (``/home/u/proj/train.py``), or the notebook cell
    #: (``Cell In[3]``) for a notebook frame
    path: str
    line: int
    function: str = ""
    #: the line of code the log shows for the frame (stripped), if any
    code: str = ""
    #: the execution count of a notebook cell frame (``In[3]``), else None
    cell: int | None = None

    @property
    def is_notebook_cell(self) -> bool:
        return self.cell is not None or self.path.startswith(("Cell In", "<ipython-input"))


@dataclass(frozen=True)
class Traceback:
    """One traceback of the log: its frames, innermost last, and the error it ended in."""

    frames: tuple[Frame, ...]
    error_type: str
    message: str

    @property
    def error(self) -> str:
        return f"{self.error_type}: {self.message}" if self.message else self.error_type


@dataclass(frozen=True)
class Mismatch:
    """What a device error's message says: the devices, and the operand it names."""

    #: which of PyTorch's texts it is: ``two-devices`` ("found at least two devices, cuda:1
    #: and cuda:0!"), ``argument`` ("got index is on cpu, different from other tensors on
    #: cuda:0"), or another device error (``rnn``, ``conv``, ``mask``, ``indices``, ``numpy``,
    #: ``generator``, ``metric``, ``data-parallel``, ``other``)
    form: str
    devices: tuple[str, ...]
    #: the argument of the failing op the message names (``index``), and its device
    argument: str | None = None
    argument_device: str | None = None
    #: the device of the op's other tensors, in the per-argument form
    others_device: str | None = None
    #: the failing op as the message names it (``index_select`` for
    #: ``wrapper_CUDA__index_select``), if it does
    op: str | None = None


@dataclass(frozen=True)
class Log:
    """A log's tracebacks, oldest first, and the one to explain."""

    tracebacks: tuple[Traceback, ...] = ()
    #: lines of the log that report a device error outside any traceback
    loose_errors: tuple[str, ...] = field(default=())

    def chosen(self) -> Traceback | None:
        """The traceback to explain: the last one whose error is a device mismatch (the
        innermost of DataParallel's or a chain's), else the last one."""
        for tb in reversed(self.tracebacks):
            if is_device_mismatch(tb.message):
                return tb
        return self.tracebacks[-1] if self.tracebacks else None

    def frames_for(self, chosen: Traceback) -> list[Frame]:
        """The frames of ``chosen`` and, before them, those of the tracebacks that wrap it
        (DataParallel's ``Caught RuntimeError in replica 1``, printed before it; a chained
        error raised while handling it, printed after it): the call chain, outermost first, as
        far as the log shows it."""
        index = self.tracebacks.index(chosen)
        frames: list[Frame] = []
        for tb in self.tracebacks[:index]:
            if tb.message.startswith("Caught "):
                frames.extend(tb.frames)
        for tb in self.tracebacks[index + 1 :]:
            frames.extend(tb.frames)
        frames.extend(chosen.frames)
        return frames


def clean(text: str) -> list[str]:
    """The log's lines without colour codes, launcher or CI prefixes, or trailing blanks."""
    out: list[str] = []
    for raw in _ANSI.sub("", text).splitlines():
        line = raw.rstrip()
        match = _PREFIX.match(line)
        if match is not None and match.end() > 0:
            line = line[match.end() :]
        out.append(line)
    return out


def parse(text: str) -> Log:
    """Every traceback of ``text``."""
    lines = clean(text)
    tracebacks: list[Traceback] = []
    loose: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if _TRACEBACK.search(line) or _frame_header(line) is not None:
            tb, i = _read_traceback(lines, i)
            if tb is not None:
                tracebacks.append(tb)
            continue
        if is_device_mismatch(line):
            loose.append(line.strip())
        i += 1
    # DataParallel's and torch's wrapping errors are parsed as one traceback each; the error
    # line of the wrapper ("Caught RuntimeError in replica 1") ends the outer traceback.
    return Log(tuple(tracebacks), tuple(loose))


def _frame_header(line: str) -> tuple[str, int, str, int | None] | None:
    """(path, line, function, notebook cell count) of a frame's first line, else None."""
    match = _PY_FRAME.match(line)
    if match is not None:
        path = match.group("path")
        cell = _cell_count(path)
        return path, int(match.group("line")), (match.group("func") or "").strip(), cell
    match = _IPY_CELL.match(line)
    if match is not None:
        count = match.group("count")
        return (
            f"Cell In[{count}]",
            int(match.group("line")),
            (match.group("func") or "").strip(),
            int(count) if count else None,
        )
    match = _IPY_INPUT.match(line)
    if match is not None:
        count = int(match.group("count"))
        return f"<ipython-input-{count}>", 0, match.group("func").strip(), count
    match = _IPY_FILE.match(line)
    if match is not None:
        return (
            match.group("path"),
            int(match.group("line")),
            (match.group("func") or "").strip(),
            None,
        )
    match = _IPY_OLD_FILE.match(line)
    if match is not None:
        return match.group("path"), 0, match.group("func").strip(), None
    return None


def _cell_count(path: str) -> int | None:
    """The execution count in an IPython cell's file name (``<ipython-input-3-ab12>``)."""
    match = re.match(r"<ipython-input-(\d+)-", path)
    return int(match.group(1)) if match is not None else None


def _read_traceback(lines: list[str], start: int) -> tuple[Traceback | None, int]:
    """The traceback that starts at ``lines[start]``, and the index after it."""
    i = start
    if _TRACEBACK.search(lines[i]):
        i += 1
    frames: list[Frame] = []
    while i < len(lines):
        line = lines[i]
        header = _frame_header(line)
        if header is not None:
            path, number, function, cell = header
            ipython = _PY_FRAME.match(line) is None
            i += 1
            code = ""
            arrow: int | None = None
            # the frame's code: Python's next indented line, or IPython's `---->` line
            while i < len(lines) and _frame_header(lines[i]) is None:
                body = lines[i]
                if not body.strip():
                    if not _more_frames(lines, i):
                        break
                    i += 1
                    continue
                marked = _ARROW.match(body) if ipython else None
                if marked is not None:
                    arrow = int(marked.group("line"))
                    code = marked.group("code").strip()
                    i += 1
                    continue
                if ipython and (_CONTEXT.match(body) or body.strip() == "..."):
                    i += 1
                    continue
                if body.startswith((" ", "\t")) and not ipython:
                    stripped = body.strip()
                    if not code and not set(stripped) <= set("^~ "):
                        code = stripped
                    i += 1
                    continue
                break
            if number == 0 and arrow is not None:
                number = arrow
            frames.append(Frame(path, number, function, code, cell))
            continue
        if not line.strip() or set(line.strip()) <= set("-"):
            i += 1
            continue
        stripped = line.strip()
        match = _ERROR.match(stripped)
        if match is not None or (frames and not line.startswith(" ")):
            error_type = match.group("type") if match is not None else ""
            message = (match.group("message") or "") if match is not None else stripped
            if match is None and ":" in stripped:
                error_type, message = (part.strip() for part in stripped.split(":", 1))
            # IPython's header line: `RuntimeError    Traceback (most recent call last)`
            i += 1
            extra: list[str] = []
            while (
                i < len(lines)
                and lines[i].strip()
                and not _TRACEBACK.search(lines[i])
                and _frame_header(lines[i]) is None
                and not lines[i].startswith(_CHAIN)
                and len(extra) < 20
            ):
                extra.append(lines[i].strip())
                i += 1
            if not is_device_mismatch(message):
                found = next((e for e in extra if is_device_mismatch(e)), None)
                if found is not None:
                    message = f"{message} {found}".strip()
            return Traceback(tuple(frames), error_type, message.strip()), i
        if _IPY_HEADER.match(stripped):
            i += 1
            continue
        break
    if frames:
        return Traceback(tuple(frames), "", ""), i
    return None, max(i, start + 1)


_IPY_HEADER = re.compile(r"^\S+\s+Traceback \(most recent call last\)")


def _more_frames(lines: list[str], i: int) -> bool:
    """Whether, after the blank lines at ``i``, the traceback goes on (IPython leaves blank
    lines between frames and before the error)."""
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i >= len(lines):
        return False
    return _frame_header(lines[i]) is not None or _ERROR.match(lines[i]) is not None


# --------------------------------------------------------------------------------------------
# What a device error's message says.

_TWO_DEVICES = re.compile(r"found at least two devices, (?P<a>[\w:]+) and (?P<b>[\w:]+)!?")
_ARGUMENT = re.compile(
    r"but got (?P<arg>[\w.\[\]]+) is on (?P<dev>[\w:]+), different from other tensors on "
    r"(?P<others>[\w:]+)"
)
_CHECKING = re.compile(
    r"\(when checking arguments? (?:for argument (?P<arg>[\w.\[\]]+) )?in method "
    r"(?P<method>[\w.]+)\)"
)
_MASK = re.compile(
    r"but got (?P<arg>\w+) on (?P<dev>[\w:]+) and (?P<other>\w+) on (?P<odev>[\w:]+)"
)
_RNN = re.compile(r"found input tensor at (?P<a>[\w:]+) and hidden tensor at (?P<b>[\w:]+)")
_OLD_ARGUMENT = re.compile(
    r"Tensor for argument #\d+ '(?P<arg>\w+)' is on (?P<dev>CPU|GPU)"
    r"|for argument #\d+ '(?P<arg2>\w+)'"
)


def mismatch(message: str) -> Mismatch | None:
    """What the message of a device error says; None when it is no device error."""
    if not is_device_mismatch(message) and "device" not in message.lower():
        return None
    checking = _CHECKING.search(message)
    op = _op_of(checking.group("method")) if checking is not None else None
    argument = _ARGUMENT.search(message)
    if argument is not None:
        devices = tuple(dict.fromkeys((argument.group("others"), argument.group("dev"))))
        return Mismatch(
            "argument",
            devices,
            argument.group("arg"),
            argument.group("dev"),
            argument.group("others"),
            op,
        )
    two = _TWO_DEVICES.search(message)
    if two is not None:
        arg = checking.group("arg") if checking is not None else None
        return Mismatch("two-devices", (two.group("a"), two.group("b")), argument=arg, op=op)
    rnn = _RNN.search(message)
    if rnn is not None:
        return Mismatch(
            "rnn", (rnn.group("a"), rnn.group("b")), "hx", rnn.group("b"), rnn.group("a")
        )
    masked = _MASK.search(message)
    if masked is not None:
        return Mismatch(
            "mask",
            (masked.group("odev"), masked.group("dev")),
            masked.group("arg"),
            masked.group("dev"),
            masked.group("odev"),
        )
    devices = tuple(devices_in(message))
    if "weight type" in message and "Input type" in message:
        return Mismatch("conv", devices or ("cpu", "cuda"), "input")
    if "indices should be either on cpu" in message:
        return Mismatch("indices", devices, "indices")
    if "device type tensor to numpy" in message:
        return Mismatch("numpy", devices)
    if "device type for generator" in message:
        return Mismatch("generator", devices, "generator")
    if "different devices in metric calculation" in message:
        return Mismatch("metric", devices)
    if "module must have its parameters and buffers on device" in message:
        return Mismatch("data-parallel", devices)
    old = _OLD_ARGUMENT.search(message)
    if old is not None:
        return Mismatch("other", devices, old.group("arg") or old.group("arg2"))
    if is_device_mismatch(message):
        return Mismatch("other", devices)
    return None


def _op_of(method: str) -> str:
    """``index_select`` for ``wrapper_CUDA__index_select``, ``addmm`` for ``wrapper_addmm``."""
    name = re.sub(r"^wrapper_(?:CUDA_|CPU_|CompositeImplicitAutograd_)?_*", "", method)
    return name or method
