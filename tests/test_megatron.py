"""Megatron token files: what megatron-core's own IndexedDataset reads back is, document
for document, what the tokenizer makes of the text; merged shards keep every document."""

from __future__ import annotations

import json
import os
import tempfile
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask import DocumentDataset
from curator_dask.io.megatron import MegatronFormatError, read_index
from curator_dask.io.tokens import TokenizerError
from curator_dask.testing.tokenizer import save_bpe_tokenizer
from curator_dask.training import merge_megatron

tokenizers = pytest.importorskip("tokenizers", reason="tokenizing needs the tokenize extra")
with warnings.catch_warnings():  # megatron-core warns that it has no Transformer Engine
    warnings.simplefilter("ignore")
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset",
                                  reason="reading back needs megatron-core (the test extra)")


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    return save_bpe_tokenizer(tmp_path_factory.mktemp("bpe"), vocab_size=1000, limit=200)


def reference(tokenizer_dir: str):
    """The tokenizer, loaded by the tokenizers library itself, and its BOS/EOS id."""
    tokenizer = tokenizers.Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    with open(os.path.join(tokenizer_dir, "tokenizer_config.json")) as handle:
        config = json.load(handle)
    return tokenizer, tokenizer.token_to_id(config["bos_token"]), \
        tokenizer.token_to_id(config["eos_token"])


def read_back(prefixes) -> list[list[int]]:
    """Every document of the datasets, through megatron-core's IndexedDataset."""
    out = []
    for prefix in prefixes:
        dataset = indexed.IndexedDataset(prefix)
        out += [dataset[i].tolist() for i in range(len(dataset))]
    return out


def prefixes_of(files) -> list[str]:
    return sorted({f[:-4] for f in files if f.endswith((".bin", ".idx"))})


texts = st.lists(st.one_of(st.text(max_size=60), st.none(),
                           st.sampled_from(["", " ", "Dask curates text.", "naïve café 東京"])),
                 min_size=1, max_size=30)


@given(texts=texts, partitions=st.integers(1, 4), bos=st.booleans(), eos=st.booleans(),
       per_file=st.one_of(st.none(), st.integers(1, 80)))
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_megatron_core_reads_every_document_as_the_tokenizer_encodes_it(bpe, texts, partitions,
                                                                       bos, eos, per_file):
    tokenizer, bos_id, eos_id = reference(bpe)
    ds = DocumentDataset.from_pandas(pd.DataFrame({"text": texts}),
                                     npartitions=min(partitions, len(texts)))
    out = tempfile.mkdtemp()
    result = ds.to_megatron(out, bpe, bos=bos, eos=eos, mode="overwrite",
                            target_file_size=f"{per_file} tokens" if per_file else None)
    expected = [[bos_id] * bos + tokenizer.encode(t or "", add_special_tokens=False).ids
                + [eos_id] * eos for t in texts]
    # Part and piece names sort in document order; a document of no tokens is counted.
    assert read_back(prefixes_of(result.files)) == [tokens for tokens in expected if tokens]
    assert result.rows == sum(1 for tokens in expected if tokens)
    assert result.dropped.get("no_tokens", 0) == sum(1 for tokens in expected if not tokens)
    assert result.counters.get("tokens", 0) == sum(map(len, expected))
    if per_file:
        for prefix in prefixes_of(result.files):
            lengths = read_index_lengths(prefix)
            assert lengths.sum() <= per_file or len(lengths) == 1


def read_index_lengths(prefix: str) -> np.ndarray:
    # A copy made while the dataset lives: its arrays are views of a memory map that
    # closes when it is collected.
    dataset = indexed.IndexedDataset(prefix)
    lengths = dataset.sequence_lengths.copy()
    del dataset
    return lengths


def test_the_dtype_follows_the_vocabulary_as_megatron_chooses_it(tmp_path, bpe):
    small = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a cat"]}))
    result = small.to_megatron(str(tmp_path / "small"), bpe)
    assert indexed.IndexedDataset(prefixes_of(result.files)[0]).index.dtype == np.uint16

    # A word-level vocabulary of 70,000 words needs 32-bit ids.
    words = {f"w{i}": i for i in range(70_000)}
    big = tokenizers.Tokenizer(tokenizers.models.WordLevel(words, unk_token="w0"))
    big.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    (tmp_path / "big").mkdir()
    big.save(str(tmp_path / "big" / "tokenizer.json"))
    text = DocumentDataset.from_pandas(pd.DataFrame({"text": ["w69999 w1 w65535", "w70"]}))
    result = text.to_megatron(str(tmp_path / "out"), str(tmp_path / "big"))
    prefix = prefixes_of(result.files)[0]
    assert indexed.IndexedDataset(prefix).index.dtype == np.int32
    assert read_back([prefix]) == [[69999, 1, 65535], [70]]


def test_the_manifest_records_the_tokenizer_and_the_tokens_by_source(tmp_path, bpe):
    frame = pd.DataFrame({"text": ["a b c", "some more text here", "x"],
                          "corpus": ["web", "books", "web"]})
    result = DocumentDataset.from_pandas(frame, npartitions=2).to_megatron(
        str(tmp_path / "out"), bpe, eos=True, source_field="corpus")
    manifest = json.loads((tmp_path / "out" / ".curator-output.json").read_text())["encoded"]
    tokens = read_back(prefixes_of(result.files))
    assert manifest["tokens"] == sum(map(len, tokens)) == result.counters["tokens"]
    assert manifest["tokens_by_source"] == {"web": len(tokens[0]) + len(tokens[2]),
                                            "books": len(tokens[1])}
    assert result.counters["tokens.web"] == manifest["tokens_by_source"]["web"]
    assert manifest["documents"] == 3 and manifest["vocab_size"] == 1000
    assert manifest["dtype"] == "uint16" and manifest["eos"] is True


@given(lengths=st.lists(st.integers(1, 40), min_size=1, max_size=40),
       partitions=st.integers(1, 5), shards=st.integers(1, 6))
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_merged_shards_hold_every_document_in_order_balanced_by_tokens(bpe, lengths, partitions,
                                                                        shards):
    # Documents of known token counts: "a" repeated with spaces tokenizes word by word.
    _tokenizer, _, _ = reference(bpe)
    texts = [" ".join(["x"] * n) for n in lengths]
    ds = DocumentDataset.from_pandas(pd.DataFrame({"text": texts}),
                                     npartitions=min(partitions, len(texts)))
    parts, merged = tempfile.mkdtemp(), tempfile.mkdtemp()
    written = ds.to_megatron(parts, bpe, mode="overwrite")
    stats = merge_megatron(parts, merged, num_shards=shards, mode="overwrite")

    documents = read_back(prefixes_of(written.files))
    shard_prefixes = prefixes_of(f for s in stats for f in s["files"])
    assert read_back(shard_prefixes) == documents
    # Each document is in the shard its first token falls in (shards no document falls
    # in are not written, so the shards are those of the documents, in order).
    total = sum(map(len, documents))
    starts = np.cumsum([0] + [len(d) for d in documents])[:-1]
    owners = [min(start * shards // max(total, 1), shards - 1) for start in starts]
    groups = [owners.count(k) for k in sorted(set(owners))]
    assert [len(indexed.IndexedDataset(p)) for p in shard_prefixes] == groups
    assert len(shard_prefixes) <= shards


@given(lengths=st.lists(st.integers(1, 30), min_size=1, max_size=30), limit=st.integers(1, 60))
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_shards_of_a_target_size_are_filled_in_order(bpe, lengths, limit):
    texts = [" ".join(["x"] * n) for n in lengths]
    ds = DocumentDataset.from_pandas(pd.DataFrame({"text": texts}), npartitions=min(3, len(texts)))
    parts, merged = tempfile.mkdtemp(), tempfile.mkdtemp()
    written = ds.to_megatron(parts, bpe, mode="overwrite")
    stats = merge_megatron(parts, merged, target_file_size=f"{limit} tokens", mode="overwrite")
    assert read_back(prefixes_of(f for s in stats for f in s["files"])) == \
        read_back(prefixes_of(written.files))
    shard_lengths = [read_index_lengths(p).tolist()
                     for p in prefixes_of(f for s in stats for f in s["files"])]
    for k, shard in enumerate(shard_lengths):
        assert sum(shard) <= limit or len(shard) == 1
        if k + 1 < len(shard_lengths):  # full: the next shard's first document did not fit
            assert sum(shard) + shard_lengths[k + 1][0] > limit


def test_a_missing_tokenizer_or_token_is_an_error_naming_it(tmp_path, bpe):
    ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a"]}))
    with pytest.raises(TokenizerError, match=r"does not exist.*save_pretrained"):
        ds.to_megatron(str(tmp_path / "out"), str(tmp_path / "no-such-tokenizer"))
    with pytest.raises(TokenizerError, match=r"'<\|nope\|>' is not in the vocabulary"):
        ds.to_megatron(str(tmp_path / "out"), bpe, eos="<|nope|>", mode="overwrite")
    assert not [n for n in os.listdir(tmp_path / "out") if n.startswith("part-")]


def test_a_file_that_is_not_an_index_is_refused_naming_it(tmp_path):
    import fsspec

    (tmp_path / "x.idx").write_bytes(b"not an index")
    with pytest.raises(MegatronFormatError, match=r"x\.idx: not a Megatron index"):
        read_index(fsspec.filesystem("file"), str(tmp_path / "x.idx"))


def test_a_partition_tokenized_in_many_calls_is_tokenized_as_in_one(bpe, monkeypatch):
    from curator_dask.io import tokens

    texts = [f"document {i}: " + "some words " * (i % 9) for i in range(60)] + ["", None]
    ds = DocumentDataset.from_pandas(pd.DataFrame({"text": texts}))
    whole = read_back(prefixes_of(ds.to_megatron(tempfile.mkdtemp(), bpe, eos=True,
                                                 mode="overwrite").files))
    monkeypatch.setattr(tokens, "CHUNK_CHARS", 37)  # a call every two or three documents
    pieces = read_back(prefixes_of(ds.to_megatron(tempfile.mkdtemp(), bpe, eos=True,
                                                  mode="overwrite").files))
    tokenizer, _, eos = reference(bpe)
    assert pieces == whole == [[*tokenizer.encode(t or "", add_special_tokens=False).ids, eos]
                               for t in texts]
