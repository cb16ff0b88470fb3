"""DocumentDataset: a partitioned corpus, a thin wrapper over a Dask dataframe.

``ds.df`` is the Dask dataframe; everything Dask offers works on it. The wrapper adds
curator-dask's readers (planned partitions, clear errors on bad input), atomic writers
and the drop counts that stages record.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import dask
import dask.dataframe as dd
import pandas as pd
import pyarrow as pa

from curator_dask._compute import compute
from curator_dask.compat import nemo_keywords, renamed
from curator_dask.dropped import get_counters, get_dropped, split_counts, sum_dropped
from curator_dask.io.files import JSONL_EXTENSIONS, PARQUET_EXTENSIONS, list_files
from curator_dask.io.guard import guarded
from curator_dask.io.jsonl import (
    ENCODING_ERRORS,
    ON_BAD_LINES,
    EncodingErrors,
    OnBadLines,
    filename_column,
    infer_jsonl_schema,
    read_jsonl_partition,
    read_jsonl_table,
)
from curator_dask.io.overlap import InputPaths, input_paths
from curator_dask.io.parquet import (
    infer_parquet_schema,
    read_parquet_partition,
    read_parquet_table,
)
from curator_dask.io.planner import PartitionSpec, plan_partitions, resolve_blocksize
from curator_dask.io.arrow_types import to_frame
from curator_dask.io.tables import (
    Backend,
    check_backend,
    schema_with_overrides,
    with_text_column,
)
from curator_dask.io.warc import (
    HTML_CONTENT_TYPES,
    WARC_BLOCKSIZE,
    WARC_EXTENSIONS,
    WARC_SCHEMA,
    read_warc_partition,
)
from curator_dask.io.output_state import finish_output
from curator_dask.io.rollover import TargetFileSize
from curator_dask.io.tokens import MegatronEncoder, TokenizerSpec
from curator_dask.io.writers import WriteMode, WriteSpec, prepare_output, write_part

__all__ = ["DocumentDataset", "WriteResult"]

logger = logging.getLogger(__name__)


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


def _check_text_cast(text_cast) -> None:
    if not isinstance(text_cast, bool):
        raise TypeError(f"text_cast must be True or False, got {text_cast!r}")


class _ReadPartition:
    """The task that reads one planned partition (pickled to workers with its options)."""

    def __init__(self, fmt: str, fs, schema: pa.Schema, options: dict):
        self.fmt, self.fs, self.schema, self.options = fmt, fs, schema, options

    def __call__(self, spec: PartitionSpec):
        if self.fmt == "jsonl":
            return read_jsonl_partition(spec, self.fs, self.schema, **self.options)
        if self.fmt == "warc":
            return read_warc_partition(spec, self.fs, **self.options)
        return read_parquet_partition(spec, self.fs, self.schema, **self.options)

    def table(self, spec: PartitionSpec) -> tuple[pa.Table, dict[str, int]]:
        """The partition as an Arrow table, and the rows the reader skipped by reason:
        for work that stays in Arrow from the reader to the writer."""
        options = {k: v for k, v in self.options.items() if k != "backend"}
        if self.fmt == "jsonl":
            return read_jsonl_table(spec, self.fs, self.schema, **options)
        return read_parquet_table(spec, self.fs, self.schema, **options)

    @property
    def backend(self) -> str:
        return self.options.get("backend", "pandas")


class DocumentDataset:
    """A corpus as a Dask dataframe of documents, one row per document.

    Parameters
    ----------
    df : dask.dataframe.DataFrame
        Partitions are pandas (Arrow-backed strings) or cuDF frames with a text column.
    plan : list of PartitionSpec, optional
        The partition plan the data was read with (set by the readers).
    sources : InputPaths, optional
        Where the data was read from (set by the readers, kept by every dataset derived
        from this one): writes refuse an output that is, contains or lies inside them.

    Examples
    --------
    >>> import pandas as pd
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a", "b", "c"]}), npartitions=2)
    >>> ds.npartitions, len(ds.df)
    (2, 3)
    """

    def __init__(self, df: dd.DataFrame, *, plan: Sequence[PartitionSpec] | None = None,
                 sources: InputPaths | None = None):
        if not isinstance(df, dd.DataFrame):
            raise TypeError(
                f"DocumentDataset wraps a dask.dataframe.DataFrame, got {type(df).__name__}; "
                "use DocumentDataset.from_pandas for a pandas frame"
            )
        self.df = df
        # The partition plan the data was read with, kept while partitions map 1:1 to it.
        self.plan = list(plan) if plan is not None else None
        self.sources = sources
        # For a dataset read from files: the callable that reads one PartitionSpec of
        # ``plan`` (executors stream partitions through stages with it). Not carried on.
        self.partition_reader = None
        #: Bytes per partition the plan was made with (given or chosen automatically;
        #: None for ``files_per_partition`` or data not read from files). Passing it as
        #: ``blocksize`` gives the same plan on any cluster.
        self.blocksize: int | None = None
        #: The Arrow schema the data was read with (None for data not read from files),
        #: kept by every dataset derived from this one: writers give string columns the
        #: type it records (``string`` or ``large_string``).
        self.schema: pa.Schema | None = None

    def _derive(self, df: dd.DataFrame) -> DocumentDataset:
        keep_plan = self.plan is not None and df.npartitions == self.df.npartitions
        derived = DocumentDataset(df, plan=self.plan if keep_plan else None,
                                  sources=self.sources)
        derived.blocksize = self.blocksize if keep_plan else None
        derived.schema = self.schema
        return derived

    @property
    def npartitions(self) -> int:
        return self.df.npartitions

    def __repr__(self) -> str:
        return f"DocumentDataset(npartitions={self.npartitions}, columns={list(self.df.columns)})"

    # -- reading ----------------------------------------------------------------------
    @classmethod
    @nemo_keywords()
    def read_jsonl(
        cls,
        path: str | Sequence[str],
        *,
        blocksize: int | str | None = None,
        files_per_partition: int | None = None,
        columns: Sequence[str] | None = None,
        text_field: str | None = "text",
        add_filename: bool | str = False,
        input_meta: Mapping | None = None,
        backend: Backend = "pandas",
        on_bad_lines: OnBadLines = "error",
        encoding_errors: EncodingErrors = "strict",
        text_cast: bool = False,
        storage_options: dict | None = None,
    ) -> DocumentDataset:
        """Read JSONL files (``.jsonl``/``.json``, optionally ``.gz``, ``.zst``, ``.bz2``).

        Parameters
        ----------
        path : str or list of str
            A directory (searched recursively), a glob, a file or a list of them; any
            fsspec URL (``memory://``, ``s3://`` with s3fs installed).
        blocksize : int or str, optional
            Target bytes per partition. Small files are grouped, large uncompressed
            files split at line boundaries. Default (or ``"auto"``): chosen from the
            data and the cluster, two partitions per worker thread where the data
            allows, between 1 MiB and 64 MiB and within the workers' memory (see
            ``docs/io.md``); the choice is in
            :attr:`blocksize`.
        files_per_partition : int, optional
            Whole files per partition instead of ``blocksize``; not both.
        columns : list of str, optional
            Columns to keep (other fields are dropped without notice).
        text_field : str or None, default "text"
            The text column; a file without it is an error, and so is a text value that
            is not a string (see ``text_cast``). ``None`` reads files without a text
            column (a list of ids, scores) as they are.
        add_filename : bool or str
            Add a column (``file_name``, or the given name) with each document's source
            file, relative to the input directory.
        input_meta : mapping, optional
            Column dtypes (``{"id": "int64", "text": "str"}``) for the columns named;
            the others are inferred from samples of up to 16 files spread over the
            listing (the first complete line of each, however long, and 256 KiB after
            it). Samples that disagree on a type (a string and a number) are an error
            naming both files. A field found later that the schema lacks is an error
            naming the file and line (pass it in ``input_meta``, or choose ``columns``).
        backend : {"pandas", "cudf"}
        on_bad_lines : {"error", "skip", "warn"}
            A malformed line, or a value whose type does not fit its column, raises an
            error naming the file and line, or is skipped and counted in
            :meth:`dropped_counts` (``reader.bad_json_line``, ``reader.type_mismatch``;
            ``"warn"`` also logs each). A truncated compressed file raises an error
            naming the file and its last complete line, or keeps the lines before the
            break and counts the partial line under ``reader.truncated_file``.
        encoding_errors : {"strict", "replace"}
            Invalid UTF-8 raises an error naming the file and line, or is replaced.
        text_cast : bool, default False
            Cast text values that are numbers or booleans to strings (a warning per
            file counts them) instead of raising an error.
        storage_options : dict, optional
            Passed to fsspec.
        """
        if on_bad_lines not in ON_BAD_LINES:
            raise ValueError(f"on_bad_lines must be one of {ON_BAD_LINES}, got {on_bad_lines!r}")
        if encoding_errors not in ENCODING_ERRORS:
            raise ValueError(
                f"encoding_errors must be one of {ENCODING_ERRORS}, got {encoding_errors!r}"
            )
        _check_text_cast(text_cast)
        check_backend(backend)
        fs, files = list_files(path, JSONL_EXTENSIONS, storage_options)
        block = resolve_blocksize(files, files_per_partition=files_per_partition,
                                  blocksize=blocksize)
        plan = plan_partitions(files, files_per_partition=files_per_partition,
                               blocksize=block, fmt="jsonl", fs=fs)
        sources = input_paths(path, storage_options, files=[f.path for f in files])
        inferred = infer_jsonl_schema(
            fs, files, settled={text_field, *(input_meta or {})}, columns=columns,
            on_conflict="error" if on_bad_lines == "error" else "keep",
        )
        schema = with_text_column(schema_with_overrides(inferred, input_meta, columns),
                                  text_field, columns is not None)
        options = dict(text_field=text_field, add_filename=filename_column(add_filename),
                       on_bad_lines=on_bad_lines, encoding_errors=encoding_errors,
                       text_cast=text_cast, typed=tuple(input_meta or ()),
                       columns_chosen=columns is not None, backend=backend)
        return cls._from_plan("jsonl", fs, plan, schema, options, sources, block)

    @classmethod
    def read_json(cls, input_files: str | Sequence[str], **options) -> DocumentDataset:
        """NeMo Curator's name of :meth:`read_jsonl` (warns); same options."""
        renamed("DocumentDataset.read_json(...)", "DocumentDataset.read_jsonl(...)")
        return cls.read_jsonl(input_files, **options)

    @classmethod
    @nemo_keywords()
    def read_parquet(
        cls,
        path: str | Sequence[str],
        *,
        blocksize: int | str | None = None,
        files_per_partition: int | None = None,
        columns: Sequence[str] | None = None,
        text_field: str | None = "text",
        add_filename: bool | str = False,
        input_meta: Mapping | None = None,
        backend: Backend = "pandas",
        text_cast: bool = False,
        storage_options: dict | None = None,
    ) -> DocumentDataset:
        """Read Parquet files; ``blocksize`` groups small files and splits by row groups.

        Parameters are those of :meth:`read_jsonl`, less the JSON-specific ones. The
        schema is the union of the footers of up to 16 files spread over the listing;
        errors name the file and the row (counted over the whole file).
        """
        _check_text_cast(text_cast)
        check_backend(backend)
        fs, files = list_files(path, PARQUET_EXTENSIONS, storage_options)
        block = resolve_blocksize(files, files_per_partition=files_per_partition,
                                  blocksize=blocksize)
        plan = plan_partitions(files, files_per_partition=files_per_partition,
                               blocksize=block, fmt="parquet", fs=fs)
        sources = input_paths(path, storage_options, files=[f.path for f in files])
        inferred = infer_parquet_schema(fs, files, settled={text_field, *(input_meta or {})},
                                        columns=columns)
        schema = with_text_column(schema_with_overrides(inferred, input_meta, columns),
                                  text_field, True)
        options = dict(text_field=text_field, add_filename=filename_column(add_filename),
                       text_cast=text_cast, typed=tuple(input_meta or ()),
                       columns_chosen=columns is not None, backend=backend)
        return cls._from_plan("parquet", fs, plan, schema, options, sources, block)

    @classmethod
    def read_warc(
        cls,
        path: str | Sequence[str],
        *,
        blocksize: int | str | None = None,
        files_per_partition: int | None = None,
        content_types: Sequence[str] = HTML_CONTENT_TYPES,
        add_filename: bool | str = False,
        storage_options: dict | None = None,
    ) -> DocumentDataset:
        """Read the HTML responses of WARC files (``.warc``, ``.warc.gz``), one row each.

        Columns: ``url`` (``WARC-Target-URI``), ``warc_date`` (``WARC-Date``, as written),
        ``warc_record_id``, ``content_type`` (the payload's MIME type), ``charset`` (from
        the HTTP ``Content-Type`` header, or null) and ``html``: the HTTP payload as raw
        bytes, with transfer and content encodings (chunked, gzip, brotli) undone. The
        bytes are decoded by :class:`~curator_dask.stages.extract.HtmlExtractor`, which
        adds the ``text`` column. Partitions are pandas frames: cuDF has no bytes column
        for the HTML (``to_backend("cudf")`` after extraction moves the text to the GPU).

        Parameters
        ----------
        path : str or list of str
            A directory (searched recursively), a glob, a file or a list of them, on any
            fsspec filesystem: local, ``s3://`` (the ``s3`` extra), ``https://`` (the
            ``warc`` extra).
        blocksize : int or str, optional
            Bytes of the stored file per partition (default ``"64MiB"``, about a thousand
            pages and a minute of extraction on one core): a large plain WARC, or a gzip WARC
            with one member per record (as Common Crawl ships), is split into byte ranges
            at record boundaries; other compressed files are read whole.
        files_per_partition : int, optional
            Whole files per partition instead of ``blocksize``; not both.
        content_types : sequence of str
            The payload types kept (default HTML and XHTML). Response records of other
            types are counted under ``reader.warc_not_html`` in :meth:`dropped_counts`.
        add_filename : bool or str
            Add a column with each record's source file.
        storage_options : dict, optional
            Passed to fsspec.

        Examples
        --------
        >>> ds = DocumentDataset.read_warc("crawl/")  # doctest: +SKIP
        >>> list(ds.df.columns)  # doctest: +SKIP
        ['url', 'warc_date', 'warc_record_id', 'content_type', 'charset', 'html']
        """
        if files_per_partition is None and blocksize is None:
            blocksize = WARC_BLOCKSIZE
        fs, files = list_files(path, WARC_EXTENSIONS, storage_options)
        plan = plan_partitions(files, files_per_partition=files_per_partition,
                               blocksize=blocksize, fmt="warc", fs=fs)
        options = dict(content_types=tuple(content_types),
                       add_filename=filename_column(add_filename), backend="pandas")
        sources = input_paths(path, storage_options, files=[f.path for f in files])
        return cls._from_plan("warc", fs, plan, WARC_SCHEMA, options, sources)

    @classmethod
    def _from_plan(cls, fmt, fs, plan, schema, options, sources=None,
                   blocksize=None) -> DocumentDataset:
        full = schema
        if options["add_filename"]:
            full = schema.append(pa.field(options["add_filename"], pa.string()))
        meta = to_frame(full.empty_table(), options["backend"])
        reader = _ReadPartition(fmt, fs, schema, options)
        # The reader gives text columns Arrow strings itself; dask's convert-string would
        # also turn every other object column (vectors, lists, dicts) into their repr.
        with dask.config.set({"dataframe.convert-string": False}):
            df = dd.from_map(reader, plan, meta=meta, label=f"read_{fmt}",
                             enforce_metadata=False, divisions=[None] * (len(plan) + 1))
        logger.info("planned %d partitions over %d bytes", len(plan),
                    sum(p.nbytes for p in plan))
        ds = cls(df, plan=plan, sources=sources)
        ds.partition_reader = reader
        ds.blocksize = blocksize
        ds.schema = full
        return ds

    @classmethod
    def from_pandas(cls, df: pd.DataFrame, npartitions: int = 1) -> DocumentDataset:
        """A dataset from an in-memory pandas frame, split into ``npartitions``."""
        return cls(dd.from_pandas(df, npartitions=npartitions, sort=False))

    # -- writing ----------------------------------------------------------------------
    @nemo_keywords()
    def to_parquet(self, path: str, *, write_to_filename: bool = False,
                   filename_field: str = "file_name", keep_filename_column: bool = False,
                   compression: str | None = "snappy", mode: WriteMode = "error",
                   target_file_size: TargetFileSize | None = None,
                   storage_options: dict | None = None,
                   fingerprint: dict | None = None, force: bool = False) -> WriteResult:
        """Write one Parquet file per partition (``part-00000.parquet``, ...).

        Parameters
        ----------
        write_to_filename : bool
            Write each document to a file named after its source file (needs
            ``add_filename`` when reading); names that would leave ``path`` are refused.
        mode : {"error", "overwrite", "overwrite_all", "append"}
            What to do when ``path`` already holds files: refuse; replace the files an
            earlier write of curator-dask made there (and refuse if anything else is
            there); delete everything in the directory first; or add parts after the
            existing ones.
        target_file_size : int or str, optional
            Cut each partition's part into files of at most this size, named
            ``part-00042-00000.parquet``, ``part-00042-00001.parquet``, ...: bytes
            (``"256MiB"``, counted before compression) or documents (``"100000
            documents"``); see :mod:`curator_dask.io.rollover`.
        fingerprint : dict, optional
            What the output is computed from (JSON), recorded in the directory's
            manifest (``.curator-output.json``) for whoever resumes into it.
        force : bool, default False
            Take over the directory's lease when the run that held it stopped
            heart-beating (see :mod:`curator_dask.io.lease`); a live one is refused.

        Raises
        ------
        OutputOverlapsInputError
            ``path`` is, contains or lies inside a path this dataset was read from (or,
            inside a run, another output of the run); checked before anything is
            deleted or written.
        OutputInUseError
            Another run is writing ``path`` (it holds the directory's lease).
        ForeignFilesError
            ``mode="overwrite"`` and ``path`` holds files curator-dask did not write.

        Examples
        --------
        >>> import pandas as pd, tempfile
        >>> out = tempfile.mkdtemp()
        >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a", "b"]}))
        >>> ds.to_parquet(out, mode="overwrite").files[0].rsplit("/", 1)[-1]
        'part-00000.parquet'
        """
        spec = WriteSpec(path=str(path), fmt="parquet", compression=compression,
                         filename_field=filename_field if write_to_filename else None,
                         keep_filename_column=keep_filename_column,
                         target_file_size=target_file_size)
        return self._write(path, spec, mode, storage_options, fingerprint, force)

    @nemo_keywords()
    def to_jsonl(self, path: str, *, compression: str | None = None,
                 write_to_filename: bool = False, filename_field: str = "file_name",
                 keep_filename_column: bool = False, mode: WriteMode = "error",
                 target_file_size: TargetFileSize | None = None,
                 storage_options: dict | None = None,
                 fingerprint: dict | None = None, force: bool = False) -> WriteResult:
        """Write one JSONL file per partition; ``compression`` is gzip, zstd or bz2.

        Other parameters are those of :meth:`to_parquet`; a ``target_file_size`` in bytes
        counts the lines' bytes exactly (before compression).
        """
        spec = WriteSpec(path=str(path), fmt="jsonl", compression=compression,
                         filename_field=filename_field if write_to_filename else None,
                         keep_filename_column=keep_filename_column,
                         target_file_size=target_file_size)
        return self._write(path, spec, mode, storage_options, fingerprint, force)

    def to_megatron(self, path: str, tokenizer: str, *, text_field: str = "text",
                    bos: bool | str = False, eos: bool | str = False,
                    add_special_tokens: bool = False,
                    target_file_size: TargetFileSize | None = None,
                    source_field: str | None = None, mode: WriteMode = "error",
                    storage_options: dict | None = None,
                    fingerprint: dict | None = None, force: bool = False) -> WriteResult:
        """Tokenize every document and write Megatron-LM token files, a ``.bin`` +
        ``.idx`` pair per partition (``part-00042.bin``) that megatron-core's
        ``IndexedDataset("path/part-00042")`` reads.

        ``tokenizer`` is a local directory with a Hugging Face fast tokenizer; the other
        options are :class:`~curator_dask.training.MegatronWriter`'s, and ``mode``,
        ``storage_options``, ``fingerprint``, ``force`` those of :meth:`to_parquet`. The
        result's ``counters["tokens"]`` (and ``tokens.<source>``) count the tokens written.

        Examples
        --------
        >>> import pandas as pd, tempfile
        >>> from curator_dask.testing.tokenizer import save_bpe_tokenizer
        >>> tokenizer = save_bpe_tokenizer(tempfile.mkdtemp())
        >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a cat", "a dog"]}))
        >>> result = ds.to_megatron(tempfile.mkdtemp(), tokenizer, eos=True, mode="overwrite")
        >>> result.counters, [f.rsplit("/", 1)[-1] for f in result.files]
        ({'tokens': 8}, ['part-00000.bin', 'part-00000.idx'])
        """
        encoder = MegatronEncoder(TokenizerSpec(tokenizer, bos=bos, eos=eos,
                                                add_special_tokens=add_special_tokens),
                                  text_field=text_field, source_field=source_field)
        spec = WriteSpec(path=str(path), fmt="encoded", encoder=encoder,
                         target_file_size=target_file_size)
        return self._write(path, spec, mode, storage_options, fingerprint, force)

    def to_json(self, output_path: str, *, partition_on: str | None = None,
                **options) -> WriteResult:
        """NeMo Curator's name of :meth:`to_jsonl` (warns); same options."""
        if partition_on is not None:
            raise TypeError(
                "DocumentDataset.to_json: partition_on= is NeMo Curator's and has no "
                "counterpart in curator-dask; write one file per input file with "
                "write_to_filename=True (read with add_filename=True)")
        renamed("DocumentDataset.to_json(...)", "DocumentDataset.to_jsonl(...)")
        return self.to_jsonl(output_path, **options)

    def _write(self, path, spec: WriteSpec, mode, storage_options, fingerprint,
               force) -> WriteResult:
        """Write every partition as ``spec`` says (its options checked when it was made,
        before the output directory is touched)."""
        if spec.filename_field is not None:
            if spec.filename_field not in self.df.columns:
                raise KeyError(
                    f"write_to_filename needs the column {spec.filename_field!r}; read with "
                    f"add_filename=True (columns: {list(self.df.columns)})"
                )
            self._check_whole_files()
        with guarded(path, "output directory", inputs=[self.sources],
                     storage_options=storage_options, force=force) as out:
            first = prepare_output(out, mode, fingerprint=fingerprint)
            spec = replace(spec, path=out.path, first_index=first, schema=self.schema)
            token = dask.base.tokenize(self.df, spec)
            tasks = [dask.delayed(write_part)(part, spec, out.fs, (i,),
                                              dask_key_name=f"write-{token}-{i}")
                     for i, part in enumerate(self.df.to_delayed())]
            # Counted as it runs when a phase is labelled (a dedup phase, a barrier's output).
            stats = list(compute(*tasks))
            finish_output(out.fs, out.path, spec.encoder, stats)
        files = sorted(f for s in stats for f in s["files"])
        dropped, counters = split_counts(sum_dropped(s["dropped"] for s in stats))
        return WriteResult(
            path=path, files=files, rows=sum(s["rows"] for s in stats),
            bytes=sum(s["bytes"] for s in stats),
            dropped=dropped, counters=counters, partitions=stats,
        )

    def _check_whole_files(self) -> None:
        if self.plan is None:
            return
        split = sorted({s.file.name for p in self.plan for s in p.slices if not s.whole})
        if split:
            raise ValueError(
                f"write_to_filename: {len(split)} source file(s) were split across partitions "
                f"by blocksize (first: {split[0]!r}), so each would be written twice. Read with "
                "files_per_partition=1, or a blocksize larger than the largest file."
            )

    # -- in memory ----------------------------------------------------------------------
    def persist(self) -> DocumentDataset:
        """Compute the partitions and keep them in (cluster) memory."""
        return self._derive(self.df.persist())

    def head(self, n: int = 5):
        """The first ``n`` documents (from the first partition)."""
        return self.df.head(n)

    def repartition(self, npartitions: int | None = None,
                    partition_size: int | str | None = None) -> DocumentDataset:
        """Change the number of partitions (``npartitions``) or their size in memory."""
        if (npartitions is None) == (partition_size is None):
            raise ValueError("give exactly one of npartitions or partition_size")
        if npartitions is not None:
            df = self.df.repartition(npartitions=npartitions)
        else:
            df = self.df.repartition(partition_size=partition_size)
        repartitioned = DocumentDataset(df, sources=self.sources)
        repartitioned.schema = self.schema
        return repartitioned

    def map_partitions(self, func, *args, **kwargs) -> DocumentDataset:
        """``df.map_partitions(func, ...)`` as a dataset that keeps this one's sources
        (and plan), so writing it still refuses an output on top of the input.

        Examples
        --------
        >>> import pandas as pd
        >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a", "b"]}))
        >>> upper = ds.map_partitions(lambda df: df.assign(text=df["text"].str.upper()))
        >>> upper.df.compute()["text"].tolist()
        ['A', 'B']
        """
        return self._derive(self.df.map_partitions(func, *args, **kwargs))

    def to_backend(self, backend: str) -> DocumentDataset:
        """Move partitions to ``"pandas"`` (host) or ``"cudf"`` (GPU) frames."""
        check_backend(backend)
        return self._derive(self.df.to_backend(backend))

    def dropped_counts(self) -> dict[str, int]:
        """Documents dropped upstream, by reason, summed over partitions (computes)."""
        tasks = [dask.delayed(get_dropped)(part) for part in self.df.to_delayed()]
        return sum_dropped(dask.compute(*tasks))

    def counters(self) -> dict[str, int]:
        """Events counted upstream that dropped no document (for example entities
        redacted, by type), by name, summed over partitions (computes)."""
        tasks = [dask.delayed(get_counters)(part) for part in self.df.to_delayed()]
        return sum_dropped(dask.compute(*tasks))
