"""Line and column ranges of a module's nodes, from one code generation pass.

libcst's PositionProvider gives the same ranges, but resolving it through a MetadataWrapper
first walks the whole tree (rebuilding every node) and then splits every generated token on
newlines to keep a line and column up to date. Here code generation records character
offsets only; lines and columns come from those and the generated text's line starts, for
the few nodes a run reports. tests/test_positions.py holds the ranges equal to
PositionProvider's for every node of the goldens.

The recorder plugs into libcst's code generation (`CodegenState`, the hooks its nodes call);
if a libcst release changes that, :func:`node_ranges` falls back to PositionProvider.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

try:
    from libcst._nodes.internal import CodegenState as CodegenState
except ImportError:  # pragma: no cover - a libcst without this module: use PositionProvider
    CodegenState = None  # type: ignore[assignment,misc]

#: What libcst counts as a line break when it tracks positions.
_NEWLINE = re.compile(r"\r\n?|\n")


class NodeRanges:
    """The range of each node of one module, as PositionProvider would give it."""

    def __init__(
        self,
        spans: Mapping[int, tuple[int, int]],
        code: str,
        code_starts: Mapping[int, int] | None = None,
    ) -> None:
        self._spans = spans
        self._code_starts = code_starts or {}
        self._line_starts = [0, *(match.end() for match in _NEWLINE.finditer(code))]

    def code_start(self, node: cst.CSTNode) -> int | None:
        """Character offset where `node`'s own code starts, leading lines and decorators
        included (where a statement's range starts later); None when not known."""
        start = self._code_starts.get(id(node))
        if start is not None:
            return start
        span = self._spans.get(id(node))
        return span[0] if span is not None else None

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        start, end = self._spans[id(node)]
        return CodeRange(self._position(start), self._position(end))

    def _position(self, offset: int) -> CodePosition:
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return CodePosition(line + 1, offset - self._line_starts[line])


class _ProviderRanges(NodeRanges):
    """PositionProvider's own table, behind the same lookup."""

    def __init__(self, table: Mapping[cst.CSTNode, CodeRange]) -> None:
        self._table = table

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        return self._table[node]

    def code_start(self, node: cst.CSTNode) -> int | None:
        return None


def node_ranges(module: cst.Module) -> NodeRanges:
    """Every node's range in `module`."""
    if CodegenState is not None:
        try:
            recorder = _OffsetRecorder(
                default_indent=module.default_indent, default_newline=module.default_newline
            )
            module._codegen(recorder)
            # Ranges are counted before the module drops its trailing newline (as libcst does).
            code = "".join(recorder.tokens) + recorder.popped
            return NodeRanges(recorder.spans, code, recorder.code_starts)
        except (AttributeError, TypeError):  # pragma: no cover - libcst's internals changed
            pass
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    return _ProviderRanges(wrapper.resolve(PositionProvider))


if CodegenState is not None:

    @dataclass
    class _OffsetRecorder(CodegenState):
        """Code generation that records each node's (start, end) character offsets, with
        PositionProvider's rules: a node's range is what its code generation emits, narrowed
        where the node marks its syntactic part (a statement without its leading lines)."""

        offset: int = 0
        spans: dict[int, tuple[int, int]] = field(default_factory=dict)
        starts: list[int] = field(default_factory=list)
        #: Where the code of a node whose range is narrowed (a statement) starts.
        code_starts: dict[int, int] = field(default_factory=dict)
        popped: str = ""

        def add_indent_tokens(self) -> None:
            self.tokens.extend(self.indent_tokens)
            for token in self.indent_tokens:
                self.offset += len(token)

        def add_token(self, value: str) -> None:
            self.tokens.append(value)
            self.offset += len(value)

        def pop_trailing_newline(self) -> None:
            if self.tokens:
                self.popped = self.tokens.pop()

        def before_codegen(self, node: cst.CSTNode) -> None:
            self.starts.append(self.offset)

        def after_codegen(self, node: cst.CSTNode) -> None:
            start = self.starts.pop()
            # A syntactic range recorded while the node generated its code wins.
            self.spans.setdefault(id(node), (start, self.offset))

        @contextmanager
        def record_syntactic_position(
            self,
            node: cst.CSTNode,
            *,
            start_node: cst.CSTNode | None = None,
            end_node: cst.CSTNode | None = None,
        ) -> Iterator[None]:
            start = self.offset
            # The node's code generation began at the top of the stack (its before_codegen).
            self.code_starts[id(node)] = self.starts[-1]
            try:
                yield
            finally:
                end = self.offset
                if start_node is not None:
                    start = self.spans[id(start_node)][0]
                if end_node is not None:
                    end = self.spans[id(end_node)][1]
                self.spans[id(node)] = (start, end)
