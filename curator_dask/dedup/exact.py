"""Exact deduplication: hash every text, shuffle ``(id, hash, row)`` on the hash, remove.

``identify`` hashes the text of each partition where it lies and keeps only
``(id, _hash, _row)``: about 60 bytes a document. ``_row`` is the document's row number
(:func:`~curator_dask.dedup.ids.row_numbers`: its partition and position), so a document
is known by where it is, not only by its id, which need not be unique. Those triples,
never the text, are shuffled on the hash (dask's P2P shuffle on a cluster, which spills
through disk, so a worker's memory follows the partition size and not the dataset's).
After the shuffle all copies of a text are in one partition, where ``duplicated`` finds
the groups. ``remove`` keeps the lowest id of each group (the first row of those that
share it) and takes the other rows out with
:func:`~curator_dask.dedup.removal.remove_ids`: by row, so repeated ids never take a
unique document or the last copy of a text with them.

Texts are compared byte for byte: no normalisation, so ``""`` and ``" "`` differ, and all
empty texts form one group. Two different texts are taken as equal only if their 128-bit
hashes collide.

Hashing on pandas partitions reads the Arrow string buffers directly and hashes each
text's bytes with ``hashlib.md5`` (OpenSSL) or ``xxhash.xxh3_128``, then turns all digests
into hex at once. Measured on one core, 200,000 texts of ~2 KB / 1,000,000 of ~94 B:

==============================================  ==========  ==========
method                                          ~2 KB       ~94 B
==============================================  ==========  ==========
``[md5(s.encode()).hexdigest() for s in ...]``  405 MB/s    63 MB/s
md5 over the Arrow buffers (used)               545 MB/s    104 MB/s
xxh3_128 over the Arrow buffers (used)          2600-4100   300 MB/s
``pandas.util.hash_pandas_object`` (64-bit)     198 MB/s    156 MB/s
==============================================  ==========  ==========

pyarrow has no md5 kernel, and md5 itself runs at ~600 MB/s a core, so on documents of a
few KB the md5 path is within 10% of the algorithm's speed; the per-text Python overhead
(~0.3 us) matters only for very short texts. ``md5`` is the default because cuDF's
``Series.hash_values(method="md5")`` gives the same 32-character hex digest on a GPU, so
both backends keep the same documents; ``xxh3_128`` is several times faster on CPUs (on
cuDF partitions it is computed on the host).
"""

from __future__ import annotations

import hashlib
import itertools
import logging

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa

from curator_dask.backends import backend_dispatch, rows_where
from curator_dask.compat import nemo_keywords, renamed
from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.cache import write_duplicates
from curator_dask.dedup.config import HASH_METHODS, Configured, ExactDedupConfig, takes_config
from curator_dask.dedup.held import InputHold
from curator_dask.dedup.ids import (
    HASH_FIELD,
    ROW_FIELD,
    is_hash_partitioned,
    mark_hash_partitioned,
    row_numbers,
)
from curator_dask.dedup.removal import (
    default_shuffle_method,
    listed_at_most,
    remove_ids,
)
from curator_dask.dropped import record_dropped
from curator_dask.errors import (
    ArgumentTypeError,
    CuratorError,
    InvalidArgumentError,
    MissingDependencyError,
)
from curator_dask.io.arrow_types import string_offsets, to_frame
from curator_dask.stages.columns import id_column_fix, require_columns
from curator_dask.task_names import scoped, task_name

__all__ = [
    "DUPLICATE_REASON",
    "HASH_FIELD",
    "HASH_METHODS",
    "NULL_TEXT_REASON",
    "ExactDuplicates",
    "NullTextError",
    "default_hash_partitions",
    "hash_texts",
]

logger = logging.getLogger(__name__)

DUPLICATE_REASON = "exact_duplicate"
NULL_TEXT_REASON = "null_text"
_HEX_CHARS = 32


class NullTextError(CuratorError, ValueError):
    """A document has no text (null) where exact deduplication needs one."""


# -- hashing ------------------------------------------------------------------------------

def hash_texts(texts, method: str = "md5"):
    """Hex digests of each text's UTF-8 bytes, as a string Series with the same index.

    Parameters
    ----------
    texts : pandas.Series or cudf.Series of str
        No nulls.
    method : {"md5", "xxh3_128"}
        ``md5`` matches cuDF's ``hash_values(method="md5")`` and ``hashlib``; ``xxh3_128``
        matches ``xxhash.xxh3_128_hexdigest`` and is several times faster.

    Examples
    --------
    >>> import pandas as pd
    >>> hash_texts(pd.Series(["", "All work and no play makes Jack a dull boy"])).tolist()
    ['d41d8cd98f00b204e9800998ecf8427e', 'c61a4185135eda043f35e92c3505e180']
    """
    if method not in HASH_METHODS:
        raise InvalidArgumentError(f"hash_method must be one of {HASH_METHODS}, got {method!r}")
    return _hash_texts(texts, method)


def _hash_texts_pandas(texts: pd.Series, method: str) -> pd.Series:
    hexes = _hash_arrow(_arrow_strings(texts), method)
    hashed = to_frame(pa.table({HASH_FIELD: hexes}), "pandas")[HASH_FIELD]
    hashed.index = texts.index
    return hashed


def _hash_texts_cudf(texts, method: str):
    import cudf

    if method == "md5":
        # 32-character lowercase hex md5 of the UTF-8 bytes, as _hash_arrow makes it.
        return texts.hash_values(method="md5")
    # cuDF has no XXH3-128: hash on the host, bring the digests back.
    arrow = texts.to_arrow()
    if isinstance(arrow, pa.ChunkedArray):
        arrow = arrow.combine_chunks()
    hashed = cudf.Series.from_arrow(_hash_arrow(arrow, method))
    hashed.index = texts.index
    return hashed


_hash_texts = backend_dispatch("hash_texts", pandas=_hash_texts_pandas,
                               cudf=lambda: _hash_texts_cudf)


def _arrow_strings(texts: pd.Series) -> pa.Array | pa.ChunkedArray:
    values = texts.array
    if hasattr(values, "__arrow_array__"):
        arrow = pa.array(values)
    else:  # object dtype
        arrow = pa.array(np.asarray(values, dtype=object), type=pa.large_string())
    # Chunks stay as they are: digests hashes each where it lies.
    if not (pa.types.is_string(arrow.type) or pa.types.is_large_string(arrow.type)):
        arrow = arrow.cast(pa.large_string())
    return arrow


def _md5_constructor():
    try:
        hashlib.md5(b"")
        return hashlib.md5
    except ValueError:  # FIPS mode: md5 only when declared not for security
        return lambda data: hashlib.md5(data, usedforsecurity=False)


def _hash_constructor(method: str):
    if method == "md5":
        return _md5_constructor()
    try:
        import xxhash
    except ImportError as err:
        raise MissingDependencyError(
            "hash_method='xxh3_128' needs the xxhash package: pip install 'curator-dask[dedup]' "
            "(or pip install xxhash), or use hash_method='md5'"
        ) from err
    return xxhash.xxh3_128


def string_buffers(arrow: pa.Array) -> tuple[memoryview, list[int]]:
    """The UTF-8 bytes of a string array and its ``len + 1`` offsets (as Python ints,
    which slice a memoryview fastest)."""
    data, offsets = _string_offsets(arrow)
    return data, offsets.tolist()


def _string_offsets(arrow: pa.Array) -> tuple[memoryview, np.ndarray]:
    data_buffer, offsets = string_offsets(arrow)
    return (memoryview(data_buffer) if data_buffer is not None else memoryview(b"")), offsets


def digests(arrow: pa.Array | pa.ChunkedArray, method: str) -> bytes:
    """The 16-byte digests of every string's UTF-8 bytes, concatenated (no nulls).

    A chunked array is hashed chunk by chunk where it lies: combining the chunks first
    would copy every text once more (a fresh allocation as large as the texts, whose
    page faults cost about as much as the hashing on a 64 MiB partition).
    """
    if arrow.null_count:
        raise NullTextError(f"cannot hash {arrow.null_count} null text(s)")
    new = _hash_constructor(method)
    chunks = arrow.chunks if isinstance(arrow, pa.ChunkedArray) else [arrow]
    hashed = []
    for chunk in chunks:
        data, offsets = string_buffers(chunk)
        # The one per-document loop, measured faster than the alternatives in the module
        # docstring: the hashing runs in C on buffer slices, no Python str is built.
        hashed.extend([new(data[start:end]).digest()
                       for start, end in itertools.pairwise(offsets)])
    return b"".join(hashed)


def hex_digests(packed: bytes) -> pa.LargeStringArray:
    """32-character lowercase hex strings of concatenated 16-byte digests, made at once."""
    n = len(packed) // 16
    hex_offsets = np.arange(0, _HEX_CHARS * (n + 1), _HEX_CHARS, dtype=np.int64)
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(hex_offsets),
                                            pa.py_buffer(packed.hex().encode("ascii")))


def _hash_arrow(arrow: pa.Array | pa.ChunkedArray, method: str) -> pa.Array:
    """Hash each string's bytes straight from the Arrow buffers; hex all digests at once."""
    return hex_digests(digests(arrow, method))


# -- partition functions -----------------------------------------------------------------

def _hash_partition(df, id_field: str, text_field: str, method: str, on_null: str,
                    partition_info=None):
    """``(id, _hash, _row)`` of one partition; null texts raise or are left out."""
    number = partition_info["number"] if partition_info is not None else 0
    # Numbered before any row is left out: removal counts positions in the whole partition.
    rows = row_numbers(len(df), number)
    texts = df[text_field]
    nulls = texts.isna()
    null_count = int(nulls.sum())
    if null_count:
        if on_null == "error":
            first = df[id_field][nulls].iloc[0]
            raise NullTextError(
                f"partition {number}: {null_count} document(s) have a null {text_field!r} "
                f"(first: {id_field}={first}; ds.plan[{number}] lists the partition's "
                "files). Drop or fill them first, or pass on_null='skip' to drop them and "
                f"count them as {NULL_TEXT_REASON!r}"
            )
        df = rows_where(df, ~nulls)
        rows = rows[~np.asarray(nulls.to_numpy(), dtype=bool)]
    out = df[[id_field]].assign(**{HASH_FIELD: hash_texts(df[text_field], method),
                                   ROW_FIELD: rows})
    return out.reset_index(drop=True)


def _duplicate_groups(df, id_field: str):
    """The rows whose hash occurs more than once, ordered by hash, id, then row."""
    candidates = repeated_digest_candidates(df[HASH_FIELD])
    if candidates is not None:
        # Every repeated hash is among the candidates; singletons whose fold collides
        # with another's are taken out by the exact comparison below.
        df = df[candidates]
    grouped = df[df[HASH_FIELD].duplicated(keep=False)]
    return grouped.sort_values([HASH_FIELD, id_field, ROW_FIELD]).reset_index(drop=True)


#: Odd 64-bit multipliers that fold a 32-character digest's four 8-byte words into one.
_FOLD = np.array([1, 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9],
                 dtype=np.uint64)


def repeated_digest_candidates(hashes) -> np.ndarray | None:
    """A mask over ``hashes`` (32-character hex digests) that holds every row whose
    digest occurs more than once, and rarely a few more; None where the column is not
    such digests in Arrow memory (cuDF, object strings), and the caller compares the
    strings themselves.

    Comparing 400,000 digests as strings (``duplicated``) costs about three times as
    much as comparing one 64-bit fold of each: the grouping step compares every
    document's hash, so the fold is taken first and only the rows it finds repeated
    are compared as strings.

    Examples
    --------
    >>> import pandas as pd
    >>> digests = pd.Series(["0" * 32, "1" * 32, "0" * 32], dtype="string[pyarrow]")
    >>> repeated_digest_candidates(digests).tolist()
    [True, False, True]
    """
    values = hashes.array if isinstance(hashes, pd.Series) else None
    if values is None or not hasattr(values, "__arrow_array__") or len(values) == 0:
        return None
    arrow = pa.chunked_array(values.__arrow_array__())
    if arrow.null_count or not (pa.types.is_string(arrow.type)
                                or pa.types.is_large_string(arrow.type)):
        return None
    folds = []
    for chunk in arrow.chunks:  # where they lie: no copy of the digests
        data, offsets = _string_offsets(chunk)
        if np.any(np.diff(offsets) != _HEX_CHARS):
            return None
        start, n = int(offsets[0]), len(chunk)
        words = np.frombuffer(data[start:start + _HEX_CHARS * n], dtype=np.uint64)
        with np.errstate(over="ignore"):
            folds.append(np.bitwise_xor.reduce(words.reshape(n, 4) * _FOLD, axis=1))
    return pd.Series(np.concatenate(folds)).duplicated(keep=False).to_numpy()


def _rows_to_remove(df, id_field: str):
    """``(id, _row)`` of all but the first of each hash group, by id then row (the frame
    holds whole groups). Two copies that share an id are two rows: one of them stays."""
    ordered = df.sort_values([HASH_FIELD, id_field, ROW_FIELD])
    return ordered[ordered[HASH_FIELD].duplicated(keep="first")][[id_field, ROW_FIELD]]


def _drop_null_text(df, text_field: str):
    nulls = df[text_field].isna()
    count = int(nulls.sum())
    if not count:
        return df
    return record_dropped(rows_where(df, ~nulls), NULL_TEXT_REASON, count)


# -- the operation ------------------------------------------------------------------------

#: What the tasks of exact dedup are called outside a pipeline stage (``exact_dedup/hash``).
EXACT_SCOPE = "exact_dedup"


class ExactDuplicates(Configured):
    """Find documents with identical text, and remove all but the first of each group.

    Parameters
    ----------
    id_field : str, default "id"
        Document ids (``AddId``); the document kept of each group is the one with the
        lowest id. Ids need not be unique: documents are removed by row (see
        :mod:`curator_dask.dedup.ids`), and of copies that share the lowest id the first
        in the input is kept.
    text_field : str, default "text"
    hash_method : {"md5", "xxh3_128"}
        See :func:`hash_texts`. ``md5`` keeps the same documents on pandas and cuDF.
    perform_removal : bool, default False
        Calling the object returns the deduplicated dataset instead of the duplicates
        (as NeMo Curator's, and :class:`~curator_dask.dedup.FuzzyDuplicates`).
    cache_path : str, optional
        A directory for the duplicate list: ``identify`` writes it there (one Parquet file
        per hash partition) and returns it read back, so ``remove`` does not hash again.
        NeMo Curator's ``cache_dir=`` is taken for it (with a ``DeprecationWarning``).
    on_null : {"error", "skip"}
        A null text raises :class:`NullTextError` naming the partition, or the document is
        left out of the groups and dropped by ``remove``, counted as ``"null_text"``.
    removal_strategy : {"auto", "broadcast", "shuffle"}
    broadcast_threshold : int
        See :func:`~curator_dask.dedup.removal.remove_ids`.
    config : ExactDedupConfig, optional
        All the parameters above but ``perform_removal``, ``cache_path`` and
        ``storage_options`` as one object (then leave them at their defaults), shared
        with the workflow and the pipeline stage.
    hold_input : bool, optional
        Keep the partitions ``identify`` parses in the cluster's memory for the
        ``remove`` of the same dataset, which then does not read the input again. By
        default only where a ``distributed`` client runs and the input, read from
        files, fits comfortably in the workers' memory; ``False`` never, ``True``
        always. See :mod:`curator_dask.dedup.held`.
    hash_partitions : int, optional
        Partitions of the ``(id, _hash, _row)`` shuffle. Default: one per 2 GiB of input
        files (one per 16 input partitions for data not read from files). The triples
        are ~50 bytes a document, so a partition of 2 GiB of ~1 KB documents holds about
        100 MB; fewer, larger shuffle shards cost less than one per input partition.

    Examples
    --------
    >>> import pandas as pd
    >>> from curator_dask import DocumentDataset
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame(
    ...     {"id": [1, 2, 3, 4, 5], "text": ["a", "b", "a", "", ""]}), npartitions=2)
    >>> dedup = ExactDuplicates()
    >>> dups = dedup.identify(ds)
    >>> dups.df.compute().sort_values("id")["id"].tolist()
    [1, 3, 4, 5]
    >>> clean = dedup.remove(ds, dups)
    >>> sorted(clean.df.compute()["id"]), clean.dropped_counts()
    ([1, 2, 4], {'exact_duplicate': 2})
    """

    @nemo_keywords()
    @takes_config(ExactDedupConfig, positional=("id_field", "text_field", "hash_method",
                                                "perform_removal", "cache_path"))
    def __init__(self, perform_removal: bool = False, cache_path: str | None = None, *,
                 storage_options: dict | None = None, hold_input: bool | None = None,
                 config: ExactDedupConfig | None = None):
        if config.hash_method == "xxh3_128":
            _hash_constructor(config.hash_method)  # fail now, not on a worker
        self.config = config
        self.perform_removal = perform_removal
        self.cache_path = cache_path
        self.storage_options = storage_options
        self.held = InputHold(hold_input)

    def __repr__(self) -> str:
        return (f"ExactDuplicates(id_field={self.id_field!r}, text_field={self.text_field!r}, "
                f"hash_method={self.hash_method!r}, perform_removal={self.perform_removal})")

    @nemo_keywords()
    def __call__(self, ds: DocumentDataset) -> DocumentDataset:
        """The duplicates, or with ``perform_removal=True`` the deduplicated dataset."""
        duplicates = self.identify(ds)
        return self.remove(ds, duplicates) if self.perform_removal else duplicates

    # -- identify --------------------------------------------------------------------------
    @nemo_keywords()
    @scoped(EXACT_SCOPE)
    def identify(self, ds: DocumentDataset) -> DocumentDataset:
        """``(id, _hash, _row)`` of every document whose text occurs more than once.

        Lazy unless ``cache_path`` is set. The result is partitioned on ``_hash``: each
        group lies whole in one partition, ordered by hash, id, then row. ``_row`` is
        the document's row number in ``ds``, so ``remove`` needs the same ``ds``.
        Where it fits, the parsed input is kept for that ``remove`` (``hold_input``):
        its parse then starts at once, on the cluster, in the background.
        """
        self._check_columns(ds)
        with self.held.holding(ds) as held:
            return self._identify(held)

    def _identify(self, ds: DocumentDataset) -> DocumentDataset:
        meta = _hash_partition(ds.df._meta, self.id_field, self.text_field,
                               self.hash_method, "skip")
        hashed = ds.df.map_partitions(
            _hash_partition, self.id_field, self.text_field, self.hash_method, self.on_null,
            meta=meta, align_dataframes=False, enforce_metadata=False, token=task_name("hash"),
        )
        buckets = self.hash_partitions or _hash_partitions(ds)
        shuffled = hashed.shuffle(on=HASH_FIELD, ignore_index=True, npartitions=buckets,
                                  shuffle_method=default_shuffle_method(
                                      hashed.npartitions * buckets))
        groups = shuffled.map_partitions(_duplicate_groups, self.id_field, meta=meta,
                                         align_dataframes=False, enforce_metadata=False,
                                         token=task_name("groups"))
        duplicates = DocumentDataset(groups)
        mark_hash_partitioned(duplicates)
        if self.cache_path is None:
            return duplicates
        return write_duplicates(duplicates, self.cache_path, storage_options=self.storage_options,
                                inputs=[ds.sources]).duplicates

    @nemo_keywords()
    def identify_duplicates(self, ds: DocumentDataset) -> DocumentDataset:
        """NeMo Curator's name of :meth:`identify` (warns)."""
        renamed("ExactDuplicates.identify_duplicates(ds)", "ExactDuplicates.identify(ds)")
        return self.identify(ds)

    def _check_columns(self, ds: DocumentDataset) -> None:
        if not isinstance(ds, DocumentDataset):
            raise ArgumentTypeError(
                f"ExactDuplicates takes a DocumentDataset, got {type(ds).__name__}")
        wanted = [self.id_field, self.text_field]
        missing = [c for c in wanted if c not in ds.df.columns]
        require_columns("ExactDuplicates", ds.df.columns, wanted,
                        fix=id_column_fix(self.id_field, missing)
                        or "Pass text_field= naming the text column.")

    # -- remove ----------------------------------------------------------------------------
    @nemo_keywords()
    @scoped(EXACT_SCOPE)
    def remove(self, ds: DocumentDataset, duplicates: DocumentDataset, *,
               strategy: str | None = None) -> DocumentDataset:
        """Keep the lowest id of each group in ``duplicates`` and drop the rest from ``ds``.

        ``duplicates`` must come from ``identify(ds)`` on this same dataset (its rows
        are named by position); a list made from another raises
        :class:`~curator_dask.dedup.ids.DuplicateListMismatchError` instead of removing
        the wrong documents. Dropped documents are counted as ``"exact_duplicate"``
        (and, with ``on_null="skip"``, null texts as ``"null_text"``) in
        :meth:`DocumentDataset.dropped_counts`. ``strategy`` overrides
        ``removal_strategy`` for this call (a caller that knows the list is short can
        skip the count that ``"auto"`` makes).
        """
        self._check_columns(ds)
        ds = self.held.take(ds)
        most = listed_at_most(duplicates)
        rows = self.ids_to_remove(duplicates, most_rows=most)
        clean = remove_ids(ds, rows, id_field=self.id_field,
                           strategy=strategy or self.removal_strategy,
                           broadcast_threshold=self.broadcast_threshold,
                           reason=DUPLICATE_REASON, most_ids=most)
        if self.on_null == "skip":
            # After the removal, which finds rows by their position in the whole partition.
            clean = clean.map_partitions(_drop_null_text, self.text_field,
                                         meta=clean.df._meta, token=task_name("remove"))
        return clean

    @scoped(EXACT_SCOPE)
    def ids_to_remove(self, duplicates: DocumentDataset, *,
                      most_rows: int | None = None) -> dd.DataFrame:
        """``(id, _row)`` of the documents ``remove`` drops: every row in ``duplicates``
        but the first of its group.

        A list not known to be partitioned on the hash (read back from files) is
        regrouped first: shuffled on the hash, or, where ``most_rows`` (the most rows it
        holds, known without computing it) is within ``broadcast_threshold``, gathered
        into one partition, which is cheaper and holds every group whole too."""
        df = duplicates.df if isinstance(duplicates, DocumentDataset) else duplicates
        wanted = [self.id_field, HASH_FIELD, ROW_FIELD]
        require_columns(
            "ExactDuplicates.remove", df.columns, wanted,
            fix="The duplicates must be as ExactDuplicates.identify returns them (a list of "
                "ids alone cannot tell apart documents that share an id): identify again, "
                "or use remove_ids.")
        if not is_hash_partitioned(df) and df.npartitions > 1:
            # Not known to hold whole groups per partition (read from elsewhere): regroup.
            if most_rows is not None and most_rows <= self.broadcast_threshold:
                df = df.repartition(npartitions=1)
            else:
                df = df.shuffle(on=HASH_FIELD, ignore_index=True,
                                shuffle_method=default_shuffle_method(df.npartitions ** 2))
        return df.map_partitions(_rows_to_remove, self.id_field,
                                 meta=df._meta[[self.id_field, ROW_FIELD]],
                                 align_dataframes=False, enforce_metadata=False,
                                 token=task_name("remove"))


#: Input bytes a hash bucket serves: ~50 bytes of ``(id, hash, row)`` per document, so
#: a bucket of 2 GiB of ~1 KB documents holds about 100 MB.
BYTES_PER_BUCKET = 2 << 30


def default_hash_partitions(input_bytes: int) -> int:
    """Hash buckets for ``input_bytes`` of input: one per 2 GiB, at least one.

    Examples
    --------
    >>> default_hash_partitions(500 * 10**6), default_hash_partitions(10**12)
    (1, 466)
    """
    return max(1, -(-int(input_bytes) // BYTES_PER_BUCKET))


def _hash_partitions(ds: DocumentDataset) -> int:
    """Partitions of the ``(id, hash, row)`` shuffle when the user gives none: one per
    2 GiB of input files (~50 bytes a document go into the shuffle, so each holds about
    100 MB of ~1 KB documents), or one per 16 input partitions for data not read from
    files."""
    if ds.plan is not None:
        return min(ds.npartitions, default_hash_partitions(sum(p.nbytes for p in ds.plan)))
    return max(1, -(-ds.npartitions // 16))
