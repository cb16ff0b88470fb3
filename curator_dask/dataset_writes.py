"""Writing a dataset: one part per partition, each with its counts, through the io writer.

:meth:`DocumentDataset.to_parquet <curator_dask.DocumentDataset.to_parquet>` and
``to_jsonl`` (and ``to_megatron``) check the output (the run's guard: nothing on, in or
around an input; the directory's lease), prepare it (the manifest, what ``mode`` keeps or
replaces), then compute one write task per partition's envelope, so each partition is
computed once and written with its drop counts and counters
(:func:`~curator_dask.io.writers.write_part`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import dask

from curator_dask._compute import compute
from curator_dask.dropped import split_counts, sum_dropped
from curator_dask.envelopes import Envelopes
from curator_dask.errors import InvalidArgumentError, NameNotFoundError
from curator_dask.faults import planned_partition_bytes
from curator_dask.io.guard import guarded
from curator_dask.io.output_state import finish_output
from curator_dask.io.overlap import InputPaths
from curator_dask.io.rollover import TargetFileSize
from curator_dask.io.tokens import MegatronEncoder, TokenizerSpec
from curator_dask.io.writers import WriteMode, WriteSpec, prepare_output, write_part
from curator_dask.task_names import task_label

__all__ = ["WriteResult", "check_whole_files", "file_spec", "megatron_spec", "write_partitions"]


@dataclass
class WriteResult:
    """What a write produced: the files, and rows, bytes, drop counts and counters in total."""

    path: str
    files: list[str]
    rows: int
    bytes: int
    dropped: dict[str, int] = field(default_factory=dict)
    #: Events counted upstream that dropped no document (entities redacted, ...), by name.
    counters: dict[str, int] = field(default_factory=dict)
    partitions: list[dict] = field(default_factory=list, repr=False)


def check_whole_files(plan) -> None:
    """Refuse to write each document to a file named after its source file when a source
    file was split across partitions (each part would write it again)."""
    if plan is None:
        return
    split = sorted({s.file.name for p in plan for s in p.slices if not s.whole})
    if split:
        raise InvalidArgumentError(
            f"write_to_filename: {len(split)} source file(s) were split across partitions "
            f"by blocksize (first: {split[0]!r}), so each would be written twice. Read with "
            "files_per_partition=1, or a blocksize larger than the largest file."
        )


def file_spec(path: str, fmt: str, compression: str | None, filename_field: str | bool,
              keep_filename_column: bool, target_file_size: TargetFileSize | None) -> WriteSpec:
    """What ``to_parquet``/``to_jsonl`` write (checked now, before any directory is
    touched); ``filename_field`` is False unless each document goes to a file named
    after its source file."""
    return WriteSpec(path=str(path), fmt=fmt, compression=compression,
                     filename_field=filename_field or None,
                     keep_filename_column=keep_filename_column,
                     target_file_size=target_file_size)


def megatron_spec(path: str, tokenizer: str, text_field: str, bos: bool | str,
                  eos: bool | str, add_special_tokens: bool, source_field: str | None,
                  target_file_size: TargetFileSize | None) -> WriteSpec:
    """What ``to_megatron`` writes: token files of ``tokenizer``'s ids."""
    encoder = MegatronEncoder(TokenizerSpec(tokenizer, bos=bos, eos=eos,
                                            add_special_tokens=add_special_tokens),
                              text_field=text_field, source_field=source_field)
    return WriteSpec(path=str(path), fmt="encoded", encoder=encoder,
                     target_file_size=target_file_size)


def write_partitions(parts: Envelopes, path: str, spec: WriteSpec, mode: WriteMode,
                     storage_options: dict | None, fingerprint: dict | None, force: bool,
                     *, plan, meta, sources: InputPaths | None, schema) -> WriteResult:
    """Write every partition of ``parts`` (read as ``plan`` says, columns as ``meta``) to
    ``path`` as ``spec`` says, one part each, with its counts; what the output holds as a
    whole goes into its manifest (:func:`~curator_dask.io.output_state.finish_output`)."""
    if spec.filename_field is not None:
        if spec.filename_field not in meta.columns:
            raise NameNotFoundError(
                f"write_to_filename needs the column {spec.filename_field!r}; read with "
                f"add_filename=True (columns: {list(meta.columns)})"
            )
        check_whole_files(plan)
    with guarded(path, "output directory", inputs=[sources],
                 storage_options=storage_options, force=force) as out:
        first = prepare_output(out, mode, fingerprint=fingerprint)
        spec = replace(spec, path=out.path, first_index=first, schema=schema)
        token = dask.base.tokenize(parts.token, spec)
        name = task_label("write")
        tasks = [dask.delayed(write_part)(part, spec, out.fs, (i,),
                                          dask_key_name=f"{name}-{token}-{i}")
                 for i, part in enumerate(parts.delayed())]
        # Counted as it runs when a phase is labelled (a dedup phase, a barrier's output).
        # One value each (not two lists, which a cluster would gather in a task of its own).
        computed = compute(*tasks, *parts.carried, partition_bytes=planned_partition_bytes(plan))
        stats, carried = computed[:len(tasks)], computed[len(tasks):]
        finish_output(out.fs, out.path, spec.encoder, stats)
    files = sorted(f for s in stats for f in s["files"])
    dropped, counters = split_counts(sum_dropped([*(s["dropped"] for s in stats), *carried]))
    return WriteResult(
        path=path, files=files, rows=sum(s["rows"] for s in stats),
        bytes=sum(s["bytes"] for s in stats),
        dropped=dropped, counters=counters, partitions=stats,
    )
