"""TaskDecontamination: planted evaluation text cut out exactly as a plain per-document
reference says, near misses kept, counts that add up, deterministic over runs and
partitionings, hash collisions harmless, and evaluation sets read from local files."""

from __future__ import annotations

import functools
import json
import string
import textwrap
from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator_dask import DocumentDataset, Pipeline
from curator_dask.cli.main import main
from curator_dask.cli.registry import stage_catalog
from curator_dask.executors import StreamingExecutor
from curator_dask.stages.decontamination import (
    EvalTask,
    TaskDecontamination,
    TaskFileError,
    build_index,
    load_task_texts,
)
from curator_dask.stages.decontamination import stage as decontamination_stage
from curator_dask.stages.decontamination.index import words_of
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter
from tests.conftest import write_jsonl

# -- a plain reference, one document at a time --------------------------------------------

_STRIP = str.maketrans("", "", string.punctuation)


def ref_words(text: str) -> list[tuple[str, int, int]]:
    """Normalised words with their character spans: lowercase, punctuation removed,
    ``str.split()`` words, empty ones left out."""
    out, pos = [], 0
    for raw in text.split():
        start = text.index(raw, pos)
        pos = start + len(raw)
        word = raw.lower().translate(_STRIP)
        if word:
            out.append((word, start, pos))
    return out


def ref_ngrams(tasks: dict[str, list[str]], max_n=13, min_n=8) -> dict[tuple, str]:
    """Task n-gram -> first task that has it (NeMo Curator's rule)."""
    out: dict[tuple, str] = {}
    for name, texts in tasks.items():
        for text in texts:
            words = [w for w, _, _ in ref_words(text)]
            if len(words) < min_n:
                continue
            grams = [tuple(words)] if len(words) < max_n else \
                [tuple(words[i:i + max_n]) for i in range(len(words) - max_n + 1)]
            for gram in grams:
                out.setdefault(gram, name)
    return out


def ref_matches(text, ngrams, sizes, enabled=None):
    """At each word position, the longest (enabled) task n-gram starting there."""
    words = ref_words(text)
    found = []
    for p in range(len(words)):
        for n in sizes:
            gram = tuple(w for w, _, _ in words[p:p + n])
            if len(gram) == n and gram in ngrams and (enabled is None or gram in enabled):
                found.append((gram, words[p][1], words[p + n - 1][2]))
                break
    return found


def ref_cut(text, matches, margin, min_length, max_splits) -> list[str]:
    pieces, c, m = [], 0, 0
    while True:
        while m < len(matches) and matches[m][1] < c:
            m += 1
        if m == len(matches):
            pieces.append(text[c:])
            break
        _, start, end = matches[m]
        pos = start - c - margin
        if pos > 0:
            while pos > 0 and text[c + pos] not in ".!?":
                pos -= 1
            if pos > 0 and len(text[c:c + pos + 1]) > min_length:
                pieces.append(text[c:c + pos + 1])
        rest = text[c:]
        pos = end - c + margin
        while pos < len(rest) and rest[pos] not in ".!?":
            pos += 1
        if len(pieces) > max_splits or pos + 1 >= len(rest) or len(rest[pos + 1:]) <= min_length:
            break
        c += pos + 1
    return pieces


def reference(texts, tasks, *, max_matches=10, margin=200, min_length=200, max_splits=10):
    """(output texts, drop reasons, counters) of TaskDecontamination, one document at a time."""
    ngrams = ref_ngrams(tasks)
    sizes = sorted({len(g) for g in ngrams}, reverse=True)
    enabled = None
    if max_matches is not None:
        counts = Counter(g for t in texts for g, _, _ in ref_matches(t, ngrams, sizes))
        enabled = {g for g in ngrams if counts[g] <= max_matches}
    out, dropped, counters = [], Counter(), Counter()
    name = "task_decontamination"
    for text in texts:
        matches = ref_matches(text, ngrams, sizes, enabled)
        if not matches:
            out.append(text)
            continue
        for task in {ngrams[g] for g, _, _ in matches}:
            counters[f"{name}.{task}.documents"] += 1
        for g, _, _ in matches:
            counters[f"{name}.{ngrams[g]}.ngrams"] += 1
        pieces = ref_cut(text, matches, margin, min_length, max_splits)
        first = ngrams[matches[0][0]]
        if not pieces:
            dropped[f"{name}.{first}.no_piece_left"] += 1
        elif len(pieces) > max_splits:
            dropped[f"{name}.{first}.too_many_splits"] += 1
        else:
            counters[f"{name}.split_documents"] += 1
            counters[f"{name}.pieces"] += len(pieces)
            out += pieces
    return out, dict(sorted(dropped.items())), dict(sorted(counters.items()))


# -- a corpus with planted contamination ------------------------------------------------------

VOCAB_EXTRA = ["café", "naïve", "日本語", "😀", "Ωmega", "straße", "e\u0301te\u0301", "don't",
               "(see", "below)", "U.S.", "well-known", "3.14", "—"]


def make_corpus(seed: int, n_docs: int = 160):
    """Evaluation tasks (texts of 5 to 40 words) and documents of 40 to 600 words, some
    holding task passages: whole, 13 or more words of them, or 12 (a near miss)."""
    rng = np.random.default_rng(seed)
    letters = list("abcdefghijklmnopqrstuvwxyz")
    vocab = ["".join(rng.choice(letters, size=rng.integers(2, 9))) for _ in range(400)]
    vocab += VOCAB_EXTRA

    def words(n):
        out = [str(w) for w in rng.choice(vocab, size=n)]
        for i in range(0, n, int(rng.integers(6, 14))):
            out[i] = out[i] + str(rng.choice([".", "!", "?", ",", ""]))
        if n and rng.random() < 0.3:
            out[0] = out[0].capitalize()
        return out

    tasks = {name: [" ".join(words(int(rng.integers(5, 41)))) for _ in range(25)]
             for name in ("arc", "gsm8k", "squad")}
    task_words = [(name, t.split()) for name, texts in tasks.items() for t in texts]
    texts, planted = [], []
    for _ in range(n_docs):
        body = words(int(rng.integers(40, 600)))
        kinds = []
        for _ in range(int(rng.choice([0, 0, 1, 1, 2, 4, 14]))):
            name, task = task_words[int(rng.integers(len(task_words)))]
            kind = str(rng.choice(["whole", "long", "near"]))
            if kind == "near" and len(task) > 12:
                start = int(rng.integers(0, len(task) - 11))
                passage = task[start:start + 12]
            elif kind == "long" and len(task) >= 13:
                n = int(rng.integers(13, len(task) + 1))
                start = int(rng.integers(0, len(task) - n + 1))
                passage = task[start:start + n]
            else:
                kind, passage = "whole", task
            at = int(rng.integers(0, len(body) + 1))
            body[at:at] = passage
            kinds.append((kind, name, " ".join(passage)))
        texts.append(" ".join(body))
        planted.append(kinds)
    return tasks, texts, planted


def write_tasks(tasks: dict[str, list[str]], root) -> list[EvalTask]:
    """Each task as a JSONL file of {"question": ..., "answer": ...} (texts alternate)."""
    out = []
    for name, texts in tasks.items():
        path = root / f"{name}.jsonl"
        rows = [{"question": q, "answer": a}
                for q, a in zip(texts[::2], texts[1::2], strict=False)]
        if len(texts) % 2:
            rows.append({"question": texts[-1], "answer": ""})
        write_jsonl(path, rows)
        out.append(EvalTask(str(path), fields=("question", "answer")))
    return out


def run(texts, tasks, npartitions=3, **options):
    ds = DocumentDataset.from_pandas(pd.DataFrame({"text": pd.array(texts, dtype="str")}),
                                     npartitions=npartitions)
    out = TaskDecontamination(tasks, **options)(ds)
    return out.df.compute()["text"].tolist(), out.dropped_counts(), out.counters()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    tasks, texts, planted = make_corpus(seed=5)
    files = write_tasks(tasks, tmp_path_factory.mktemp("evals"))
    return tasks, texts, planted, files


# -- behaviour ---------------------------------------------------------------------------------

@pytest.mark.parametrize("options", [
    {},
    {"max_matches": None},
    {"max_matches": 1, "remove_char_each_side": 30, "min_document_length": 50},
    {"remove_char_each_side": 0, "min_document_length": 0, "max_splits": 3},
])
@pytest.mark.slow
def test_output_equals_the_per_document_reference(corpus, options):
    tasks, texts, _, files = corpus
    ref_options = {"max_matches": options.get("max_matches", 10),
                   "margin": options.get("remove_char_each_side", 200),
                   "min_length": options.get("min_document_length", 200),
                   "max_splits": options.get("max_splits", 10)}
    expected = reference(texts, tasks, **ref_options)
    assert run(texts, files, **options) == expected
    assert expected[2]["task_decontamination.split_documents"] > 0
    if not options:
        assert expected[1]  # some documents are cut into too many pieces


def test_planted_passages_are_cut_out_and_near_misses_are_kept(corpus):
    tasks, texts, planted, files = corpus
    out, _, _ = run(texts, files, max_matches=None, remove_char_each_side=0,
                    min_document_length=0)
    joined = "\n".join(out)
    normalised = " ".join(w for w, _, _ in ref_words(joined))
    ngrams = ref_ngrams(tasks)
    leaked = [p for kinds in planted for kind, _, p in kinds if kind != "near"
              and tuple(w for w, _, _ in ref_words(p)) in ngrams]
    assert leaked  # passages long enough to hold a task n-gram were planted
    for passage in leaked:
        assert " ".join(w for w, _, _ in ref_words(passage)) not in normalised
    near_only = [t for t, kinds in zip(texts, planted, strict=True)
                 if kinds and all(kind == "near" for kind, _, _ in kinds)]
    assert near_only
    for text in near_only:  # 12 of 13 words: not a match, the document is kept as it was
        assert text in out


def test_a_twelve_word_near_miss_is_kept_byte_for_byte(tmp_path):
    question = ("one two three four five six seven eight nine ten eleven twelve thirteen "
                "fourteen")
    (tmp_path / "q.txt").write_text(question + "\n")
    filler = "Some other words in a sentence. " * 30
    near = filler + " ".join(question.split()[:12]) + ". " + filler
    hit = filler + " ".join(question.split()[1:]) + ". " + filler
    out, dropped, counters = run([near, hit], [EvalTask(str(tmp_path / "q.txt"))], 1)
    assert out[0] == near and len(out) == 3 and not any("thirteen" in t for t in out[1:])
    assert counters["task_decontamination.q.ngrams"] == 1 and dropped == {}


def test_same_output_over_runs_and_partitionings(corpus):
    _, texts, _, files = corpus
    first = run(texts, files, npartitions=1)
    for npartitions in (1, 4, 9):
        assert run(texts, files, npartitions=npartitions) == first


def test_documents_out_are_documents_in_less_drops_and_split_documents_plus_pieces(corpus):
    _, texts, _, files = corpus
    out, dropped, counters = run(texts, files)
    name = "task_decontamination"
    assert len(out) == (len(texts) - sum(dropped.values()) - counters[f"{name}.split_documents"]
                        + counters[f"{name}.pieces"])
    for task in ("arc", "gsm8k", "squad"):
        assert counters[f"{name}.{task}.documents"] > 0


def test_ngrams_found_more_than_max_matches_times_are_kept(tmp_path):
    passage = " ".join(f"word{i}" for i in range(13))
    (tmp_path / "t.txt").write_text(passage + "\n")
    filler = "Some other words in a sentence. " * 30
    texts = [f"{filler}{passage}. {filler}"] * 4
    task = [EvalTask(str(tmp_path / "t.txt"))]
    kept, _, _ = run(texts, task, max_matches=3)
    assert kept == texts
    cut, _, _ = run(texts, task, max_matches=4)
    assert len(cut) == 8 and not any(passage in t for t in cut)


@pytest.mark.slow
def test_hash_collisions_cost_comparisons_not_false_matches(corpus, monkeypatch):
    _, texts, _, files = corpus
    exact = build_index(files)
    # Four key bits: every window of a task n-gram's length collides with some n-gram.
    four_bits = functools.partial(build_index, mask=np.uint64(0xF))
    colliding = four_bits(files)
    assert len(np.unique(colliding.keys)) <= 16 and len(colliding) == len(exact)
    words = words_of(pa.array(texts, pa.large_string()))
    found = [np.asarray(a).tolist() for a in exact.find(words)[:3]]
    assert [np.asarray(a).tolist() for a in colliding.find(words)[:3]] == found
    # The stage builds its index with the colliding keys too.
    monkeypatch.setattr(decontamination_stage, "build_index", four_bits)
    stage = TaskDecontamination(files)
    assert len(np.unique(stage.index.keys)) <= 16
    out = stage(DocumentDataset.from_pandas(pd.DataFrame({"text": texts}), npartitions=2))
    assert out.df.compute()["text"].tolist() == run(texts, files)[0]


def test_the_index_is_counted_at_its_arrays_size(corpus):
    """What distributed counts for the index a task takes: its arrays (it had counted
    the few bytes of the object around them)."""
    from dask.sizeof import sizeof

    index = build_index(corpus[3])
    arrays = sum(a.nbytes for a in (index.tokens, index.keys, index.starts, index.lengths,
                                    index.task_of, index.directory, index.enabled,
                                    index.key_filter)) + index.vocabulary.nbytes
    assert arrays > 1000
    assert arrays <= sizeof(index) <= arrays + 1000


def test_words_are_normalised_as_nemo_curator_does():
    w = words_of(pa.array(["It's (ALMOST) 3.14 — naïve\tCafé;\nend", None, "..."]))
    assert w.values.to_pylist() == ["its", "almost", "314", "—", "naïve", "café", "end"]
    assert w.doc_offsets.tolist() == [0, 7, 7, 7]


def test_matches_are_found_beside_emoji_and_right_to_left_text(tmp_path):
    question = " ".join(f"alpha{i}" for i in range(13))
    (tmp_path / "q.txt").write_text(question + "\n")
    sentence = "😀 שלום مرحبا e\u0301te\u0301 日本語 sentence. "
    text = sentence * 12 + question + ". " + sentence * 12
    out, _, _ = run([text], [EvalTask(str(tmp_path / "q.txt"))], 1,
                    remove_char_each_side=10, min_document_length=20)
    tasks = {"q": [question]}
    assert out == reference([text], tasks, margin=10, min_length=20)[0]
    assert len(out) == 2 and all(t.startswith(("😀", " 😀")) for t in out)


# -- evaluation sets from files ----------------------------------------------------------------

def test_tasks_are_read_from_jsonl_parquet_text_and_directories(tmp_path):
    write_jsonl(tmp_path / "qa.jsonl", [
        {"question": "Q1?", "answers": {"text": ["A1", "A1b"]}, "choices": ["x", "y"]},
        {"question": "Q2?", "answers": {"text": []}, "choices": ["z"]}])
    pq.write_table(pa.table({"prompt": ["P1", "P2"], "answer": ["R1", None]}),
                   tmp_path / "qa.parquet")
    (tmp_path / "lines.txt").write_text("first line\n\nsecond line\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "b.txt").write_text("b\n")
    (tmp_path / "dir" / "a.txt").write_text("a\n")
    assert load_task_texts(EvalTask(str(tmp_path / "qa.jsonl"),
                                    fields=["question", "answers.text", "choices"])) == \
        ["Q1?", "A1", "A1b", "x", "y", "Q2?", "z"]
    assert load_task_texts(EvalTask(str(tmp_path / "qa.parquet"), fields=["prompt", "answer"])) \
        == ["P1", "R1", "P2"]
    assert load_task_texts(EvalTask(str(tmp_path / "lines.txt"))) == ["first line",
                                                                      "second line"]
    assert load_task_texts(EvalTask(str(tmp_path / "dir"))) == ["a", "b"]
    assert EvalTask(str(tmp_path / "qa.parquet")).name == "qa"


def test_a_missing_field_names_the_file_the_line_and_the_fix(tmp_path):
    write_jsonl(tmp_path / "qa.jsonl", [{"question": "Q?", "answer": "A"}, {"question": "Q?"}])
    with pytest.raises(TaskFileError, match=r"qa.jsonl, line 2: no field 'answer'.*fields="):
        load_task_texts(EvalTask(str(tmp_path / "qa.jsonl"), fields=["question", "answer"]))


def test_a_malformed_line_and_a_missing_file_are_named(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{"text": \n')
    with pytest.raises(TaskFileError, match=r"bad\.jsonl, line 2: malformed JSON"):
        load_task_texts(EvalTask(str(tmp_path / "bad.jsonl")))
    with pytest.raises(TaskFileError, match="does not exist"):
        TaskDecontamination(str(tmp_path / "nope.jsonl")).index  # noqa: B018


def test_tasks_need_distinct_names(tmp_path):
    with pytest.raises(ValueError, match="repeat"):
        TaskDecontamination([str(tmp_path / "a" / "x.jsonl"), str(tmp_path / "b" / "x.jsonl")])


# -- in pipelines ----------------------------------------------------------------------------

@pytest.mark.slow
def test_a_streaming_run_reports_per_task_counts_that_add_up(corpus, tmp_path, client):
    tasks, texts, _, files = corpus
    write_jsonl(tmp_path / "in" / "docs.jsonl", [{"text": t} for t in texts])
    p = (Pipeline("decontaminate")
         .add_stage(JsonlReader(str(tmp_path / "in"), blocksize="64KiB"))
         .add_stage(TaskDecontamination(files))
         .add_stage(ParquetWriter(str(tmp_path / "out"))))
    result = p.run(StreamingExecutor(cache_path=str(tmp_path / "cache"), progress=False))
    out = pd.read_parquet(tmp_path / "out")
    expected, dropped, counters = reference(texts, tasks)
    assert result.partitions > 1
    assert out["text"].tolist() == expected
    assert result.dropped == dropped and result.counters == counters
    assert p.stages[1].last_run.ngrams == len(build_index(files))


def test_a_yaml_pipeline_names_task_decontamination(corpus, tmp_path, capsys):
    tasks, texts, _, files = corpus
    assert stage_catalog()["TaskDecontamination"].kind == "dedup"
    write_jsonl(tmp_path / "in" / "docs.jsonl", [{"text": t} for t in texts[:120]])
    task_list = json.dumps([{"path": f.path, "fields": list(f.fields)} for f in files])
    pipeline = tmp_path / "decont.yaml"
    pipeline.write_text(textwrap.dedent(f"""
        reader: {{type: jsonl, path: {tmp_path / "in"}, blocksize: 64KiB}}
        stages:
          - TaskDecontamination:
              tasks: {task_list}
              max_matches: null
        writer: {{type: parquet, path: {tmp_path / "out"}}}
        executor: {{type: local}}
    """).lstrip())
    assert main(["run", str(pipeline)]) == 0
    printed = capsys.readouterr().out
    expected, dropped, counters = reference(texts[:120], tasks, max_matches=None)
    assert pd.read_parquet(tmp_path / "out")["text"].tolist() == expected
    for reason, count in dropped.items():
        assert f"{reason} = {count}" in printed
    assert f"task_decontamination.pieces = {counters['task_decontamination.pieces']}" in printed
