"""The fix engine's entry points: one file (:func:`fix_file`) and many (:func:`fix_paths`).

Passes report findings; the engine applies them. Its layers, from the bottom up:

* :mod:`devfix.parsing`: a file's code to a libcst tree (refused where Python refuses it);
* :mod:`devfix.tree`: the tree as tables, and the dispatcher that runs every pass in one walk;
* :mod:`devfix.suppression`: `# devfix: ignore` comments;
* :mod:`devfix.edits`: applying a finding's edit group (and the imports it needs);
* :mod:`devfix.fix_loop`: the per-file loop, pure and allowed to raise: :func:`check_source`
  reports, :func:`fix_source` applies fixes round after round and says what was fixed and left;
* :mod:`devfix.source_file`: one adapter for a `.py` file or a notebook (code in, text out,
  locations, diffs);
* this module: :func:`fix_file` turns every error into a :class:`FileResult`, and
  :func:`fix_paths` runs many files, in parallel, with the result cache.

What a run was asked for is resolved once into :class:`devfix.settings.Settings`.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from devfix import isolation, limits, sources
from devfix.cache import ResultCache, content_key
from devfix.edits import apply_findings
from devfix.errors import InputError, InternalError
from devfix.fix_loop import MAX_ROUNDS, Accept, analyse_source, check_source, fix_source
from devfix.parsing import parse
from devfix.settings import OptionsLike, Settings
from devfix.source_file import SourceFile, open_source, unified_diff
from devfix.types import FileResult, FileStatus, Finding, TextEdit, file_order

__all__ = [
    "MAX_ROUNDS",
    "Accept",
    "analyse_source",
    "apply_findings",
    "check_source",
    "fix_file",
    "fix_paths",
    "fix_source",
    "parse",
    "tune_collector",
    "unified_diff",
]


def fix_file(
    path: str,
    options: OptionsLike = None,
    *,
    write: bool = True,
    want_diff: bool = False,
    check_only: bool = False,
    fix_text: bool = False,
) -> FileResult:
    """Fix one file (a `.py` file or a notebook); every error becomes a FAILED result and the file
    is left untouched.

    With `check_only`, the passes only report and nothing is written; with `fix_text` too, each
    finding's fix is given as a text replacement of the file (for SARIF).
    """
    settings = Settings.resolve(options)
    try:
        source = open_source(path)
    except InputError as error:
        return FileResult(path, FileStatus.FAILED, reason=str(error))
    if sources.is_generated(source.code):
        return FileResult(path, FileStatus.SKIPPED, reason="generated file (@generated marker)")
    try:
        if check_only:
            if fix_text:
                found = _with_fix_text(source, settings)
            else:
                found = tuple(source.locate(f) for f in check_source(source.code, path, settings))
            return FileResult(
                path,
                FileStatus.UNCHANGED,
                findings=found,
                remaining=found,
                fingerprint=source.document.fingerprint or "",
            )
        result = fix_source(source.code, settings, path=path)
        output = source.render(result.output)
    except InputError as error:
        return FileResult(path, FileStatus.FAILED, reason=str(error))
    except InternalError as error:
        return FileResult(path, FileStatus.FAILED, reason=str(error), internal_error=True)
    except Exception as error:  # a pass crashed: report it, keep going
        return FileResult(
            path,
            FileStatus.FAILED,
            reason=f"{type(error).__name__}: {error}",
            internal_error=True,
        )
    changed = output != source.document.text
    applied = tuple(source.locate(f) for f in result.applied)
    remaining = tuple(source.locate(f) for f in result.remaining)
    if changed and write:
        try:
            sources.write_atomic(path, source.document.with_text(output))
        except InputError as error:
            return FileResult(path, FileStatus.FAILED, remaining=remaining, reason=str(error))
    return FileResult(
        path,
        FileStatus.CHANGED if changed else FileStatus.UNCHANGED,
        findings=in_file_order(applied + remaining),
        applied=applied,
        remaining=remaining,
        diff=source.diff(result.output) if want_diff and changed else "",
        fingerprint=source.document.fingerprint or "",
    )


def _with_fix_text(source: SourceFile, settings: Settings) -> tuple[Finding, ...]:
    """The findings, each with its fix as one replacement of the file's text: the fix applied
    alone (with the imports it needs), rendered into the file, reduced to the span it changes."""
    module, findings = analyse_source(source.code, settings, path=source.path)
    if module is None:
        return ()
    # As check_source does: no fix that apply would refuse to write (CR-only line endings).
    findings = limits.mark_unfixable(module, source.code, findings)
    original = source.document.text
    located: list[Finding] = []
    for finding in findings:
        edits: tuple[TextEdit, ...] = ()
        if finding.has_fix:
            rewritten, applied = apply_findings(module, [finding])
            if applied:
                edits = (text_replacement(original, source.render(rewritten.code)),)
        located.append(replace(source.locate(finding), text_edits=edits))
    return tuple(located)


def text_replacement(before: str, after: str) -> TextEdit:
    """The one replacement (1-based lines and columns of `before`) that turns it into `after`."""
    start = 0
    limit = min(len(before), len(after))
    while start < limit and before[start] == after[start]:
        start += 1
    end_before, end_after = len(before), len(after)
    while (
        end_before > start and end_after > start and before[end_before - 1] == after[end_after - 1]
    ):
        end_before -= 1
        end_after -= 1

    def position(offset: int) -> tuple[int, int]:
        line_start = before.rfind("\n", 0, offset) + 1
        return before.count("\n", 0, offset) + 1, offset - line_start + 1

    line, col = position(start)
    end_line, end_col = position(end_before)
    return TextEdit(line, col, end_line, end_col, after[start:end_after])


def in_file_order(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    return tuple(sorted(findings, key=file_order))


def _fix_one(job: tuple[str, Settings, bool, bool, bool, bool]) -> FileResult:
    path, settings, write, want_diff, check_only, fix_text = job
    result = fix_file(
        path,
        settings,
        write=write,
        want_diff=want_diff,
        check_only=check_only,
        fix_text=fix_text,
    )
    return result.without_nodes()


def fix_paths(
    paths: Sequence[str],
    options: OptionsLike = None,
    *,
    write: bool = True,
    want_diff: bool = False,
    check_only: bool = False,
    fix_text: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[FileResult]:
    """Fix every Python file under `paths`, yielding results in the order of the files found.

    Paths that cannot be walked become FAILED results; each file is worked on in one of `jobs`
    worker processes (0 = one per core), so that a crash or a hang costs only that file. With a
    `cache_dir`, files whose content produced no rewrite last time are not parsed again.
    `progress(done, total)` is called after each file.
    """
    settings = Settings.resolve(options)
    files: list[str] = []
    excludes = sources.Excludes(settings.exclude, settings.extend_exclude, settings.root)
    for entry in sources.discover(paths, excludes, report_links=True):
        if isinstance(entry, FileResult):
            yield entry
        else:
            files.append(entry)
    mode = (
        ("check+fixes" if fix_text else "check") if check_only else ("apply" if write else "diff")
    )
    store = ResultCache(settings.cache_dir, settings, mode) if settings.cache_dir else None
    cached: dict[str, FileResult] = {}
    if store is not None and not want_diff:
        for file in files:
            try:
                with open(file, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            # A notebook's cell lines may all sit on one JSON line, as `\n` escapes.
            lines = data.count(b"\n") + data.count(b"\\n") + 1
            hit = store.lookup(file, content_key(data), lines)
            if hit is not None:
                cached[file] = hit
    todo = [file for file in files if file not in cached]
    results = iter(_run_jobs(todo, settings, write, want_diff, check_only, fix_text))
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
    files: list[str],
    settings: Settings,
    write: bool,
    want_diff: bool,
    check_only: bool,
    fix_text: bool,
) -> Iterator[FileResult]:
    """Each file in a worker process (devfix.isolation): a crash or a hang costs that file."""
    work = [(file, (file, settings, write, want_diff, check_only, fix_text)) for file in files]
    yield from isolation.run_isolated(
        _fix_one,
        work,
        workers=settings.workers,
        per_file=isolation.Limits(settings.timeout_per_file, settings.max_memory_mib),
        initializer=tune_collector,
    )
