"""DocumentDataset: a partitioned corpus, a thin wrapper over a Dask dataframe.

``ds.df`` is the Dask dataframe; everything Dask offers works on it. The wrapper adds
curator-dask's readers (planned partitions, clear errors on bad input), atomic writers
and the drop counts that stages record.

The counts cannot ride on the dataframe's partitions (a partition is a frame, and a
frame carries nothing that survives every operation on every backend), so a dataset
keeps its partitions twice over the same tasks: as envelopes
(:class:`~curator_dask.envelopes.Envelopes`, one
:class:`~curator_dask.partition.Partition` each, frame and counts) and as the
dataframe of their frames (``ds.df``). A stage, :meth:`DocumentDataset.map_partitions`
and the dedup removals add a step to the envelopes; a write and
:meth:`DocumentDataset.dropped_counts` compute the envelopes, so each partition is
computed once and its counts exactly. Operations on ``ds.df`` itself (a column set in
place, a filter written with Dask) are seen: the dataset then takes the new dataframe
as its partitions and carries the counts of the old ones beside it, computed from the
same tasks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import dask
import dask.dataframe as dd
import pandas as pd
import pyarrow as pa

from curator_dask._compute import compute
from curator_dask.compat import nemo_keywords, renamed
from curator_dask.dataset_writes import WriteResult, file_spec, megatron_spec, write_partitions
from curator_dask.dropped import counting, join_counts, split_counts, sum_dropped
from curator_dask.envelopes import Envelopes, FunctionStep
from curator_dask.errors import ArgumentTypeError, InvalidArgumentError
from curator_dask.io.jsonl import EncodingErrors, OnBadLines
from curator_dask.io.overlap import InputPaths
from curator_dask.io.planner import PartitionSpec
from curator_dask.io.rollover import TargetFileSize
from curator_dask.io.source import PartitionSource, plan_jsonl, plan_parquet, plan_warc
from curator_dask.io.tables import Backend, check_backend
from curator_dask.io.warc import HTML_CONTENT_TYPES
from curator_dask.io.writers import WriteMode, WriteSpec
from curator_dask.partition import Partition, Step

__all__ = ["DocumentDataset", "WriteResult"]

logger = logging.getLogger(__name__)


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
            raise ArgumentTypeError(
                f"DocumentDataset wraps a dask.dataframe.DataFrame, got {type(df).__name__}; "
                "use DocumentDataset.from_pandas for a pandas frame"
            )
        self._set(Envelopes.of(df), df._meta, plan=plan, sources=sources)
        self._df, self._df_name = df, df._name

    def _set(self, parts: Envelopes, meta, *, plan=None, sources=None, blocksize=None,
             schema=None) -> None:
        self._parts, self._meta = parts, meta
        # The dataframe of the frames, made on first use (and its name then, which tells
        # an operation done on it in place).
        self._df: dd.DataFrame | None = None
        self._df_name: str | None = None
        # The partition plan the data was read with, kept while partitions map 1:1 to it.
        self.plan = list(plan) if plan is not None else None
        self.sources = sources
        #: Bytes per partition the plan was made with (given or chosen automatically;
        #: None for ``files_per_partition`` or data not read from files). Passing it as
        #: ``blocksize`` gives the same plan on any cluster.
        self.blocksize: int | None = blocksize
        #: The Arrow schema the data was read with (None for data not read from files),
        #: kept by every dataset derived from this one: writers give string columns the
        #: type it records (``string`` or ``large_string``).
        self.schema: pa.Schema | None = schema

    # -- the partitions: envelopes, and the dataframe of their frames -------------------
    @property
    def df(self) -> dd.DataFrame:
        """The Dask dataframe of the documents."""
        if self._df is None:
            self._df = self._parts.frames(self._meta)
            self._df_name = self._df._name
        return self._df

    @df.setter
    def df(self, df: dd.DataFrame) -> None:
        parts = self._envelopes()
        self._parts = Envelopes.of(df, carried=parts.counts())
        self._df, self._df_name, self._meta = df, df._name, df._meta

    def _envelopes(self) -> Envelopes:
        """The partitions as envelopes, after whatever was done to :attr:`df` in place
        (a column set): then the dataframe is the partitions, the counts of the old
        ones carried."""
        if self._df is not None and self._df._name != self._df_name:
            self._parts = Envelopes.of(self._df, carried=self._parts.counts())
            self._df_name, self._meta = self._df._name, self._df._meta
        return self._parts

    def _derived(self, parts: Envelopes, meta, *, keep_plan: bool = True) -> DocumentDataset:
        """A dataset of ``parts`` that keeps this one's sources, schema and (with
        ``keep_plan``: the partitions still map 1:1 to it) plan."""
        derived = DocumentDataset.__new__(DocumentDataset)
        derived._set(parts, meta, plan=self.plan if keep_plan else None, sources=self.sources,
                     blocksize=self.blocksize if keep_plan else None, schema=self.schema)
        return derived

    def with_step(self, step: Step, meta) -> DocumentDataset:
        """A dataset of these partitions after ``step`` (a callable ``step(partition,
        index) -> Partition``, see :mod:`curator_dask.partition`), whose frames have
        ``meta``'s columns: how a stage applies itself (``stage(ds)``)."""
        return self._derived(self._envelopes().with_step(step), meta)

    def with_frames(self, df: dd.DataFrame) -> DocumentDataset:
        """A dataset of ``df``, made from this one's dataframe by Dask operations (a
        column selection, a repartition): it keeps this one's sources and schema, and
        the counts of this one's partitions, computed from the same tasks."""
        parts = self._envelopes()
        derived = self._derived(Envelopes.of(df, carried=parts.counts()), df._meta,
                                keep_plan=self.plan is not None
                                and df.npartitions == parts.npartitions)
        derived._df, derived._df_name = df, df._name
        return derived

    def with_partitions(self, parts: Sequence) -> DocumentDataset:
        """A dataset of ``parts`` (``Delayed`` :class:`~curator_dask.partition.Partition`,
        one per partition of this one, in order): it keeps its sources, schema and plan."""
        return self._derived(Envelopes.of(list(parts)), self._meta)

    def with_counts(self, dropped: Mapping[str, int],
                    counters: Mapping[str, int] | None = None) -> DocumentDataset:
        """This dataset with ``dropped`` (documents by reason) and ``counters`` added to
        its counts: what a whole-dataset operation that ran on the client recorded."""
        if not dropped and not counters:
            return self
        return self._carrying([join_counts(dropped, counters or {})])

    def _carrying(self, counts: Sequence) -> DocumentDataset:
        """This dataset with ``counts`` (joined mappings, or Delayed ones) carried."""
        parts = self._envelopes()
        derived = self._derived(replace(parts, carried=(*parts.carried, *counts)), self._meta)
        derived._df, derived._df_name = self._df, self._df_name
        return derived

    def through(self, operation: Callable[[DocumentDataset], DocumentDataset]
                ) -> DocumentDataset:
        """``operation(ds)`` on these documents as a whole (a whole-dataset stage, a
        dedup), counted once: ``operation`` sees the documents without the counts of
        what came before (its output may be built from them, or not), and its output
        carries those counts, with what ``operation`` recorded on the client."""
        parts = self._envelopes()
        bare = self._derived(Envelopes.of(self.df), self._meta)
        bare._df, bare._df_name = self.df, self.df._name
        with counting() as tally:
            out = operation(bare)
        return out._carrying([*parts.counts(), join_counts(tally.dropped, tally.counters)])

    @property
    def source(self) -> PartitionSource | None:
        """The planned input this dataset is, as read (None once a step or an operation
        changed it, or for data not read as planned); :mod:`curator_dask.io.source`."""
        parts = self._envelopes()
        if isinstance(parts.origin, PartitionSource) and not parts.steps:
            return parts.origin
        return None

    def stream_source(self) -> tuple[PartitionSource | None, str]:
        """The planned input the partitions can be streamed from, one task a partition
        reading it and running the steps applied since (an executor streams on from a
        whole-dataset stage's output this way), or None and why not."""
        return self._envelopes().stream_source(self._meta)

    @property
    def npartitions(self) -> int:
        return self._envelopes().npartitions

    @property
    def token(self) -> str:
        """A name of these partitions as they are defined now, unique to them: a
        dataset derived from this one (a stage, a persist) has its own, and so has this
        one once ``df`` is changed in place. What a dedup's ``remove`` checks before it
        takes the partitions its ``identify`` kept (:mod:`curator_dask.dedup.held`).

        Examples
        --------
        >>> import pandas as pd
        >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a", "b"]}))
        >>> before = ds.token
        >>> ds.token == before
        True
        >>> ds.df = ds.df.assign(n=1)
        >>> ds.token == before
        False
        """
        return self._envelopes().token

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
        return cls.from_source(plan_jsonl(
            path, blocksize=blocksize, files_per_partition=files_per_partition,
            columns=columns, text_field=text_field, add_filename=add_filename,
            input_meta=input_meta, backend=backend, on_bad_lines=on_bad_lines,
            encoding_errors=encoding_errors, text_cast=text_cast,
            storage_options=storage_options))

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
        return cls.from_source(plan_parquet(
            path, blocksize=blocksize, files_per_partition=files_per_partition,
            columns=columns, text_field=text_field, add_filename=add_filename,
            input_meta=input_meta, backend=backend, text_cast=text_cast,
            storage_options=storage_options))

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
        return cls.from_source(plan_warc(
            path, blocksize=blocksize, files_per_partition=files_per_partition,
            content_types=content_types, add_filename=add_filename,
            storage_options=storage_options))

    @classmethod
    def from_source(cls, source: PartitionSource) -> DocumentDataset:
        """The dataset of a planned input (:mod:`curator_dask.io.source`): one partition
        per planned partition, each read by the source's reader in a task of its own.

        The ``read_*`` methods are this over ``plan_jsonl``, ``plan_parquet`` and
        ``plan_warc``; a pipeline's reader stage hands the same source to the executors.
        """
        ds = cls.__new__(cls)
        ds._set(Envelopes.of(source), source.meta, plan=source.plan, sources=source.sources,
                blocksize=source.blocksize, schema=source.schema)
        return ds

    @classmethod
    def from_partitions(cls, parts: Sequence, meta, *,
                        sources: InputPaths | None = None) -> DocumentDataset:
        """The dataset of partitions already made: ``Delayed`` values or futures of
        :class:`~curator_dask.partition.Partition` (what an executor keeps without a
        writer), with frames like ``meta``; their counts come with them."""
        ds = cls.__new__(cls)
        ds._set(Envelopes.of(list(parts) or [dask.delayed(Partition(meta))]), meta,
                sources=sources)
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
        spec = file_spec(path, "parquet", compression, write_to_filename and filename_field,
                         keep_filename_column, target_file_size)
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
        spec = file_spec(path, "jsonl", compression, write_to_filename and filename_field,
                         keep_filename_column, target_file_size)
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
        spec = megatron_spec(path, tokenizer, text_field, bos, eos, add_special_tokens,
                             source_field, target_file_size)
        return self._write(path, spec, mode, storage_options, fingerprint, force)

    def to_json(self, output_path: str, *, partition_on: str | None = None,
                **options) -> WriteResult:
        """NeMo Curator's name of :meth:`to_jsonl` (warns); same options."""
        if partition_on is not None:
            raise ArgumentTypeError(
                "DocumentDataset.to_json: partition_on= is NeMo Curator's and has no "
                "counterpart in curator-dask; write one file per input file with "
                "write_to_filename=True (read with add_filename=True)")
        renamed("DocumentDataset.to_json(...)", "DocumentDataset.to_jsonl(...)")
        return self.to_jsonl(output_path, **options)

    def _write(self, path, spec: WriteSpec, *options) -> WriteResult:
        return write_partitions(self._envelopes(), path, spec, *options, plan=self.plan,
                                meta=self._meta, sources=self.sources, schema=self.schema)

    # -- in memory ----------------------------------------------------------------------
    def persist(self) -> DocumentDataset:
        """Compute the partitions and keep them in (cluster) memory, counts included."""
        parts = self._envelopes()
        kept = dask.persist(*parts.delayed(), *parts.carried)
        n = parts.npartitions
        return self._derived(Envelopes.of(list(kept[:n]), carried=kept[n:]), self._meta)

    def head(self, n: int = 5):
        """The first ``n`` documents (from the first partition)."""
        return self.df.head(n)

    def repartition(self, npartitions: int | None = None,
                    partition_size: int | str | None = None) -> DocumentDataset:
        """Change the number of partitions (``npartitions``) or their size in memory."""
        if (npartitions is None) == (partition_size is None):
            raise InvalidArgumentError("give exactly one of npartitions or partition_size")
        if npartitions is not None:
            df = self.df.repartition(npartitions=npartitions)
        else:
            df = self.df.repartition(partition_size=partition_size)
        repartitioned = self.with_frames(df)
        repartitioned.plan = repartitioned.blocksize = None
        return repartitioned

    def map_partitions(self, func, *args, meta=None, token: str | None = None,
                       **kwargs) -> DocumentDataset:
        """``func(partition, *args, **kwargs)`` on every partition, as a dataset that keeps
        this one's sources (and plan), so writing it still refuses an output on top of
        the input, and counts what ``func`` records
        (:func:`~curator_dask.dropped.record_dropped`).

        ``args`` may hold Dask collections, as for Dask's ``map_partitions``: a
        dataframe of one partition goes whole to every partition, one with as many
        partitions as this dataset goes partition by partition. ``meta``: the output's
        empty frame (inferred by Dask when not given); a ``func`` that takes
        ``partition_info`` gets ``{"number": i}``. ``token``: what the tasks are called,
        as for Dask (by default the function's name, ``<scope>/<name>`` inside a task
        scope: :mod:`curator_dask.task_names`).

        Examples
        --------
        >>> import pandas as pd
        >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a", "b"]}))
        >>> upper = ds.map_partitions(lambda df: df.assign(text=df["text"].str.upper()))
        >>> upper.df.compute()["text"].tolist()
        ['A', 'B']
        """
        for option in ("align_dataframes", "enforce_metadata"):
            kwargs.pop(option, None)  # Dask's own options: the step needs none of them
        if meta is None:  # as Dask infers it: the function on the empty frame
            meta = self.df.map_partitions(func, *args, align_dataframes=False,
                                          **kwargs)._meta
        parts = self._envelopes()
        if not any(dask.is_dask_collection(arg) for arg in args):
            return self._derived(parts.with_step(
                FunctionStep(func, args, tuple(kwargs.items())), label=token), meta)
        return self._derived(parts.with_layer(func, args, kwargs, label=token), meta)

    def to_backend(self, backend: str) -> DocumentDataset:
        """Move partitions to ``"pandas"`` (host) or ``"cudf"`` (GPU) frames."""
        check_backend(backend)
        return self.with_frames(self.df.to_backend(backend))

    def to_partitions(self) -> list:
        """The partitions as ``dask.delayed`` :class:`~curator_dask.partition.Partition`
        values: each frame with its drop counts and counters, from the same tasks as
        :attr:`df`'s partitions.

        Examples
        --------
        >>> import dask, pandas as pd
        >>> from curator_dask.dropped import record_dropped
        >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a", "", "b"]}))
        >>> def drop_empty(df):
        ...     keep = df["text"] != ""
        ...     return record_dropped(df[keep], "empty", int((~keep).sum()))
        >>> [part.dropped for part in dask.compute(*ds.map_partitions(drop_empty).to_partitions())]
        [{'empty': 1}]
        """
        return self._envelopes().delayed()

    def dropped_counts(self) -> dict[str, int]:
        """Documents dropped upstream, by reason, summed over partitions (computes)."""
        return self._counts()[0]

    def counters(self) -> dict[str, int]:
        """Events counted upstream that dropped no document (for example entities
        redacted, by type), by name, summed over partitions (computes)."""
        return self._counts()[1]

    def _counts(self) -> tuple[dict[str, int], dict[str, int]]:
        dropped, counters = split_counts(sum_dropped(compute(*self._envelopes().counts())))
        return dict(sorted(dropped.items())), dict(sorted(counters.items()))

