"""The named classifiers on their publishers' layouts: tiny random models, saved as each
publisher saves theirs (``curator_dask.testing.published_models``).

Every expected value comes from an independent reference: the saved model loaded with
the publisher-style module (``PyTorchModelHubMixin.from_pretrained``), ``transformers``
or ``peft``, run one document at a time in input order, with NeMo Curator's formulas
written out here row by row.
"""

from __future__ import annotations

import functools
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from curator_dask import DocumentDataset  # noqa: E402
from curator_dask.stages.models import (  # noqa: E402
    ClassifierOptionError,
    ContentTypeClassifier,
    DomainClassifier,
    FineWebEduClassifier,
    FineWebMixtralEduClassifier,
    FineWebNemotronEduClassifier,
    ModelDirectoryError,
    MultilingualDomainClassifier,
    PromptTaskComplexityClassifier,
    QualityClassifier,
)
from curator_dask.testing.published_models import (  # noqa: E402
    DOMAIN_LABELS_SAMPLE,
    PROMPT_TARGETS,
    deberta_v3_config,
    publisher_module,
    save_backbone_config,
    save_fineweb_classifier,
    save_hub_mixin_classifier,
    save_prompt_complexity_classifier,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

WORDS = ("the cat sat on a mat while the dog ran to the river and the city market was busy "
         "with news of sport science and weather write a story about summarize this "
         "passage what is the capital of france explain how to bake bread 42 !").split()
QUALITY_LABELS = ["High", "Medium", "Low"]


def documents(n: int = 40, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=k)) for k in rng.integers(0, 40, size=n)]


def frame(texts) -> pd.DataFrame:
    return pd.DataFrame({"text": pd.Series(texts, dtype="str"), "n": np.arange(len(texts))})


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return save_backbone_config(tmp_path_factory.mktemp("deberta-v3-base"), deberta_v3_config())


@pytest.fixture(scope="module")
def quality_dir(tmp_path_factory, backbone):
    return save_hub_mixin_classifier(tmp_path_factory.mktemp("quality"), backbone,
                                     QUALITY_LABELS, seed=1)


@pytest.fixture(scope="module")
def domain_dir(tmp_path_factory, backbone):
    return save_hub_mixin_classifier(tmp_path_factory.mktemp("domain"), backbone,
                                     DOMAIN_LABELS_SAMPLE, seed=2)


@functools.cache
def reference_tokenizer(model_dir: str):
    return transformers.AutoTokenizer.from_pretrained(model_dir)


def reference_tokens(model_dir: str, text: str, max_chars, max_length: int) -> dict:
    tokenizer = reference_tokenizer(model_dir)
    text = text if max_chars is None else text[:max_chars]
    enc = tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt")
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}


def as_matrix(column) -> np.ndarray:
    return np.stack(column.to_list())


# -- the DeBERTa hub-mixin classifiers -----------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("cls, column", [(QualityClassifier, "quality_pred"),
                                         (DomainClassifier, "domain_pred"),
                                         (MultilingualDomainClassifier, "domain_pred"),
                                         (ContentTypeClassifier, "content_pred")])
def test_hub_mixin_classifiers_give_the_publisher_modules_probabilities(cls, column, quality_dir,
                                                                         backbone):
    texts = documents(16)
    stage = cls(quality_dir, base_model_path=backbone, device="cpu", prob_column="probs",
                model_inference_batch_size=4)
    out = stage.process(frame(texts))
    reference = publisher_module("first-token", backbone).from_pretrained(quality_dir).eval()
    with torch.no_grad():
        expected = np.stack([
            reference(**reference_tokens(quality_dir, text, stage.max_chars, stage.max_length))
            .softmax(-1)[0].numpy() for text in texts])
    np.testing.assert_allclose(as_matrix(out["probs"]), expected, rtol=1e-4, atol=1e-6)
    assert out[column].tolist() == [QUALITY_LABELS[i] for i in expected.argmax(1)]
    assert len(set(out[column])) > 1
    assert out["n"].tolist() == list(range(16))


def test_quality_defaults_are_nemo_curators(quality_dir, backbone):
    stage = QualityClassifier(quality_dir, base_model_path=backbone, device="cpu")
    out = stage.process(frame(documents(5)))
    assert list(out.columns) == ["text", "n", "quality_pred", "quality_prob"]
    assert (stage.name, stage.max_chars, stage.max_length) == ("quality_classifier",
                                                                     6000, 1024)
    assert stage.labels == QUALITY_LABELS
    domain = DomainClassifier(quality_dir, base_model_path=backbone, device="cpu")
    assert (domain.pred_column, domain.prob_column, domain.max_chars) == ("domain_pred", None,
                                                                         2000)


@pytest.mark.slow
def test_filter_by_drops_other_labels_counts_them_and_the_label_distribution(domain_dir,
                                                                             backbone):
    texts = documents(60, seed=1)
    everything = DomainClassifier(domain_dir, base_model_path=backbone,
                                  device="cpu").process(frame(texts))
    labels = everything["domain_pred"].to_numpy()
    keep = [label for label in DOMAIN_LABELS_SAMPLE if label in set(labels)][:1]
    stage = DomainClassifier(domain_dir, base_model_path=backbone, device="cpu",
                             filter_by=keep, name="domain")
    result = stage(DocumentDataset.from_pandas(frame(texts), npartitions=3))
    out = result.df.compute()
    assert out["n"].tolist() == np.flatnonzero(labels == keep[0]).tolist()
    dropped = pd.Series(labels[labels != keep[0]]).value_counts()
    assert result.dropped_counts() == {f"domain.{label}": int(count)
                                       for label, count in dropped.items()}
    with pytest.raises(ClassifierOptionError, match=r"filter_by names label\(s\) \['Games'\]"):
        DomainClassifier(domain_dir, base_model_path=backbone, filter_by=["Games"])


def test_the_label_distribution_is_counted_per_label(quality_dir, backbone):
    from curator_dask.partition import Partition

    stage = QualityClassifier(quality_dir, base_model_path=backbone, device="cpu")
    out = Partition(frame(documents(30))).apply(stage.process)
    counts = out.frame["quality_pred"].value_counts()
    assert out.counters == {f"quality_classifier.quality_pred={label}": int(n)
                            for label, n in counts.items()}


# -- where the model comes from ----------------------------------------------------------

def test_a_missing_model_names_the_model_id_and_how_to_download_it(tmp_path):
    with pytest.raises(ModelDirectoryError) as err:
        QualityClassifier(cache_dir=tmp_path / "hub")
    message = str(err.value)
    assert "nvidia/quality-classifier-deberta" in message
    assert "hf download nvidia/quality-classifier-deberta" in message
    assert "base_model, fc_dropout, id2label" in message
    assert not (tmp_path / "hub").exists()


def test_an_incomplete_model_lists_what_is_missing(tmp_path, quality_dir, backbone):
    import json
    import shutil

    broken = shutil.copytree(quality_dir, tmp_path / "quality")
    config = json.loads((broken / "config.json").read_text())
    del config["fc_dropout"]
    (broken / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelDirectoryError, match=r"config.json has no 'fc_dropout'.*"
                                                  r"hf download nvidia/quality"):
        QualityClassifier(broken, base_model_path=backbone)


def test_the_backbone_config_is_needed_and_never_downloaded(quality_dir, tmp_path):
    with pytest.raises(ModelDirectoryError, match=r"base_model='microsoft/deberta-v3-base'.*"
                                                  r"base_model_path="):
        QualityClassifier(quality_dir, cache_dir=tmp_path / "empty-hub")


def _cache_snapshot(hub, model_id: str, source: str) -> None:
    """Lay ``source`` out as the Hugging Face cache does: refs/main and a snapshot."""
    import shutil

    repo = hub / f"models--{model_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    shutil.copytree(source, repo / "snapshots" / ("0" * 40))


def test_models_are_found_in_the_local_hugging_face_cache(tmp_path, quality_dir, backbone):
    hub = tmp_path / "hub"
    _cache_snapshot(hub, "nvidia/quality-classifier-deberta", quality_dir)
    _cache_snapshot(hub, "microsoft/deberta-v3-base", backbone)
    texts = documents(10)
    from_cache = QualityClassifier(cache_dir=hub, device="cpu").process(frame(texts))
    direct = QualityClassifier(quality_dir, base_model_path=backbone,
                               device="cpu").process(frame(texts))
    assert from_cache["quality_pred"].tolist() == direct["quality_pred"].tolist()


def test_nemo_curators_keywords_work_and_warn(quality_dir, backbone):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stage = QualityClassifier(quality_dir, base_model_path=backbone, batch_size=8,
                                  label_field="q", score_field=None, autocast=False,
                                  device_type="cpu", max_mem_gb=4, keep_tokens=True)
    assert (stage.model_inference_batch_size, stage.pred_column, stage.prob_column,
            stage.dtype, stage.device) == (8, "q", None, "float32", "cpu")
    messages = " ".join(str(w.message) for w in caught)
    assert "QualityClassifier(model_inference_batch_size=...)" in messages
    assert "QualityClassifier(max_mem_gb=...) is NeMo" in messages
    with pytest.raises(TypeError, match="filter_by= is NeMo Curator's"):
        PromptTaskComplexityClassifier(quality_dir, base_model_path=backbone,
                                       filter_by=["x"])


# -- FineWeb-Edu ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fineweb_dir(tmp_path_factory):
    return save_fineweb_classifier(tmp_path_factory.mktemp("fineweb"), seed=2)


@pytest.mark.parametrize("cls, prefix, labelled", [
    (FineWebEduClassifier, "fineweb-edu-score", False),
    (FineWebMixtralEduClassifier, "fineweb-mixtral-edu-score", True),
    (FineWebNemotronEduClassifier, "fineweb-nemotron-edu-score", True)])
def test_fineweb_scores_are_the_clipped_regression_output_and_its_rounding(cls, prefix,
                                                                           labelled,
                                                                           fineweb_dir):
    texts = documents(40, seed=3)
    out = cls(fineweb_dir, device="cpu", model_inference_batch_size=8).process(frame(texts))
    model = transformers.AutoModelForSequenceClassification.from_pretrained(fineweb_dir).eval()
    with torch.no_grad():
        raw = [float(model(**reference_tokens(fineweb_dir, t, None, 512)).logits[0, 0])
               for t in texts]
    clipped = [min(5.0, max(0.0, score)) for score in raw]
    np.testing.assert_allclose(out[prefix], clipped, rtol=1e-5, atol=1e-5)
    assert out[f"{prefix}-int"].tolist() == [round(score) for score in clipped]
    assert len(set(out[f"{prefix}-int"])) > 0 and out[f"{prefix}-int"].dtype == np.int64
    if labelled:
        assert out[f"{prefix}-label"].tolist() == [
            "high_quality" if score >= 2.5 else "low_quality" for score in raw]
    else:
        assert f"{prefix}-label" not in out.columns


def test_fineweb_filter_keeps_high_quality(fineweb_dir):
    texts = documents(40, seed=4)
    scored = FineWebEduClassifier(fineweb_dir, device="cpu").process(frame(texts))
    high = scored["fineweb-edu-score"] >= 2.5
    assert 0 < high.sum() < len(texts)
    kept = FineWebEduClassifier(fineweb_dir, device="cpu", filter_by=["high_quality"],
                                max_chars=-1).process(frame(texts))
    assert kept["n"].tolist() == scored["n"][high].tolist()


# -- prompt task and complexity -----------------------------------------------------------

def nemo_prompt_scores(head_logits: list, config: dict) -> dict:
    """NeMo Curator's formulas for one prompt, in plain Python."""
    names = [name for name, *_ in PROMPT_TARGETS]
    probs = {
        name: torch.softmax(logits, dim=1)[0]
        for name, logits in zip(names, head_logits, strict=True)
    }
    task = probs["task_type"]
    top = torch.topk(task, k=2)
    first, second = (round(float(p), 3) for p in top.values)
    row = {"task_type_1": config["task_type_map"][str(int(top.indices[0]))],
           "task_type_2": ("NA" if second < 0.1
                           else config["task_type_map"][str(int(top.indices[1]))]),
           "task_type_prob": first}
    for name in names[1:]:
        weighted = np.sum(probs[name].numpy() * np.array(config["weights_map"][name]))
        score = round(weighted / config["divisor_map"][name], 4)
        row[name] = score if name != "number_of_few_shots" or score >= 0.05 else 0
    row["prompt_complexity_score"] = round(
        0.35 * row["creativity_scope"] + 0.25 * row["reasoning"] + 0.15 * row["constraint_ct"]
        + 0.15 * row["domain_knowledge"] + 0.05 * row["contextual_knowledge"]
        + 0.05 * row["number_of_few_shots"], 5)
    return row


def test_prompt_complexity_follows_nemo_curators_formulas(tmp_path_factory, backbone):
    import json

    model_dir = save_prompt_complexity_classifier(tmp_path_factory.mktemp("prompt"), backbone,
                                                  seed=5)
    config = json.loads(Path(model_dir, "config.json").read_text())
    texts = documents(25, seed=5)
    out = PromptTaskComplexityClassifier(model_dir, base_model_path=backbone, device="cpu",
                                         model_inference_batch_size=4).process(frame(texts))
    reference = publisher_module("multi-head", backbone).from_pretrained(model_dir).eval()
    with torch.no_grad():
        expected = pd.DataFrame([
            nemo_prompt_scores(reference(**reference_tokens(model_dir, t, 2000, 512)), config)
            for t in texts])
    for column in expected.columns:
        if column in ("task_type_1", "task_type_2"):
            assert out[column].tolist() == expected[column].tolist(), column
        else:
            np.testing.assert_allclose(out[column], expected[column], atol=2e-4, err_msg=column)
    assert len(set(out["task_type_1"])) > 1
