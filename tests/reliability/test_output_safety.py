"""Writers never destroy their input, and ``overwrite`` deletes only what curator-dask wrote.

An output (or cache) directory that is, contains or lies inside an input path, after
``..`` and symbolic links are resolved, is refused before anything is deleted or
written: through ``to_parquet``/``to_jsonl`` (also of datasets derived from what was
read), a pipeline writer, the executors' barrier cache, ``curator-dask run`` and
``curator-dask dedup exact``. ``mode="overwrite"`` next to files curator-dask did not
write refuses and names them; ``mode="overwrite_all"`` wipes the directory when asked.
Temporary parts a killed run left are removed by the next run of the same output.

Every test checks that the input files are byte for byte what they were, and, where a run
completes, that every input id is in the output exactly once or in a drop count.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from conftest import wait_until

from curator_dask import DocumentDataset, processing_stage
from curator_dask.cli.main import main
from curator_dask.dedup import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow
from curator_dask.dedup.stages import ExactDedup
from curator_dask.executors import BatchExecutor, LocalExecutor, StreamingExecutor
from curator_dask.io import ForeignFilesError, OutputOverlapsInputError
from curator_dask.io.writers import MANIFEST
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetReader, ParquetWriter

N_DOCS = 300


# -- helpers ---------------------------------------------------------------------------------

def write_corpus(root: Path, fmt: str = "jsonl") -> Path:
    """``N_DOCS`` documents with unique ids and texts in 3 files under ``root/raw``."""
    raw = root / "raw"
    raw.mkdir(parents=True)
    rows = [{"id": i, "text": f"document {i} " + "word " * (i % 7)} for i in range(N_DOCS)]
    for f in range(3):
        part = rows[f * 100:(f + 1) * 100]
        if fmt == "jsonl":
            (raw / f"f{f}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
        else:
            pd.DataFrame(part).to_parquet(raw / f"f{f}.parquet")
    return raw


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (hidden ones too), by relative path."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def assert_exactly_once(output: Path, dropped: dict | None = None, total: int = N_DOCS) -> None:
    """Every input id is in ``output`` once, or counted in ``dropped``."""
    ids = pd.read_parquet(output)["id"].tolist()
    assert len(ids) == len(set(ids)), "an id is in the output twice"
    assert set(ids) <= set(range(total))
    assert len(ids) + sum((dropped or {}).values()) == total


@pytest.fixture
def corpus(tmp_path):
    raw = write_corpus(tmp_path)
    return raw, snapshot(raw)


def _link(tmp_path: Path, raw: Path) -> Path:
    link = tmp_path / "link-to-raw"
    link.symlink_to(raw, target_is_directory=True)
    return link


#: Outputs that overlap the input ``raw`` (under ``tmp``): how to make each, and the
#: relation the error names.
OVERLAPS = {
    "equal": (lambda tmp, raw: raw, "is"),
    "inside": (lambda tmp, raw: raw / "out", "lies inside"),
    "contains": (lambda tmp, raw: tmp, "contains"),
    "symlink": (_link, "is"),
    "dotdot": (lambda tmp, raw: Path(f"{raw}/sub/../../{raw.name}"), "is"),
    "dotdot_inside": (lambda tmp, raw: Path(f"{tmp}/elsewhere/../{raw.name}/clean"),
                      "lies inside"),
}


# -- DocumentDataset.to_parquet / to_jsonl ---------------------------------------------------

@pytest.mark.parametrize("way", list(OVERLAPS))
@pytest.mark.parametrize("writer", ["to_parquet", "to_jsonl"])
@pytest.mark.parametrize("mode", ["error", "overwrite", "overwrite_all", "append"])
def test_dataset_writes_refuse_an_output_overlapping_the_input(tmp_path, corpus, way, writer,
                                                               mode):
    raw, before = corpus
    make, relation = OVERLAPS[way]
    output = make(tmp_path, raw)
    everything = snapshot(tmp_path)
    ds = DocumentDataset.read_jsonl(str(raw), blocksize="4KiB")
    with pytest.raises(OutputOverlapsInputError) as err:
        getattr(ds, writer)(str(output), mode=mode)
    message = str(err.value)
    assert f"output directory {str(output)!r} {relation} the input" in message
    assert str(raw) in message and f"{raw}-curated" in message  # the fix
    assert snapshot(raw) == before
    assert snapshot(tmp_path) == everything  # nothing deleted or written anywhere


def test_append_into_the_input_no_longer_reads_its_own_output_back(tmp_path):
    # Before the check, each append into raw/out read raw/ (recursively) with the earlier
    # output in it: 300 documents became 600, then 900.
    raw = write_corpus(tmp_path, fmt="parquet")
    before = snapshot(raw)
    for _ in range(2):
        ds = DocumentDataset.read_parquet(str(raw))
        assert len(ds.df) == N_DOCS
        with pytest.raises(OutputOverlapsInputError, match="lies inside the input path"):
            ds.to_parquet(str(raw / "out"), mode="append")
    assert snapshot(raw) == before and not (raw / "out").exists()


@processing_stage(name="shout")
def shout(df):
    return df.assign(text=df["text"].str.upper())


DERIVED = {
    "stage": shout,
    "map_partitions": lambda ds: ds.map_partitions(lambda df: df[df["id"] % 2 == 0]),
    "persist": lambda ds: ds.persist(),
    "repartition": lambda ds: ds.repartition(npartitions=2),
    "to_backend": lambda ds: ds.to_backend("pandas"),
    "exact_dedup": ExactDedup(),
}


@pytest.mark.parametrize("derive", list(DERIVED))
def test_derived_datasets_remember_their_input(tmp_path, corpus, derive):
    raw, before = corpus
    ds = DERIVED[derive](DocumentDataset.read_jsonl(str(raw), blocksize="4KiB"))
    with pytest.raises(OutputOverlapsInputError, match="is the input path"):
        ds.to_parquet(str(raw), mode="overwrite")
    with pytest.raises(OutputOverlapsInputError, match="lies inside the input path"):
        ds.to_jsonl(str(raw / "clean"), mode="overwrite")
    assert snapshot(raw) == before
    written = ds.to_parquet(str(tmp_path / "clean"))  # beside the input: fine
    expected = {"map_partitions": N_DOCS // 2}.get(derive, N_DOCS)
    assert written.rows == expected and snapshot(raw) == before


# -- pipelines and executors -------------------------------------------------------------------

def overlap_pipeline(raw: Path, output: Path, *, mode: str = "overwrite", barrier=False):
    p = Pipeline("safety").add_stage(JsonlReader(str(raw), blocksize="4KiB")).add_stage(shout)
    if barrier:
        p.add_stage(ExactDedup())
    return p.add_stage(ParquetWriter(str(output), mode=mode))


@pytest.mark.parametrize("way", ["equal", "inside", "symlink", "dotdot"])
@pytest.mark.parametrize("resume", [False, True])
def test_a_pipeline_writer_refuses_an_output_overlapping_the_input(tmp_path, corpus, client,
                                                                   way, resume):
    raw, before = corpus
    output = OVERLAPS[way][0](tmp_path, raw)
    everything = snapshot(tmp_path)
    with pytest.raises(OutputOverlapsInputError, match="the input path"):
        overlap_pipeline(raw, output).run(StreamingExecutor(resume=resume, progress=False))
    assert snapshot(raw) == before and snapshot(tmp_path) == everything


@pytest.mark.parametrize("executor", [StreamingExecutor, BatchExecutor, LocalExecutor])
def test_the_barrier_cache_may_not_touch_the_input_or_the_output(tmp_path, corpus, executor,
                                                                 request):
    raw, before = corpus
    if executor is not LocalExecutor:
        request.getfixturevalue("client")
    p = overlap_pipeline(raw, tmp_path / "out", barrier=True)
    with pytest.raises(OutputOverlapsInputError,
                       match=r"cache directory .* lies inside the input path"):
        p.run(executor(cache_path=str(raw / "cache"), progress=False))
    with pytest.raises(OutputOverlapsInputError,
                       match=r"output directory .* contains the cache directory"):
        p.run(executor(cache_path=str(tmp_path / "out" / "cache"), progress=False))
    assert snapshot(raw) == before and not (tmp_path / "out").exists()
    result = p.run(executor(cache_path=str(tmp_path / "cache"), progress=False))
    assert_exactly_once(tmp_path / "out", result.dropped)
    assert snapshot(raw) == before


def test_curator_dask_run_refuses_to_write_into_its_input(tmp_path, corpus, capsys):
    raw, before = corpus
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(textwrap.dedent(f"""
        executor: {{type: local, progress: false}}
        reader: {{type: jsonl, path: {raw}, blocksize: 4KiB}}
        stages: [WhitespaceNormalizer]
        writer: {{type: parquet, path: {raw}, mode: overwrite}}
    """))
    assert main(["run", str(pipeline)]) == 2  # refused before anything runs: a usage error
    err = capsys.readouterr().err
    assert err.startswith("curator-dask run: error: output directory")
    assert f"{str(raw)!r} is the input path {str(raw)!r}" in err
    assert snapshot(raw) == before


def test_curator_dask_dedup_exact_refuses_an_output_equal_to_its_input(tmp_path, corpus,
                                                                       cluster, capsys):
    raw, before = corpus
    base = ["dedup", "exact", "--input", str(raw), "--output-mode", "overwrite",
            "--scheduler-address", cluster.scheduler_address]
    # Refused before anything runs: usage errors.
    assert main([*base, "--output", str(raw), "--cache", str(tmp_path / "cache")]) == 2
    err = capsys.readouterr().err
    assert f"output directory {str(raw)!r} is the input path {str(raw)!r}" in err
    assert main([*base, "--output", str(tmp_path / "out"), "--cache", str(raw / "cache")]) == 2
    assert "cache directory" in capsys.readouterr().err
    assert main([*base, "--output", str(tmp_path / "c" / "out"),
                 "--cache", str(tmp_path / "c")]) == 2
    assert "lies inside the cache directory" in capsys.readouterr().err
    assert snapshot(raw) == before
    assert not (tmp_path / "cache").exists() and not (tmp_path / "out").exists()
    # The same command with an output of its own works, and keeps every id once.
    assert main([*base, "--output", str(tmp_path / "out"), "--cache", str(tmp_path / "cache")]) == 0
    assert_exactly_once(tmp_path / "out")
    assert snapshot(raw) == before


def test_dedup_workflows_check_output_and_cache_before_computing(tmp_path, corpus):
    raw, before = corpus
    with pytest.raises(OutputOverlapsInputError, match=r"cache directory .* the input path"):
        FuzzyDeduplicationWorkflow(str(raw), cache_path=str(raw)).run()
    with pytest.raises(OutputOverlapsInputError, match=r"output directory .* the input path"):
        ExactDeduplicationWorkflow(f"{raw}/*.jsonl", str(raw / "x"), str(tmp_path / "c")).run()
    assert snapshot(raw) == before and not (tmp_path / "c").exists()


# -- overwrite, foreign files and the whole-directory wipe ----------------------------------------

def test_overwrite_refuses_foreign_files_and_names_them(tmp_path, corpus):
    raw, before = corpus
    out = tmp_path / "out"
    ds = DocumentDataset.read_jsonl(str(raw), blocksize="4KiB")
    ds.to_parquet(str(out))
    (out / "notes.txt").write_text("mine")
    (out / "keep").mkdir()
    (out / "keep" / "model.bin").write_bytes(b"\0" * 10)
    kept = snapshot(out)
    with pytest.raises(ForeignFilesError) as err:
        ds.to_parquet(str(out), mode="overwrite")
    assert "'keep/model.bin', 'notes.txt'" in str(err.value)
    assert "mode='overwrite_all'" in str(err.value)
    assert snapshot(out) == kept  # not one file touched, the project's parts included
    # Without the foreign files, overwrite replaces what the project wrote.
    (out / "notes.txt").unlink()
    (out / "keep" / "model.bin").unlink()
    written = ds.to_parquet(str(out), mode="overwrite")
    assert_exactly_once(out, written.dropped)
    assert snapshot(raw) == before


def test_a_run_killed_before_its_manifest_was_in_place_does_not_block_the_next(tmp_path,
                                                                               corpus):
    raw, before = corpus
    out = tmp_path / "out"
    out.mkdir()
    # The name the writer gives the manifest while writing it.
    (out / f"{MANIFEST}.tmp-{'c' * 32}").write_bytes(b"")
    written = DocumentDataset.read_jsonl(str(raw)).to_parquet(str(out))
    assert sorted(os.listdir(out)) == [".curator-output.json", ".part-00000.done",
                                       "part-00000.parquet"]
    assert_exactly_once(out, written.dropped)
    assert snapshot(raw) == before


def test_overwrite_never_claims_a_directory_without_a_manifest(tmp_path, corpus):
    raw, before = corpus
    out = tmp_path / "out"
    out.mkdir()
    # Named like a part, but nothing records that curator-dask wrote it.
    (out / "part-00000.parquet").write_bytes(b"someone else's")
    ds = DocumentDataset.read_jsonl(str(raw))
    with pytest.raises(ForeignFilesError, match=r"'part-00000\.parquet'"):
        ds.to_parquet(str(out), mode="overwrite")
    assert (out / "part-00000.parquet").read_bytes() == b"someone else's"
    assert snapshot(raw) == before


def test_overwrite_all_wipes_the_directory_when_asked(tmp_path, corpus):
    raw, before = corpus
    out = tmp_path / "out"
    (out / "old").mkdir(parents=True)
    (out / "old" / "stale.jsonl").write_text("{}\n")
    (out / "notes.txt").write_text("x")
    outside = tmp_path / "outside.txt"
    outside.write_text("not in the output")
    (out / "link").symlink_to(outside)
    written = DocumentDataset.read_jsonl(str(raw), blocksize="4KiB").to_parquet(
        str(out), mode="overwrite_all")
    assert sorted(os.listdir(out)) == sorted([".curator-output.json",
                                              *(Path(f).name for f in written.files),
                                              *(f".part-{i:05d}.done"
                                                for i in range(len(written.files)))])
    assert outside.read_text() == "not in the output"  # a link is removed, not followed
    assert_exactly_once(out, written.dropped)
    assert snapshot(raw) == before


def test_overwrite_replaces_files_written_to_their_source_names(tmp_path, corpus):
    raw, before = corpus
    out = tmp_path / "out"
    ds = DocumentDataset.read_jsonl(str(raw), add_filename=True, files_per_partition=1)
    ds.to_jsonl(str(out), write_to_filename=True)
    again = ds.to_jsonl(str(out), write_to_filename=True, mode="overwrite")
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "f0.jsonl", "f1.jsonl", "f2.jsonl"]
    assert again.rows == N_DOCS
    (out / "f9.jsonl").write_text('{"text": "foreign"}\n')
    with pytest.raises(ForeignFilesError, match=r"'f9\.jsonl'"):
        ds.to_jsonl(str(out), write_to_filename=True, mode="overwrite")
    assert snapshot(raw) == before


def test_a_pipeline_writer_refuses_foreign_files_before_any_task(tmp_path, corpus, client):
    raw, before = corpus
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.pdf").write_bytes(b"%PDF")
    with pytest.raises(ForeignFilesError, match=r"'report\.pdf'"):
        overlap_pipeline(raw, out).run(StreamingExecutor(progress=False))
    assert os.listdir(out) == ["report.pdf"]
    result = overlap_pipeline(raw, out, mode="overwrite_all").run(StreamingExecutor(progress=False))
    assert not (out / "report.pdf").exists()
    assert_exactly_once(out, result.dropped)
    assert snapshot(raw) == before


def test_modes_are_checked_and_offered(tmp_path, corpus, capsys):
    raw, _ = corpus
    ds = DocumentDataset.read_jsonl(str(raw))
    with pytest.raises(ValueError, match="'overwrite_all' everything in the directory"):
        ds.to_parquet(str(tmp_path / "out"), mode="wipe")
    with pytest.raises(ValueError, match="mode must be one of"):
        ParquetWriter(str(tmp_path / "out"), mode="replace")
    with pytest.raises(ValueError, match="output_mode must be one of"):
        ExactDeduplicationWorkflow(str(raw), str(tmp_path / "o"), str(tmp_path / "c"),
                                   output_mode="append")
    with pytest.raises(SystemExit):
        main(["dedup", "exact", "--input", str(raw), "--output", "o", "--cache", "c",
              "--output-mode", "wipe"])
    assert "choose from 'error', 'overwrite', 'overwrite_all'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# -- temporary parts of a killed run ----------------------------------------------------------

def plant_leftovers(out: Path, index: int) -> list[str]:
    """What a run killed while writing part ``index`` leaves: no part, no marker, and the
    temporary files of both (named as the writer names them)."""
    (out / f"part-{index:05d}.parquet").unlink()
    (out / f".part-{index:05d}.done").unlink()
    names = [f".part-{index:05d}.parquet.tmp-{'a' * 32}", f".part-{index:05d}.done.tmp-{'b' * 32}"]
    for name in names:
        (out / name).write_bytes(b"")
    return names


@pytest.mark.parametrize("executor", [StreamingExecutor, BatchExecutor])
@pytest.mark.parametrize("rerun", ["resume", "overwrite"])
def test_the_next_run_removes_temporary_parts_of_a_killed_run(tmp_path, corpus, client, executor,
                                                              rerun):
    raw, before = corpus
    out = tmp_path / "out"
    overlap_pipeline(raw, out, mode="error").run(executor(progress=False))
    plant_leftovers(out, 3)
    if rerun == "resume":
        result = overlap_pipeline(raw, out, mode="error").run(executor(resume=True,
                                                                       progress=False))
        assert result.partitions_skipped == result.partitions - 1
    else:
        result = overlap_pipeline(raw, out, mode="overwrite").run(executor(progress=False))
    assert [n for n in os.listdir(out) if ".tmp-" in n] == []
    assert (out / "part-00003.parquet").exists()
    assert_exactly_once(out, result.dropped)
    assert snapshot(raw) == before


DRIVER = textwrap.dedent("""
    import os, re, sys, threading
    from distributed.diagnostics.plugin import WorkerPlugin
    from curator_dask import processing_stage
    from curator_dask.cluster import get_client
    from curator_dask.executors import StreamingExecutor
    from curator_dask.pipeline import Pipeline
    from curator_dask.stages.io_stages import JsonlReader, JsonlWriter

    @processing_stage(name="shout")
    def shout(df):
        return df.assign(text=df["text"].str.upper())

    class StallBeforeRename(WorkerPlugin):
        # A worker about to rename a finished temporary part into place says so in a
        # flag file and stops there: the part is written, not yet committed.
        def __init__(self, flag):
            self.flag = flag

        def setup(self, worker):
            flag = self.flag
            for name in ("rename", "replace"):
                original = getattr(os, name)

                def stalled(src, dst, *args, _original=original, **kwargs):
                    if re.match(r"[.]part-.*[.]tmp-", os.path.basename(str(src))):
                        open(flag, "w").close()
                        threading.Event().wait()
                    return _original(src, dst, *args, **kwargs)

                setattr(os, name, stalled)

    if __name__ == "__main__":
        client = get_client(n_workers=2, dashboard_address=None)
        client.register_plugin(StallBeforeRename(sys.argv[3]))
        (Pipeline("safety").add_stage(JsonlReader(sys.argv[1], blocksize="1MiB"))
         .add_stage(shout).add_stage(JsonlWriter(sys.argv[2], compression="gzip")))\\
            .run(StreamingExecutor(progress=False))
""")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_temporary_parts_of_a_really_killed_run_are_removed_on_resume(tmp_path, client):
    from curator_dask.stages.io_stages import JsonlWriter

    raw = tmp_path / "raw"
    raw.mkdir()
    total = 40_000
    for f in range(2):
        with open(raw / f"f{f}.jsonl", "w") as handle:
            for i in range(f * total // 2, (f + 1) * total // 2):
                handle.write(json.dumps({"id": i, "text": "word " * 40 + str(i)}) + "\n")
    before = snapshot(raw)
    out, stalled = tmp_path / "out", tmp_path / "stalled"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    # The driver runs its own LocalCluster, whose workers stop before committing their
    # first part: killing its process group then kills them mid-write, as a machine that
    # loses power does.
    driver = subprocess.Popen([sys.executable, str(script), str(raw), str(out), str(stalled)],
                              start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={**os.environ})
    try:
        assert wait_until(lambda: stalled.exists() or driver.poll() is not None, timeout=120)
        assert stalled.exists(), "the driver should have stopped before committing a part"
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    assert [n for n in os.listdir(out) if ".tmp-" in n]  # what the kill left behind

    p = (Pipeline("safety").add_stage(JsonlReader(str(raw), blocksize="1MiB"))
         .add_stage(shout).add_stage(JsonlWriter(str(out), compression="gzip")))
    result = p.run(StreamingExecutor(resume=True, progress=False))
    assert [n for n in os.listdir(out) if ".tmp-" in n] == []
    assert result.partitions_skipped < result.partitions
    ids = pd.concat(pd.read_json(f, lines=True) for f in sorted(out.glob("part-*")))["id"]
    assert sorted(ids) == list(range(total))
    assert snapshot(raw) == before


def test_parquet_reader_sources_include_globs(tmp_path):
    raw = write_corpus(tmp_path, fmt="parquet")
    reader = ParquetReader(f"{raw}/*.parquet")
    with pytest.raises(OutputOverlapsInputError, match="lies inside the input path"):
        reader.dataset().to_parquet(str(raw / "out"))
