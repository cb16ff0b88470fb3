"""MinHash signatures of documents: the first phase of fuzzy deduplication.

:class:`MinHash` is a partition stage: ``(id, text)`` in, ``(id, _minhash_signature)``
out. On pandas partitions it calls the numba kernel in
:mod:`curator_dask.dedup.fuzzy.minhash_kernel`, or with ``device="cuda"`` the torch
kernel in :mod:`curator_dask.dedup.fuzzy.minhash_torch` on the worker's GPU (pandas in
and out: the text goes to the GPU and the signatures come back); on cuDF partitions it
calls cuDF's ``Series.str.minhash`` / ``minhash64``. All compute the same signatures bit
for bit, so a fleet of CPU and GPU workers puts the same documents in the same LSH
buckets.

The signature column
--------------------
One Arrow ``list<uint32>`` (or ``list<uint64>``) column, every row ``num_hashes`` long:

* In memory it is two buffers: the ``n * num_hashes`` values, contiguous, and ``n + 1``
  int32 offsets (0.4% extra at 260 hashes). :func:`signature_matrix` views the values as
  an ``(n, num_hashes)`` numpy matrix without copying, which is what LSH hashes. On
  pandas it is an Arrow-backed extension column (one object, not one per row).
* It is what cuDF's ``str.minhash`` returns, so CPU and GPU partitions write the same
  Parquet schema to the cache and either can read the other's.
* One column per hash (260 columns) would cost the same bytes, but make every frame,
  meta and Parquet footer 260 columns wide; a binary column has no cuDF counterpart.

Signatures are 1,040 bytes a document at the defaults, about half of a typical web
document, and they never cross the network: LSH turns them into 16-byte ``(id, bucket)``
pairs where they lie, and only those pairs are shuffled.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pyarrow as pa

from curator_dask.backends import backend_dispatch, is_cudf
from curator_dask.dedup.exact import NullTextError
from curator_dask.dedup.fuzzy.minhash_kernel import generate_permutations, minhash32, minhash64
from curator_dask.devices import check_device_name, compute_device
from curator_dask.errors import (
    InvalidArgumentError,
    MissingDependencyError,
    ResourceUnavailableError,
)
from curator_dask.stages.base import ProcessingStage
from curator_dask.stages.columns import id_column_fix

__all__ = [
    "SIGNATURE_FIELD",
    "MinHash",
    "check_minhash_device",
    "signature_matrix",
    "signature_series",
    "signature_type",
]

logger = logging.getLogger(__name__)

SIGNATURE_FIELD = "_minhash_signature"


def signature_type(use_64_bit_hash: bool = False) -> pa.DataType:
    """The Arrow type of the signature column: ``list<uint32>`` or ``list<uint64>``."""
    return pa.list_(pa.uint64() if use_64_bit_hash else pa.uint32())


def signature_series(matrix: np.ndarray, index=None) -> pd.Series:
    """An ``(n, k)`` numpy matrix as a pandas Arrow ``list`` column, without copying values.

    Examples
    --------
    >>> s = signature_series(np.array([[1, 2], [3, 4]], dtype=np.uint32))
    >>> s.dtype, s.tolist()
    (list<item: uint32>[pyarrow], [[1, 2], [3, 4]])
    """
    n, k = matrix.shape
    values = pa.array(np.ascontiguousarray(matrix).reshape(-1))
    offsets = pa.array(np.arange(0, n * k + 1, k, dtype=np.int32))
    lists = pa.ListArray.from_arrays(offsets, values, type=pa.list_(values.type))
    return pd.Series(pd.arrays.ArrowExtensionArray(lists), index=index, name=SIGNATURE_FIELD)


def signature_matrix(signatures, num_hashes: int | None = None):
    """The signatures of a partition as an ``(n, num_hashes)`` matrix.

    Zero-copy for an Arrow-backed pandas column (numpy result) and for a cuDF list column
    (cupy result).

    Parameters
    ----------
    signatures : pandas.Series or cudf.Series
        The ``_minhash_signature`` column.
    num_hashes : int, optional
        The expected signature length; inferred from the first row when not given.

    Raises
    ------
    ValueError
        If rows are null or not all of one length.
    """
    return _signature_matrix(signatures, num_hashes)


def _signature_matrix_pandas(signatures: pd.Series, num_hashes: int | None) -> np.ndarray:
    values = signatures.array
    arrow = getattr(values, "_pa_array", None)
    if arrow is None:  # object column of arrays, e.g. from a generic Parquet reader
        arrow = pa.array(list(values))
    if isinstance(arrow, pa.ChunkedArray):
        arrow = arrow.combine_chunks() if arrow.num_chunks != 1 else arrow.chunk(0)
    n = len(arrow)
    if arrow.null_count:
        raise InvalidArgumentError(f"{arrow.null_count} of {n} signatures are null")
    offsets = np.frombuffer(arrow.buffers()[1], dtype=np.int32 if pa.types.is_list(arrow.type)
                            else np.int64)[arrow.offset:arrow.offset + n + 1]
    if num_hashes is None:
        num_hashes = int(offsets[1] - offsets[0]) if n else 0
    if n and not np.array_equal(np.diff(offsets), np.full(n, num_hashes, dtype=offsets.dtype)):
        raise InvalidArgumentError(f"signatures must all have {num_hashes} values; these have "
                                   f"{sorted(set(np.diff(offsets).tolist()))[:5]}")
    flat = arrow.flatten().to_numpy(zero_copy_only=True) if n else np.empty(0, np.uint32)
    return flat.reshape(n, num_hashes)


def _signature_matrix_cudf(signatures, num_hashes: int | None):
    n = len(signatures)
    if signatures.null_count:
        raise InvalidArgumentError(f"{signatures.null_count} of {n} signatures are null")
    lengths = signatures.list.len()
    if num_hashes is None:
        num_hashes = int(lengths.iloc[0]) if n else 0
    if n and not bool((lengths == num_hashes).all()):
        raise InvalidArgumentError(f"signatures must all have {num_hashes} values")
    return signatures.list.leaves.values.reshape(n, num_hashes)


_signature_matrix = backend_dispatch("signature_matrix", pandas=_signature_matrix_pandas,
                                     cudf=lambda: _signature_matrix_cudf)


# -- where the signatures are computed --------------------------------------------------------

def _is_torch_device(device) -> bool:
    return type(device).__module__.split(".")[0] == "torch"


def check_minhash_device(device, use_64_bit_hash: bool = False):
    """``device`` if :class:`MinHash` can compute on it: a device name, or a
    ``torch.device`` (``torch.device("cpu")`` runs the torch kernel on the CPU)."""
    if not _is_torch_device(device):
        check_device_name(device)
    if use_64_bit_hash and (_is_torch_device(device) or device.startswith("cuda")):
        raise InvalidArgumentError(
            f"device={device!r} computes 32-bit signatures only; use use_64_bit_hash=False, "
            "or device='cpu' (or 'auto', which computes 64-bit signatures on the CPU)")
    return device


def _torch_device(device) -> str | None:
    """The torch device to compute on in this process, or None for the numba kernel."""
    if _is_torch_device(device):
        return device
    device = compute_device(device)
    if device == "cpu":
        return None
    try:
        import torch
    except ImportError as err:
        raise MissingDependencyError(
            f"MinHash(device={device!r}) computes with torch, which is not installed "
            f"({err}); install it with pip install 'curator-dask[models]', or use "
            "device='auto'") from err
    if not torch.cuda.is_available():
        raise ResourceUnavailableError(
            f"MinHash(device={device!r}) but this worker process sees no CUDA GPU; use "
            "device='auto' to compute on the CPU where there is none")
    return device


# -- one small function per backend --------------------------------------------------------

def _minhash_pandas(texts: pd.Series, a: np.ndarray, b: np.ndarray, seed: int,
                    char_ngrams: int, device="cpu") -> pd.Series:
    if a.dtype == np.uint64:
        matrix = minhash64(texts, a, b, seed, char_ngrams)
    elif (where := _torch_device(device)) is None:
        matrix = minhash32(texts, a, b, seed, char_ngrams)
    else:
        # torch is an optional dependency (the models extra): imported where it is used.
        from curator_dask.dedup.fuzzy.minhash_torch import minhash32_torch

        matrix = minhash32_torch(texts, a, b, seed, char_ngrams, device=where)
    return signature_series(matrix, index=texts.index)


def _minhash_cudf(texts, a: np.ndarray, b: np.ndarray, seed: int, char_ngrams: int,
                  device="cpu"):
    # cuDF's published API: Series.str.minhash(seed, a, b, width) -> list<uint32>,
    # Series.str.minhash64(seed, a, b, width) -> list<uint64>; a, b are device columns.
    # cuDF data is on a GPU already: ``device`` chooses for pandas partitions only.
    import cudf

    a_col, b_col = cudf.Series(a), cudf.Series(b)
    if a.dtype == np.uint64:
        out = texts.str.minhash64(seed, a=a_col, b=b_col, width=char_ngrams)
    else:
        out = texts.str.minhash(seed, a=a_col, b=b_col, width=char_ngrams)
    out.name = SIGNATURE_FIELD
    return out


_minhash = backend_dispatch("minhash", pandas=_minhash_pandas, cudf=lambda: _minhash_cudf)


#: The most hashes a signature may hold (a document's signature is this many 4 or 8
#: bytes; the usual choice is 260).
MAX_HASHES = 1 << 16

class MinHash(ProcessingStage):
    """MinHash signatures of each document's character n-grams.

    Every document gets ``num_hashes`` values: for permutation ``i``, the minimum over
    its ``char_ngrams``-character shingles of ``a[i] * h + b[i]``, where ``h`` is the
    shingle's MurmurHash3. Two documents agree on a given value with probability equal
    to the Jaccard similarity of their shingle sets. Parameters and defaults are NeMo
    Curator's, and so are the signatures: the permutations come from
    :func:`~curator_dask.dedup.fuzzy.minhash_kernel.generate_permutations` and the
    MurmurHash seed is ``a[0]``, as NeMo Curator passes it to cuDF.

    Parameters
    ----------
    seed : int, default 42
        Seeds the permutations; every run that is to share buckets must use the same.
    char_ngrams : int, default 24
        Shingle width in characters (Unicode code points). A text shorter than this is
        one shingle; an empty text has an all-zero signature (so empty texts group).
    num_hashes : int, default 260
        Signature length; LSH needs ``num_bands * minhashes_per_band`` of them.
    use_64_bit_hash : bool, default False
        MurmurHash3_x64_128 and uint64 values (twice the memory; fewer collisions,
        which matters only for documents with millions of shingles).
    text_field, id_field : str
    device : {"cpu", "auto", "cuda", "cuda:N"} or torch.device, default "cpu"
        Where pandas partitions' signatures are computed: ``"cpu"``, the numba kernel;
        ``"cuda"`` / ``"cuda:N"``, torch on the worker's GPU
        (:func:`~curator_dask.dedup.fuzzy.minhash_torch.minhash32_torch`; needs torch
        with CUDA, not cuDF); ``"auto"``, the GPU when the worker's torch sees one, else
        the numba kernel (a machine without an NVIDIA driver never imports torch). The
        signatures are the same everywhere, bit for bit. The GPU computes 32-bit
        signatures only. cuDF partitions are always computed by cuDF.

    Examples
    --------
    >>> import pandas as pd
    >>> from curator_dask import DocumentDataset
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame(
    ...     {"id": [1, 2], "text": ["the cat sat on the mat", "the cat sat on a mat"]}))
    >>> out = MinHash(char_ngrams=5, num_hashes=64)(ds).df.compute()
    >>> list(out.columns), len(out[SIGNATURE_FIELD].iloc[0])
    (['id', '_minhash_signature'], 64)
    """

    working_set = "minhash"  # memory per input byte: see io/planner.py

    def __init__(self, seed: int = 42, char_ngrams: int = 24, num_hashes: int = 260,
                 use_64_bit_hash: bool = False, text_field: str = "text",
                 id_field: str = "id", device: str = "cpu"):
        if not isinstance(char_ngrams, int) or char_ngrams < 2:
            raise InvalidArgumentError(
                f"char_ngrams must be an integer of 2 or more, got {char_ngrams!r}")
        if not isinstance(num_hashes, int) or not 1 <= num_hashes <= MAX_HASHES:
            raise InvalidArgumentError(
                f"num_hashes (num_bands x minhashes_per_band) must be an integer from 1 to "
                f"{MAX_HASHES}, got {num_hashes!r}: each document's signature holds that "
                "many hashes (260 is the usual choice)")
        self.seed = seed
        self.char_ngrams = char_ngrams
        self.num_hashes = num_hashes
        self.use_64_bit_hash = use_64_bit_hash
        self.text_field = text_field
        self.id_field = id_field
        self.device = check_minhash_device(device, use_64_bit_hash)
        self.name = "minhash"
        self.a, self.b = generate_permutations(seed, num_hashes, use_64_bit_hash)
        self.hash_seed = int(self.a[0])

    def __repr__(self) -> str:
        return (f"MinHash(seed={self.seed}, char_ngrams={self.char_ngrams}, "
                f"num_hashes={self.num_hashes}, use_64_bit_hash={self.use_64_bit_hash})")

    @property
    def input_columns(self) -> list[str]:
        return [self.id_field, self.text_field]

    def missing_columns_fix(self, columns) -> str:
        return id_column_fix(self.id_field, columns) or super().missing_columns_fix(columns)

    def meta(self, input_meta):
        self.check_input_columns(input_meta.columns)
        if is_cudf(input_meta):
            import cudf

            value = "uint64" if self.use_64_bit_hash else "uint32"
            return cudf.DataFrame({
                self.id_field: input_meta[self.id_field],
                SIGNATURE_FIELD: cudf.Series([], dtype=cudf.ListDtype(value)),
            })
        empty = np.empty((0, self.num_hashes), dtype=self.a.dtype)
        return pd.DataFrame({self.id_field: input_meta[self.id_field],
                             SIGNATURE_FIELD: signature_series(empty, index=input_meta.index)})

    def signatures(self, texts):
        """Signatures of a text column (pandas or cuDF), as a list column."""
        return _minhash(texts, self.a, self.b, self.hash_seed, self.char_ngrams, self.device)

    def process(self, df):
        texts = df[self.text_field]
        nulls = int(texts.isna().sum())
        if nulls:
            first = df[self.id_field][texts.isna()].iloc[0]
            raise NullTextError(
                f"MinHash: {nulls} document(s) have a null {self.text_field!r} (first: "
                f"{self.id_field}={first}); drop them or fill them with '' first"
            )
        return df[[self.id_field]].assign(**{SIGNATURE_FIELD: self.signatures(texts)})
