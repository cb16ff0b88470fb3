"""Classifiers in a row over one text and one tokenizer tokenize once, and give exactly
what each gives alone. Counted with ``tokenization_counts()``, which counts the documents
handed to the real tokenizer and those served from the token cache."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from curator_dask import DocumentDataset
from curator_dask.stages.models import (
    TOKEN_CACHE_ENV,
    ContentTypeClassifier,
    DomainClassifier,
    QualityClassifier,
    tokenization_counts,
)
from curator_dask.testing.published_models import (
    DOMAIN_LABELS_SAMPLE,
    deberta_v3_config,
    save_backbone_config,
    save_hub_mixin_classifier,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
WORDS = "the cat sat on a mat while the dog ran to the river market news sport 42 !".split()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    base = save_backbone_config(tmp_path_factory.mktemp("base"), deberta_v3_config())
    quality = save_hub_mixin_classifier(tmp_path_factory.mktemp("quality"), base,
                                        ["High", "Medium", "Low"], seed=1)
    domain = save_hub_mixin_classifier(tmp_path_factory.mktemp("domain"), base,
                                       DOMAIN_LABELS_SAMPLE, seed=2)
    return base, quality, domain


def texts(seed: int, n: int = 24) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=k)) for k in rng.integers(1, 30, size=n)]


def totals(counts: dict) -> tuple[int, int]:
    return (sum(c["tokenized"] for c in counts.values()),
            sum(c["reused"] for c in counts.values()))


def chain(base, quality, domain, **quality_options):
    return [QualityClassifier(quality, base_model_path=base, device="cpu", **quality_options),
            DomainClassifier(domain, base_model_path=base, device="cpu"),
            ContentTypeClassifier(quality, base_model_path=base, device="cpu",
                                  max_chars=2000, max_length=512)]


def run(stages, frame):
    ds = DocumentDataset.from_pandas(frame, npartitions=2)
    for stage in stages:
        ds = stage(ds)
    return ds.df.compute(scheduler="sync")


@pytest.mark.slow
def test_three_classifiers_in_a_row_tokenize_each_document_once(models, monkeypatch):
    base, quality, domain = models
    frame = pd.DataFrame({"text": pd.Series(texts(seed=21), dtype="str")})
    before = totals(tokenization_counts())
    # The same cut (2,000 characters, 512 tokens) and, in two directories, the same
    # tokenizer: one tokenization serves all three.
    shared = run(chain(base, quality, domain, max_chars=2000, max_length=512), frame)
    after = totals(tokenization_counts())
    assert (after[0] - before[0], after[1] - before[1]) == (len(frame), 2 * len(frame))

    monkeypatch.setenv(TOKEN_CACHE_ENV, "0")  # each stage on its own
    alone = run(chain(base, quality, domain, max_chars=2000, max_length=512), frame)
    assert totals(tokenization_counts())[0] - after[0] == 3 * len(frame)
    pd.testing.assert_frame_equal(shared, alone)


@pytest.mark.slow
def test_classifiers_with_other_settings_never_share_tokens(models):
    base, quality, domain = models
    frame = pd.DataFrame({"text": pd.Series(texts(seed=22), dtype="str")})
    before = totals(tokenization_counts())
    # Quality reads 1,024 tokens of 6,000 characters, the other two 512 of 2,000.
    run(chain(base, quality, domain), frame)
    after = totals(tokenization_counts())
    assert (after[0] - before[0], after[1] - before[1]) == (2 * len(frame), len(frame))
