"""Load PyTorch-profiler (Kineto) traces: files, directories of rank files, or lists of both.

The only module of the traces layer that touches files. Each rank file is decoded to columns by
``traces.decode``; several files of a large job are decoded in parallel processes
(``traces.workers``; results travel back pickled). A rank file that cannot be read is reported in
``LoadedTrace.skipped`` and the others still load; only when every file fails is it an error.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from gpuwarden.errors import CorruptInputError, InputError, MissingExtraError
from gpuwarden.traces.decode import decode_file, releases_gil
from gpuwarden.traces.memory import release_free_heap
from gpuwarden.traces.model import LoadedTrace, RankTrace
from gpuwarden.traces.workers import ProgressFn, decode_files


def _is_trace_name(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith(".json") or name.endswith(".json.gz")


def unusable_path(path: Path, exc: OSError | RuntimeError) -> InputError:
    """A path the OS refuses to look at (permission denied, a name too long, a loop of links):
    what it said, naming the path."""
    said = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
    return InputError(
        f"{path}: cannot read ({said})",
        reference="trace-unreadable",
        hint="check the path and its permissions",
    )


def _trace_files(directory: Path) -> list[Path]:
    found = sorted(c for c in directory.iterdir() if c.is_file() and _is_trace_name(c))
    if not found:
        raise InputError(
            f"{directory}: no trace files (*.json, *.json.gz) in this directory",
            reference="trace-no-files",
            hint="point at the folder torch.profiler.tensorboard_trace_handler wrote, "
            "or at the trace files themselves",
        )
    return found


def expand_paths(paths: Sequence[str | Path]) -> list[Path]:
    """Files named directly, plus every ``*.json``/``*.json.gz`` in directories (sorted).
    A path the OS refuses to look at is an InputError ``trace-unreadable``."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: list[Path] = []
    for item in paths:
        p = Path(item)
        try:
            files.extend(_trace_files(p) if p.is_dir() else [p])
        except OSError as exc:
            raise unusable_path(p, exc) from None
    if not files:
        raise InputError(
            "no trace files given",
            reference="trace-no-files",
            hint="pass one or more *.pt.trace.json[.gz] files or a directory of them",
        )
    seen: set[Path] = set()
    unique = []
    for f in files:
        try:
            key = f.resolve()
        except (OSError, RuntimeError) as exc:  # 3.11 raises RuntimeError on a symlink loop
            raise unusable_path(f, exc) from None
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def _decode_or_reason(path: str) -> RankTrace | CorruptInputError:
    """Worker entry point: the decoded rank, or why it failed (one bad file must not stop the
    others). MissingExtraError is not about the file and propagates."""
    try:
        return decode_file(Path(path))
    except MissingExtraError:
        raise
    except CorruptInputError as exc:
        return exc
    except MemoryError:
        return CorruptInputError(
            f"{path}: not enough memory to load this trace",
            reference="trace-too-large",
            hint="load fewer ranks at once (--ranks) or use a machine with more memory",
        )


def load_traces(
    paths: Sequence[str | Path] | Mapping[int, str | Path],
    *,
    progress: ProgressFn | None = None,
    workers: int | None = None,
) -> LoadedTrace:
    """Load every rank file; rank from ``distributedInfo.rank``, else ``rank-N`` in the file name,
    else 0 — or, when ``paths`` is a mapping ``{rank: file}`` (like HTA's ``trace_files``), the
    given ranks. ``progress(path, files_done, files_total)`` is called as each file finishes.

    Raises InputError (no files, two files with the same rank) and CorruptInputError when no file
    could be loaded (each failure in the message); MissingExtraError without the ``trace`` extra.
    """
    given: dict[str, int] = {}
    if isinstance(paths, Mapping):
        given = {str(Path(p)): int(r) for r, p in paths.items()}
        paths = [Path(p) for p in paths.values()]
    files = expand_paths(paths)
    results = decode_files(
        files,
        _decode_or_reason,
        workers or os.cpu_count() or 1,
        progress,
        threads=releases_gil(),
    )
    release_free_heap()  # the decoders' temporaries, before the analyses allocate theirs
    ranks: dict[int, RankTrace] = {}
    skipped: list[tuple[str, str]] = []
    errors: list[CorruptInputError] = []
    for f in files:
        res = results[str(f)]
        if isinstance(res, CorruptInputError):
            skipped.append((str(f), res.message))
            errors.append(res)
            continue
        rank_trace = _with_given_rank(res, given.get(str(f)))
        rank = rank_trace.meta.rank
        if rank in ranks:
            raise _duplicate_rank(ranks[rank], rank_trace, f)
        ranks[rank] = rank_trace
    if not ranks:
        raise _nothing_loaded(errors, skipped)
    return LoadedTrace(ranks=dict(sorted(ranks.items())), skipped=tuple(skipped))


def _with_given_rank(trace: RankTrace, given: int | None) -> RankTrace:
    """The trace with the rank the caller gave for its file, if any."""
    if given is None:
        return trace
    meta = dataclasses.replace(trace.meta, rank=given, rank_source="given")
    return dataclasses.replace(trace, meta=meta)


def _duplicate_rank(first: RankTrace, second: RankTrace, path: Path) -> InputError:
    other, meta = first.meta, second.meta
    return InputError(
        f"{other.path} and {path} both have rank {meta.rank} "
        f"({other.rank_source} / {meta.rank_source})",
        reference="trace-duplicate-rank",
        hint="load the traces of one job at a time, one file per rank "
        "(the rank comes from distributedInfo.rank, else `rank-N` in the file name)",
    )


_REASONS_SHOWN = 5  # files whose reason an error names when no file loaded


def _nothing_loaded(
    errors: Sequence[CorruptInputError], skipped: Sequence[tuple[str, str]]
) -> CorruptInputError:
    """Why no file loaded: one file's own error (its reference and hint say what is wrong),
    else the first files' reasons and how many more (a folder of 20,000 files that are not
    traces made a message of 1.2 MB)."""
    if len(errors) == 1:
        return errors[0]
    detail = "; ".join(reason for _, reason in skipped[:_REASONS_SHOWN])
    if len(skipped) > _REASONS_SHOWN:
        detail += f"; and {len(skipped) - _REASONS_SHOWN:,} more of {len(skipped):,} files"
    return CorruptInputError(
        f"no trace could be loaded: {detail}",
        reference="trace-unreadable",
        hint="check that these are PyTorch profiler (Kineto) *.pt.trace.json[.gz] files "
        "and that they are complete",
    )
