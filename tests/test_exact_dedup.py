"""Exact deduplication: hashing, groups, removal strategies, null texts, drop counts."""

from __future__ import annotations

import hashlib
import itertools
import logging

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import write_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_dask import AddId, DocumentDataset
from curator_dask.dedup import ExactDuplicates, NullTextError, hash_texts, remove_ids
from curator_dask.dedup.exact import (
    HASH_FIELD,
    _duplicate_groups,
    digests,
    repeated_digest_candidates,
)

try:  # xxh3_128 needs the optional xxhash package (the dedup extra)
    import xxhash
except ImportError:
    xxhash = None
needs_xxhash = pytest.mark.skipif(xxhash is None, reason="xxhash is not installed")

# cuDF's own MD5 test vectors (cpp/tests/hashing/md5_test.cpp): the digests that
# cudf's Series.hash_values(method="md5") returns for these strings.
CUDF_MD5_VECTORS = {
    "": "d41d8cd98f00b204e9800998ecf8427e",
    "A 60 character string to test MD5's message padding algorithm":
        "682240021651ae166d08fe2a014d5c09",
    "A very long (greater than 128 bytes/char string) to test a multi hash-step data point "
    "in the MD5 hash function. This string needed to be longer.":
        "3669d5225fddbb34676312ca3b78bbd9",
    "All work and no play makes Jack a dull boy": "c61a4185135eda043f35e92c3505e180",
    "!\"#$%&'()*+,-./0123456789:;<=>?@[\\]^_`{|}~": "52da74c75cb6575d25be29e66bd0adde",
    "Multi-byte characters: é¼³⅝": "65d1f8a3274d134f1ea9e6e854c72caa",
}


def frame(texts, ids=None) -> pd.DataFrame:
    ids = list(range(len(texts))) if ids is None else ids
    return pd.DataFrame({"id": pd.array(ids, dtype="int64"), "text": pd.array(texts, dtype="str")})


def dataset(texts, ids=None, npartitions=2) -> DocumentDataset:
    return DocumentDataset.from_pandas(frame(texts, ids), npartitions=npartitions)


def kept_ids(ds: DocumentDataset) -> list:
    return sorted(ds.df.compute()["id"].tolist())


def expected_kept(df: pd.DataFrame) -> list:
    """The specification: pandas drop_duplicates on the text, keeping the lowest id."""
    return sorted(df.sort_values("id").drop_duplicates("text", keep="first")["id"].tolist())


def corpus(n=3000, distinct=1200, seed=0) -> pd.DataFrame:
    """Texts with many duplicate groups, ids shuffled so row order is not id order."""
    rng = np.random.default_rng(seed)
    pool = [f"document {i} " + "lorem " * (i % 5) for i in range(distinct)] + ["", " ", "\n"]
    texts = [pool[i] for i in rng.integers(0, len(pool), n)]
    ids = rng.permutation(n).astype("int64") * 7 + 11
    return frame(texts, ids)


# -- hashing ----------------------------------------------------------------------------

def test_md5_digests_equal_cudf_published_vectors():
    texts = pd.Series(list(CUDF_MD5_VECTORS), dtype="str")
    assert hash_texts(texts, "md5").tolist() == list(CUDF_MD5_VECTORS.values())


def series_variants(texts, start):
    # A slice gives an Arrow array with a non-zero offset; object dtype takes another path.
    return pd.Series(texts, dtype="str")[start:], pd.Series(texts, dtype=object)[start:]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(), max_size=40), st.integers(0, 5))
def test_md5_equals_hashlib_on_any_text(texts, start):
    for series in series_variants(texts, start):
        assert hash_texts(series, "md5").tolist() == [
            hashlib.md5(t.encode("utf-8")).hexdigest() for t in series]
        assert hash_texts(series).index.equals(series.index)


def chunked(texts: list[str], cuts: list[int], arrow_type: pa.DataType) -> pa.ChunkedArray:
    """``texts`` split into chunks at ``cuts``, each chunk a slice (non-zero offset) of a
    larger array, as a reader's blocks and a filter's output are."""
    bounds = sorted({0, len(texts), *(c % (len(texts) + 1) for c in cuts)})
    chunks = []
    for lo, hi in itertools.pairwise(bounds):
        padded = pa.array(["pad", *texts[lo:hi], "pad"], type=arrow_type)
        chunks.append(padded.slice(1, hi - lo))
    return pa.chunked_array(chunks, type=arrow_type)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.text(), max_size=40), st.lists(st.integers(0, 40), max_size=6),
       st.sampled_from([pa.string(), pa.large_string()]))
def test_chunked_texts_hash_as_hashlib_chunk_by_chunk(texts, cuts, arrow_type):
    # The readers' tables come in chunks, hashed where they lie (never combined).
    arrow = chunked(texts, cuts, arrow_type)
    expected = [hashlib.md5(t.encode("utf-8")).digest() for t in texts]
    packed = digests(arrow, "md5")
    assert [packed[i:i + 16] for i in range(0, len(packed), 16)] == expected
    series = pd.Series(pd.arrays.ArrowStringArray(arrow.cast(pa.large_string())))
    assert hash_texts(series).tolist() == [d.hex() for d in expected]


@needs_xxhash
@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(), max_size=40), st.integers(0, 5))
def test_xxh3_128_equals_xxhash_on_any_text(texts, start):
    for series in series_variants(texts, start):
        assert hash_texts(series, "xxh3_128").tolist() == [
            xxhash.xxh3_128_hexdigest(t.encode("utf-8")) for t in series]


def test_unknown_hash_method_is_refused():
    with pytest.raises(ValueError, match="hash_method must be one of"):
        ExactDuplicates(hash_method="sha1")


# -- identify ----------------------------------------------------------------------------

hex_digest = st.text(alphabet="0123456789abcdef", min_size=32, max_size=32)


def reference_groups(df: pd.DataFrame) -> pd.DataFrame:
    """The specification of the grouping step: rows whose hash repeats, by hash, id, row."""
    grouped = df[df[HASH_FIELD].astype(object).duplicated(keep=False)]
    return grouped.sort_values([HASH_FIELD, "id", "_row"]).reset_index(drop=True)


@settings(max_examples=60, deadline=None)
@given(pool=st.lists(hex_digest, min_size=1, max_size=12, unique=True),
       picks=st.lists(st.integers(0, 11), min_size=1, max_size=60),
       chunks=st.integers(1, 4), start=st.integers(0, 3),
       dtype=st.sampled_from(["str", "string[pyarrow]", object]))
def test_duplicate_groups_equal_the_string_comparison(pool, picks, chunks, start, dtype):
    hashes = [pool[i % len(pool)] for i in picks]
    pieces = np.array_split(np.arange(len(hashes)), chunks)
    # Chunked as a shuffle's concatenation leaves them, in every string storage.
    df = pd.concat([pd.DataFrame({"id": pd.array([7 * int(i) % 5 for i in part], dtype="int64"),
                                  HASH_FIELD: pd.array([hashes[i] for i in part], dtype=dtype),
                                  "_row": np.asarray(part, dtype=np.int64)})
                    for part in pieces], ignore_index=True)
    df = df.iloc[start:]  # Arrow slices that start inside their buffers
    got = _duplicate_groups(df, "id")
    want = reference_groups(df)
    assert got["_row"].tolist() == want["_row"].tolist()
    assert got[HASH_FIELD].astype(object).tolist() == want[HASH_FIELD].astype(object).tolist()


def test_digests_whose_folds_collide_are_compared_exactly(monkeypatch):
    from curator_dask.dedup import exact

    # Every fold the same: every row a candidate, so only the string comparison is left
    # to keep the unique digests out of the groups.
    monkeypatch.setattr(exact, "_FOLD", np.zeros(4, dtype=np.uint64))
    df = pd.DataFrame({"id": pd.array([1, 2, 3, 4], dtype="int64"),
                       HASH_FIELD: pd.array(["a" * 32, "b" * 32, "a" * 32, "c" * 32],
                                            dtype="str"),
                       "_row": np.arange(4, dtype=np.int64)})
    assert exact.repeated_digest_candidates(df[HASH_FIELD]).tolist() == [True] * 4
    assert _duplicate_groups(df, "id")["id"].tolist() == [1, 3]


@pytest.mark.parametrize("values", [["ab", "ab"], ["a" * 32, None]])
def test_candidates_are_none_where_the_column_is_not_fixed_width_digests(values):
    assert repeated_digest_candidates(pd.Series(values, dtype="str")) is None
    assert repeated_digest_candidates(pd.Series(values, dtype=object)) is None


def test_identify_finds_known_groups_without_normalising():
    texts = ["a", "b", "a", "", "", " ", " ", "  ", "A", "a ", "b", "\t"]
    ds = dataset(texts, ids=[10 * i for i in range(len(texts))], npartitions=3)
    dups = ExactDuplicates().identify(ds).df.compute()
    groups = sorted(sorted(g["id"]) for _, g in dups.groupby(HASH_FIELD))
    # "a", "b", empty and single-space texts repeat; "  ", "A", "a ", "\t" are unique.
    assert groups == [[0, 20], [10, 100], [30, 40], [50, 60]]
    assert dups.set_index("id")[HASH_FIELD][30] == "d41d8cd98f00b204e9800998ecf8427e"


@pytest.mark.parametrize("hash_method", ["md5", pytest.param("xxh3_128", marks=needs_xxhash)])
def test_kept_set_equals_pandas_drop_duplicates_keeping_lowest_id(hash_method):
    df = corpus()
    ds = DocumentDataset.from_pandas(df, npartitions=5)
    clean = ExactDuplicates(hash_method=hash_method, perform_removal=True)(ds)
    assert kept_ids(clean) == expected_kept(df)
    assert clean.dropped_counts() == {"exact_duplicate": len(df) - len(expected_kept(df))}


def test_fewer_hash_partitions_keep_the_same_ids():
    df = corpus(seed=5)
    ds = DocumentDataset.from_pandas(df, npartitions=8)
    dedup = ExactDuplicates(hash_partitions=2, perform_removal=True)
    assert dedup.identify(ds).npartitions == 2
    assert kept_ids(dedup(ds)) == expected_kept(df)


def test_same_kept_ids_for_1_7_and_31_partitions():
    df = corpus(seed=1)
    results = [kept_ids(ExactDuplicates(perform_removal=True)(
        DocumentDataset.from_pandas(df, npartitions=n))) for n in (1, 7, 31)]
    assert results[0] == results[1] == results[2] == expected_kept(df)


def test_string_ids_keep_the_lowest_string():
    df = pd.DataFrame({"id": pd.array(["b-2", "a-9", "c-1"], dtype="str"),
                       "text": pd.array(["x", "x", "y"], dtype="str")})
    clean = ExactDuplicates(perform_removal=True)(DocumentDataset.from_pandas(df, 2))
    assert sorted(clean.df.compute()["id"]) == ["a-9", "c-1"]


def test_null_text_is_an_error_naming_the_partition_and_document():
    ds = dataset(["a", "b", None, "a"], ids=[1, 2, 3, 4], npartitions=2)
    with pytest.raises(NullTextError, match=r"partition 1: 1 document\(s\) have a null 'text' "
                                            r"\(first: id=3; .*on_null='skip'"):
        ExactDuplicates().identify(ds).df.compute()


def test_null_text_skip_drops_and_counts_them():
    ds = dataset(["a", None, "a", None, "b"], ids=[1, 2, 3, 4, 5], npartitions=2)
    clean = ExactDuplicates(on_null="skip", perform_removal=True)(ds)
    assert kept_ids(clean) == [1, 5]
    assert clean.dropped_counts() == {"exact_duplicate": 1, "null_text": 2}


def test_missing_columns_name_the_fix():
    ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a"]}))
    with pytest.raises(KeyError, match="assign ids with AddId"):
        ExactDuplicates().identify(ds)


# -- removal ------------------------------------------------------------------------------

def partitions(ds: DocumentDataset) -> list[pd.DataFrame]:
    # Not get_partition(i): selecting one partition renumbers partition_info, which
    # AddId reads, so the ids would differ from a whole-dataset compute.
    return list(dask.compute(*ds.df.to_delayed()))


def test_broadcast_and_shuffle_removal_give_identical_partitions_and_counts():
    df = corpus(seed=2)
    ds = DocumentDataset.from_pandas(df, npartitions=6)
    dups = ExactDuplicates().identify(ds)
    outputs = {s: ExactDuplicates(removal_strategy=s).remove(ds, dups)
               for s in ("broadcast", "shuffle")}
    broadcast, shuffle = (dask.compute(*outputs[s].to_partitions())
                          for s in ("broadcast", "shuffle"))
    assert len(broadcast) == len(shuffle) == 6
    for a, b in zip(broadcast, shuffle, strict=True):
        pd.testing.assert_frame_equal(a.frame, b.frame)
        assert (a.dropped, a.counters) == (b.dropped, b.counters)
    assert sorted(pd.concat([p.frame for p in broadcast])["id"]) == expected_kept(df)


def test_removal_keeps_partitions_order_plan_and_upstream_counts(tmp_path):
    rows = [{"text": t} for t in ["x", "y", "x", "z", "y", "x"]]
    write_jsonl(tmp_path / "a.jsonl", rows)
    with open(tmp_path / "a.jsonl", "a") as out:
        out.write("{not json\n")
    write_jsonl(tmp_path / "b.jsonl", rows)
    ds = AddId()(DocumentDataset.read_jsonl(tmp_path, files_per_partition=1,
                                            on_bad_lines="skip"))
    clean = ExactDuplicates(perform_removal=True)(ds)
    assert clean.npartitions == 2 and clean.plan == ds.plan
    first, second = partitions(clean)
    assert first["text"].tolist() == ["x", "y", "z"] and second.empty
    assert clean.dropped_counts() == {"exact_duplicate": 9, "reader.bad_json_line": 1}


@pytest.mark.parametrize("strategy", ["broadcast", "shuffle", "auto"])
def test_remove_ids_takes_a_series_and_ignores_unknown_ids(strategy):
    ds = dataset(list("abcdef"), ids=[5, 1, 4, 2, 6, 3], npartitions=3)
    drop = dd.from_pandas(pd.Series([4, 3, 99, 4], name="whatever"), npartitions=2)
    out = remove_ids(ds, drop, strategy=strategy, reason="test")
    assert [p["id"].tolist() for p in partitions(out)] == [[5, 1], [2], [6]]
    assert out.dropped_counts() == {"test": 2}


def test_remove_ids_auto_picks_by_threshold(caplog):
    ds = dataset(list("abcd"), ids=[1, 2, 3, 4])
    drop = DocumentDataset.from_pandas(pd.DataFrame({"id": [1, 2]}))
    with caplog.at_level(logging.INFO, logger="curator_dask.dedup.removal"):
        remove_ids(ds, drop, broadcast_threshold=2)
        remove_ids(ds, drop, broadcast_threshold=1)
    assert [r.getMessage().rsplit(" ", 2)[-2] for r in caplog.records] == ["broadcast", "shuffle"]


def test_a_list_read_from_parquet_is_broadcast_without_counting_it(tmp_path, caplog):
    df = corpus(seed=6)
    ds = DocumentDataset.from_pandas(df, npartitions=3)
    dedup = ExactDuplicates()
    dedup.identify(ds).to_parquet(str(tmp_path / "dups"))
    listed = DocumentDataset.read_parquet(str(tmp_path / "dups"), text_field=None)
    rows = len(pd.read_parquet(tmp_path / "dups"))
    messages = {}
    for threshold in (rows, rows - 1):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="curator_dask.dedup.removal"):
            clean = ExactDuplicates(broadcast_threshold=threshold).remove(ds, listed)
        messages[threshold] = [r.getMessage() for r in caplog.records]
        assert kept_ids(clean) == expected_kept(df)
    # Within the threshold the footers' count decides; above it the ids are counted
    # (fewer than the list's rows: the first of each group stays) and broadcast too.
    assert messages[rows] == [f"remove_ids: at most {rows} ids to remove, "
                              f"broadcast_threshold={rows}: broadcast strategy"]
    assert messages[rows - 1] == [f"remove_ids: {len(df) - len(expected_kept(df))} ids to "
                                  f"remove, broadcast_threshold={rows - 1}: broadcast strategy"]


@pytest.mark.parametrize("threshold", [10_000_000, 0])
def test_a_list_read_back_in_pieces_is_regrouped_whole(tmp_path, threshold):
    """A list read back cut into many partitions splits groups between them: gathered
    into one partition (within the threshold) or shuffled on the hash (above it), every
    group is whole again and the same documents are kept."""
    df = corpus(seed=7)
    ds = DocumentDataset.from_pandas(df, npartitions=3)
    dedup = ExactDuplicates(broadcast_threshold=threshold)
    dedup.identify(ds).to_parquet(str(tmp_path / "dups"))
    listed = DocumentDataset.read_parquet(str(tmp_path / "dups"), text_field=None,
                                          blocksize="4KiB")
    assert listed.npartitions > 3
    assert kept_ids(dedup.remove(ds, listed)) == expected_kept(df)


def test_remove_ids_refuses_mismatched_id_types():
    ds = dataset(["a"], ids=[1])
    drop = dd.from_pandas(pd.DataFrame({"id": pd.array(["1"], dtype="str")}), npartitions=1)
    with pytest.raises(TypeError, match="both must be integers or both strings"):
        remove_ids(ds, drop)


def test_duplicates_not_partitioned_on_hash_are_regrouped():
    df = corpus(seed=3)
    ds = DocumentDataset.from_pandas(df, npartitions=4)
    dups = ExactDuplicates().identify(ds).df.compute()
    # Split the groups across partitions, as a list from another tool might be.
    scattered = DocumentDataset.from_pandas(dups.sample(frac=1, random_state=0), npartitions=5)
    clean = ExactDuplicates().remove(ds, scattered)
    assert kept_ids(clean) == expected_kept(df)


def test_cache_path_writes_and_reads_back_the_duplicates(tmp_path):
    df = corpus(seed=4)
    ds = DocumentDataset.from_pandas(df, npartitions=3)
    dedup = ExactDuplicates(cache_path=str(tmp_path / "cache"), hash_partitions=3)
    dups = dedup.identify(ds)
    files = sorted(p.name for p in (tmp_path / "cache" / "exact_duplicates").iterdir()
                   if not p.name.startswith("."))  # the writer's hidden manifest
    assert files == ["_COMPLETE.json"] + [f"part-{i:05d}.parquet" for i in range(3)]
    assert kept_ids(dedup.remove(ds, dups)) == expected_kept(df)


def test_the_default_hash_partitions_follow_the_input_size(tmp_path):
    # Data not read from files: one hash partition per 16 input partitions.
    df = corpus(seed=5)
    for npartitions, wanted in ((3, 1), (17, 2)):
        ds = DocumentDataset.from_pandas(df, npartitions=npartitions)
        assert ExactDuplicates().identify(ds).npartitions == wanted
    # Files: one per 2 GiB, so a small corpus is grouped in one.
    ds.to_parquet(str(tmp_path / "pq"))
    read = DocumentDataset.read_parquet(str(tmp_path / "pq"), files_per_partition=1)
    assert read.npartitions == 17
    dedup = ExactDuplicates(perform_removal=True)
    assert dedup.identify(read).npartitions == 1
    assert kept_ids(dedup(read)) == expected_kept(df)


def test_a_corpus_without_duplicates_keeps_everything(tmp_path):
    ds = dataset(["a", "b", "c", "d"], npartitions=2)
    dedup = ExactDuplicates(cache_path=str(tmp_path / "cache"), perform_removal=True)
    clean = dedup(ds)
    assert kept_ids(clean) == [0, 1, 2, 3] and clean.dropped_counts() == {}
