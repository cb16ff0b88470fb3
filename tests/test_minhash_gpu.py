"""MinHash with torch on a real NVIDIA GPU: the numba kernel's signatures, bit for bit, and
fuzzy dedup's duplicates on a cluster. Skipped without a CUDA GPU. Run on a GPU machine
with ``python -m pytest tests/test_minhash_gpu.py -m gpu``.
"""

from __future__ import annotations

import importlib.util
import logging

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from curator_dask import DocumentDataset  # noqa: E402
from curator_dask.dedup import FuzzyDuplicates  # noqa: E402
from curator_dask.dedup.fuzzy.minhash_kernel import generate_permutations, minhash32  # noqa: E402
from curator_dask.dedup.fuzzy.minhash_torch import minhash32_torch  # noqa: E402
from curator_dask.sample import noisy_sample  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

#: Real text, and the edge cases of the scheme: non-ASCII characters of every UTF-8
#: length, NUL, empty documents, documents shorter than a shingle.
EDGES = ["", "a", "é😀x", "\x00\x00abc\x00", "日本語のテキストです。" * 40, "",
         "\U00010348" * 30, "x" * 23, "y" * 24, "z" * 25]


#: The torch code alone, and with the Triton kernels (the default where Triton is).
FUSED = [False, pytest.param(True, marks=pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="needs triton"))]


@pytest.mark.parametrize("fused", FUSED)
@pytest.mark.parametrize("chunk_bytes", [1 << 16, 256 << 20])
def test_cuda_signatures_equal_the_numba_kernel(chunk_bytes, fused):
    texts = list(noisy_sample()["text"]) + EDGES
    a, b = generate_permutations(42, 260)
    got = minhash32_torch(texts, a, b, int(a[0]), 24, device="cuda", chunk_bytes=chunk_bytes,
                          fused=fused)
    np.testing.assert_array_equal(got, minhash32(texts, a, b, int(a[0]), 24))


@pytest.mark.parametrize("fused", FUSED)
def test_cuda_signatures_with_parameters_above_2_31(fused):
    # The stage's permutations are below 2**31; any uint32 ones must wrap the same way.
    rng = np.random.default_rng(0)
    a, b = (rng.integers(0, 1 << 32, 64, dtype=np.uint64).astype(np.uint32) for _ in "ab")
    texts = list(noisy_sample(limit=200)["text"]) + EDGES
    for width, seed in ((2, 0), (5, 123456789), (24, (1 << 32) - 1)):
        np.testing.assert_array_equal(
            minhash32_torch(texts, a, b, seed, width, device="cuda", fused=fused),
            minhash32(texts, a, b, seed, width))


@pytest.mark.slow
def test_fuzzy_duplicates_on_cuda_workers_equal_the_cpu_path():
    from distributed import Client, LocalCluster

    docs = noisy_sample().reset_index(names="id")[["id", "text"]]
    ds = DocumentDataset.from_pandas(docs, npartitions=8)
    with LocalCluster(n_workers=2, threads_per_worker=2, processes=True, host="127.0.0.1",
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
            Client(cluster):
        groups = [FuzzyDuplicates(device=device)(ds).df.compute()
                  .sort_values("id").reset_index(drop=True) for device in ("cpu", "cuda")]
    assert len(groups[0]) > 0   # the sample plants near duplicates
    pd.testing.assert_frame_equal(groups[1], groups[0])
