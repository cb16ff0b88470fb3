"""The false-positive check: true Jaccard similarity of candidate pairs before they connect.

LSH makes a pair a candidate when one band of its signatures agrees, which happens for
pairs well below the threshold too (at 20 bands of 13, a pair of similarity 0.6 becomes a
candidate 2% of the time). With ``false_positive_check=True`` each candidate edge is
checked against the exact Jaccard similarity of the two documents' character n-gram sets,
and dropped below ``jaccard_threshold``.

Shingles are those of MinHash (``char_ngrams`` code points; a shorter text is one
shingle; an empty text has none, and two empty texts are identical). Each shingle is
represented by the first 64-bit word of its MurmurHash3_x64_128: two different shingles of
one pair share it with probability about ``shingles**2 / 2**64`` (1e-12 for 5,000
shingles), so the result is the exact Jaccard similarity in all but name.

How the text meets the edge
---------------------------
Text is the heavy part, so only the documents that appear in an edge are taken out of the
dataset (a semi-join against the sorted candidate ids, broadcast while that list is
small; a shuffle join beyond it) and shuffled once, by id. The edges then travel to the
partition holding their member's text, pick it up, and travel on to the partition holding
their anchor's, where the pair is scored: one shuffle of the selected texts and two of the
edges, and the text of documents in no edge (most of a corpus) never moves.
"""

from __future__ import annotations

import logging

import dask.dataframe as dd
import numpy as np
import pandas as pd

from curator_dask.backends import is_cudf, rows_where
from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.fuzzy.lsh import EDGE_FIELDS
from curator_dask.dedup.fuzzy.minhash_kernel import shingle_hashes64, string_buffers
from curator_dask.dedup.removal import DEFAULT_BROADCAST_THRESHOLD, default_shuffle_method
from curator_dask.errors import InvalidArgumentError
from curator_dask.numba_cache import njit
from curator_dask.task_names import task_name

__all__ = ["JACCARD_FIELD", "char_ngram_jaccard", "check_false_positives", "pair_similarities"]

logger = logging.getLogger(__name__)

JACCARD_FIELD = "jaccard"


def _task() -> str:
    """What the tasks built here are called, in the task scope in force."""
    return task_name("jaccard", scope="fuzzy_dedup")


@njit(inline="always")
def _unique_sorted(values, n):
    """Sort ``values[:n]`` in place and move its distinct values to the front; their count."""
    if n == 0:
        return 0
    block = values[:n]
    block.sort()
    m = 1
    for i in range(1, n):
        if block[i] != block[m - 1]:
            block[m] = block[i]
            m += 1
    return m


@njit(nogil=True)
def _jaccard_kernel(data_a, offsets_a, data_b, offsets_b, width, out):
    n = offsets_a.shape[0] - 1
    longest = 0
    for i in range(n):
        longest = max(longest, offsets_a[i + 1] - offsets_a[i], offsets_b[i + 1] - offsets_b[i])
    # A text of L bytes has at most L shingles: one buffer each, reused for every pair.
    buf_a = np.empty(max(longest, 1), dtype=np.uint64)
    buf_b = np.empty(max(longest, 1), dtype=np.uint64)
    for i in range(n):
        na = _unique_sorted(buf_a, shingle_hashes64(data_a, offsets_a[i], offsets_a[i + 1],
                                                    width, np.uint64(0), buf_a))
        nb = _unique_sorted(buf_b, shingle_hashes64(data_b, offsets_b[i], offsets_b[i + 1],
                                                    width, np.uint64(0), buf_b))
        if na == 0 or nb == 0:
            out[i] = 1.0 if na == nb else 0.0
            continue
        common = 0
        p = 0
        q = 0
        while p < na and q < nb:
            if buf_a[p] == buf_b[q]:
                common += 1
                p += 1
                q += 1
            elif buf_a[p] < buf_b[q]:
                p += 1
            else:
                q += 1
        out[i] = common / (na + nb - common)


def char_ngram_jaccard(texts_a, texts_b, char_ngrams: int = 24) -> np.ndarray:
    """Jaccard similarity of the character n-gram sets of ``texts_a[i]`` and ``texts_b[i]``.

    Parameters
    ----------
    texts_a, texts_b : pandas.Series, pyarrow arrays or sequences of str
        Equal lengths, no nulls.
    char_ngrams : int, default 24
        Shingle width in characters, as for MinHash.

    Returns
    -------
    numpy.ndarray of float64

    Examples
    --------
    >>> char_ngram_jaccard(["abcde", "abcde", "", "ab"], ["abcdx", "abcde", "", "xy"], 3)
    array([0.5, 1. , 1. , 0. ])
    """
    data_a, offsets_a = string_buffers(texts_a)
    data_b, offsets_b = string_buffers(texts_b)
    if len(offsets_a) != len(offsets_b):
        raise InvalidArgumentError(f"texts_a has {len(offsets_a) - 1} texts but texts_b has "
                                   f"{len(offsets_b) - 1}; pairs need one of each")
    if int(char_ngrams) < 2:
        raise InvalidArgumentError(f"char_ngrams must be 2 or more, got {char_ngrams}")
    out = np.empty(len(offsets_a) - 1, dtype=np.float64)
    _jaccard_kernel(data_a, offsets_a, data_b, offsets_b, np.int64(char_ngrams), out)
    return out


# -- over a dataset -----------------------------------------------------------------------------

def _select_sorted(df, wanted, id_field: str, text_field: str):
    """The ``(id, text)`` rows of one partition whose id is in the sorted frame ``wanted``."""
    ids = df[id_field].to_numpy()
    wanted = wanted[id_field].to_numpy()
    if len(wanted) == 0:
        hit = np.zeros(len(ids), dtype=bool)
    else:
        position = np.minimum(np.searchsorted(wanted, ids), len(wanted) - 1)
        hit = wanted[position] == ids
    return rows_where(df[[id_field, text_field]], hit)


def _sorted_unique(df, id_field: str):
    return df.drop_duplicates().sort_values(id_field, ignore_index=True)


_PARTITION = "_partition"
_MIX = 0x9E3779B97F4A7C15


def _route(df, column: str, npartitions: int):
    """Add the partition each row goes to: a mix of ``column``'s value, modulo ``npartitions``."""
    h = df[column].to_numpy().astype(np.uint64) * np.uint64(_MIX)
    h ^= h >> np.uint64(31)
    return df.assign(**{_PARTITION: (h % np.uint64(npartitions)).astype(np.int64)})


def _routed(df: dd.DataFrame, column: str, npartitions: int) -> dd.DataFrame:
    """``df`` moved so that partition ``i`` holds the rows whose ``column`` routes to ``i``.

    Two frames routed on columns with equal values line up partition by partition (the
    explicit divisions put value ``i`` in partition ``i``), which is what lets the texts
    be shuffled once and joined twice.
    """
    meta = df._meta.assign(**{_PARTITION: np.array([], dtype=np.int64)})
    tagged = df.map_partitions(_route, column, npartitions, token=_task(), meta=meta,
                               align_dataframes=False, enforce_metadata=False)
    if npartitions == 1:
        return tagged.repartition(npartitions=1)
    return tagged.set_index(_PARTITION, divisions=[*range(npartitions), npartitions - 1],
                            shuffle_method=default_shuffle_method())


def _attach_text(edges, texts, on: str, id_field: str, text_field: str, as_column: str):
    """Local join of one routed edge partition with the routed texts of the same partition."""
    looked_up = texts[[id_field, text_field]].rename(columns={id_field: on,
                                                              text_field: as_column})
    return edges.reset_index(drop=True).merge(looked_up.reset_index(drop=True), on=on,
                                              how="inner")


def _with_member_text(edges, texts, id_field: str, text_field: str, text_y: str):
    x, y = EDGE_FIELDS
    # A pair repeats across bands; every copy has the same id_y, so all are here.
    edges = edges[[x, y]].drop_duplicates()
    return _attach_text(edges, texts, y, id_field, text_field, text_y)


def _scored(pairs, texts, id_field: str, text_field: str, text_y: str, text_x: str,
            char_ngrams: int):
    x, y = EDGE_FIELDS
    pairs = _attach_text(pairs[[x, y, text_y]], texts, x, id_field, text_field, text_x)
    if len(pairs) == 0:
        similarity = np.empty(0, dtype=np.float64)
    else:
        similarity = char_ngram_jaccard(pairs[text_x], pairs[text_y], char_ngrams)
    return pd.DataFrame({x: pairs[x].to_numpy(), y: pairs[y].to_numpy(),
                         JACCARD_FIELD: similarity.astype(np.float32)})


def pair_similarities(edges, ds: DocumentDataset, *, char_ngrams: int = 24,
                      id_field: str = "id", text_field: str = "text",
                      num_edges: int | None = None,
                      broadcast_threshold: int = DEFAULT_BROADCAST_THRESHOLD) -> dd.DataFrame:
    """The exact Jaccard similarity of every candidate pair, each pair once.

    Parameters
    ----------
    edges : dask DataFrame or DocumentDataset
        ``(id_x, id_y)`` candidate pairs (duplicates allowed), from :class:`LSH`.
    ds : DocumentDataset
        The documents, with ``id_field`` and ``text_field``.
    num_edges : int, optional
        The number of edges, if known: up to ``broadcast_threshold / 2`` the candidate
        ids are broadcast to select their texts; beyond that (or unknown), a shuffle join.

    Returns
    -------
    dask DataFrame
        ``(id_x, id_y, jaccard)``, ``jaccard`` as float32 (lazy).
    """
    x, y = EDGE_FIELDS
    edges = edges.df if isinstance(edges, DocumentDataset) else edges
    edges = edges[[x, y]]
    method = default_shuffle_method()
    docs = ds.df
    texts_meta = docs._meta[[id_field, text_field]]
    ids = dd.concat([edges[x].rename(id_field), edges[y].rename(id_field)]).to_frame()
    if num_edges is not None and 2 * num_edges <= broadcast_threshold:
        # One sorted frame of candidate ids, shipped once to each worker (as removal does).
        ids_meta = ids._meta
        wanted = (ids.map_partitions(_sorted_unique, id_field, token=_task(), meta=ids_meta)
                  .repartition(npartitions=1)
                  .map_partitions(_sorted_unique, id_field, token=_task(), meta=ids_meta))
        texts = docs.map_partitions(_select_sorted, wanted, id_field, text_field,
                                    token=_task(), meta=texts_meta, align_dataframes=False,
                                    enforce_metadata=False)
    else:
        ids = ids.drop_duplicates(split_out=edges.npartitions, shuffle_method=method)
        texts = docs[[id_field, text_field]].merge(ids, on=id_field, how="inner",
                                                   shuffle_method=method)
    if is_cudf(texts_meta):
        texts = texts.to_backend("pandas")  # scored on the host, beside the edges
    # The texts move once; the edges go to their member's text, then to their anchor's.
    # As many partitions as the dataset: the selected texts are at most all of it.
    nparts = max(docs.npartitions, 1)
    texts = _routed(texts, id_field, nparts)
    text_x, text_y = f"_{text_field}_x", f"_{text_field}_y"
    with_y_meta = pd.DataFrame({x: pd.Series([], dtype=edges._meta[x].dtype),
                                y: pd.Series([], dtype=edges._meta[y].dtype),
                                text_y: pd.Series([], dtype=texts._meta[text_field].dtype)})
    with_y = dd.map_partitions(_with_member_text, _routed(edges, y, nparts), texts, id_field,
                               text_field, text_y, token=_task(), meta=with_y_meta,
                               align_dataframes=False, enforce_metadata=False)
    meta = pd.DataFrame({x: pd.Series([], dtype=edges._meta[x].dtype),
                         y: pd.Series([], dtype=edges._meta[y].dtype),
                         JACCARD_FIELD: pd.Series([], dtype=np.float32)})
    return dd.map_partitions(_scored, _routed(with_y, x, nparts), texts, id_field, text_field,
                             text_y, text_x, char_ngrams, token=_task(), meta=meta,
                             align_dataframes=False, enforce_metadata=False)


def check_false_positives(edges, ds: DocumentDataset, *, char_ngrams: int = 24,
                          jaccard_threshold: float = 0.8, id_field: str = "id",
                          text_field: str = "text", num_edges: int | None = None,
                          broadcast_threshold: int = DEFAULT_BROADCAST_THRESHOLD
                          ) -> dd.DataFrame:
    """Keep the candidate edges whose documents have Jaccard similarity >= the threshold.

    Parameters are those of :func:`pair_similarities`, and ``jaccard_threshold``.

    Returns
    -------
    dask DataFrame
        ``(id_x, id_y, jaccard)`` of the pairs kept, each pair once (lazy).

    Examples
    --------
    >>> import pandas as pd
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"id": [1, 2, 3],
    ...     "text": ["abcdefgh", "abcdefgX", "zzzzzzzz"]}))
    >>> edges = dd.from_pandas(pd.DataFrame({"id_x": [1, 1], "id_y": [2, 3]}), npartitions=1)
    >>> check_false_positives(edges, ds, char_ngrams=3, jaccard_threshold=0.5).compute()
       id_x  id_y   jaccard
    0     1     2  0.714286
    """
    scored = pair_similarities(edges, ds, char_ngrams=char_ngrams, id_field=id_field,
                               text_field=text_field, num_edges=num_edges,
                               broadcast_threshold=broadcast_threshold)
    return scored[scored[JACCARD_FIELD] >= np.float32(jaccard_threshold)]
