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

import ast
import bisect
import contextlib
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
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
    ) -> None:
        self._spans = spans
        self._line_starts = [0, *(match.end() for match in _NEWLINE.finditer(code))]

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


class StatementRanges(NodeRanges):
    """Ranges recorded one module-level statement at a time, on first use: a file whose
    findings lie in two functions generates those two, not the whole file.

    Where each module-level statement starts in the file's text comes from Python's own parse
    of that text (the line of its first token) less its leading lines; the code generated for
    a statement is checked against the text at that place, and anything that does not match,
    or lies outside the statements, is answered from the whole file's generation instead.
    """

    def __init__(
        self,
        module: cst.Module,
        code: str,
        statement_of: Callable[[cst.CSTNode], cst.CSTNode | None],
    ) -> None:
        self._recorded_spans: dict[int, tuple[int, int]] = {}
        super().__init__(self._recorded_spans, code)
        self._module = module
        self._code = code
        self._statement_of = statement_of
        self._statement_starts: dict[int, int] | None = None
        self._recorded: set[int] = set()
        self._whole: NodeRanges | None = None

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        if not self._record_statement_of(node):
            return self._whole_file()[node]
        return super().__getitem__(node)

    def _whole_file(self) -> NodeRanges:
        if self._whole is None:
            self._whole = node_ranges(self._module)
        return self._whole

    def _record_statement_of(self, node: cst.CSTNode) -> bool:
        """Whether `node`'s range is known from its own module-level statement."""
        if id(node) in self._spans:
            return True
        if self._whole is not None:
            return False
        statement = self._statement_of(node)
        if statement is None or id(statement) in self._recorded:
            return False
        self._recorded.add(id(statement))
        start = self._starts().get(id(statement))
        if start is None:
            return False
        recorder = _OffsetRecorder(
            default_indent=self._module.default_indent,
            default_newline=self._module.default_newline,
            offset=start,
        )
        statement._codegen(recorder)
        generated = "".join(recorder.tokens)
        if self._code[start : start + len(generated)] != generated:
            return False
        self._recorded_spans.update(recorder.spans)
        return id(node) in self._spans

    def _starts(self) -> dict[int, int]:
        if self._statement_starts is None:
            self._statement_starts = _statement_starts(self._module, self._code, self._line_starts)
        return self._statement_starts


def _statement_starts(module: cst.Module, code: str, line_starts: list[int]) -> dict[int, int]:
    """id of each module-level statement -> where its code (leading lines included) starts
    in `code`; empty where Python's parse and the module's statements do not pair up."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parsed = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    body = parsed.body
    starts: dict[int, int] = {}
    index = 0
    for statement in module.body:
        if index >= len(body):
            return {}
        first = body[index]
        line = first.lineno
        if isinstance(first, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            line = min([line, *(decorator.lineno for decorator in first.decorator_list)])
        if line > len(line_starts):
            return {}
        leading = code_of(module, statement.leading_lines)
        starts[id(statement)] = line_starts[line - 1] - len(leading)
        index += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
    return starts if index == len(body) else {}


def node_ranges(
    module: cst.Module,
    text: str | None = None,
    statement_of: Callable[[cst.CSTNode], cst.CSTNode | None] | None = None,
) -> NodeRanges:
    """Every node's range in `module`; with the file's `text` and a way to find a node's
    module-level statement, recorded one statement at a time as nodes are asked for."""
    if CodegenState is not None and text is not None and statement_of is not None:
        return StatementRanges(module, text, statement_of)
    if CodegenState is not None:
        try:
            recorder = _OffsetRecorder(
                default_indent=module.default_indent, default_newline=module.default_newline
            )
            module._codegen(recorder)
            # Ranges are counted before the module drops its trailing newline (as libcst does).
            code = "".join(recorder.tokens) + recorder.popped
            return NodeRanges(recorder.spans, code)
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

        def record_syntactic_position(  # type: ignore[override]
            self,
            node: cst.CSTNode,
            *,
            start_node: cst.CSTNode | None = None,
            end_node: cst.CSTNode | None = None,
        ) -> _SyntacticSpan:
            return _SyntacticSpan(self, node, start_node, end_node)

    class _SyntacticSpan:
        """Records the part of a node's code that is the node itself (a statement without its
        leading lines). A plain object: a generator-based context manager, entered for every
        statement and most expressions, costs several times more."""

        __slots__ = ("end_node", "node", "recorder", "start", "start_node")

        def __init__(
            self,
            recorder: _OffsetRecorder,
            node: cst.CSTNode,
            start_node: cst.CSTNode | None,
            end_node: cst.CSTNode | None,
        ) -> None:
            self.recorder = recorder
            self.node = node
            self.start_node = start_node
            self.end_node = end_node
            self.start = recorder.offset

        def __enter__(self) -> None:
            return None

        def __exit__(self, *exc: object) -> None:
            spans = self.recorder.spans
            start = self.start if self.start_node is None else spans[id(self.start_node)][0]
            end = self.recorder.offset if self.end_node is None else spans[id(self.end_node)][1]
            spans[id(self.node)] = (start, end)

    class _PlainCodegen(CodegenState):
        """libcst's code generation without its position bookkeeping."""

        def record_syntactic_position(  # type: ignore[override]
            self,
            node: cst.CSTNode,
            *,
            start_node: cst.CSTNode | None = None,
            end_node: cst.CSTNode | None = None,
        ) -> contextlib.nullcontext[None]:
            return _NO_RECORD


_NO_RECORD: contextlib.nullcontext[None] = contextlib.nullcontext()


def module_code(module: cst.Module) -> str:
    """`module.code`, generated without libcst's per-node position bookkeeping (about half the
    time of a whole file's generation)."""
    return code_of(module, [module])


def code_of(module: cst.Module, nodes: Sequence[cst.CSTNode], indents: Sequence[str] = ()) -> str:
    """The code of `nodes` as `module` writes them inside blocks indented by `indents` (the
    module itself: its whole code), without libcst's position bookkeeping."""
    if CodegenState is None:  # pragma: no cover - libcst's internals changed
        if indents:
            raise ValueError("indented code needs libcst's CodegenState")
        return "".join(module.code_for_node(node) for node in nodes)
    state = _PlainCodegen(
        default_indent=module.default_indent, default_newline=module.default_newline
    )
    for indent in indents:
        state.increase_indent(indent)
    for node in nodes:
        node._codegen(state)
    return "".join(state.tokens)
