"""Fuzzing the readers: whatever the bytes, the outcome is a correct table, or an error of
the project (a ``CuratorError``) that names the file (and the line where one applies),
never a raw exception; under ``on_bad_lines="skip"`` every good line is read once and
every other line is read or counted.

Malformed JSONL lines: bad escapes, lone surrogates, values whose type changes (lists
mixing numbers and objects), deep nesting, numbers too large for any type, NaN and
Infinity, a byte-order mark, CRLF, NUL, bytes that are not UTF-8, cut-off lines; files
compressed and cut short. Malformed Parquet: text that is not strings (numbers, bytes,
lists, structs), dictionary-encoded text, cut-off and random files.
"""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask import CuratorError, DocumentDataset
from reliability.conftest import snapshot_bytes

BAD_LINES = [
    b'{"id": %d, "text": "\\ud800"}',                    # a lone surrogate escape
    b'{"id": %d, "text": "\\x41"}',                      # not a JSON escape
    b'{"id": %d, "text": "a", "l": [1, {"k": 2}]}',      # a list mixing types
    b'{"id": %d, "text": 5}',                            # text that is a number
    b'{"id": "%d", "text": "a"}',                        # an id that is a string
    b'{"id": %d, "text": "a", "n": 1e400}',              # too large for a double
    b'{"id": %d, "text": "a", "n": 123456789012345678901234567890}',
    b'{"id": %d, "text": "a", "n": NaN, "m": -Infinity}',
    b'{"id": %d, "text": "a", "deep": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    b'{"id": %d, "text": "a\x00b"}',                     # a raw NUL inside a string
    b'{"id": %d, "text": "\xff\xfe"}',                   # bytes that are not UTF-8
    b'{"id": %d, "text": "cut',                          # a line cut off
    b'[%d, "not an object"]',
    b'{"id": %d, "text": "a", "text": "b"}',             # a key given twice
]


def good(i: int) -> bytes:
    return json.dumps({"id": i, "text": f"document {i}"}).encode()


@st.composite
def jsonl_files(draw):
    """Lines (bytes) of a JSONL file, and the ids of the good lines among them."""
    n = draw(st.integers(1, 30))
    lines, good_ids = [], []
    for i in range(n):
        bad = draw(st.none() | st.sampled_from(BAD_LINES))
        if bad is None:
            lines.append(good(i))
            good_ids.append(i)
        else:
            lines.append(bad.replace(b"%d", str(i).encode()))
    ending = draw(st.sampled_from([b"\n", b"\r\n"]))
    data = ending.join(lines) + draw(st.sampled_from([ending, b""]))
    if draw(st.booleans()):
        data = b"\xef\xbb\xbf" + data  # a byte-order mark
    return data, good_ids, n


def outcome(path, **options):
    """The frame read, or the CuratorError raised (any other exception fails the test)."""
    try:
        ds = DocumentDataset.read_jsonl(str(path), blocksize=options.pop("blocksize", None),
                                        **options)
        return ds.df.compute(), ds.dropped_counts()
    except CuratorError as err:
        return err, None


def assert_names_the_file(err: CuratorError, path) -> None:
    assert str(path) in str(err), err
    line = getattr(err, "line", None)
    if line is not None:
        assert line >= 0  # a truncated stream names the lines complete before it


@pytest.mark.slow
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(file=jsonl_files(), blocksize=st.sampled_from([None, 64, 300]))
def test_malformed_jsonl_is_a_table_or_a_named_error(tmp_path_factory, file, blocksize):
    data, good_ids, n = file
    root = tmp_path_factory.mktemp("fuzz")
    path = root / "in.jsonl"
    path.write_bytes(data)
    before = snapshot_bytes(root)
    for mode in ("error", "skip"):
        result, dropped = outcome(path, on_bad_lines=mode, blocksize=blocksize)
        if isinstance(result, CuratorError):
            assert_names_the_file(result, path)
            continue
        ids = result["id"].tolist() if "id" in result.columns else []
        assert len(ids) == len(set(ids)), ids
        if ids and all(isinstance(i, str) for i in ids):
            # Most sampled ids were strings ('{"id": "3"}' lines), so the column is text:
            # the lines with numeric ids are the ones that do not fit, counted under skip.
            assert all(i.isdigit() for i in ids), ids
            ids = [int(i) for i in ids]
        else:
            assert set(good_ids) <= set(ids), (good_ids, ids)  # every good line, once
        assert set(ids) <= set(range(n)), ids
        if mode == "skip":  # every line is read or counted
            assert len(ids) + sum(dropped.values()) == n, (ids, dropped)
    assert snapshot_bytes(root) == before


@pytest.mark.slow
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 200), cut=st.floats(0.05, 0.95),
       codec=st.sampled_from(["gzip", "zstd"]))
def test_a_compressed_file_cut_short_is_named_or_keeps_the_lines_before_the_break(
        tmp_path_factory, n, cut, codec):
    data = b"\n".join(good(i) for i in range(n)) + b"\n"
    packed = gzip.compress(data) if codec == "gzip" else zstandard.ZstdCompressor().compress(data)
    root = tmp_path_factory.mktemp("cut")
    path = root / ("in.jsonl.gz" if codec == "gzip" else "in.jsonl.zst")
    path.write_bytes(packed[:max(1, int(len(packed) * cut))])
    result, _ = outcome(path)
    assert isinstance(result, CuratorError), "a cut-off stream must not read as complete"
    assert_names_the_file(result, path)
    result, _dropped = outcome(path, on_bad_lines="skip")
    if not isinstance(result, CuratorError):
        ids = result["id"].tolist() if "id" in result.columns else []
        assert ids == list(range(len(ids)))  # the lines before the break, in order
    else:
        assert_names_the_file(result, path)


PARQUET_TEXTS = {
    "numbers": pa.array([1, 2, None]),
    "bytes": pa.array([b"a", b"\xff", None]),
    "lists": pa.array([["a"], [], None]),
    "structs": pa.array([{"t": "a"}, None, {"t": None}]),
    "dictionary": pa.array(["a", "b", None]).dictionary_encode(),
    "large_string": pa.array(["a", "b", None], pa.large_string()),
}


@pytest.mark.parametrize("kind", list(PARQUET_TEXTS))
def test_parquet_text_of_every_type_is_read_or_named(tmp_path, kind):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": [0, 1, 2], "text": PARQUET_TEXTS[kind]}), path)
    try:
        out = DocumentDataset.read_parquet(str(path)).df.compute()
    except CuratorError as err:
        assert_names_the_file(err, path)
        assert kind in ("numbers", "bytes", "lists", "structs"), err
    else:
        assert kind in ("dictionary", "large_string")
        assert out["text"].tolist()[:2] == ["a", "b"]


@pytest.mark.slow
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(0.0, 0.99), noise=st.binary(max_size=64))
def test_a_broken_parquet_file_is_a_named_error(tmp_path_factory, cut, noise):
    root = tmp_path_factory.mktemp("parquet")
    path = root / "in.parquet"
    pq.write_table(pa.table({"id": list(range(50)), "text": [f"d{i}" for i in range(50)]}),
                   path)
    whole = path.read_bytes()
    path.write_bytes(whole[:int(len(whole) * cut)] + noise)
    try:
        out = DocumentDataset.read_parquet(str(path)).df.compute()
    except CuratorError as err:
        assert_names_the_file(err, path)
    else:
        assert out["id"].tolist() == list(range(50))  # only a file that is still whole
