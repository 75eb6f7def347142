"""The fix engine: passes report findings, this module applies them.

Three layers, as in ufmt: :func:`fix_source` is pure and may raise; :func:`fix_file` turns every
error into a :class:`FileResult`; :func:`fix_paths` runs many files, in parallel.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import functools
import gc
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import libcst as cst

from devfix import isolation, limits, sources
from devfix.cache import ResultCache, content_key
from devfix.context import FileContext
from devfix.errors import InputError, InternalError
from devfix.registry import select_passes
from devfix.tree import children_of
from devfix.types import (
    Applicability,
    Edit,
    FileResult,
    FileStatus,
    Finding,
    Options,
    Replacement,
    SourceResult,
)

if TYPE_CHECKING:
    from devfix.codemods._base import DevicePass

#: Rounds of "run every pass, apply what it found"; ruff uses 100, devfix's passes converge in 2-3.
MAX_ROUNDS = 10

Accept = Callable[[Finding], bool]

_SUPPRESSION = re.compile(r"#\s*devfix:\s*ignore(?:\[(?P<rules>[^\]]*)\])?", re.IGNORECASE)


def parse(text: str, path: str) -> cst.Module:
    # Cheap refusals first (devfix.limits): libcst can crash or take minutes on what they catch.
    limits.check_parsable(text)
    _reject_what_python_rejects(text, path)
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as error:
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


def _is_suppressed(finding: Finding, lines: Sequence[str]) -> bool:
    """A `# devfix: ignore[...]` on the finding's first or last line, or alone on the line above."""
    above = finding.line - 1
    own_line_above = 0 < above <= len(lines) and lines[above - 1].lstrip().startswith("#")
    candidates = {finding.line, finding.end_line} | ({above} if own_line_above else set())
    for number in candidates:
        if not 0 < number <= len(lines):
            continue
        match = _SUPPRESSION.search(lines[number - 1])
        if match is None:
            continue
        rules = match.group("rules")
        if rules is None:
            return True
        wanted = {rule.strip().upper() for rule in rules.split(",")}
        if finding.code.upper() in wanted or finding.name.upper() in wanted:
            return True
    return False


@contextlib.contextmanager
def _deep_recursion() -> Iterator[None]:
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


def _with_deep_recursion(function: F) -> F:
    """Run `function` under :func:`_deep_recursion` (parse, passes, rewrite and code output)."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _deep_recursion():
            return function(*args, **kwargs)

    return cast(F, wrapper)


def _run_passes(module: cst.Module, text: str, path: str, options: Options) -> list[Finding]:
    context = FileContext(module, path, text)
    findings: list[Finding] = []
    checkers = [
        pass_class(context, **options.pass_options.get(pass_class.CODE, {}))
        for pass_class in _woken_passes(text, options)
    ]
    # One traversal for all passes (each full libcst traversal costs more than the parse).
    try:
        with _deep_recursion():
            if checkers:
                dispatcher = _Dispatcher(checkers)
                if dispatcher.attribute_visitors:
                    module.visit(dispatcher)  # only libcst's own traversal calls those hooks
                else:
                    dispatcher.run(module, context.children_table())
    except RecursionError:
        # libcst nests e.g. implicitly concatenated strings: thousands of pieces exceed the stack.
        raise InputError("nested too deeply to analyse") from None
    finally:
        for checker in checkers:
            findings.extend(checker.findings)
            checker.release()
        context.release()
    lines = text.splitlines()
    findings = [finding for finding in findings if not _is_suppressed(finding, lines)]
    findings.sort(key=lambda f: (f.line, f.col, f.code))
    return findings


class _Dispatcher(cst.CSTVisitor):
    """Runs several visitors in one traversal, each seeing exactly what it would see alone.

    A visitor whose visit method returns False skips that node's children (the others do not)
    and still gets the node's leave call, as in libcst's own traversal.
    """

    def __init__(self, visitors: Sequence[cst.CSTVisitor]) -> None:
        super().__init__()
        self.visitors = list(visitors)
        #: Per visitor, the node whose children it declined (None: it is visiting).
        self.skipping: list[cst.CSTNode | None] = [None] * len(self.visitors)
        #: How many entries of `skipping` are not None.
        self.skipped = 0
        self.visits: dict[type[cst.CSTNode], list[tuple[int, Callable[[cst.CSTNode], object]]]] = {}
        self.leaves: dict[type[cst.CSTNode], list[tuple[int, Callable[[cst.CSTNode], object]]]] = {}
        base_visit, base_leave = cst.CSTVisitor.on_visit, cst.CSTVisitor.on_leave
        #: Visitors that override on_visit / on_leave get them called for every node.
        self.custom = [
            type(v).on_visit is not base_visit or type(v).on_leave is not base_leave
            for v in self.visitors
        ]
        self.attribute_visitors = [
            index
            for index, visitor in enumerate(self.visitors)
            if _has_attribute_hooks(type(visitor))
        ]

    def _table(
        self,
        table: dict[type[cst.CSTNode], list[tuple[int, Callable[[cst.CSTNode], object]]]],
        prefix: str,
        kind: type[cst.CSTNode],
    ) -> list[tuple[int, Callable[[cst.CSTNode], object]]]:
        entries: list[tuple[int, Callable[[cst.CSTNode], object]]] = []
        for index, visitor in enumerate(self.visitors):
            if self.custom[index]:
                if prefix == "visit_":
                    # libcst skips the children when on_visit returns anything falsy.
                    entries.append((index, _as_bool(visitor.on_visit)))
                else:
                    entries.append((index, visitor.on_leave))
                continue
            name = prefix + kind.__name__
            # libcst's CSTVisitor declares an empty hook for every node type: calling those
            # would only cost time (twice per node).
            if getattr(type(visitor), name, None) is getattr(cst.CSTVisitor, name, None):
                continue
            entries.append((index, getattr(visitor, name)))
        table[kind] = entries
        return entries

    def on_visit(self, node: cst.CSTNode) -> bool:
        kind = type(node)
        entries = self.visits.get(kind)
        if entries is None:
            entries = self._table(self.visits, "visit_", kind)
        skipping = self.skipping
        for index, method in entries:
            if skipping[index] is None and method(node) is False:
                skipping[index] = node
                self.skipped += 1
        return self.skipped < len(skipping)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        kind = type(original_node)
        entries = self.leaves.get(kind)
        if entries is None:
            entries = self._table(self.leaves, "leave_", kind)
        skipping = self.skipping
        if self.skipped:
            for index, mark in enumerate(skipping):
                if mark is original_node:
                    skipping[index] = None
                    self.skipped -= 1
        for index, method in entries:
            if skipping[index] is None:
                method(original_node)

    def run(self, root: cst.CSTNode, children: dict[int, list[cst.CSTNode]]) -> None:
        """`root.visit(self)` over the children table, for visitors without attribute hooks.

        Most nodes (names, whitespace, operators) have no hook in any pass: they cost a lookup
        and a push of their children, not two method calls.
        """
        visits, leaves, skipping = self.visits, self.leaves, self.skipping
        total = len(skipping)
        stack: list[object] = [root]
        while stack:
            item = stack.pop()
            if item is _LEAVE:
                self.on_leave(cast(cst.CSTNode, stack.pop()))
                continue
            node = cast(cst.CSTNode, item)
            kind = type(node)
            entries = visits.get(kind)
            if entries is None:
                entries = self._table(visits, "visit_", kind)
            leave_entries = leaves.get(kind)
            if leave_entries is None:
                leave_entries = self._table(leaves, "leave_", kind)
            started = False
            for index, method in entries:
                if skipping[index] is None and method(node) is False:
                    skipping[index] = node
                    self.skipped += 1
                    started = True
            if leave_entries or started:
                stack.append(node)
                stack.append(_LEAVE)
            if self.skipped < total:
                kids = children.get(id(node))
                if kids is None:
                    kids = children_of(node)
                stack.extend(reversed(kids))

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        for index in self.attribute_visitors:
            if self.skipping[index] is None:
                self.visitors[index].on_visit_attribute(node, attribute)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        for index in self.attribute_visitors:
            if self.skipping[index] is None:
                self.visitors[index].on_leave_attribute(original_node, attribute)


#: Marks, on the traversal stack, that the node below it is being left.
_LEAVE = object()


def _as_bool(hook: Callable[[cst.CSTNode], object]) -> Callable[[cst.CSTNode], bool]:
    return lambda node: bool(hook(node))


@functools.cache
def _has_attribute_hooks(kind: type[cst.CSTVisitor]) -> bool:
    """Whether a visitor uses libcst's per-attribute hooks (`visit_Call_func` and the like)."""
    if (
        kind.on_visit_attribute is not cst.CSTVisitor.on_visit_attribute
        or kind.on_leave_attribute is not cst.CSTVisitor.on_leave_attribute
    ):
        return True
    # libcst's CSTVisitor itself declares an empty hook for every node attribute: skip those.
    return any(
        name.startswith(("visit_", "leave_"))
        and "_" in name.split("_", 1)[1]
        and getattr(kind, name) is not getattr(cst.CSTVisitor, name, None)
        for name in dir(kind)
    )


@_with_deep_recursion
def check_source(
    text: str, path: str = "<string>", options: Options | None = None
) -> list[Finding]:
    """The findings of every selected pass on `text`; nothing is applied."""
    options = options or Options()
    if not _mentions_trigger(text, options):
        return []
    module = parse(text, path)
    return limits.mark_unfixable(module, text, _run_passes(module, text, path, options))


def analyse_source(
    text: str, options: Options | None = None, *, path: str = "<string>"
) -> tuple[cst.Module | None, list[Finding]]:
    """The parsed module and the findings on it, for callers that apply findings one at a time
    with :func:`apply_findings` (interactive review). No module when no trigger word occurs."""
    options = options or Options()
    if not _mentions_trigger(text, options):
        return None, []
    module = parse(text, path)
    return module, _run_passes(module, text, path, options)


def _mentions_trigger(text: str, options: Options) -> bool:
    return bool(_woken_passes(text, options))


def _woken_passes(text: str, options: Options) -> list[type[DevicePass]]:
    searched = _SearchedText(text)
    return [cls for cls in select_passes(options.select, options.ignore) if cls.wakes_on(searched)]


class _SearchedText(str):
    """A file's text that remembers which words were looked for in it: most passes test for
    "torch", and on a file without it each test would scan the whole text again."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self._found: dict[str, bool] = {}

    def __contains__(self, word: object) -> bool:
        if not isinstance(word, str):
            return super().__contains__(word)  # type: ignore[operator]
        found = self._found.get(word)
        if found is None:
            found = self._found[word] = super().__contains__(word)
        return found


def _subtree_ids(node: cst.CSTNode) -> set[int]:
    ids = {id(node)}
    for child in node.children:
        ids |= _subtree_ids(child)
    return ids


class _Replacer(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, Replacement]) -> None:
        super().__init__()
        self.replacements = replacements

    def on_visit(self, node: cst.CSTNode) -> bool:
        return id(node) not in self.replacements

    # libcst types on_leave per node class through a TypeVar; a replacer returns any node.
    def on_leave(  # type: ignore[override]
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[cst.CSTNode]:
        return self.replacements.get(id(original_node), updated_node)


def apply_findings(
    module: cst.Module, findings: Iterable[Finding]
) -> tuple[cst.Module, list[Finding]]:
    """Apply each finding's edit group whole, skipping groups that overlap one already taken.

    Skipped groups are found again, on the rewritten code, by the next round.
    """
    claimed: set[int] = set()
    replacements: dict[int, Replacement] = {}
    applied: list[Finding] = []
    for finding in findings:
        touched: set[int] = set()
        for edit in finding.edits:
            touched |= _subtree_ids(edit.target)
        if touched & claimed:
            continue
        claimed |= touched
        replacements.update(_replacement_map(finding.edits))
        applied.append(finding)
    if not applied:
        return module, []
    rewritten = module.visit(_Replacer(replacements))
    imports = [spec for finding in applied for spec in finding.imports]
    if imports:
        # libcst.codemod pulls in libcst.matchers (over a second to import): only when needed.
        from libcst.codemod import CodemodContext
        from libcst.codemod.visitors import AddImportsVisitor, ImportItem

        context = CodemodContext()
        for spec in imports:
            AddImportsVisitor.add_needed_import(context, spec.module, spec.name, spec.alias)
        rewritten = AddImportsVisitor(
            context, [ImportItem(s.module, s.name, s.alias) for s in imports]
        ).transform_module(rewritten)
    return rewritten, applied


def _replacement_map(edits: Iterable[Edit]) -> dict[int, Replacement]:
    return {id(edit.target): edit.replacement for edit in edits}


def _wanted(finding: Finding, options: Options, accept: Accept | None) -> bool:
    if not finding.has_fix:
        return False
    if (
        finding.applicability is Applicability.UNSAFE
        and not options.unsafe_fixes
        and accept is None
    ):
        return False
    return accept(finding) if accept is not None else True


@_with_deep_recursion
def fix_source(
    text: str,
    options: Options | None = None,
    *,
    path: str = "<string>",
    accept: Accept | None = None,
) -> SourceResult:
    """Run the selected passes and apply their fixes until nothing changes.

    Raises :class:`InputError` if `text` does not parse and :class:`InternalError` if the fixes
    produce code that does not parse or keep changing it.
    """
    options = options or Options()
    if not _mentions_trigger(text, options):
        return SourceResult(text, text, (), (), 0)
    module = parse(text, path)
    findings: list[Finding] = []
    first_findings: list[Finding] | None = None
    applied_all: list[Finding] = []
    current_text, current_module = text, module
    for _round in range(MAX_ROUNDS):
        findings = _run_passes(current_module, current_text, path, options)
        if first_findings is None:
            first_findings = findings
        candidates = [f for f in findings if _wanted(f, options, accept)]
        if not candidates:
            break
        rewritten, applied = apply_findings(current_module, candidates)
        new_text = rewritten.code
        if new_text == current_text:
            break
        try:
            current_module = cst.parse_module(new_text)
        except cst.ParserSyntaxError as error:
            codes = ", ".join(sorted({f.code for f in applied}))
            first_line = error.message.splitlines()[0]
            raise InternalError(
                f"fixes by {codes} produced code that does not parse ({first_line})"
            ) from None
        applied_all.extend(applied)
        current_text = new_text
        if accept is not None:
            # A reviewed run applies exactly what was accepted: no second round of unasked fixes.
            findings = _run_passes(current_module, current_text, path, options)
            break
    else:
        codes = ", ".join(sorted({f.code for f in applied_all}))
        raise InternalError(f"fixes by {codes} did not converge after {MAX_ROUNDS} rounds")
    if current_text != text and module.code != text:
        raise InputError(
            "libcst cannot reproduce this file byte for byte, so devfix will not rewrite it"
        )
    remaining = tuple(findings)
    hidden = 0
    if not options.unsafe_fixes and accept is None:
        hidden = sum(1 for f in remaining if f.applicability is Applicability.UNSAFE and f.edits)
    return SourceResult(
        text, current_text, tuple(first_findings or ()), tuple(applied_all), hidden, remaining
    )


def unified_diff(before: str, after: str, path: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=path if os.path.isabs(path) else f"a/{path}",
            tofile=path if os.path.isabs(path) else f"b/{path}",
        )
    )


def fix_file(
    path: str,
    options: Options | None = None,
    *,
    write: bool = True,
    want_diff: bool = False,
    check_only: bool = False,
) -> FileResult:
    """Fix one file; every error becomes a FAILED result and the file is left untouched.

    With `check_only`, the passes only report (no fix is computed) and nothing is written.
    """
    options = options or Options()
    if path.endswith(".ipynb"):  # Jupyter notebooks: code cells, see devfix.notebooks
        from devfix import notebooks

        return notebooks.fix_notebook_file(
            path, options, write=write, want_diff=want_diff, check_only=check_only
        )
    try:
        document = sources.read(path)
    except InputError as error:
        return FileResult(path, FileStatus.FAILED, reason=str(error))
    if sources.is_generated(document.text):
        return FileResult(path, FileStatus.SKIPPED, reason="generated file (@generated marker)")
    try:
        if check_only:
            found = tuple(check_source(document.text, path, options))
            hidden = 0
            if not options.unsafe_fixes:
                hidden = sum(
                    1 for f in found if f.applicability is Applicability.UNSAFE and f.edits
                )
            return FileResult(
                path,
                FileStatus.UNCHANGED,
                findings=found,
                hidden_unsafe=hidden,
                remaining=found,
                fingerprint=document.fingerprint or "",
            )
        result = fix_source(document.text, options, path=path)
    except InputError as error:
        return FileResult(path, FileStatus.FAILED, reason=str(error))
    except InternalError as error:
        return FileResult(path, FileStatus.FAILED, reason=str(error), internal_error=True)
    except Exception as error:
        return FileResult(
            path,
            FileStatus.FAILED,
            reason=f"{type(error).__name__}: {error}",
            internal_error=True,
        )
    status = FileStatus.CHANGED if result.changed else FileStatus.UNCHANGED
    diff = unified_diff(result.source, result.output, path) if want_diff and result.changed else ""
    if result.changed and write:
        try:
            sources.write_atomic(path, document.with_text(result.output))
        except InputError as error:
            return FileResult(
                path,
                FileStatus.FAILED,
                findings=result.findings,
                reason=str(error),
            )
    return FileResult(
        path,
        status,
        findings=result.findings,
        applied=result.applied,
        hidden_unsafe=result.hidden_unsafe,
        remaining=result.remaining,
        diff=diff,
        fingerprint=document.fingerprint or "",
    )


def _fix_one(job: tuple[str, Options, bool, bool, bool]) -> FileResult:
    path, options, write, want_diff, check_only = job
    result = fix_file(path, options, write=write, want_diff=want_diff, check_only=check_only)
    return result.without_nodes()


def fix_paths(
    paths: Sequence[str],
    options: Options | None = None,
    *,
    write: bool = True,
    want_diff: bool = False,
    check_only: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[FileResult]:
    """Fix every Python file under `paths`, yielding results in the order of the files found.

    Paths that cannot be walked become FAILED results; work runs in `options.jobs` processes
    (0 = one per core) when there is enough of it to be worth starting them. With
    `options.cache_dir`, files whose content produced no rewrite last time are not parsed again.
    `progress(done, total)` is called after each file.
    """
    options = options or Options()
    files: list[str] = []
    excludes = sources.Excludes(options.exclude, options.extend_exclude, options.root)
    for entry in sources.discover(paths, excludes, report_links=True):
        if isinstance(entry, FileResult):
            yield entry
        else:
            files.append(entry)
    mode = "check" if check_only else ("apply" if write else "diff")
    store = ResultCache(options.cache_dir, options, mode) if options.cache_dir else None
    cached: dict[str, FileResult] = {}
    if store is not None and not want_diff:
        for file in files:
            try:
                with open(file, "rb") as handle:
                    key = content_key(handle.read())
            except OSError:
                continue
            hit = store.lookup(file, key)
            if hit is not None:
                cached[file] = hit
    todo = [file for file in files if file not in cached]
    results = iter(_run_jobs(todo, options, write, want_diff, check_only))
    done = 0
    try:
        for file in files:
            result = cached.get(file) or next(results)
            if store is not None and file not in cached and result.fingerprint:
                # Keyed on the bytes that were parsed, which differ from those hashed above
                # if the file was edited in between.
                store.store(result.fingerprint, result)
            done += 1
            if progress is not None:
                progress(done, len(files))
            yield result
    finally:
        if store is not None:
            store.save()


def tune_collector() -> None:
    """Settings for a process that runs devfix over many files.

    Each file allocates hundreds of thousands of tree nodes; with the default thresholds the
    collector scans them (and everything imported at start-up) over and over although the trees
    hold no reference cycles (the engine breaks the one cycle an analysis makes). Freezing the
    start-up objects and collecting the youngest generation less often saves about a tenth of
    a run.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def _run_jobs(
    files: list[str], options: Options, write: bool, want_diff: bool, check_only: bool
) -> Iterator[FileResult]:
    """Each file in a worker process (devfix.isolation): a crash or a hang costs that file."""
    work = [(file, (file, options, write, want_diff, check_only)) for file in files]
    yield from isolation.run_isolated(
        _fix_one,
        work,
        workers=options.jobs or os.cpu_count() or 1,
        per_file=isolation.Limits(options.timeout_per_file, options.max_memory_mib),
        initializer=tune_collector,
    )
