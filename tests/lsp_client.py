"""A language-server client for the tests: JSON-RPC over the pipes of a `devfix server` process.

It speaks the protocol itself (`Content-Length` framing, requests, notifications, the server's
own requests answered with null), so the tests see the server as an editor does. Positions are
UTF-16 code units, the protocol's default.
"""

from __future__ import annotations

import itertools
import json
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

#: How long to wait for a message before the test fails (a hung server, not a speed check).
PATIENCE = 120.0

Message = dict[str, Any]


class LspClient:
    def __init__(self, args: Sequence[str] = (), *, cwd: Path) -> None:
        # closed by close(), which ends the session
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "devfix", "server", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            cwd=cwd,
        )
        self.ids = itertools.count(1)
        self.inbox: queue.Queue[Message | None] = queue.Queue()
        self.seen: list[Message] = []
        self.responses: dict[int, Message] = {}
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    # -- the wire -------------------------------------------------------------------------------

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            message = _read_message(stream)
            self.inbox.put(message)
            if message is None:
                return

    def send(self, message: Message) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        stdin.flush()

    def _next(self) -> Message:
        try:
            message = self.inbox.get(timeout=PATIENCE)
        except queue.Empty:
            raise AssertionError(
                f"the server said nothing more; stderr:\n{self.errors()}"
            ) from None
        if message is None:
            raise AssertionError(f"the server closed its output; stderr:\n{self.errors()}")
        if "method" in message and "id" in message:  # a request of the server's
            self.send({"id": message["id"], "result": None})
        if "method" in message:
            self.seen.append(message)
        elif "id" in message:
            self.responses[message["id"]] = message
        return message

    def errors(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace")

    # -- requests and notifications -------------------------------------------------------------

    def request(self, method: str, params: Any) -> Any:
        number = next(self.ids)
        self.send({"id": number, "method": method, "params": params})
        while number not in self.responses:
            self._next()
        response = self.responses.pop(number)
        assert "error" not in response, response["error"]
        return response.get("result")

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    def wait_for(self, method: str, test: Callable[[Any], bool] = lambda params: True) -> Any:
        """The params of the first notification `method` (since the last wait) that pass `test`."""
        while True:
            for index, message in enumerate(self.seen):
                if message["method"] == method and test(message.get("params")):
                    del self.seen[: index + 1]
                    return message.get("params")
            self._next()

    def diagnostics(self, uri: str, version: int | None = None) -> list[dict[str, Any]]:
        """The next diagnostics published for `uri` (for `version` of it, if given)."""

        def wanted(params: Any) -> bool:
            return bool(
                params["uri"] == uri and (version is None or params.get("version") == version)
            )

        return list(self.wait_for("textDocument/publishDiagnostics", wanted)["diagnostics"])

    # -- a session ------------------------------------------------------------------------------

    def initialize(self, root: Path, *, resolve_edits: bool = False) -> Any:
        code_action: dict[str, Any] = {
            "codeActionLiteralSupport": {
                "codeActionKind": {"valueSet": ["quickfix", "source", "source.fixAll"]}
            },
            "isPreferredSupport": True,
            "dataSupport": True,
        }
        if resolve_edits:
            code_action["resolveSupport"] = {"properties": ["edit"]}
        capabilities = {
            "textDocument": {
                "synchronization": {"didSave": True},
                "publishDiagnostics": {"versionSupport": True, "codeDescriptionSupport": True},
                "codeAction": code_action,
            },
            "notebookDocument": {"synchronization": {}},
            "workspace": {"workspaceEdit": {"documentChanges": False}},
        }
        result = self.request(
            "initialize",
            {
                "processId": None,
                "rootUri": root.as_uri(),
                "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
                "capabilities": capabilities,
            },
        )
        self.notify("initialized", {})
        return result

    def open(self, path: Path, text: str | None = None, version: int = 1) -> str:
        uri = path.as_uri()
        self.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": uri,
                    "languageId": "python",
                    "version": version,
                    "text": path.read_text(encoding="utf-8") if text is None else text,
                }
            },
        )
        return uri

    def code_actions(
        self, uri: str, diagnostic: dict[str, Any], only: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        context: dict[str, Any] = {"diagnostics": [diagnostic]}
        if only is not None:
            context["only"] = list(only)
        params = {"textDocument": {"uri": uri}, "range": diagnostic["range"], "context": context}
        return list(self.request("textDocument/codeAction", params) or [])

    def close(self) -> int:
        """Shut the server down; its exit status."""
        try:
            self.request("shutdown", None)
            self.notify("exit", None)
            return self.process.wait(timeout=PATIENCE)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                if stream is not None:
                    stream.close()
            self.stderr.close()


def _read_message(stream: BinaryIO) -> Message | None:
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("ascii").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    if length is None:
        return None
    body = stream.read(length)
    message: Message = json.loads(body.decode("utf-8"))
    return message


def offset(text: str, position: dict[str, int]) -> int:
    """The index in `text` of an LSP position (a line, and UTF-16 code units into it)."""
    lines = text.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: position["line"]])
    line = lines[position["line"]] if position["line"] < len(lines) else ""
    units = 0
    for index, char in enumerate(line):
        if units >= position["character"]:
            return start + index
        units += 2 if ord(char) > 0xFFFF else 1
    return start + len(line)


def apply_edits(text: str, edits: Sequence[dict[str, Any]]) -> str:
    """`text` with LSP text edits applied (they do not overlap; applied from the end)."""
    spans = sorted(
        (
            (offset(text, e["range"]["start"]), offset(text, e["range"]["end"]), e["newText"])
            for e in edits
        ),
        reverse=True,
    )
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def apply_workspace_edit(texts: dict[str, str], edit: dict[str, Any]) -> dict[str, str]:
    """The documents' texts (by URI) once a workspace edit's `changes` are applied."""
    result = dict(texts)
    for uri, edits in (edit.get("changes") or {}).items():
        result[uri] = apply_edits(result[uri], edits)
    return result
