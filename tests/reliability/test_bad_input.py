"""Bad input never loses documents silently: an error naming the file and line, or a
counted skip. Each test also checks that the input files are byte-identical afterwards.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import zlib
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from curator_dask import DocumentDataset
from curator_dask.io import (
    CorruptFileError,
    InvalidEncodingError,
    MalformedLineError,
    MissingColumnError,
    SchemaConflictError,
    SchemaMismatchError,
    TextTypeError,
    TruncatedFileError,
    UnexpectedColumnError,
)
from curator_dask.io.files import list_files, sample_files
from curator_dask.io.jsonl import SAMPLE_BYTES, SAMPLE_FILES


def write_lines(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def rows(n: int, start: int = 0, **extra) -> list[dict]:
    return [{"id": i, "text": f"document {i} " + "word " * (i % 9), **extra}
            for i in range(start, start + n)]


def past_the_sample(start: int = 0, **extra) -> list[dict]:
    """Enough rows that the schema sample (first line + SAMPLE_BYTES) ends before them."""
    n = SAMPLE_BYTES // 40 + 100
    return rows(n, start, **extra)


def digests(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def read_ids(ds: DocumentDataset) -> list[int]:
    return sorted(ds.df.compute()["id"].tolist())


# -- schema inference reads enough -----------------------------------------------------

@pytest.mark.slow
def test_a_50_mb_first_line_keeps_every_other_field(tmp_path):
    path = tmp_path / "big.jsonl"
    with open(path, "w") as out:
        out.write('{"id": 0, "url": "https://a.example", "text": "')
        for _ in range(50):
            out.write("x" * 1_000_000)
        out.write('", "lang": "en"}\n')
        for i in range(1, 4):
            out.write(json.dumps({"id": i, "url": f"https://{i}.example", "text": "short",
                                  "lang": "de"}) + "\n")
    before = digests(tmp_path)
    ds = DocumentDataset.read_jsonl(str(path))
    assert list(ds.df.columns) == ["id", "url", "text", "lang"]
    out = ds.df.compute()
    assert out["id"].tolist() == [0, 1, 2, 3]
    assert out["url"].tolist()[0] == "https://a.example"
    assert out["lang"].tolist() == ["en", "de", "de", "de"]
    assert len(out["text"].iloc[0]) == 50_000_000
    assert digests(tmp_path) == before


def test_a_field_only_in_a_later_line_is_an_error_naming_file_and_line(tmp_path):
    early = past_the_sample()
    later = {"id": len(early), "text": "late", "lang": "en"}
    path = tmp_path / "a.jsonl"
    write_lines(path, [*early, later])
    before = digests(tmp_path)
    with pytest.raises(UnexpectedColumnError, match=r"'lang'.*input_meta=.*columns=") as err:
        DocumentDataset.read_jsonl(str(path)).df.compute()
    assert (err.value.path, err.value.line, err.value.column) == (str(path), len(early) + 1, "lang")
    # Either fix keeps every document; input_meta keeps the field too.
    fixed = DocumentDataset.read_jsonl(str(path), input_meta={"lang": "str"}).df.compute()
    assert fixed["lang"].dropna().tolist() == ["en"] and len(fixed) == len(early) + 1
    chosen = DocumentDataset.read_jsonl(str(path), columns=["id", "text"]).df.compute()
    assert sorted(chosen["id"]) == list(range(len(early) + 1))
    assert digests(tmp_path) == before


@pytest.mark.slow
def test_a_field_only_in_an_unsampled_file_is_an_error_naming_it(tmp_path, client):
    for i in range(3 * SAMPLE_FILES):
        write_lines(tmp_path / f"f{i:03d}.jsonl", rows(3, start=3 * i))
    _, files = list_files(str(tmp_path), [".jsonl"])
    sampled = {f.path for f in sample_files(files, SAMPLE_FILES)}
    unsampled = next(f.path for f in files if f.path not in sampled)
    write_lines(Path(unsampled), [{"id": -1, "text": "a"}, {"id": -2, "text": "b", "lang": "en"}])
    before = digests(tmp_path)
    ds = DocumentDataset.read_jsonl(str(tmp_path), files_per_partition=4)
    with pytest.raises(UnexpectedColumnError) as err:  # raised on a worker process
        ds.df.compute()
    assert (err.value.path, err.value.line, err.value.column) == (unsampled, 2, "lang")
    assert digests(tmp_path) == before


def test_files_that_disagree_on_a_type_are_an_error_naming_both(tmp_path):
    write_lines(tmp_path / "a.jsonl", rows(3, source="crawl"))
    write_lines(tmp_path / "b.jsonl", [*rows(2, start=3, source="crawl"),
                                      {"id": 5, "text": "t", "source": 7}])
    before = digests(tmp_path)
    with pytest.raises(SchemaConflictError) as err:
        DocumentDataset.read_jsonl(str(tmp_path))
    message = str(err.value)
    assert f"{tmp_path / 'a.jsonl'}, line 1" in message and "string" in message
    assert f"{tmp_path / 'b.jsonl'}, line 3" in message and "int64" in message
    assert "input_meta={'source': ...}" in message
    # The fix the message gives reads every document, the number as a string.
    out = DocumentDataset.read_jsonl(str(tmp_path), input_meta={"source": "str"}).df.compute()
    assert out["source"].tolist() == ["crawl"] * 5 + ["7"]
    assert digests(tmp_path) == before


# -- a value whose type changes inside a file ------------------------------------------

def test_a_type_change_inside_a_file_names_file_and_line(tmp_path):
    early = past_the_sample(source="crawl")
    path = tmp_path / "a.jsonl"
    write_lines(path, [*early, *rows(3, start=len(early), source=7)])
    before = digests(tmp_path)
    ds = DocumentDataset.read_jsonl(str(path))
    with pytest.raises(SchemaMismatchError, match="on_bad_lines='skip'") as err:
        ds.df.compute()
    assert (err.value.path, err.value.line, err.value.column) == (str(path), len(early) + 1,
                                                                  "source")
    assert err.value.found == "int64" and err.value.expected == "string"
    # Inside a byte range of a split file, the line is still counted from the file's start.
    split = DocumentDataset.read_jsonl(str(path), blocksize="64KiB")
    assert split.npartitions > 3
    with pytest.raises(SchemaMismatchError) as err:
        split.df.compute()
    assert err.value.line == len(early) + 1
    assert digests(tmp_path) == before


@pytest.mark.parametrize("mode", ["skip", "warn"])
def test_type_changes_skipped_are_counted(tmp_path, mode, caplog):
    early = past_the_sample(source="crawl")
    n = len(early)
    odd = [{"id": n, "text": "t", "source": 7}, {"id": n + 1, "text": 8},
           {"id": n + 2, "text": "t", "source": {"nested": True}}]
    path = tmp_path / "a.jsonl"
    write_lines(path, [*early, *odd, *rows(2, start=n + 3, source="crawl")])
    write_lines(tmp_path / "b.jsonl", rows(4, start=n + 5, source=99))  # a whole file
    # The first file disagrees with most sampled values: the type of the most is kept.
    write_lines(tmp_path / "0.jsonl", rows(1, start=n + 9, source=3))
    before = digests(tmp_path)
    input_ids = list(range(n + 10))
    with caplog.at_level(logging.WARNING):
        ds = DocumentDataset.read_jsonl(str(tmp_path), on_bad_lines=mode, blocksize="256KiB")
    assert "keeping string" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        kept = read_ids(ds)
    warned = [r.getMessage() for r in caplog.records if "skipping a line" in r.getMessage()]
    assert ds.dropped_counts() == {"reader.type_mismatch": 8}
    assert sorted([*kept, n, n + 1, n + 2, *list(range(n + 5, n + 10))]) == input_ids
    if mode == "warn":
        assert f"{path}, line {n + 1}: skipping a line whose 'source' is int64, not string" \
            in warned
        assert len(warned) == 8
    else:
        assert warned == []
    assert digests(tmp_path) == before


# -- truncated compressed files --------------------------------------------------------

def _truncated(payload: bytes, suffix: str) -> bytes:
    if suffix == ".gz":
        whole = gzip.compress(payload)
    else:
        whole = zstandard.ZstdCompressor().compress(payload)
    return whole[: len(whole) * 2 // 3]


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_a_truncated_compressed_file_names_the_file_and_keeps_what_came_before(tmp_path, suffix):
    # Varied text so that the compressed stream has many blocks.
    docs = [{"id": i, "text": hashlib.sha256(str(i).encode()).hexdigest() * 4}
            for i in range(8000)]
    payload = "".join(json.dumps(d) + "\n" for d in docs).encode()
    path = tmp_path / f"a.jsonl{suffix}"
    path.write_bytes(_truncated(payload, suffix))
    write_lines(tmp_path / "b.jsonl", rows(5, start=10_000))
    before = digests(tmp_path)

    with pytest.raises(TruncatedFileError, match="on_bad_lines='skip'") as err:
        DocumentDataset.read_jsonl(str(tmp_path), files_per_partition=1).df.compute()
    assert err.value.path == str(path)
    last_good = err.value.line
    assert 0 < last_good < len(docs)

    ds = DocumentDataset.read_jsonl(str(tmp_path), files_per_partition=1, on_bad_lines="skip")
    kept = read_ids(ds)
    # Every complete line before the break, and the other file, in full; the partial
    # line at the break is counted (lines after it cannot be).
    assert kept == list(range(last_good)) + list(range(10_000, 10_005))
    assert ds.dropped_counts() == {"reader.truncated_file": 1}
    assert digests(tmp_path) == before


def test_a_truncated_zstd_file_on_another_filesystem_is_not_read_short_silently(tmp_path):
    payload = "".join(json.dumps({"id": i, "text": hashlib.sha256(str(i).encode()).hexdigest()})
                      + "\n" for i in range(20_000)).encode()
    fs = fsspec.filesystem("memory")
    with fs.open("/truncated/a.jsonl.zst", "wb") as out:
        out.write(_truncated(payload, ".zst"))
    try:
        with pytest.raises(TruncatedFileError) as err:
            DocumentDataset.read_jsonl("memory://truncated").df.compute()
        assert err.value.path == "/truncated/a.jsonl.zst"
    finally:
        fs.rm("/truncated", recursive=True)


# -- a text column that is not strings -------------------------------------------------

def test_a_numeric_text_column_is_an_error_and_a_counted_cast_when_asked(tmp_path, caplog):
    write_lines(tmp_path / "a.jsonl", rows(3))
    numbers = tmp_path / "b.jsonl"
    write_lines(numbers, [{"id": 10 + i, "text": 1000 + i} for i in range(4)])
    before = digests(tmp_path)
    with pytest.raises(TextTypeError, match="text_cast=True") as err:
        DocumentDataset.read_jsonl(str(tmp_path)).df.compute()
    assert (err.value.path, err.value.line, err.value.column, err.value.found) == (
        str(numbers), 1, "text", "int64")
    # A dataset whose only file has numeric texts is not read as numbers either.
    with pytest.raises(TextTypeError):
        DocumentDataset.read_jsonl(str(numbers)).df.compute()

    with caplog.at_level(logging.WARNING):
        out = DocumentDataset.read_jsonl(str(tmp_path), text_cast=True).df.compute()
    assert out["text"].tolist()[3:] == ["1000", "1001", "1002", "1003"]
    assert f"{numbers}: cast 4 values of the text column 'text' to strings" in caplog.text
    assert digests(tmp_path) == before


# -- Parquet ----------------------------------------------------------------------------

def test_parquet_errors_name_the_file_and_row(tmp_path):
    for i in range(3 * SAMPLE_FILES):
        pq.write_table(pa.table({"id": [2 * i, 2 * i + 1], "text": ["a", "b"],
                                 "score": [0.5, 1.5]}), tmp_path / f"f{i:03d}.parquet")
    _, files = list_files(str(tmp_path), [".parquet"])
    sampled = {f.path for f in sample_files(files, SAMPLE_FILES)}
    unsampled = [f.path for f in files if f.path not in sampled]
    before = {}

    pq.write_table(pa.table({"id": [1, 2], "text": ["a", "b"], "score": ["high", "low"]}),
                   unsampled[0], row_group_size=1)
    before = digests(tmp_path)
    with pytest.raises(SchemaMismatchError) as err:
        DocumentDataset.read_parquet(str(tmp_path)).df.compute()
    assert (err.value.path, err.value.line, err.value.column) == (unsampled[0], 1, "score")
    assert "row 1" in str(err.value)

    pq.write_table(pa.table({"id": [1, 2], "text": [7, 8], "score": [0.1, 0.2]}), unsampled[0])
    with pytest.raises(TextTypeError) as err:
        DocumentDataset.read_parquet(str(tmp_path)).df.compute()
    assert (err.value.path, err.value.line) == (unsampled[0], 1)
    cast = DocumentDataset.read_parquet(str(tmp_path), text_cast=True).df.compute()
    assert sorted(cast["text"])[:2] == ["7", "8"]

    pq.write_table(pa.table({"id": [1], "text": ["a"], "score": [0.1], "lang": ["en"]}),
                   unsampled[0])
    with pytest.raises(UnexpectedColumnError) as err:
        DocumentDataset.read_parquet(str(tmp_path)).df.compute()
    assert (err.value.path, err.value.column) == (unsampled[0], "lang")

    whole = Path(unsampled[0]).read_bytes()
    Path(unsampled[0]).write_bytes(whole[: len(whole) // 2])
    before = digests(tmp_path)
    with pytest.raises(CorruptFileError, match="not a complete Parquet file") as err:
        DocumentDataset.read_parquet(str(tmp_path)).df.compute()
    assert err.value.path == unsampled[0]
    assert digests(tmp_path) == before


# -- cases that were already handled keep their clear errors ----------------------------

def test_malformed_json_names_file_and_line_and_skip_counts_it(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"id": 0, "text": "a"}\n{"id": 1, "text": oops}\n{"id": 2, "text": "c"}\n')
    before = digests(tmp_path)
    with pytest.raises(MalformedLineError) as err:
        DocumentDataset.read_jsonl(str(path)).df.compute()
    assert (err.value.path, err.value.line) == (str(path), 2)
    ds = DocumentDataset.read_jsonl(str(path), on_bad_lines="skip")
    assert read_ids(ds) == [0, 2] and ds.dropped_counts() == {"reader.bad_json_line": 1}
    assert digests(tmp_path) == before


def test_bad_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"id": 0, "text": "fine"}\n{"id": 1, "text": "caf\xe9"}\n')
    before = digests(tmp_path)
    with pytest.raises(InvalidEncodingError) as err:
        DocumentDataset.read_jsonl(str(path)).df.compute()
    assert (err.value.path, err.value.line) == (str(path), 2)
    assert digests(tmp_path) == before


def test_missing_text_column_names_file_line_and_columns(tmp_path, client):
    write_lines(tmp_path / "a.jsonl", rows(2))
    path = tmp_path / "b.jsonl"
    write_lines(path, [{"id": 5, "body": "x"}])
    before = digests(tmp_path)
    with pytest.raises(MissingColumnError, match=r"it has \['id', 'body'\]") as err:
        DocumentDataset.read_jsonl(str(tmp_path), files_per_partition=1).df.compute()
    assert (err.value.path, err.value.line, err.value.column) == (str(path), 1, "text")
    assert digests(tmp_path) == before


def test_empty_files_give_empty_partitions_and_no_files_an_error(tmp_path):
    write_lines(tmp_path / "a.jsonl", rows(2))
    (tmp_path / "b.jsonl").write_text("")
    (tmp_path / "c.jsonl").write_text("\n  \n")
    (tmp_path / "d.jsonl.gz").write_bytes(gzip.compress(b""))
    before = digests(tmp_path)
    ds = DocumentDataset.read_jsonl(str(tmp_path), files_per_partition=1)
    assert ds.df.map_partitions(len).compute().tolist() == [2, 0, 0, 0]
    assert ds.dropped_counts() == {}
    (tmp_path / "none").mkdir()
    with pytest.raises(FileNotFoundError, match="none"):
        DocumentDataset.read_jsonl(str(tmp_path / "none"))
    assert digests(tmp_path) == before


def test_errors_cross_from_worker_processes_intact(tmp_path, client):
    path = tmp_path / "a.jsonl.gz"
    payload = "".join(json.dumps({"id": i, "text": str(i) * 50}) + "\n" for i in range(5000))
    whole = gzip.compress(payload.encode())
    path.write_bytes(whole[: len(whole) // 2])
    ds = DocumentDataset.read_jsonl(str(path))
    with pytest.raises(TruncatedFileError) as err:
        ds.df.compute()  # on the cluster
    local = zlib.decompressobj(wbits=31).decompress(path.read_bytes())
    assert (err.value.path, err.value.line, err.value.offset) == (
        str(path), local.count(b"\n"), len(local))
