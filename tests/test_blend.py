"""Blending sources by weight: exact shares, the same documents however the input is cut,
with and without replacement, by documents or tokens, and every document accounted for."""

from __future__ import annotations

import os

import pandas as pd
import pytest
from conftest import write_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_dask import DocumentDataset, LocalExecutor, Pipeline, StreamingExecutor
from curator_dask.cli.config import load_config_text
from curator_dask.io.errors import ResumeMismatchError
from curator_dask.stages.io_stages import ParquetWriter
from curator_dask.testing.tokenizer import save_bpe_tokenizer
from curator_dask.training import BlendError, BlendReader, blend_datasets

tokenizers = pytest.importorskip("tokenizers", reason="blending by tokens needs the tokenize extra")


def source(prefix: str, n: int) -> list[dict]:
    return [{"text": f"{prefix} document {i} " + "word " * (i % 11), "n": i} for i in range(n)]


@pytest.fixture
def two_sources(tmp_path):
    for k in range(3):
        write_jsonl(tmp_path / "web" / f"w{k}.jsonl", source(f"web{k}", 40))
    write_jsonl(tmp_path / "books" / "b.jsonl", source("book", 30))
    return tmp_path


def blend(root, *, blocksize=None, files_per_partition=None, **options):
    reader = BlendReader([{"path": str(root / "web"), "weight": 3},
                          {"path": str(root / "books"), "weight": 1}],
                         blocksize=blocksize, files_per_partition=files_per_partition,
                         **{"target_size": 80, "seed": 5, **options})
    return reader, reader.dataset().df.compute()


def test_each_source_gives_its_share_of_the_target(two_sources):
    reader, out = blend(two_sources)
    assert out["source"].value_counts().to_dict() == {"web": 60, "books": 20}
    assert out["text"].is_unique
    web = {r["text"] for k in range(3) for r in source(f"web{k}", 40)}
    assert set(out.loc[out["source"] == "web", "text"]) <= web
    assert reader.blend_plan.documents == [60, 20]


def test_the_same_documents_however_the_sources_are_cut(two_sources):
    _, whole = blend(two_sources, files_per_partition=3)
    _, fine = blend(two_sources, blocksize=600)
    assert sorted(whole["text"]) == sorted(fine["text"])
    _, other_seed = blend(two_sources, blocksize=600, seed=6)
    assert sorted(other_seed["text"]) != sorted(fine["text"])


@given(target=st.integers(0, 120), weights=st.lists(st.integers(0, 5), min_size=2, max_size=2),
       partitions=st.integers(1, 4))
@settings(max_examples=10, deadline=None)
def test_shares_are_exact_and_sum_to_the_target(target, weights, partitions):
    if sum(weights) == 0:
        weights = [1, 0]
    a = DocumentDataset.from_pandas(pd.DataFrame(source("a", 70)), npartitions=partitions)
    b = DocumentDataset.from_pandas(pd.DataFrame(source("b", 70)), npartitions=partitions)
    counts = blend_datasets(target, [a, b], weights, seed=1, names=["a", "b"],
                            replacement=True).df.compute()["source"].value_counts()
    assert counts.sum() == target
    for name, weight in zip("ab", weights, strict=True):
        assert abs(counts.get(name, 0) - target * weight / sum(weights)) < 1


def test_a_share_larger_than_its_source_needs_replacement(two_sources):
    with pytest.raises(BlendError, match=r"'books' holds 30 documents but its weight asks for 35"):
        blend(two_sources, target_size=140)
    _, out = blend(two_sources, target_size=140, replacement=True)
    books = out[out["source"] == "books"]
    # 35 from 30 documents: every one once, 5 of them twice, none more.
    assert len(books) == 35 and books["text"].value_counts().max() == 2
    assert books["text"].nunique() == 30


def test_blending_by_tokens_counts_the_tokens_of_the_text(two_sources, tmp_path_factory):
    tokenizer_dir = save_bpe_tokenizer(tmp_path_factory.mktemp("tok"), vocab_size=500, limit=50)
    tokenizer = tokenizers.Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    reader, out = blend(two_sources, by="tokens", target_size=800, tokenizer=tokenizer_dir)
    tokens = out.assign(tokens=[len(tokenizer.encode(t, add_special_tokens=False).ids)
                                for t in out["text"]]).groupby("source")["tokens"]
    longest = tokens.max()
    for name, share in (("web", 600), ("books", 200)):
        # Whole documents until the share is reached: past it by less than one document.
        assert share <= tokens.sum()[name] < share + longest[name]
    assert reader.blend_plan.given == [tokens.sum()["web"], tokens.sum()["books"]]


def test_a_pipeline_counts_what_each_source_gave_and_what_it_left(two_sources):
    reader = BlendReader([{"path": str(two_sources / "web"), "weight": 3, "name": "crawl"},
                          {"path": str(two_sources / "books"), "weight": 1}],
                         target_size=80, seed=5, files_per_partition=1)
    result = (Pipeline("blend").add_stage(reader)
              .add_stage(ParquetWriter(str(two_sources / "out")))
              .run(LocalExecutor(progress=False)))
    assert result.counters["read_blend.crawl.documents"] == 60
    assert result.counters["read_blend.books.documents"] == 20
    # Every document read is written or counted: 150 read, 80 written.
    assert result.rows + result.dropped["reader.blend_not_selected"] == 150
    assert set(pd.read_parquet(two_sources / "out")["source"]) == {"crawl", "books"}


@pytest.mark.slow
def test_a_blend_on_a_cluster_is_the_blend_read_in_process(two_sources, client):
    _, local = blend(two_sources, blocksize=700)
    result = (Pipeline("blend")
              .add_stage(BlendReader([{"path": str(two_sources / "web"), "weight": 3},
                                      {"path": str(two_sources / "books"), "weight": 1}],
                                     target_size=80, seed=5, files_per_partition=1))
              .add_stage(ParquetWriter(str(two_sources / "out")))
              .run(StreamingExecutor(progress=False)))
    assert result.rows == 80
    assert sorted(pd.read_parquet(two_sources / "out")["text"]) == sorted(local["text"])


def test_bad_blends_are_refused_with_what_to_change(two_sources):
    web, books = str(two_sources / "web"), str(two_sources / "books")
    with pytest.raises(BlendError, match="weights are numbers of 0 or more"):
        BlendReader([{"path": web, "weight": -1}], target_size=1)
    with pytest.raises(BlendError, match="pass tokenizer="):
        BlendReader([{"path": web, "weight": 1}], target_size=1, by="tokens")
    with pytest.raises(BlendError, match="distinct names"):
        BlendReader([{"path": web, "weight": 1}, {"path": web, "weight": 1}], target_size=1)
    with pytest.raises(BlendError, match=r"column 'n' already.*source_field="):
        blend(two_sources, source_field="n")
    with pytest.raises(BlendError, match=r"'web' has no column\(s\) \['missing'\]"):
        BlendReader([{"path": web, "weight": 1}, {"path": books, "weight": 1}], target_size=2,
                    columns=["text", "missing"]).dataset()


def test_a_pipeline_file_blends_sources(two_sources, tmp_path):
    config = load_config_text(f"""
reader:
  type: blend
  sources:
    - {{path: {two_sources / 'web'}, weight: 3}}
    - {{path: {two_sources / 'books'}, weight: 1, name: library}}
  target_size: 40
  seed: 3
stages: []
writer: {{type: parquet, path: {tmp_path / 'out'}}}
""", "blend.yaml")
    config.check_inputs()
    result = config.pipeline.run(LocalExecutor(progress=False))
    assert result.counters == {"read_blend.web.documents": 30, "read_blend.library.documents": 10}
    bad = ("reader:\n  type: blend\n  sources: [{path: x, weight: heavy}]\n  target_size: 4\n"
           "stages: []\n")
    with pytest.raises(ValueError, match=r"blend\.yaml, line 3: .*sources expects"):
        load_config_text(bad, "blend.yaml")


def test_by_tokens_with_repeated_texts_the_cut_counts_every_copy(tmp_path_factory):
    """Equal texts share a key: at the cut they are taken together, their tokens summed."""
    tokenizer_dir = save_bpe_tokenizer(tmp_path_factory.mktemp("tok"), vocab_size=300, limit=20)
    texts = [f"text number {i % 7} " + "x " * (i % 7) for i in range(70)]  # 7 texts x 10
    ds = DocumentDataset.from_pandas(pd.DataFrame({"text": texts}), npartitions=3)
    tokenizer = tokenizers.Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    size = {t: len(tokenizer.encode(t, add_special_tokens=False).ids) for t in set(texts)}
    for target in (1, 40, 150, sum(size[t] for t in texts)):
        out = blend_datasets(target, [ds], [1], by="tokens", tokenizer=tokenizer_dir,
                             seed=2).df.compute()
        taken = sum(size[t] for t in out["text"])
        # Whole groups of equal texts, in key order, until the target is reached.
        assert taken >= target
        groups = out["text"].value_counts()
        assert (groups == 10).all()
        assert taken - target < 10 * max(size.values())


def test_a_resumed_blend_refuses_a_source_file_edited_since(two_sources):
    def run(resume: bool):
        reader, _ = blend(two_sources)
        return (Pipeline("blend").add_stage(reader)
                .add_stage(ParquetWriter(str(two_sources / "out")))
                .run(LocalExecutor(resume=resume, progress=False)))

    run(False)
    edited = two_sources / "books" / "b.jsonl"
    edited.write_text(edited.read_text().replace("book document 3 ", "book document X "))
    with pytest.raises(ResumeMismatchError, match=r"b\.jsonl"):
        run(True)
