"""Bad input that is already handled: an error naming the file, the line (or column) and
the fix, or, where the user asked to skip, a skip that is counted. Either way no document
is lost silently and the input files are left as they were.
"""

from __future__ import annotations

import logging
import re

import pandas as pd
import pytest
from conftest import write_jsonl

from curator_dask import DocumentDataset
from curator_dask.executors import BatchExecutor, StreamingExecutor
from curator_dask.io import InvalidEncodingError, MalformedLineError, MissingColumnError
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter
from reliability.conftest import (
    assert_exactly_once,
    line_ids,
    output_ids,
    replace_line,
    write_corpus,
)

BAD_LINE = "reader.bad_json_line"


# -- malformed JSON --------------------------------------------------------------------

def test_a_malformed_line_is_an_error_naming_the_file_the_line_and_the_fix(corpus):
    replace_line(corpus.files[1], 3, b'{"id": 102, "text": broken}')
    corpus.resnapshot()
    ds = DocumentDataset.read_jsonl(str(corpus.path))
    with pytest.raises(MalformedLineError, match=r"f01\.jsonl, line 3: malformed JSON") as err:
        ds.df.compute()
    assert err.value.path == str(corpus.files[1]) and err.value.line == 3
    assert "on_bad_lines='skip'" in str(err.value)
    corpus.assert_unchanged()


def test_a_malformed_line_is_numbered_right_inside_a_byte_range(tmp_path):
    corpus = write_corpus(tmp_path / "in", 200, n_files=1)
    replace_line(corpus.files[0], 151, b'{"id": 150, "text": oops}')
    corpus.resnapshot()
    ds = DocumentDataset.read_jsonl(str(corpus.path), blocksize="1KiB")
    assert ds.npartitions > 3  # line 151 is not in the first byte range
    with pytest.raises(MalformedLineError, match=r"f00\.jsonl, line 151") as err:
        ds.df.compute()
    assert err.value.line == 151
    corpus.assert_unchanged()


def _break_two_lines(corpus) -> set[int]:
    """Lines 2 of f00 and 4 of f02 made malformed; returns the ids they held."""
    broken = {line_ids(corpus.files[0])[1], line_ids(corpus.files[2])[3]}
    replace_line(corpus.files[0], 2, b"[1, 2]")
    replace_line(corpus.files[2], 4, b"not json")
    corpus.resnapshot()
    return broken


@pytest.mark.parametrize("mode", ["skip", "warn"])
def test_skipped_malformed_lines_are_counted(corpus, mode, caplog):
    broken = _break_two_lines(corpus)
    ds = DocumentDataset.read_jsonl(str(corpus.path), on_bad_lines=mode)
    with caplog.at_level(logging.WARNING):
        ids = ds.df.compute()["id"].tolist()
    warned = [r.getMessage() for r in caplog.records if "skipping malformed JSON" in r.getMessage()]
    dropped = ds.dropped_counts()
    assert dropped == {BAD_LINE: 2}
    assert_exactly_once(corpus.ids, ids, dropped)
    assert set(corpus.ids) - set(ids) == broken  # the two bad lines, and nothing else
    if mode == "warn":
        assert [m.split(": skipping")[0].rsplit("/", 1)[-1] for m in warned] == [
            "f00.jsonl, line 2", "f02.jsonl, line 4"]
    else:
        assert warned == []
    corpus.assert_unchanged()


@pytest.mark.parametrize("executor", [StreamingExecutor, BatchExecutor])
def test_skipped_lines_reach_the_run_result_of_a_pipeline(corpus, tmp_path, client, executor):
    _break_two_lines(corpus)
    out = tmp_path / "out"
    result = (Pipeline("skip").add_stage(JsonlReader(str(corpus.path), blocksize="1KiB",
                                                     on_bad_lines="skip"))
              .add_stage(ParquetWriter(str(out)))).run(executor(progress=False))
    assert result.dropped == {BAD_LINE: 2}
    assert result.rows == len(corpus.ids) - 2
    assert_exactly_once(corpus.ids, output_ids(out), result.dropped)
    corpus.assert_unchanged()


# -- bad UTF-8 -------------------------------------------------------------------------

def _latin1_line(corpus) -> int:
    """Line 6 of f00 rewritten with a Latin-1 byte; returns its id."""
    replace_line(corpus.files[0], 6, b'{"id": 5, "text": "caf\xe9"}')
    corpus.resnapshot()
    return 5


def test_invalid_utf8_is_an_error_naming_the_file_the_line_and_the_fix(corpus):
    _latin1_line(corpus)
    with pytest.raises(InvalidEncodingError, match=r"f00\.jsonl, line 6: invalid UTF-8") as err:
        DocumentDataset.read_jsonl(str(corpus.path)).df.compute()
    assert err.value.path == str(corpus.files[0]) and err.value.line == 6
    assert "encoding_errors='replace'" in str(err.value)
    corpus.assert_unchanged()


def test_invalid_utf8_is_replaced_when_asked_and_no_document_is_lost(corpus):
    doc = _latin1_line(corpus)
    ds = DocumentDataset.read_jsonl(str(corpus.path), encoding_errors="replace")
    out = ds.df.compute()
    assert_exactly_once(corpus.ids, out["id"], ds.dropped_counts())
    assert out.set_index("id").loc[doc, "text"] == "caf\ufffd"
    corpus.assert_unchanged()


# -- missing column, empty files, no files ---------------------------------------------

def test_a_file_without_the_text_column_is_an_error_naming_column_file_and_fix(corpus):
    write_jsonl(corpus.path / "f03.jsonl", [{"id": 300, "content": "x", "url": "u"}])
    corpus.resnapshot()
    with pytest.raises(MissingColumnError) as err:
        DocumentDataset.read_jsonl(str(corpus.path)).df.compute()
    message = str(err.value)
    assert f"'text' not found in {corpus.path / 'f03.jsonl'}" in message
    assert "it has ['id', 'content', 'url']" in message
    assert "Pass text_field=" in message
    assert err.value.path.endswith("f03.jsonl")
    corpus.assert_unchanged()


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_an_empty_file_is_an_empty_partition_and_loses_nothing(tmp_path, fmt):
    corpus = write_corpus(tmp_path / "in", 30, n_files=3, fmt=fmt)
    if fmt == "jsonl":
        (corpus.path / "f03.jsonl").write_bytes(b"")
        read = DocumentDataset.read_jsonl
    else:
        pd.DataFrame({"id": pd.Series([], dtype="int64"), "text": pd.Series([], dtype="str")}
                     ).to_parquet(corpus.path / "f03.parquet", index=False)
        read = DocumentDataset.read_parquet
    corpus.resnapshot()
    ds = read(str(corpus.path), files_per_partition=1)
    assert ds.df.map_partitions(len).compute().tolist() == [10, 10, 10, 0]
    assert list(ds.df.get_partition(3).compute().columns) == ["id", "text"]
    assert_exactly_once(corpus.ids, ds.df.compute()["id"], ds.dropped_counts())
    corpus.assert_unchanged()


@pytest.mark.parametrize(("read", "extension"), [(DocumentDataset.read_jsonl, r"\.jsonl"),
                                                 (DocumentDataset.read_parquet, r"\.parquet")])
def test_a_directory_without_input_files_is_an_error_naming_it(tmp_path, read, extension):
    (tmp_path / "notes.csv").write_text("x")
    with pytest.raises(FileNotFoundError, match=rf"no files ending in {extension}.*under "
                                                rf"'{re.escape(str(tmp_path))}'"):
        read(str(tmp_path))
    assert (tmp_path / "notes.csv").read_text() == "x"


def test_a_missing_path_is_an_error_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        DocumentDataset.read_jsonl(str(tmp_path / "nope"))
    assert not (tmp_path / "nope").exists()
