"""Task names say the stage and the phase, on a real cluster's dashboard.

The scheduler's ``task_prefixes`` are what the dashboard groups tasks by (the task
stream's colours, the progress bars, the task groups). Every prefix a curator-dask call
adds must start with its stage's (or workflow's) name and a phase, except the ones dask
names itself, which docs/monitoring.md lists with the reason.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import dask
import dask.utils
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from curator_dask import DocumentDataset, JsonlReader, ParquetWriter, Pipeline, StreamingExecutor
from curator_dask.dedup import (
    ExactDedup,
    ExactDuplicates,
    FuzzyDedup,
    FuzzyDuplicates,
    SemanticDeduplicationWorkflow,
)
from curator_dask.task_names import scoped, task_name, task_scope
from curator_dask.testing.fuzzy import planted_near_duplicates

MONITORING = Path(__file__).parent.parent / "docs" / "monitoring.md"
FUZZY = dict(char_ngrams=5, num_bands=10, minhashes_per_band=4)


def documented_section(start: str, end: str) -> str:
    text = MONITORING.read_text()
    return text[text.index(start):text.index(end, text.index(start))]


def prefixes_dask_names() -> set[str]:
    """The first column of docs/monitoring.md's table of prefixes dask names itself."""
    table = documented_section("keep the names dask gives them", "## Progress")
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return {word for row in rows for word in re.findall(r"`([^`/]+)`", row)}


# -- the names, without a cluster ----------------------------------------------------------

@given(scope=st.text(max_size=12), phase=st.text(max_size=12))
def test_dask_gives_back_every_name_whole(scope, phase):
    name = task_name(phase, scope=scope or None)
    key = f"{name}-{uuid.uuid4().hex}"
    assert dask.utils.key_split(key) == name
    assert dask.utils.key_split((key, 3)) == name
    assert name.count("/") == 1 and "-" not in name


def test_the_outermost_scope_names_the_tasks():
    @scoped("fuzzy_dedup")
    def workflow_step():
        return task_name("lsh")

    assert workflow_step() == "fuzzy_dedup/lsh"
    with task_scope("near dups"):
        assert workflow_step() == "near_dups/lsh"
    assert task_name("lsh", scope="fuzzy_dedup") == "fuzzy_dedup/lsh"


def test_a_dataset_step_is_named_in_its_scope_and_by_its_token():
    ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a", "b"]}))

    def shout(df):
        return df.assign(text=df["text"].str.upper())

    with task_scope("cleanup"):
        inside = ds.map_partitions(shout)
        named = ds.map_partitions(shout, token=task_name("upper"))
    outside = ds.map_partitions(shout)
    keys = [dask.utils.key_split(d.key) for d in
            (inside.to_partitions()[0], named.to_partitions()[0], outside.to_partitions()[0])]
    assert keys == ["cleanup/shout", "cleanup/upper", "shout"]
    assert named.df.compute()["text"].tolist() == ["A", "B"]


# -- on a cluster --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def own_client():
    """A cluster of its own: the prefixes it has seen are this module's alone."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        yield client


def seen_prefixes(client) -> set[str]:
    return set(client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.task_prefixes)))


def added_prefixes(client, run) -> set[str]:
    before = seen_prefixes(client)
    run()
    return seen_prefixes(client) - before


def named(prefixes: set[str]) -> set[str]:
    """The ``<scope>/<phase>`` of each prefix (dask adds its own words to a task it fuses
    into a named one: ``exact_dedup/hash-operation``)."""
    return {p.split("-")[0] for p in prefixes}


def unexplained(prefixes: set[str], scopes: set[str]) -> set[str]:
    """Prefixes neither ``<scope>/<phase>`` of one of ``scopes`` nor named by dask."""
    return {p for p in prefixes
            if p.split("/")[0] not in scopes or not p.split("/", 1)[-1] or "/" not in p
            } - prefixes_dask_names()


@pytest.fixture(scope="module")
def documents(own_client):
    frame = planted_near_duplicates(30, seed=3)
    frame = pd.concat([frame, frame.head(5).assign(id=frame["id"].max() + 1 + frame.index[:5])])
    return frame[["id", "text"]].reset_index(drop=True)


def persisted(frame) -> DocumentDataset:
    """The documents already in cluster memory: what a call adds is its own work."""
    return DocumentDataset(DocumentDataset.from_pandas(frame, npartitions=3).df.persist())


@pytest.mark.slow
def test_fuzzy_and_exact_dedup_name_every_task_after_the_workflow_and_phase(own_client,
                                                                            documents):
    ds = persisted(documents)
    exact = ExactDuplicates()

    def fuzzy_dedup():
        FuzzyDuplicates(**FUZZY).identify(ds).df.compute()

    def exact_dedup():
        exact.remove(ds, exact.identify(ds)).df.compute()

    def exact_dedup_through_p2p():
        # As on a corpus whose shuffle has more than 64 pieces: a small one runs as plain
        # tasks, and dask fuses the grouping into the next step's tasks.
        with dask.config.set({"dataframe.shuffle.method": "p2p"}):
            exact_dedup()

    fuzzy = added_prefixes(own_client, fuzzy_dedup)
    exact_p2p = added_prefixes(own_client, exact_dedup_through_p2p)
    exact_small = added_prefixes(own_client, exact_dedup)  # names not seen in the first
    assert unexplained(fuzzy, {"fuzzy_dedup"}) == set()
    assert {"fuzzy_dedup/minhash", "fuzzy_dedup/lsh", "fuzzy_dedup/components"} <= named(fuzzy)
    assert unexplained(exact_p2p, {"exact_dedup"}) == set()
    assert {"exact_dedup/hash", "exact_dedup/groups", "exact_dedup/remove"} <= named(exact_p2p)
    assert unexplained(exact_small, {"exact_dedup"}) == set()


@pytest.mark.slow
def test_semantic_dedup_names_every_task_after_the_workflow_and_phase(own_client, documents,
                                                                      tmp_path):
    pytest.importorskip("transformers")
    from curator_dask.testing.models import save_tiny_encoder

    model = save_tiny_encoder(tmp_path / "model", hidden_size=16)
    (tmp_path / "raw").mkdir()
    documents[["text"]].to_json(tmp_path / "raw" / "a.jsonl", orient="records", lines=True)
    workflow = SemanticDeduplicationWorkflow(
        str(tmp_path / "raw"), str(tmp_path / "cache"), str(tmp_path / "out"),
        perform_removal=True, n_clusters=3, eps_thresholds=[1e-5], eps_to_extract=1e-5,
        embedding_model_name_or_path=model, embedding_batch_size=8, device="cpu")
    added = added_prefixes(own_client, workflow.run)
    assert unexplained(added, {"semantic_dedup"}) == set()
    assert {"semantic_dedup/kmeans", "semantic_dedup/clusters",
            "semantic_dedup/remove"} <= named(added)


@pytest.mark.slow
def test_a_named_stage_names_its_tasks_in_a_pipeline(own_client, documents, tmp_path):
    (tmp_path / "in").mkdir()
    documents.to_json(tmp_path / "in" / "a.jsonl", orient="records", lines=True)
    pipeline = Pipeline("names", stages=[
        JsonlReader(str(tmp_path / "in")), FuzzyDedup(**FUZZY, name="near_dups"), ExactDedup(),
        ParquetWriter(str(tmp_path / "out"))])
    added = added_prefixes(own_client, lambda: pipeline.run(StreamingExecutor(progress=False)))
    stages = {"read_jsonl", "near_dups", "exact_dedup", "write_parquet", "names"}
    assert unexplained(added, stages) == set()
    near = {p for p in named(added) if p.startswith("near_dups/")}
    assert {"near_dups/minhash", "near_dups/lsh", "near_dups/components", "near_dups/remove",
            "near_dups/input", "near_dups/output"} <= near
    assert not any(p.startswith("fuzzy_dedup/") for p in added)
    assert len(pd.read_parquet(tmp_path / "out")) < len(documents)


@pytest.mark.slow
def test_the_dashboard_pages_the_docs_name_exist(own_client):
    pages = re.findall(r"`(/[a-z][\w./-]*)`", documented_section("## The Dask dashboard",
                                                                 "### What the task names"))
    assert "/status" in pages and "/groups" in pages
    base = own_client.dashboard_link.rsplit("/", 1)[0]
    missing = []
    for page in pages:
        try:
            urllib.request.urlopen(base + page, timeout=60).close()
        except urllib.error.HTTPError as err:
            missing.append(f"{page}: {err.code}")
    assert missing == []
