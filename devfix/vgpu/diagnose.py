"""What ``devfix verify`` prints after the traceback of a device-mismatch death."""

from __future__ import annotations

import ast
import linecache
import os
import re
import sysconfig
import traceback
from dataclasses import dataclass
from typing import Any

#: texts by which a device-mismatch error is recognised
MISMATCH_MARKERS = (
    "Expected all tensors to be on the same device",
    "to be on the same device",
    "tensors are not at the same device",
    "should be the same or input should be a MKLDNN tensor",
    "module must have its parameters and buffers on device",
    "indices should be either on cpu or on the same device",
    "Expected tensor for argument",
)

_DEVICE_RE = re.compile(r"\b(cuda:\d+|cpu|cuda)\b")
_FILE_RE = re.compile(r'File "([^"]+)", line (\d+)')


@dataclass(frozen=True)
class UserFrame:
    path: str
    line: int
    source: str


def is_device_mismatch(message: str) -> bool:
    return any(m in message for m in MISMATCH_MARKERS)


def mismatch_line(text: str) -> str | None:
    """The last line of ``text`` that reports a device mismatch."""
    found = None
    for ln in text.splitlines():
        if is_device_mismatch(ln):
            found = ln
    return found


def devices_in(line: str) -> list[str]:
    """Devices named in an error line, in order of first appearance."""
    out: list[str] = []
    body = line.split("(when checking argument", 1)[0]
    for m in _DEVICE_RE.finditer(body):
        d = m.group(1)
        if d not in out:
            out.append(d)
    if "torch.cuda." in line and "torch.FloatTensor" in line:  # conv type form
        out = ["cpu", "cuda"]
    return out


def _library_roots() -> list[str]:
    roots = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            roots.add(os.path.realpath(p))
    roots.add(os.path.realpath(os.path.dirname(os.path.dirname(__file__))))  # devfix itself
    return sorted(roots)


def is_user_file(path: str) -> bool:
    if not path or path.startswith("<"):
        return False
    rp = os.path.realpath(path)
    if "site-packages" in rp.split(os.sep) or "dist-packages" in rp.split(os.sep):
        return False
    return not any(rp == r or rp.startswith(r + os.sep) for r in _library_roots())


def innermost_user_frame(exc: BaseException) -> UserFrame | None:
    """Innermost frame in the user's files: from the text of a wrapped traceback
    (DataParallel's ``Original Traceback``) if any, else from the exception's own."""
    cands: list[tuple[str, int]] = []
    for m in _FILE_RE.finditer(str(exc)):
        cands.append((m.group(1), int(m.group(2))))
    if not any(is_user_file(p) for p, _ in cands):
        cands = [(f.filename, f.lineno or 0) for f in traceback.extract_tb(exc.__traceback__)]
    for path, line in reversed(cands):
        if is_user_file(path):
            return UserFrame(path, line, linecache.getline(path, line).strip())
    return None


def _enclosing_function(source: str, line: int) -> tuple[str, int, int] | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    best: tuple[str, int, int] | None = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            end = getattr(node, "end_lineno", None) or node.lineno
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if start <= line <= end and (best is None or start >= best[1]):
                best = (node.name, start, end)
    return best


def findings_text(path: str, line: int) -> str | None:
    """devfix findings for the function around ``line`` (else the file), or None if the
    static engine is unavailable."""
    try:
        from devfix.engine import check_source  # type: ignore[import-not-found,unused-ignore]
    except Exception:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        findings: list[Any] = list(check_source(source, path))
    except Exception as e:
        return f"  (devfix could not check {path}: {e})\n"
    fn = _enclosing_function(source, line)
    scope = f"file {path}"
    chosen = findings
    if fn is not None:
        inner = [f for f in findings if fn[1] <= f.line <= fn[2]]
        if inner:
            chosen, scope = inner, f"function {fn[0]}()"
    if not chosen:
        return f"  devfix findings: none in {path}\n"
    lines = [f"  devfix findings in {scope}:"]
    for f in sorted(chosen, key=lambda f: (f.line, f.col)):
        fix = f" [fix: {f.fix_title}]" if getattr(f, "fix_title", None) else ""
        lines.append(f"    {path}:{f.line}:{f.col}: {f.code} {f.message}{fix}")
    lines.append(f"  to fix: devfix apply --unsafe-fixes {path}")
    return "\n".join(lines) + "\n"


def report(message: str, frame: UserFrame | None) -> str:
    line = mismatch_line(message)
    if line is None:
        return ""
    out = ["", "devfix verify: the script died of a device mismatch"]
    if frame is not None:
        out.append(f"  at {frame.path}:{frame.line}")
        out.append(f"    {frame.source}")
    devs = devices_in(line)
    if devs:
        out.append("  devices involved: " + ", ".join(devs))
    text = "\n".join(out) + "\n"
    if frame is not None:
        ft = findings_text(frame.path, frame.line)
        if ft:
            text += ft
    return text


def report_for_exception(exc: BaseException, script: str) -> str:
    msg = str(exc)
    if not is_device_mismatch(msg):
        return ""
    return report(msg, innermost_user_frame(exc))
