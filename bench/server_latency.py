"""Latency of `devfix server`: a change to a 1,000-line file, to its diagnostics (target: 300 ms).

Starts the server over stdio with the tests' client (tests/lsp_client.py), opens a 1,000-line
Python file, then sends single-line edits one at a time and times each from the `didChange`
to the `publishDiagnostics` of that version. Three cases:

* open: the first analysis of the file;
* change: an edit that gives text never seen before (the document is analysed again);
* undo: an edit back to text seen before (the result cache answers).

The file is the first top-level statements of torch's `torch/nn/modules/transformer.py` (real
model code) up to 1,000 lines with the Encoder of examples/tensor_factory_without_device.py
appended (one DF101 finding), or `--file FILE`.

    python bench/server_latency.py               # 30 changes
    python bench/server_latency.py --changes 100 --file my_model.py
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.lsp_client import LspClient  # noqa: E402

LINES = 1000


def thousand_lines() -> str:
    """Real model code cut at a top-level statement, topped up to 1,000 lines."""
    example = (ROOT / "examples" / "tensor_factory_without_device.py").read_text(encoding="utf-8")
    encoder = example[example.index("class Encoder") : example.index("def main")]
    source = Path(sysconfig.get_paths()["purelib"], "torch", "nn", "modules", "transformer.py")
    text = source.read_text(encoding="utf-8")
    room = LINES - encoder.count("\n") - 2
    ends = [node.end_lineno or 0 for node in ast.parse(text).body]
    cut = max(end for end in ends if end <= room)
    head = "".join(text.splitlines(keepends=True)[:cut])
    body = head + "\n\n" + encoder
    return body + "#\n" * (LINES - body.count("\n"))


def timed_change(client: LspClient, uri: str, version: int, text: str) -> float:
    started = time.perf_counter()
    client.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
    )
    client.diagnostics(uri, version=version)
    return time.perf_counter() - started


def summary(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
    return (
        f"{name:7} n={len(ms):3}  median {statistics.median(ms):6.0f} ms  p90 {p90:6.0f} ms  "
        f"max {ms[-1]:6.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=30)
    parser.add_argument("--file", type=Path, help="the file to edit (default: see above)")
    arguments = parser.parse_args()
    text = arguments.file.read_text(encoding="utf-8") if arguments.file else thousand_lines()
    lines = text.splitlines(keepends=True)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        (folder / "pyproject.toml").write_text("[project]\nname = 'bench'\n", encoding="utf-8")
        path = folder / "model.py"
        path.write_text(text, encoding="utf-8")
        client = LspClient(cwd=folder)
        client.initialize(folder)
        started = time.perf_counter()
        uri = client.open(path)
        found = client.diagnostics(uri, version=1)
        opened = time.perf_counter() - started
        changes: list[float] = []
        undos: list[float] = []
        version = 1
        for number in range(arguments.changes):
            # a new comment on a line in the middle: text the server has not seen
            edited = list(lines)
            index = len(lines) // 2
            edited[index] = edited[index].rstrip("\n") + f"  # edit {number}\n"
            version += 1
            changes.append(timed_change(client, uri, version, "".join(edited)))
            version += 1
            undos.append(timed_change(client, uri, version, text))
        client.close()
    codes = ", ".join(d["code"] for d in found)
    print(f"file: {len(lines)} lines, {len(found)} findings ({codes})")
    print(summary("open", [opened]))
    print(summary("change", changes))
    print(summary("undo", undos))


if __name__ == "__main__":
    main()
