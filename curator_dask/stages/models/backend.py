"""Partition backends for model stages: text to the host, results back as columns.

Tokenizers run on the host, so a cuDF text column is copied to host memory once
(:func:`host_text`); results come back as columns of the partition's own backend
(:func:`column_like`). These two functions are the only places model stages look at the
backend.

Column types on pandas partitions:

- labels: the ``str`` dtype (Arrow-backed);
- vectors (embeddings, class probabilities): ``object`` columns holding one float32
  numpy array per row. They write to Parquet as ``list<float>`` and read back with
  ``pandas.read_parquet`` and ``dask.dataframe.read_parquet``; an Arrow list dtype would
  not (pandas 3.1 with pyarrow 26 cannot rebuild ``list<...>[pyarrow]`` from the Parquet
  file's pandas metadata);
- token ids (between a :class:`~curator_dask.stages.models.TokenizerStage` and a model
  stage): ``list<int32>[pyarrow]``, compact to move between workers.

On cuDF partitions all of them are cuDF columns (strings and lists).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask.backends import is_cudf
from curator_dask.errors import ArgumentTypeError, InvalidArgumentError

__all__ = [
    "TOKEN_IDS_DTYPE",
    "VECTOR_DTYPE",
    "column_like",
    "cudf_meta",
    "host_text",
    "host_text_array",
    "token_array",
]

TOKEN_IDS_DTYPE = pd.ArrowDtype(pa.list_(pa.int32()))
VECTOR_DTYPE = "object"


def _arrow(series) -> pa.Array:
    arr = series.to_arrow() if is_cudf(series) else pa.array(series, from_pandas=True)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr


def host_text(series, max_chars: int | None = None) -> list[str]:
    """The text column as Python strings on the host, each cut to ``max_chars`` characters.

    Missing text becomes ``""``.

    Examples
    --------
    >>> host_text(pd.Series(["héllo wörld", None], dtype="str"), max_chars=4)
    ['héll', '']
    """
    return host_text_array(series, max_chars).to_pylist()


def host_text_array(series, max_chars: int | None = None) -> pa.Array:
    """:func:`host_text` as one Arrow string array (no nulls) on the host."""
    arr = _arrow(series)
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        try:
            arr = arr.cast(pa.large_string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            raise ArgumentTypeError(
                f"text column {series.name!r} must hold strings (it is {series.dtype}); "
                "convert it with df[column].astype('str') first"
            ) from err
    if arr.null_count:
        arr = arr.fill_null("")
    if max_chars is not None:
        arr = pc.utf8_slice_codeunits(arr, 0, max_chars)  # code points, not bytes
    return arr


def token_array(series) -> pa.Array:
    """A token-id column (lists of ints, any backend) as one Arrow list array on the host."""
    arr = _arrow(series)
    if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        raise ArgumentTypeError(
            f"column {series.name!r} must hold lists of token ids (it is {series.dtype}); "
            "make it with TokenizerStage"
        )
    return arr


# One return per kind of column and backend.
def column_like(values, like, kind: str):  # noqa: PLR0911
    """``values`` as a column on ``like``'s backend and index.

    Parameters
    ----------
    values : numpy or Arrow array
        One value per document: strings or bools (1-d numpy), vectors (2-d numpy, one
        row per document) or token ids (an Arrow list array).
    like : Series or DataFrame
        The partition or one of its columns: gives the backend and the index.
    kind : {"str", "bool", "vectors", "token_ids", "values"}
        ``"values"``: numbers (a 1-d numpy array), kept in their dtype.

    Examples
    --------
    >>> like = pd.Series(["a", "b"], index=[10, 11])
    >>> column_like(np.array(["x", "y"], dtype=object), like, "str").tolist()
    ['x', 'y']
    >>> column_like(np.eye(2, dtype=np.float32), like, "vectors")[11].tolist()
    [0.0, 1.0]
    """
    if kind == "vectors":
        vectors = np.ascontiguousarray(values, dtype=np.float32)
        if is_cudf(like):
            n, width = vectors.shape
            offsets = pa.array(np.arange(0, n * width + 1, width, dtype=np.int32))
            return _cudf_from_arrow(pa.ListArray.from_arrays(offsets, vectors.ravel()), like)
        column = np.empty(len(vectors), dtype=object)
        column[:] = list(vectors)  # row views of one block: no copy per document
        return pd.Series(column, index=like.index, dtype=VECTOR_DTYPE)
    if kind == "token_ids":
        if is_cudf(like):
            return _cudf_from_arrow(values, like)
        return pd.Series(pd.arrays.ArrowExtensionArray(values), index=like.index)
    if kind == "str":
        if is_cudf(like):
            return _cudf_from_arrow(pa.array(values, type=pa.string()), like)
        return pd.Series(values, index=like.index, dtype="str")
    if kind == "bool":
        if is_cudf(like):
            return _cudf_from_arrow(pa.array(np.asarray(values, dtype=bool)), like)
        return pd.Series(np.asarray(values, dtype=bool), index=like.index)
    if kind == "values":
        if is_cudf(like):
            return _cudf_from_arrow(pa.array(np.asarray(values)), like)
        return pd.Series(np.asarray(values), index=like.index)
    raise InvalidArgumentError(f"unknown column kind {kind!r}")


def cudf_meta(input_meta, removed_columns, added: dict[str, str]):
    """The output meta on a cuDF input meta: ``added`` maps new columns to their kind
    ("str", "vectors", "token_ids") or a numeric dtype ("float32", "int64", "bool").
    Pandas metas are made by ``ProcessingStage.meta``."""
    import cudf

    dtypes = {"str": "str", "vectors": cudf.ListDtype("float32"),
              "token_ids": cudf.ListDtype("int32")}
    out = input_meta.drop(columns=list(removed_columns))
    for column, kind in added.items():
        out[column] = cudf.Series([], dtype=dtypes.get(kind, kind), index=out.index)
    return out


def _cudf_from_arrow(arr: pa.Array, like):
    import cudf

    series = cudf.Series.from_arrow(arr)
    series.index = like.index
    return series
