"""Blend several sources by weight: a reader for pipelines, a function for datasets.

A blend of ``target_size`` documents (or tokens) takes from each source its share of the
target, ``target_size * weight / sum(weights)`` (rounded so the shares sum to the target,
the largest remainders rounded up). Which documents a source contributes is decided by a
seeded random key per document, a hash of its text, the seed and the source's place in
the list: a source gives the documents with the smallest keys until its share is reached.

- **Deterministic**: the keys depend on the documents alone, not on how the input is cut
  into partitions or how many workers read it, so the same sources, weights, seed and
  target give the same documents on any cluster, in every run. (Identical texts in one
  source share a key and are taken or left together: deduplicate first.)
- **Without replacement** (default): a source gives each document at most once; a share
  larger than the source is an error that names the source.
- **With replacement** (``replacement=True``): a source smaller than its share is
  repeated: every document ``share // size`` times, and the remainder taken by key as
  above, so no document appears more than once more than any other.
- **By tokens** (``by="tokens"``, with a ``tokenizer``): shares are counted in tokens of
  the text (no special tokens); a source gives whole documents in key order until its
  tokens reach its share (the last document may pass it by less than its own length).

Planning reads every source once before the blend is read (hashing each text, and
tokenizing it when blending by tokens), keeping 16 bytes per document in cluster memory
while it finds each source's cut: a histogram of the keys, then the exact key among the
few documents of the bucket where the share is reached.

Documents a source does not give are counted under the drop reason
``reader.blend_not_selected``; what each source gave goes into the counters
``<reader>.<source>.documents`` (and ``.tokens``, ``.repeated`` for copies beyond the
first), and into the ``source`` column of every document.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import (
    Literal,
    NotRequired,  # pydantic checks these on 3.11
)

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
from typing_extensions import TypedDict

from curator_dask.bounds import ByteSize, NonNegativeInt, PositiveInt
from curator_dask.compat import nemo_keywords
from curator_dask.dataset import DocumentDataset
from curator_dask.dropped import counting, join_counts, record_counter, record_dropped
from curator_dask.errors import CuratorError
from curator_dask.io.files import JSONL_EXTENSIONS, PARQUET_EXTENSIONS, list_files
from curator_dask.io.overlap import InputPaths, input_paths
from curator_dask.io.source import PartitionSource, plan_jsonl, plan_parquet
from curator_dask.io.tokens import TokenizerSpec, token_lengths
from curator_dask.stages.io_stages import ReaderStage
from curator_dask.task_names import scoped

__all__ = [
    "NOT_SELECTED",
    "BlendError",
    "BlendPlan",
    "BlendReader",
    "BlendSource",
    "blend_datasets",
    "blend_keys",
    "plan_blend",
    "shares_of",
]

logger = logging.getLogger(__name__)

BlendBy = Literal["documents", "tokens"]
#: The top bits of a key that choose its histogram bucket while planning.
_BUCKET_BITS = 12
NOT_SELECTED = "reader.blend_not_selected"


class BlendError(CuratorError, ValueError):
    """A blend that cannot be made as asked (a share larger than its source, a bad weight)."""


class BlendSource(TypedDict):
    """One source of a :class:`BlendReader`: a path (file, directory or glob) and its
    weight; optionally its ``name`` (default: the path's last part) and ``format``
    (``jsonl`` or ``parquet``; default: from the files' names)."""

    path: str
    weight: float
    name: NotRequired[str]
    format: NotRequired[Literal["jsonl", "parquet"]]


# -- the plan ------------------------------------------------------------------------------

@dataclass
class BlendPlan:
    """Which documents each source gives: the outcome of planning a blend.

    For source ``i``: every document ``full[i]`` times, and once more if its key is at
    most ``thresholds[i]`` (None: no more). ``shares`` are the targets, ``available``
    what the source holds and ``given`` what it gives, in the blend's unit; ``tokens``
    the tokens given by partition (``(source, position)``) when blending by tokens.
    """

    names: list[str]
    seed: int
    by: str
    shares: list[int]
    available: list[int]
    full: list[int]
    thresholds: list[int | None]
    given: list[int] = field(default_factory=list)
    documents: list[int] = field(default_factory=list)
    tokens: dict[tuple[int, int], int] = field(default_factory=dict)
    text_field: str = "text"
    source_field: str = "source"
    counter_prefix: str = "read_blend"

    def copies(self, texts: pd.Series, source: int) -> np.ndarray:
        """How many times each text of ``source`` goes into the blend."""
        keys = blend_keys(texts, self.seed, source)
        extra = (keys <= self.thresholds[source]) if self.thresholds[source] is not None \
            else np.zeros(keys.size, dtype=bool)
        return self.full[source] + extra.astype(np.int64)

    def apply(self, df, source: int, position: int):
        """The blend's documents of one partition of ``source`` (the ``position``-th),
        with their source's name, the others counted as dropped (on the partition being
        worked on, :mod:`curator_dask.dropped`)."""
        copies = self.copies(df[self.text_field], source)
        out = df.iloc[np.repeat(np.arange(len(df)), copies)].reset_index(drop=True)
        out[self.source_field] = pd.Series([self.names[source]] * len(out),
                                           dtype=pd.ArrowDtype(pa.string()))
        record_dropped(out, NOT_SELECTED, int((copies == 0).sum()))
        name = f"{self.counter_prefix}.{self.names[source]}"
        record_counter(out, f"{name}.documents", len(out))
        record_counter(out, f"{name}.repeated", int(np.maximum(copies - 1, 0).sum()))
        if self.by == "tokens":
            record_counter(out, f"{name}.tokens", self.tokens.get((source, position), 0))
        return out

    def describe(self) -> str:
        """A line per source: its share, what it holds and what it gives."""
        return "\n".join(f"{name}: {given:,} of {share:,} {self.by} asked, {available:,} held"
                         + (f", {full} full pass(es)" if full else "")
                         for name, share, available, given, full
                         in zip(self.names, self.shares, self.available, self.given,
                                self.full, strict=False))  # given: empty until planned


def blend_keys(texts: pd.Series, seed: int, source: int) -> np.ndarray:
    """A seeded 64-bit key per text (SipHash of its UTF-8 bytes; a null text is ``""``).

    Examples
    --------
    >>> keys = blend_keys(pd.Series(["a", "b", "a"]), seed=1, source=0)
    >>> bool(keys[0] == keys[2]), bool(keys[0] == blend_keys(pd.Series(["a"]), 2, 0)[0])
    (True, False)
    """
    values = texts.to_numpy(dtype=object, na_value="")
    hash_key = f"{(seed * 1_000_003 + source) & 0xFFFF_FFFF_FFFF_FFFF:016x}"
    return pd.util.hash_array(values, encoding="utf8", hash_key=hash_key, categorize=False)


def shares_of(target: int, weights: Sequence[float]) -> list[int]:
    """``target`` split by ``weights`` into whole shares that sum to it (largest
    remainders rounded up, the earlier source first on a tie).

    Examples
    --------
    >>> shares_of(10, [1, 1, 1])
    [4, 3, 3]
    >>> shares_of(1000, [5.0, 2.0, 1.0])
    [625, 250, 125]
    """
    total = float(sum(weights))
    exact = [target * w / total for w in weights]
    shares = [math.floor(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in order[:target - sum(shares)]:
        shares[i] += 1
    return shares


def _keyed(df, source: int, seed: int, text_field: str, tokenizer: TokenizerSpec | None):
    """A partition's keys and sizes in the blend's unit, aligned."""
    keys = blend_keys(df[text_field], seed, source)
    if tokenizer is None:
        sizes = np.ones(keys.size, dtype=np.int64)
    else:
        sizes = token_lengths(tokenizer.load(), df[text_field].tolist())
    return keys, sizes


def _histogram(keyed) -> np.ndarray:
    keys, sizes = keyed
    buckets = (keys >> np.uint64(64 - _BUCKET_BITS)).astype(np.int64)
    return np.stack([np.bincount(buckets, minlength=1 << _BUCKET_BITS),
                     np.bincount(buckets, weights=sizes, minlength=1 << _BUCKET_BITS)
                     .astype(np.int64)])


def _in_bucket(keyed, bucket: int):
    keys, sizes = keyed
    buckets = keys >> np.uint64(64 - _BUCKET_BITS)
    mask = buckets == np.uint64(bucket)
    return keys[mask], sizes[mask]


def _given(keyed, full: int, threshold: int | None) -> tuple[int, int]:
    """(documents, size) a partition gives."""
    keys, sizes = keyed
    extra = keys <= threshold if threshold is not None else np.zeros(keys.size, dtype=bool)
    copies = full + extra.astype(np.int64)
    return int(copies.sum()), int((copies * sizes).sum())


def _tree_sum(items: list):
    """The sum of delayed arrays, added pairwise (no task holds more than two)."""
    while len(items) > 1:
        items = [dask.delayed(np.add)(items[i], items[i + 1]) if i + 1 < len(items)
                 else items[i] for i in range(0, len(items), 2)]
    return items[0]


def plan_blend(partitions: Sequence[Sequence], names: Sequence[str], weights: Sequence[float],
               target_size: int, *, by: str = "documents", seed: int = 0,
               replacement: bool = False, tokenizer: TokenizerSpec | None = None,
               text_field: str = "text", source_field: str = "source",
               counter_prefix: str = "read_blend") -> BlendPlan:
    """Plan a blend over sources given as their partitions (delayed frames, by source)."""
    keyed = [[dask.delayed(_keyed)(part, i, seed, text_field, tokenizer) for part in parts]
             for i, parts in enumerate(partitions)]
    flat = dask.persist(*[k for parts in keyed for k in parts])
    it = iter(flat)
    keyed = [[next(it) for _ in parts] for parts in partitions]
    try:
        hists = dask.compute(*[_tree_sum([dask.delayed(_histogram)(k) for k in parts])
                               if parts else np.zeros((2, 1 << _BUCKET_BITS), np.int64)
                               for parts in keyed])
        shares = shares_of(target_size, weights)
        available = [int(h[1].sum()) for h in hists]
        full, remainders = [], []
        for name, share, held in zip(names, shares, available, strict=True):
            if share > held and not replacement:
                raise BlendError(
                    f"blend: source {name!r} holds {held:,} {by} but its weight asks for "
                    f"{share:,}; lower target_size or its weight, or pass replacement=True "
                    "to repeat it")
            if share and not held:
                raise BlendError(f"blend: source {name!r} holds no {by} to give {share:,}")
            full.append(share // held if replacement and held else 0)
            remainders.append(share - full[-1] * held)
        thresholds = [_threshold(hist, remainder, parts)
                      for hist, remainder, parts in zip(hists, remainders, keyed, strict=True)]
        given = dask.compute(*[[dask.delayed(_given)(k, full[i], thresholds[i]) for k in parts]
                               for i, parts in enumerate(keyed)])
    finally:
        del flat, keyed
    plan = BlendPlan(list(names), seed, by, shares, available, full, thresholds,
                     text_field=text_field, source_field=source_field,
                     counter_prefix=counter_prefix)
    plan.given = [sum(size for _, size in parts) for parts in given]
    plan.documents = [sum(docs for docs, _ in parts) for parts in given]
    if by == "tokens":
        plan.tokens = {(i, p): size for i, parts in enumerate(given)
                       for p, (_, size) in enumerate(parts)}
    logger.info("blend of %s %s:\n%s", f"{target_size:,}", by, plan.describe())
    return plan


def _threshold(hist: np.ndarray, remainder: int, parts: list) -> int | None:
    """The largest key a source gives a document for beyond its full passes: the key at
    which the sizes in key order first reach ``remainder`` (None for nothing)."""
    if remainder <= 0:
        return None
    cumulative = np.cumsum(hist[1])
    bucket = int(np.searchsorted(cumulative, remainder, side="left"))
    before = int(cumulative[bucket - 1]) if bucket else 0
    found = dask.compute(*[dask.delayed(_in_bucket)(k, bucket) for k in parts])
    keys = np.concatenate([k for k, _ in found])
    order = np.argsort(keys, kind="stable")
    keys, sizes = keys[order], np.concatenate([s for _, s in found])[order]
    # Equal keys (equal texts) are taken together: their sizes summed per key.
    unique, first = np.unique(keys, return_index=True)
    reached = before + np.cumsum(np.add.reduceat(sizes, first))
    return int(unique[int(np.searchsorted(reached, remainder, side="left"))])


# -- the pipeline reader ---------------------------------------------------------------------

@dataclass(frozen=True)
class BlendPart:
    """One partition of a blend: a planned partition of one source."""

    index: int
    source: int
    position: int
    spec: object

    @property
    def nbytes(self) -> int:
        return self.spec.nbytes

    @property
    def slices(self) -> tuple:
        """The file slices the source's partition reads: a blend's input is known by the
        content of its sources' files, as any reader's (see
        :meth:`~curator_dask.io.source.PartitionSource.identity`)."""
        return self.spec.slices


class _ReadBlendPartition:
    """The task that reads one partition of a blend (pickled to workers with the plan)."""

    def __init__(self, readers: list, plan: BlendPlan, columns: list[str]):
        self.readers, self.plan, self.columns = readers, plan, columns

    def __call__(self, part: BlendPart):
        # What the source's reader skips and what the blend leaves out are both counted
        # on the partition being read.
        df = self.readers[part.source](part.spec)
        return self.plan.apply(df[self.columns], part.source, part.position)

    def table(self, part: BlendPart) -> tuple[pa.Table, dict[str, int]]:
        """The partition as an Arrow table, and its drop counts and counters (for
        Arrow-only readers)."""
        with counting() as tally:
            df = self(part)
        return (pa.Table.from_pandas(df, preserve_index=False),
                join_counts(tally.dropped, tally.counters))

    @property
    def backend(self) -> str:
        return "pandas"


class BlendReader(ReaderStage):
    """Read several sources and blend them by weight (see :mod:`curator_dask.training.blend`).

    Parameters
    ----------
    sources : list of mappings
        Each ``{path: ..., weight: ...}``, optionally with ``name`` and ``format``
        (:class:`BlendSource`).
    target_size : int
        Documents (or tokens, with ``by="tokens"``) in the blend.
    by : {"documents", "tokens"}, default "documents"
    seed : int, default 0
    replacement : bool, default False
        Repeat a source smaller than its share instead of refusing it.
    tokenizer : str, optional
        A local tokenizer directory: needed to blend by tokens.
    text_field : str, default "text"
    source_field : str, default "source"
        The column that names each document's source.
    columns : list of str, optional
        The columns to keep (default: those all sources have, in the first one's order).
    blocksize, files_per_partition, storage_options
        How each source is read (as :meth:`DocumentDataset.read_jsonl`).

    Examples
    --------
    >>> BlendReader([{"path": "web/", "weight": 3}, {"path": "books/", "weight": 1}],
    ...             target_size=1_000_000, seed=42)
    <BlendReader ['web/', 'books/'] (CPU=1)>
    """

    name = "read_blend"

    def __init__(self, sources: list[BlendSource], *, target_size: NonNegativeInt,
                 by: BlendBy = "documents", seed: int = 0, replacement: bool = False,
                 tokenizer: str | None = None, text_field: str = "text",
                 source_field: str = "source", columns: list[str] | None = None,
                 blocksize: ByteSize | None = None,
                 files_per_partition: PositiveInt | None = None,
                 storage_options: dict | None = None):
        sources = [dict(s) for s in sources]
        _check_sources(sources, target_size, by, tokenizer)
        names = [s.get("name") or _default_name(s["path"]) for s in sources]
        if len(set(names)) != len(names):
            raise BlendError(f"blend: sources need distinct names, got {names}; give each a "
                             "'name'")
        super().__init__([s["path"] for s in sources], sources=sources, names=names,
                         target_size=target_size, by=by, seed=seed, replacement=replacement,
                         tokenizer=tokenizer, text_field=text_field, source_field=source_field,
                         columns=columns, blocksize=blocksize,
                         files_per_partition=files_per_partition,
                         storage_options=storage_options)
        #: The plan of the latest read (None until the blend is planned).
        self.blend_plan: BlendPlan | None = None

    def check_inputs(self) -> None:
        """Raise ``FileNotFoundError`` naming the path of a source that holds no file."""
        for source in self.options["sources"]:
            list_files(source["path"], _extensions(source), self.options["storage_options"])

    def plan(self, **options) -> PartitionSource:
        """Plan every source, then the blend (reading each source once to key its
        documents); one partition of the blend per partition of a source."""
        read = {k: options[k] for k in ("blocksize", "files_per_partition", "text_field",
                                        "storage_options")}
        planned = [_plan_source(source, read) for source in options["sources"]]
        columns = _common_columns([s.meta for s in planned], options["names"],
                                  options["columns"], options["source_field"])
        tokenizer = TokenizerSpec(options["tokenizer"]) if options["by"] == "tokens" else None
        partitions = [[dask.delayed(s.reader)(spec) for spec in s.plan] for s in planned]
        self.blend_plan = plan_blend(
            partitions, options["names"], [s["weight"] for s in options["sources"]],
            options["target_size"], by=options["by"], seed=options["seed"],
            replacement=options["replacement"], tokenizer=tokenizer,
            text_field=options["text_field"], source_field=options["source_field"],
            counter_prefix=self.name)
        parts = [BlendPart(0, i, p, spec) for i, s in enumerate(planned)
                 for p, spec in enumerate(s.plan)]
        parts = [BlendPart(k, part.source, part.position, part.spec)
                 for k, part in enumerate(parts)]
        reader = _ReadBlendPartition([s.reader for s in planned], self.blend_plan, columns)
        meta = planned[0].meta[columns].copy()
        meta[options["source_field"]] = pd.Series([], dtype=pd.ArrowDtype(pa.string()))
        sources = input_paths([s["path"] for s in options["sources"]],
                              options["storage_options"])
        # Known by the content of the sources' files (each part's slices), as any reader.
        return PartitionSource(reader, parts, meta=meta, sources=sources, fs=planned[0].fs,
                               label="read_blend")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path!r} ({self.resources})>"


def _check_sources(sources: list[dict], target_size, by: str, tokenizer) -> None:
    if not sources:
        raise BlendError("blend: give at least one source")
    for source in sources:
        if "path" not in source or "weight" not in source:
            raise BlendError(f"blend: each source needs a path and a weight, got {source!r}")
        weight = source["weight"]
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) \
                or not math.isfinite(weight) or weight < 0:
            raise BlendError(f"blend: source {source['path']!r} has weight {weight!r}; "
                             "weights are numbers of 0 or more")
    if sum(s["weight"] for s in sources) <= 0:
        raise BlendError("blend: the weights sum to 0; give at least one a positive weight")
    if isinstance(target_size, bool) or not isinstance(target_size, int) or target_size < 0:
        raise BlendError(f"blend: target_size must be a whole number of {by}, got "
                         f"{target_size!r}")
    if by not in ("documents", "tokens"):
        raise BlendError(f"blend: by must be 'documents' or 'tokens', got {by!r}")
    if by == "tokens" and tokenizer is None:
        raise BlendError("blend: by='tokens' counts tokens with a tokenizer; pass tokenizer= "
                         "(a local directory)")


def _default_name(path: str) -> str:
    base = os.path.basename(str(path).rstrip("/")) or str(path)
    for suffix in (*JSONL_EXTENSIONS, *PARQUET_EXTENSIONS):
        if base.endswith(suffix):
            return base[:-len(suffix)]
    return base


def _extensions(source: Mapping) -> tuple[str, ...]:
    fmt = source.get("format")
    if fmt == "jsonl":
        return JSONL_EXTENSIONS
    if fmt == "parquet":
        return PARQUET_EXTENSIONS
    return (*JSONL_EXTENSIONS, *PARQUET_EXTENSIONS)


def _plan_source(source: Mapping, options: dict) -> PartitionSource:
    fmt = source.get("format")
    if fmt is None:
        _, files = list_files(source["path"], _extensions(source), options["storage_options"])
        fmt = "parquet" if all(f.path.endswith(PARQUET_EXTENSIONS) for f in files) else "jsonl"
    plan = plan_parquet if fmt == "parquet" else plan_jsonl
    return plan(source["path"], **options)


def _common_columns(metas: Sequence, names: Sequence[str],
                    columns: Sequence[str] | None, source_field: str) -> list[str]:
    """The columns to blend, checked in every source's ``metas`` (empty frames)."""
    first = metas[0]
    wanted = list(columns) if columns is not None else [
        c for c in first.columns if all(c in meta.columns for meta in metas)]
    if source_field in wanted:
        raise BlendError(f"blend: the sources have a column {source_field!r} already, where "
                         "the blend names each document's source; pass source_field= another "
                         "name (or leave the column out with columns=)")
    for meta, name in zip(metas, names, strict=True):
        missing = [c for c in wanted if c not in meta.columns]
        if missing:
            raise BlendError(f"blend: source {name!r} has no column(s) {missing}; its columns "
                             f"are {list(meta.columns)}")
        for column in wanted:
            if meta[column].dtype != first[column].dtype:
                raise BlendError(f"blend: column {column!r} is {first[column].dtype} in "
                                 f"{names[0]!r} but {meta[column].dtype} in {name!r}; "
                                 "read them with the same input_meta")
    return wanted


# -- interactive ----------------------------------------------------------------------------

@nemo_keywords()
@scoped("blend")
def blend_datasets(target_size: int, datasets: Sequence[DocumentDataset],
                   weights: Sequence[float], *, by: BlendBy = "documents", seed: int = 0,
                   replacement: bool = False, tokenizer: str | None = None,
                   names: Sequence[str] | None = None, text_field: str = "text",
                   source_field: str = "source") -> DocumentDataset:
    """Blend ``datasets`` by ``weights`` into one of ``target_size`` documents (or tokens).

    NeMo Curator 0.x's ``blend_datasets(target_size, datasets, sampling_weights)``, made
    deterministic and exact (see :mod:`curator_dask.training.blend`). The datasets need
    the same columns (``text_field`` at least); the result adds ``source_field``, naming
    each document's source (``names``, default ``source0``, ``source1``, ...). Planning
    computes (it reads every dataset once); the result is lazy.

    Examples
    --------
    >>> a = DocumentDataset.from_pandas(pd.DataFrame({"text": [f"a{i}" for i in range(10)]}))
    >>> b = DocumentDataset.from_pandas(pd.DataFrame({"text": [f"b{i}" for i in range(10)]}))
    >>> out = blend_datasets(8, [a, b], [3, 1], seed=7, names=["a", "b"]).df.compute()
    >>> out["source"].value_counts().to_dict()
    {'a': 6, 'b': 2}
    """
    if len(datasets) != len(weights):
        raise BlendError(f"blend: {len(datasets)} datasets but {len(weights)} weights")
    sources = [{"path": str(i), "weight": w} for i, w in enumerate(weights)]
    _check_sources(sources, target_size, by, tokenizer)
    names = list(names) if names is not None else [f"source{i}" for i in range(len(datasets))]
    columns = _common_columns([ds.df._meta for ds in datasets], names, None, source_field)
    plan = plan_blend([ds.df.to_delayed() for ds in datasets], names, weights, target_size,
                      by=by, seed=seed, replacement=replacement,
                      tokenizer=TokenizerSpec(tokenizer) if by == "tokens" else None,
                      text_field=text_field, source_field=source_field, counter_prefix="blend")
    meta = datasets[0].df._meta[columns].copy()
    meta[source_field] = pd.Series([], dtype=pd.ArrowDtype(pa.string()))
    # Each dataset's partitions with their counts, and what the blend leaves out counted
    # on them.
    blended = [ds.map_partitions(_apply_blend, plan, i, columns, meta=meta)
               for i, ds in enumerate(datasets)]
    return DocumentDataset.from_partitions([p for ds in blended for p in ds.to_partitions()],
                                           meta, sources=_joined_sources(datasets))


def _joined_sources(datasets: Sequence[DocumentDataset]) -> InputPaths | None:
    """Where the datasets were read from, as one :class:`InputPaths` (the first one's
    filesystem), so a write of the blend keeps clear of every source."""
    known = [ds.sources for ds in datasets if ds.sources is not None]
    if not known:
        return None
    return InputPaths(known[0].fs, tuple(p for s in known for p in s.paths),
                      tuple(f for s in known for f in s.files), known[0].label)


def _apply_blend(df, plan: BlendPlan, source: int, columns: list[str], partition_info=None):
    return plan.apply(df[columns], source, (partition_info or {}).get("number", 0))

