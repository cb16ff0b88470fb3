"""The torch MinHash kernel (run here on torch's CPU) against the numba kernel and cuDF's
published values, and the MinHash stage's ``device`` option.

Expected values marked "cuDF" are copied from rapidsai/cudf's tests
(``cpp/tests/text/minhash_tests.cpp``, ``python/cudf/cudf/tests/text/test_text_methods.py``)
and the ``Series.str.minhash`` docstring. The same kernel on a CUDA GPU is checked in
``tests/test_minhash_gpu.py``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from curator_dask import DocumentDataset  # noqa: E402
from curator_dask.dedup import (  # noqa: E402
    FuzzyDedupConfig,
    FuzzyDeduplicationWorkflow,
    FuzzyDuplicates,
)
from curator_dask.dedup.fuzzy import MinHash  # noqa: E402
from curator_dask.dedup.fuzzy.minhash_kernel import generate_permutations, minhash32  # noqa: E402
from curator_dask.dedup.fuzzy.minhash_torch import minhash32_torch  # noqa: E402
from curator_dask.dedup.stages import FuzzyDedup  # noqa: E402
from curator_dask.devices import NVIDIA_CONTROL_DEVICE  # noqa: E402
from curator_dask.errors import InvalidArgumentError, ResourceUnavailableError  # noqa: E402
from curator_dask.sample import noisy_sample  # noqa: E402

M32 = (1 << 32) - 1
CPU = torch.device("cpu")


def on_torch_cpu(texts, a, b, seed, width, **kwargs):
    return minhash32_torch(texts, a, b, seed, width, device="cpu", **kwargs)


# -- cuDF's published values ---------------------------------------------------------------

def test_cudf_docstring_and_python_test_vectors():
    # Series.str.minhash docstring; test_text_methods.py::test_minhash (with "").
    assert on_torch_cpu(["this is my", "favorite book"], [1, 2, 3], [4, 5, 6], 0, 5).tolist() \
        == [[1305480171, 462824409, 74608232], [32665388, 65330773, 97996158]]
    assert on_torch_cpu(["this is my", "favorite book", ""], [1, 2, 3], [1, 2, 3], 0,
                        5).tolist() == [[1305480168, 462824406, 74608229],
                                        [32665385, 65330770, 97996155], [0, 0, 0]]


def test_cudf_cpp_permuted():
    # cpp/tests/text/minhash_tests.cpp, TEST_F(MinHashTest, Permuted)
    texts = ["doc 1", "this is doc 2", "doc 3", "d",
             "The quick brown fox jumpéd over the lazy brown dog.", "line six", "line seven",
             "line eight", "line nine", "line ten"]
    assert on_torch_cpu(texts, [10, 11, 12], [10, 11, 12], 0, 4).tolist() == [
        [1392101586, 394869177, 811528444], [211415830, 187088503, 130291444],
        [2098117052, 394869177, 799753544], [2264583304, 2920538364, 3576493424],
        [253327882, 41747273, 302030804], [2109809594, 1017470651, 326988172],
        [1303819864, 850676747, 147107852], [736021564, 720812292, 1405158760],
        [902780242, 134064807, 1613944636], [547084870, 1748895564, 656501844],
    ]


@pytest.mark.slow
def test_cudf_cpp_permuted_wide():
    # cpp/tests/text/minhash_tests.cpp, PermutedWide: a 1 MiB row, many chunks of shingles.
    params = list(range(20, 51))
    got = on_torch_cpu(["x" * (2 << 10), "y" * (2 << 19)], params, params, 0, 4,
                       chunk_bytes=16 << 20)
    assert got[:, :3].tolist() == [[1731998032, 315359380, 3193688024],
                                   [1293098788, 2860992281, 133918478]]


# -- against the numba kernel, over generated text -----------------------------------------

# Multi-byte characters of every UTF-8 length, NUL and other control characters, and ASCII
# stretches (shingles of one byte a character) shorter and longer than a shingle.
any_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
rare_char = st.sampled_from(["é", "日", "☃", "\U0001f600", "\U00010348", "\x00", "\n", "\x7f"])
ascii_stretch = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=70)
mixed_text = st.lists(st.tuples(ascii_stretch, rare_char), max_size=5).map(
    lambda parts: "".join(a + c for a, c in parts)) | ascii_stretch | any_text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(mixed_text, max_size=8), width=st.integers(2, 30),
       seed=st.integers(0, M32),
       params=st.lists(st.tuples(st.integers(0, M32), st.integers(0, M32)), min_size=1,
                       max_size=6),
       chunk_bytes=st.sampled_from([1, 3000, 1 << 20]))
def test_equals_the_numba_kernel(texts, width, seed, params, chunk_bytes):
    # chunk_bytes=1: one group of shingles a chunk, so documents span many chunks.
    a, b = [p[0] for p in params], [p[1] for p in params]
    want = minhash32(texts, a, b, seed, width)
    got = on_torch_cpu(texts, a, b, seed, width, chunk_bytes=chunk_bytes)
    assert got.dtype == np.uint32
    np.testing.assert_array_equal(got, want)


@pytest.mark.slow
def test_real_text_with_the_stage_parameters():
    texts = noisy_sample(limit=50)["text"]
    a, b = generate_permutations(42, 260)
    np.testing.assert_array_equal(on_torch_cpu(texts, a, b, int(a[0]), 24, chunk_bytes=1 << 22),
                                  minhash32(texts, a, b, int(a[0]), 24))


@pytest.mark.parametrize("make", [
    lambda t: pa.array(t, pa.large_string()),
    lambda t: pa.chunked_array([t[:2], t[2:]]),
    lambda t: pa.array(["padding", *t, "more"])[1:-1],   # a slice: offsets not from 0
    lambda t: pd.Series(t, dtype="str"),
])
def test_string_column_kinds(make):
    texts = ["naïve café", "", "日本語のテキスト", "x"]
    np.testing.assert_array_equal(on_torch_cpu(make(texts), [3, 5, M32], [1, M32, 3], 9, 3),
                                  minhash32(texts, [3, 5, M32], [1, M32, 3], 9, 3))


def test_no_documents_and_bad_parameters():
    assert on_torch_cpu([], [1, 2], [3, 4], 0, 5).shape == (0, 2)
    with pytest.raises(InvalidArgumentError, match="width"):
        on_torch_cpu(["abc"], [1], [2], 0, 1)
    with pytest.raises(InvalidArgumentError, match="null"):
        on_torch_cpu(pa.array(["abc", None]), [1], [2], 0, 5)


# -- the Triton kernels, run by Triton's interpreter on the CPU ---------------------------

INTERPRETED = """
import json, sys
import numpy as np
from curator_dask.dedup.fuzzy.minhash_torch import minhash32_torch
case = json.loads(sys.stdin.read())
got = [minhash32_torch(c["texts"], c["a"], c["b"], c["seed"], c["width"], device="cpu",
                       fused=True, chunk_bytes=1).tolist() for c in case]
print(json.dumps(got))
"""


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                    reason="needs triton (pip install triton)")
def test_triton_kernels_equal_the_numba_kernel():
    # Generated cases, one interpreter process for all: the interpreter must be chosen
    # before Triton is first imported.
    rng = np.random.default_rng(7)
    pieces = ["é", "日本", "\U0001f600", "\x00", "\n", "ab", "the quick brown fox ", ""]
    cases = []
    for _ in range(12):
        texts = ["".join(rng.choice(pieces, size=int(rng.integers(0, 40))))
                 for _ in range(int(rng.integers(1, 6)))]
        n = int(rng.integers(1, 70))
        cases.append({"texts": texts, "width": int(rng.integers(2, 26)),
                      "seed": int(rng.integers(0, M32, endpoint=True)),
                      "a": rng.integers(0, M32, n, endpoint=True).tolist(),
                      "b": rng.integers(0, M32, n, endpoint=True).tolist()})
    out = subprocess.run([sys.executable, "-c", INTERPRETED], input=json.dumps(cases),
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "TRITON_INTERPRET": "1"})
    for case, got in zip(cases, json.loads(out.stdout), strict=True):
        want = minhash32(case["texts"], case["a"], case["b"], case["seed"], case["width"])
        assert got == want.tolist()


# -- the stage's device option -------------------------------------------------------------

@pytest.mark.slow
def test_stage_on_the_torch_kernel_gives_the_numba_signatures(sync_scheduler):
    docs = noisy_sample(limit=60).reset_index(names="id")[["id", "text"]]
    ds = DocumentDataset.from_pandas(docs, npartitions=3)
    want = MinHash(char_ngrams=5, num_hashes=32)(ds).df.compute()
    got = MinHash(char_ngrams=5, num_hashes=32, device=CPU)(ds).df.compute()
    pd.testing.assert_frame_equal(got, want)


@pytest.mark.slow
def test_fuzzy_duplicates_on_the_torch_kernel_find_the_same_groups(client):
    docs = noisy_sample(limit=150).reset_index(names="id")[["id", "text"]]
    ds = DocumentDataset.from_pandas(docs, npartitions=4)
    groups = [FuzzyDuplicates(char_ngrams=24, device=device)(ds).df.compute()
              .sort_values("id").reset_index(drop=True) for device in ("cpu", CPU)]
    assert len(groups[0]) > 0   # the sample plants near duplicates
    pd.testing.assert_frame_equal(groups[1], groups[0])


def test_device_is_checked_where_the_stage_is_made():
    with pytest.raises(InvalidArgumentError, match="device must be"):
        MinHash(device="tpu")
    with pytest.raises(InvalidArgumentError, match="32-bit signatures only"):
        MinHash(device="cuda", use_64_bit_hash=True)
    with pytest.raises(InvalidArgumentError, match="device must be"):
        FuzzyDuplicates(device="gpu")
    # 64-bit signatures on "auto" are computed on the CPU, wherever that is.
    assert MinHash(device="auto", use_64_bit_hash=True).device == "auto"


def test_device_reaches_minhash_from_every_entry_point_and_no_fingerprint():
    # Every device computes the same signatures, so a cache written on one serves another.
    assert FuzzyDuplicates(device="auto").parameters() == FuzzyDuplicates().parameters()
    assert FuzzyDuplicates(config=FuzzyDedupConfig(device="cuda")).minhash.device == "cuda"
    workflow = FuzzyDeduplicationWorkflow("in", cache_path="cache", device="cuda:1")
    assert workflow.dedup.minhash.device == "cuda:1"
    assert FuzzyDedup(device="auto").dedup.minhash.device == "auto"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is here")
def test_cuda_on_a_worker_without_gpu_says_how_to_fall_back():
    with pytest.raises(ResourceUnavailableError, match="device='auto'"):
        MinHash(char_ngrams=5, num_hashes=4, device="cuda").signatures(pd.Series(["a text"]))


@pytest.mark.slow
@pytest.mark.skipif(os.path.exists(NVIDIA_CONTROL_DEVICE),
                    reason="an NVIDIA driver is here: 'auto' rightly asks torch for the GPU")
def test_auto_on_a_machine_without_gpu_is_the_numba_kernel_without_torch():
    code = ("import sys, pandas as pd; from curator_dask.dedup.fuzzy import MinHash; "
            "m = MinHash(char_ngrams=3, num_hashes=4, device='auto'); "
            "s = m.signatures(pd.Series(['some text'])); "
            "print(len(s.iloc[0]), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["4", "False"]
