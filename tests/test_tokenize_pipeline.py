"""examples/tokenize.yaml and the tokenizing writer in pipelines: JSONL in, Megatron token
files out, every document's tokens as the tokenizer makes them, counted per stage and
source, with resume intact."""

from __future__ import annotations

import json
import os
import warnings
from collections import Counter
from pathlib import Path

import pytest
from conftest import write_jsonl

from curator_dask import AddId, JsonlReader, LocalExecutor, Pipeline, StreamingExecutor
from curator_dask.cli.main import main
from curator_dask.io import OutputOverlapsInputError
from curator_dask.sample import sample_documents, write_shards
from curator_dask.stages.filters import ScoreFilter, WordCountFilter
from curator_dask.testing.tokenizer import save_bpe_tokenizer
from curator_dask.training import BlendReader, CountTokens, MegatronWriter

tokenizers = pytest.importorskip("tokenizers", reason="tokenizing needs the tokenize extra")
with warnings.catch_warnings():  # megatron-core warns that it has no Transformer Engine
    warnings.simplefilter("ignore")
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset",
                                  reason="reading back needs megatron-core (the test extra)")

EXAMPLE = Path(__file__).parent.parent / "examples" / "tokenize.yaml"


@pytest.fixture
def example_inputs(tmp_path, monkeypatch):
    """What the example's comments say to make, in a working directory of its own."""
    docs = sample_documents()
    write_shards(docs.iloc[:600], tmp_path / "training-input" / "docs")
    write_shards(docs.iloc[600:], tmp_path / "training-input" / "more-docs", shards=1)
    save_bpe_tokenizer(tmp_path / "tokenizer")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def token_sequences(directory) -> list[list[int]]:
    """Every document of the Megatron datasets in ``directory``, read by megatron-core."""
    prefixes = sorted({str(p)[:-4] for p in Path(directory).glob("part-*.idx")})
    out = []
    for prefix in prefixes:
        dataset = indexed.IndexedDataset(prefix)
        out += [dataset[i].tolist() for i in range(len(dataset))]
        del dataset
    return out


def test_the_tokenize_example_is_a_valid_pipeline_file(example_inputs, capsys):
    assert main(["run", str(EXAMPLE), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "read_blend" in printed and "write_megatron" in printed
    assert "valid (streaming executor)" in printed


@pytest.mark.slow
def test_the_tokenize_example_writes_what_the_tokenizer_makes_of_the_blend(
        example_inputs, cluster, capsys):
    assert main(["run", str(EXAMPLE), "--scheduler-address", cluster.scheduler_address]) == 0
    printed = capsys.readouterr().out

    # The documents that should reach the writer, found in-process: the blend, filtered.
    blended = BlendReader([{"path": "training-input/docs/", "weight": 3},
                           {"path": "training-input/more-docs/", "weight": 1}],
                          target_size=500, seed=42, source_field="corpus").dataset()
    kept = ScoreFilter(WordCountFilter(min_words=20))(blended).df.compute()
    tokenizer = tokenizers.Tokenizer.from_file("tokenizer/tokenizer.json")
    eos = tokenizer.token_to_id("<|endoftext|>")
    expected = [[*tokenizer.encode(t, add_special_tokens=False).ids, eos] for t in kept["text"]]

    shards = token_sequences("training-output/shards")
    assert len(list(Path("training-output/shards").glob("part-*.bin"))) == 2
    assert Counter(map(tuple, shards)) == Counter(map(tuple, expected))
    # The merged shards hold the parts' documents in the parts' (shuffled) order.
    assert shards == token_sequences("training-output/tokens")
    assert shards != expected  # shuffled

    total = sum(map(len, expected))
    assert f"write_megatron.tokens = {total:,}" in printed
    per_corpus = kept.assign(tokens=[len(t) for t in expected]).groupby("corpus")["tokens"].sum()
    for corpus, tokens in per_corpus.items():
        assert f"write_megatron.tokens.{corpus} = {tokens:,}" in printed
        assert f"count_tokens.tokens.{corpus} = {tokens:,}" in printed
    manifest = json.loads(Path("training-output/tokens/.curator-output.json").read_text())
    assert manifest["encoded"]["tokens"] == total
    assert manifest["encoded"]["tokens_by_source"] == per_corpus.to_dict()
    report = Path("training-output/report.html").read_text()
    assert "write_megatron.tokens" in report and "read_blend.docs.documents" in report


@pytest.mark.slow
def test_a_resumed_tokenizing_run_writes_every_document_once(tmp_path, client):
    rows = [{"text": f"document {i} " + "word " * (i % 13)} for i in range(90)]
    for k in range(3):
        write_jsonl(tmp_path / "in" / f"f{k}.jsonl", rows[k * 30:(k + 1) * 30])
    tokenizer = save_bpe_tokenizer(tmp_path / "tok", vocab_size=500, limit=50)

    def run(resume: bool):
        return (Pipeline("tokens")
                .add_stage(JsonlReader(str(tmp_path / "in"), files_per_partition=1))
                .add_stage(AddId())
                .add_stage(CountTokens(tokenizer, token_field=None))
                .add_stage(MegatronWriter(str(tmp_path / "out"), tokenizer=tokenizer, eos=True,
                                          target_file_size="200 tokens"))
                .run(StreamingExecutor(resume=resume, progress=False)))

    first = run(False)
    before = token_sequences(tmp_path / "out")
    # A crash while part 1 was written: no marker, and only its first piece.
    os.remove(tmp_path / "out" / ".part-00001.done")
    for piece in sorted((tmp_path / "out").glob("part-00001-*"))[2:]:
        piece.unlink()
    resumed = run(True)
    assert resumed.partitions_skipped == 2
    assert token_sequences(tmp_path / "out") == before
    assert len(before) == 90
    # The run's counts cover the parts it found complete too.
    assert resumed.counters["write_megatron.tokens"] == first.counters["write_megatron.tokens"]
    manifest = json.loads((tmp_path / "out" / ".curator-output.json").read_text())
    assert manifest["encoded"]["tokens"] == sum(map(len, before))
    assert first.counters["count_tokens.tokens"] + 90 == first.counters["write_megatron.tokens"]


def test_the_tokenizing_writer_refuses_a_merge_inside_its_output(tmp_path):
    tokenizer = save_bpe_tokenizer(tmp_path / "tok", vocab_size=300, limit=20)
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "a b"}])
    writer = MegatronWriter(str(tmp_path / "out"), tokenizer=tokenizer,
                            merge_path=str(tmp_path / "out" / "merged"), num_shards=2)
    pipeline = Pipeline("p").add_stage(JsonlReader(str(tmp_path / "in"))).add_stage(writer)
    with pytest.raises(OutputOverlapsInputError, match="merge directory"):
        pipeline.run(LocalExecutor(progress=False))
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="give merge_path"):
        MegatronWriter(str(tmp_path / "out"), tokenizer=tokenizer, num_shards=2)


@pytest.mark.parametrize("merge_path, clash", [
    ("training-input/docs/shards/", "lies inside the input path"),
    ("training-output/report.html", "the report"),
])
def test_a_pipeline_file_s_merge_directory_is_checked_before_anything_runs(
        example_inputs, capsys, merge_path, clash):
    text = EXAMPLE.read_text().replace("merge_path: training-output/shards/",
                                       f"merge_path: {merge_path}")
    assert f"merge_path: {merge_path}" in text
    (example_inputs / "p.yaml").write_text(text)
    assert main(["run", "p.yaml", "--dry-run"]) == 2
    message = capsys.readouterr().err
    assert "merge directory" in message and clash in message, message
    assert not (example_inputs / "training-output").exists()
