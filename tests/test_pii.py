"""PiiRedactor: planted entities found at their exact character offsets, each action, the
counts in the run result, unicode around entities, and Presidio over a local spaCy model."""

from __future__ import annotations

import hashlib
import hmac
import random
import textwrap
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from curator_dask import DocumentDataset, Pipeline
from curator_dask.cli.main import main
from curator_dask.cli.registry import stage_catalog
from curator_dask.executors import StreamingExecutor
from curator_dask.observe.report import stage_rows
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter
from curator_dask.stages.models.model_dir import ModelDirectoryError
from curator_dask.stages.pii import PATTERN_ENTITIES, PiiRedactor
from curator_dask.testing.pii import UNICODE_NEIGHBOURS, make_entity, planted_pii
from tests.conftest import write_jsonl


@pytest.fixture(scope="module")
def planted():
    """400 documents with 0-4 planted entities each (every patterned type), decoys and
    non-ASCII neighbours; offsets known."""
    return planted_pii(400, seed=7)


def dataset(frame: pd.DataFrame, npartitions: int = 3) -> DocumentDataset:
    return DocumentDataset.from_pandas(frame[["text"]], npartitions=npartitions)


def found_spans(frame: pd.DataFrame, **options) -> list[set]:
    out = PiiRedactor(detect_only=True, **options)(dataset(frame)).df.compute()
    return [{(s["type"], s["start"], s["end"]) for s in spans} for spans in out["pii_spans"]]


def expected_text(text: str, spans, replace) -> str:
    pieces, pos = [], 0
    for kind, start, end in sorted(spans, key=lambda s: s[1]):
        pieces += [text[pos:start], replace(kind, text[start:end])]
        pos = end
    return "".join(pieces) + text[pos:]


# -- finding ---------------------------------------------------------------------------------

def test_precision_and_recall_are_one_for_every_patterned_type(planted):
    found = found_spans(planted)
    truth = [set(spans) for spans in planted["planted"]]
    tp, fp, fn = Counter(), Counter(), Counter()
    for got, want in zip(found, truth, strict=True):
        for kind, *_ in got & want:
            tp[kind] += 1
        for kind, *_ in got - want:
            fp[kind] += 1
        for kind, *_ in want - got:
            fn[kind] += 1
    scores = {kind: (tp[kind] / (tp[kind] + fp[kind]), tp[kind] / (tp[kind] + fn[kind]))
              for kind in PATTERN_ENTITIES}
    assert scores == {kind: (1.0, 1.0) for kind in PATTERN_ENTITIES}
    assert min(tp.values()) >= 80  # every type is planted often enough to mean something


def test_each_format_of_each_type_is_found_alone():
    rng = np.random.default_rng(11)
    values = [(kind, make_entity(kind, rng)) for kind in PATTERN_ENTITIES for _ in range(40)]
    frame = pd.DataFrame({"text": [f"see {v} here" for _, v in values]})
    assert found_spans(frame) == [{(kind, 4, 4 + len(v))} for kind, v in values]


@pytest.mark.parametrize("text", [
    "card 4111 1111 1111 1112 fails Luhn",
    "ssn 000-12-3456, 666-12-3456, 912-34-5678, 536-00-1234, 536-22-0000, 111-11-1111",
    "iban GB83 WEST 1234 5698 7654 32 has a wrong check; DE89370400440532013001 too",
    "ip 256.1.2.3 and 1.2.3.4.5 and 01.02.03.04 are not addresses",
    "phone 415-155-2671 has an exchange starting with 1; +12 34 is too short",
    "version 3.11.2 at 12:30:45 on 2024-01-05 for $3.50, std::vector, user@localhost",
    "+123 456789 123456 123456 123456 123456 123456 has more digits than a phone number",
])
def test_entity_shaped_text_that_fails_the_checks_is_not_found(text):
    assert found_spans(pd.DataFrame({"text": [text]})) == [set()]


def test_offsets_are_characters_next_to_emoji_combining_marks_and_rtl_text():
    email, ip, card = "jane.doe@example.org", "2001:db8::8a2e:370:7334", "4111-1111-1111-1111"
    texts = [
        f"😀👩‍💻{email}😀 שלום {ip}",               # emoji glued to the entity
        f"e\u0301te\u0301 {card}, مرحبا {email}",    # combining accents, Arabic
        f"联系{email}获取 \u200f{ip}\u200f",          # CJK glued, right-to-left marks
    ]
    found = found_spans(pd.DataFrame({"text": texts}))
    for text, spans in zip(texts, found, strict=True):
        values = {text[start:end] for _, start, end in spans}
        assert values <= {email, ip, card} and len(values) == len(spans)
    assert [len(s) for s in found] == [2, 2, 2]
    assert (("EMAIL_ADDRESS", 4, 4 + len(email)) in found[0]
            and texts[0][4:4 + len(email)] == email)


# -- actions ----------------------------------------------------------------------------------

def test_replace_puts_each_type_tag_at_the_planted_offsets(planted):
    out = PiiRedactor()(dataset(planted)).df.compute()["text"].tolist()
    expected = [expected_text(t, s, lambda kind, _: f"<{kind}>")
                for t, s in zip(planted["text"], planted["planted"], strict=True)]
    assert out == expected


def test_mask_keeps_every_offset(planted):
    out = PiiRedactor(action="mask", mask_char="#")(dataset(planted)).df.compute()["text"]
    expected = [expected_text(t, s, lambda _, v: "#" * len(v))
                for t, s in zip(planted["text"], planted["planted"], strict=True)]
    assert out.tolist() == expected
    assert (out.str.len().to_numpy() == planted["text"].str.len().to_numpy()).all()


def test_documents_without_entities_come_out_byte_for_byte(planted):
    clean = planted_pii(150, seed=3, per_doc=(0, 0)).astype({"text": object})
    # Non-ASCII text, a null, and odd whitespace besides the generated filler.
    extra = [" ".join(UNICODE_NEIGHBOURS), "", "tab\there\r\nand  two  spaces \u00a0", None]
    frame = pd.DataFrame({"text": pd.array([*clean["text"], *extra], dtype="str")})
    for action in ("replace", "mask", "hash", "drop"):
        out = PiiRedactor(action=action, salt="s")(dataset(frame)).df.compute()["text"]
        assert len(out) == len(frame)
        assert [None if pd.isna(v) else v.encode("utf-8") for v in out] == \
            [None if pd.isna(v) else v.encode("utf-8") for v in frame["text"]]


def test_detect_only_leaves_the_text_identical(planted):
    out = PiiRedactor(detect_only=True, action="drop")(dataset(planted)).df.compute()
    assert out["text"].tolist() == planted["text"].tolist()
    assert out["pii_spans"].map(len).sum() == planted["planted"].map(len).sum()


def test_hash_is_a_salted_hmac_stable_across_runs_and_different_for_another_salt(planted):
    frame = planted.head(60)

    def run(salt):
        return PiiRedactor(action="hash", salt=salt)(dataset(frame)).df.compute()["text"].tolist()

    first, second, other = run("pepper"), run("pepper"), run("salt")
    assert first == second

    def digest(salt, value):
        return hmac.new(salt.encode(), value.encode(), hashlib.sha256).hexdigest()[:16]

    assert first == [expected_text(t, s, lambda kind, v: f"<{kind}:{digest('pepper', v)}>")
                     for t, s in zip(frame["text"], frame["planted"], strict=True)]
    changed = [a != b for a, b in zip(first, other, strict=True)]
    assert changed == [bool(s) for s in frame["planted"]]


def test_the_same_entity_gets_the_same_digest_in_every_document():
    frame = pd.DataFrame(
        {"text": ["a jane@example.com b", "jane@example.com", "x bob@example.com"]}
    )
    out = PiiRedactor(action="hash", salt="k", hash_length=8)(dataset(frame, 2)).df.compute()
    tags = out["text"].str.extract(r"(<EMAIL_ADDRESS:[0-9a-f]{8}>)")[0].tolist()
    assert tags[0] == tags[1] != tags[2]


def test_drop_removes_documents_with_entities_and_counts_them_by_first_type(planted):
    out = PiiRedactor(action="drop")(dataset(planted))
    kept = out.df.compute()
    has = planted["planted"].map(bool)
    assert kept["text"].tolist() == planted.loc[~has, "text"].tolist()
    first_type = planted.loc[has, "planted"].map(lambda s: min(s, key=lambda x: x[1])[0])
    assert out.dropped_counts() == {f"pii_redactor.{k}": v
                                    for k, v in sorted(first_type.value_counts().items())}
    assert len(kept) + sum(out.dropped_counts().values()) == len(planted)


def test_counters_count_every_entity_by_type(planted):
    counters = PiiRedactor()(dataset(planted)).counters()
    planted_types = Counter(kind for spans in planted["planted"] for kind, _, _ in spans)
    assert counters == {f"pii_redactor.{k}": v for k, v in sorted(planted_types.items())}


def test_entities_limits_the_types_searched(planted):
    found = found_spans(planted, entities=["EMAIL_ADDRESS", "US_SSN"])
    truth = [{s for s in spans if s[0] in ("EMAIL_ADDRESS", "US_SSN")}
             for spans in planted["planted"]]
    assert found == truth


# -- in a pipeline ----------------------------------------------------------------------------

@pytest.mark.slow
def test_a_streaming_run_reports_drops_and_counters_that_add_up(planted, tmp_path, client):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": t} for t in planted["text"]])
    p = (Pipeline("pii").add_stage(JsonlReader(str(tmp_path / "in"), blocksize="16KiB"))
         .add_stage(PiiRedactor(action="drop"))
         .add_stage(ParquetWriter(str(tmp_path / "out"))))
    result = p.run(StreamingExecutor(progress=False))
    out = pd.read_parquet(tmp_path / "out")
    assert result.partitions > 1
    assert len(out) + sum(result.dropped.values()) == len(planted)
    assert sorted(out["text"]) == sorted(planted.loc[~planted["planted"].map(bool), "text"])
    planted_types = Counter(kind for spans in planted["planted"] for kind, _, _ in spans)
    assert result.counters == {f"pii_redactor.{k}": v for k, v in sorted(planted_types.items())}
    row = next(r for r in stage_rows(result, p.stages) if r.stage == "pii_redactor")
    assert row.counters == result.counters and row.dropped == result.dropped


def test_a_yaml_pipeline_names_pii_redactor_and_prints_its_counts(planted, tmp_path, cluster,
                                                                   capsys):
    assert stage_catalog()["PiiRedactor"].kind == "stage"
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": t} for t in planted["text"][:100]])
    pipeline = tmp_path / "pii.yaml"
    pipeline.write_text(textwrap.dedent(f"""
        reader: {{type: jsonl, path: {tmp_path / "in"}, blocksize: 8KiB}}
        stages:
          - PiiRedactor: {{action: mask, entities: [EMAIL_ADDRESS, URL]}}
        writer: {{type: parquet, path: {tmp_path / "out"}}}
        report: {tmp_path / "report.html"}
    """).lstrip())
    assert main(["run", str(pipeline), "--scheduler-address", cluster.scheduler_address]) == 0
    printed = capsys.readouterr().out
    emails = sum(k == "EMAIL_ADDRESS" for s in planted["planted"][:100] for k, _, _ in s)
    assert f"pii_redactor.EMAIL_ADDRESS = {emails}" in printed
    assert "counted" in (tmp_path / "report.html").read_text()
    out = pd.read_parquet(tmp_path / "out")
    assert not out["text"].str.contains("@example|https?://", regex=True).any()


# -- errors ------------------------------------------------------------------------------------

def test_hash_without_a_salt_is_refused():
    with pytest.raises(ValueError, match="salt"):
        PiiRedactor(action="hash")


def test_a_model_found_type_without_a_model_directory_is_refused():
    with pytest.raises(ValueError, match="nlp_model_dir"):
        PiiRedactor(entities=["PERSON"])


def test_a_missing_model_directory_names_the_path(tmp_path):
    with pytest.raises(ModelDirectoryError, match="nope"):
        PiiRedactor(entities=["PERSON"], nlp_model_dir=str(tmp_path / "nope"))


def test_a_missing_text_column_names_the_columns(planted):
    with pytest.raises(KeyError, match="body"):
        PiiRedactor(text_field="body")(dataset(planted))


# -- Presidio over a real spaCy model from a directory ----------------------------------------

NAMES = ["Alice Moreau", "Bjorn Lindqvist", "Chen Wei", "Dana Whitaker", "Emeka Obi",
         "Farah Haddad"]
CITIES = ["Lisbon", "Nairobi", "Osaka", "Toronto", "Krakow", "Quito"]
TEMPLATES = ["My name is {p} and I live in {c}.", "{p} moved to {c} last year.",
             "Yesterday {p} called from {c}."]

# A small network: the model only has to learn these few names and places.
_NER_CONFIG = """
[model]
@architectures = "spacy.TransitionBasedParser.v2"
state_type = "ner"
extra_state_tokens = false
hidden_width = 32
maxout_pieces = 2
use_upper = true
nO = null

[model.tok2vec]
@architectures = "spacy.HashEmbedCNN.v2"
pretrained_vectors = null
width = 32
depth = 2
embed_size = 1000
window_size = 1
maxout_pieces = 2
subword_features = true
"""


@pytest.fixture(scope="module")
def ner_model_dir(tmp_path_factory):
    """A spaCy NER pipeline trained here on a few sentences and saved to a directory.

    No English model can be had from PyPI here (only unofficial re-uploads), so the test
    trains its own: a real model, loaded by Presidio from disk like any other.
    """
    spacy = pytest.importorskip("spacy", reason="needs the pii extra (spacy)")
    pytest.importorskip("presidio_analyzer", reason="needs the pii extra (presidio-analyzer)")
    from spacy.training import Example
    from thinc.api import Config

    nlp = spacy.blank("en")
    ner = nlp.add_pipe("ner", config=Config().from_str(_NER_CONFIG))
    for label in ("PERSON", "GPE"):
        ner.add_label(label)
    examples = []
    for i, person in enumerate(NAMES):
        for j, template in enumerate(TEMPLATES):
            city = CITIES[(i + j) % len(CITIES)]
            text = template.format(p=person, c=city)
            entities = [(text.index(person), text.index(person) + len(person), "PERSON"),
                        (text.index(city), text.index(city) + len(city), "GPE")]
            examples.append(Example.from_dict(nlp.make_doc(text), {"entities": entities}))
    random.seed(0)
    spacy.util.fix_random_seed(0)
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(30):
        random.shuffle(examples)
        for batch in spacy.util.minibatch(examples, size=8):
            nlp.update(batch, sgd=optimizer, drop=0.0)
    path = tmp_path_factory.mktemp("ner") / "model"
    nlp.to_disk(path)
    return str(path)


@pytest.mark.slow
def test_presidio_finds_names_and_places_beside_the_patterns(ner_model_dir):
    # Held-out pairs: each sentence pairs a name and a city the model never saw together.
    rows = [(template.format(p=p, c=CITIES[(i + j + 3) % 6]), p, CITIES[(i + j + 3) % 6])
            for i, p in enumerate(NAMES) for j, template in enumerate(TEMPLATES)]
    # A document that is one email address: whatever the model marks in it overlaps the
    # address, and the checked pattern wins.
    emails = [f"{p.split()[0].lower()}@example.com" for _, p, _ in rows]
    texts = [t for t, _, _ in rows] + emails
    stage = PiiRedactor(entities=["PERSON", "LOCATION", "EMAIL_ADDRESS"],
                        nlp_model_dir=ner_model_dir)
    out = stage(dataset(pd.DataFrame({"text": texts}), 2))
    expected = [t.replace(p, "<PERSON>").replace(c, "<LOCATION>") for t, p, c in rows]
    assert out.df.compute()["text"].tolist() == expected + ["<EMAIL_ADDRESS>"] * len(emails)
    assert out.counters() == {"pii_redactor.EMAIL_ADDRESS": 18, "pii_redactor.LOCATION": 18,
                              "pii_redactor.PERSON": 18}


@pytest.mark.slow
def test_a_pickled_stage_travels_without_its_analyzer_and_loads_it_again(ner_model_dir):
    import pickle

    stage = PiiRedactor(entities=["PERSON"], nlp_model_dir=ner_model_dir, detect_only=True)
    unloaded = len(pickle.dumps(stage))
    stage.setup()
    shipped = pickle.dumps(stage)  # what a worker receives
    assert len(shipped) == unloaded  # no analyzer, no model in it
    copy = pickle.loads(shipped)
    frame = pd.DataFrame({"text": ["Chen Wei moved to Quito last year.", "nothing here"]})
    spans = copy.process(frame)["pii_spans"]
    assert [[(s["type"], s["start"], s["end"]) for s in v] for v in spans] == \
        [[("PERSON", 0, 8)], []]
