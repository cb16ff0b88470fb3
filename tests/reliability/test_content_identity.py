"""Caches and resume know their input by content, not by file size.

Each input file's identity is its size, modification time, the filesystem's checksum
(none on a local disk) and a hash of its first and last blocks. The issue's example: a
document edited in place to another text of the same length, between two runs of exact
dedup on one cache, made the second run reuse the cache and remove a document that was
now unique. Here the same edit, with and without the file's modification time put back,
makes every cache compute again (exact and fuzzy dedup, a pipeline's barrier) and a
resume refuse, naming the file and what changed. Each test checks that every input id
is in the output once or in a drop count.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

import fsspec
import pytest
from conftest import write_jsonl

from curator_dask.dedup import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow
from curator_dask.dedup.stages import ExactDedup
from curator_dask.executors import LocalExecutor
from curator_dask.io import ResumeMismatchError
from curator_dask.io.identity import files_identity, identity_changes
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter
from reliability.conftest import (
    Corpus,
    assert_exactly_once,
    output_ids,
    snapshot_bytes,
)

SHARED = "a text that two documents share, word for word"
#: The same number of characters as ``SHARED``, so the edited file keeps its size.
EDITED = "QUITE DIFFERENT NOW: 98765 43210, zyx wvu tsrq"
N_DOCS = 30


def _texts() -> dict[int, str]:
    # Hex digests: texts that share no character n-grams, not even near duplicates.
    texts = {i: f"{i}: " + hashlib.sha256(str(i).encode()).hexdigest() for i in range(N_DOCS)}
    texts[4] = texts[17] = SHARED  # 17 is removed as a copy of 4 (the lower id is kept)
    return texts


@pytest.fixture
def shared(tmp_path) -> Corpus:
    """30 documents in 3 files, ids 4 and 17 with one text (17 is in ``f01.jsonl``)."""
    directory = tmp_path / "in"
    texts = _texts()
    files = []
    for k in range(3):
        path = directory / f"f{k:02d}.jsonl"
        write_jsonl(path, [{"id": i, "text": texts[i]} for i in range(k * 10, k * 10 + 10)])
        files.append(path)
    return Corpus(directory, list(range(N_DOCS)), files, snapshot_bytes(directory))


def edit_in_place(path: Path, old: str, new: str, *, keep_mtime: bool) -> None:
    """Overwrite ``old`` with ``new`` (same length) inside ``path``; optionally put the
    file's modification time back as it was."""
    assert len(old.encode()) == len(new.encode())
    stat = os.stat(path)
    data = path.read_bytes()
    offset = data.index(old.encode())
    with open(path, "r+b") as handle:
        handle.seek(offset)
        handle.write(new.encode())
    if keep_mtime:
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(path).st_size == stat.st_size


@pytest.mark.parametrize("keep_mtime", [False, True])
def test_exact_dedup_does_not_reuse_a_cache_after_a_same_size_edit(tmp_path, shared, caplog,
                                                                    keep_mtime):
    out, cache = tmp_path / "out", tmp_path / "cache"
    first = ExactDeduplicationWorkflow(str(shared.path), str(out), str(cache)).run()
    assert first.duplicate_documents == 1 and 17 not in output_ids(out)
    edit_in_place(shared.files[1], SHARED, EDITED, keep_mtime=keep_mtime)
    shared.resnapshot()
    with caplog.at_level(logging.WARNING, logger="curator_dask"):
        second = ExactDeduplicationWorkflow(str(shared.path), str(out), str(cache),
                                            output_mode="overwrite").run()
    assert not second.identify_from_cache
    assert second.duplicate_documents == 0  # 17 is unique now: kept
    assert_exactly_once(shared.ids, output_ids(out), second.output.dropped)
    assert str(shared.files[1]) in caplog.text and "content changed" in caplog.text
    shared.assert_unchanged()


@pytest.mark.slow
@pytest.mark.parametrize("keep_mtime", [False, True])
def test_fuzzy_dedup_recomputes_every_phase_after_a_same_size_edit(tmp_path, shared, keep_mtime):
    out, cache = tmp_path / "out", tmp_path / "cache"

    def run(**options):
        return FuzzyDeduplicationWorkflow(str(shared.path), str(cache), str(out),
                                          perform_removal=True, char_ngrams=5, num_bands=10,
                                          minhashes_per_band=4, **options).run()

    first = run()
    assert first.duplicate_documents == 1 and 17 not in output_ids(out)
    edit_in_place(shared.files[1], SHARED, EDITED, keep_mtime=keep_mtime)
    shared.resnapshot()
    second = run(output_mode="overwrite")
    assert second.phases_from_cache == []
    assert second.duplicate_documents == 0
    assert_exactly_once(shared.ids, output_ids(out), second.output.dropped)
    shared.assert_unchanged()


def _pipeline(source: Path, out: Path, *, barrier: bool = False, mode: str = "error"):
    p = Pipeline("identity").add_stage(JsonlReader(str(source), blocksize="512B"))
    if barrier:
        p.add_stage(ExactDedup())
    return p.add_stage(ParquetWriter(str(out), mode=mode))


@pytest.mark.parametrize("keep_mtime", [False, True])
def test_a_resume_after_a_same_size_edit_is_refused_naming_the_file(tmp_path, shared,
                                                                     keep_mtime):
    out = tmp_path / "out"
    _pipeline(shared.path, out).run(LocalExecutor(progress=False))
    for marker in sorted(out.glob(".part-*.done"))[2:]:  # as if stopped after two parts
        marker.unlink()
    edit_in_place(shared.files[1], SHARED, EDITED, keep_mtime=keep_mtime)
    shared.resnapshot()
    written = snapshot_bytes(out)
    with pytest.raises(ResumeMismatchError) as err:
        _pipeline(shared.path, out).run(LocalExecutor(resume=True, progress=False))
    message = str(err.value)
    assert "different input" in message and str(shared.files[1]) in message
    assert "content changed" in message
    assert ("same size and modification time" in message) == keep_mtime
    assert snapshot_bytes(out) == written  # nothing deleted, nothing mixed in
    result = _pipeline(shared.path, out, mode="overwrite").run(LocalExecutor(progress=False))
    assert_exactly_once(shared.ids, output_ids(out), result.dropped)
    shared.assert_unchanged()


def test_a_barrier_output_is_computed_again_after_a_same_size_edit(tmp_path, shared):
    cache = str(tmp_path / "cache")
    first = _pipeline(shared.path, tmp_path / "out1", barrier=True).run(
        LocalExecutor(cache_path=cache, progress=False))
    assert first.dropped == {"exact_duplicate": 1}
    edit_in_place(shared.files[1], SHARED, EDITED, keep_mtime=True)
    shared.resnapshot()
    second = _pipeline(shared.path, tmp_path / "out2", barrier=True).run(
        LocalExecutor(cache_path=cache, resume=True, progress=False))
    assert second.dropped == {}  # not the first run's barrier output
    assert_exactly_once(shared.ids, output_ids(tmp_path / "out2"), second.dropped)
    shared.assert_unchanged()


def test_the_identity_says_which_file_changed_and_how(tmp_path):
    fs = fsspec.filesystem("file")
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps({"text": SHARED}) + "\n")
    b.write_text(json.dumps({"text": "b"}) + "\n")
    before = files_identity(fs, [str(a), str(b)])
    assert identity_changes(before, files_identity(fs, [str(a), str(b)])) is None
    stat = os.stat(a)
    edit_in_place(a, SHARED, EDITED, keep_mtime=True)
    assert identity_changes(before, files_identity(fs, [str(a), str(b)])) == (
        f"the input files changed (2 files: {str(a)!r} content changed (same size and "
        "modification time))")
    os.utime(a, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert "modified (time" in identity_changes(before, files_identity(fs, [str(a), str(b)]))
    size = b.stat().st_size
    b.write_text(json.dumps({"text": "bb"}) + "\n")
    assert f"size {size} -> {size + 1} bytes" in identity_changes(
        before, files_identity(fs, [str(a), str(b)]))
    assert identity_changes(before, files_identity(fs, [str(a)])).startswith(
        f"the input files changed (2 -> 1 files: {str(b)!r} removed")
