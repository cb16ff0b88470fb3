"""NVIDIA's safety classifiers on LlamaGuard: Aegis and the instruction data guard.

Both run ``meta-llama/LlamaGuard-7b`` (a Llama 2 7B causal language model) with NVIDIA's
Aegis LoRA adapter (PEFT):

- :class:`AegisClassifier` wraps each document in Aegis's safety-policy prompt and lets
  the model generate its verdict: ``"safe"``, one of the 13 risk categories ``"O1"`` to
  ``"O13"``, or ``"unknown"`` when the answer does not parse;
- :class:`InstructionDataGuardClassifier` reads the last layer's state at each
  document's last token and scores it with NVIDIA's instruction data guard (an MLP): the
  probability that the document (an instruction and its response) is poisoned.

What is supported: the published files from local directories (the LlamaGuard-7b
directory, the adapter's ``adapter_config.json`` and ``adapter_model.safetensors``, the
guard's ``config.json`` and ``model.safetensors``), on a GPU (bfloat16 weights, about
14 GB) or on a CPU (float32, about 28 GB of memory, and minutes per document: usable for
checks, not for corpora). Needs the ``safety`` extra (``peft``) beside ``models``.
LlamaGuard-7b is gated on the hub: download it with an account that has accepted its
licence.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from curator_dask.compat import nemo_keywords
from curator_dask.resources import Resources
from curator_dask.stages.models.backend import column_like
from curator_dask.stages.models.base import ModelStage
from curator_dask.stages.models.classifier import check_filter_by, keep_labels, labelled
from curator_dask.stages.models.loading import ModelBuilder
from curator_dask.stages.models.model_dir import (
    ModelDir,
    ModelDirectoryError,
    check_safetensors,
)
from curator_dask.stages.models.named import (
    whole_document,
)
from curator_dask.stages.models.published import (
    AEGIS_DEFENSIVE_ID,
    LLAMA_GUARD_ID,
    check_layout,
    download_hint,
    find_cached_snapshot,
    inspect_published_dir,
    missing_keys,
    missing_tensors,
    resolve_model_dir,
)

__all__ = [
    "AEGIS_LABELS",
    "AegisClassifier",
    "InstructionDataGuardClassifier",
    "aegis_prompt",
]

#: What Aegis may answer: "unknown" (no parsable verdict), "safe", or a risk category.
AEGIS_LABELS = ("unknown", "safe", *(f"O{i}" for i in range(1, 14)))
POISONED_FROM = 0.5
ADAPTER_FILES = ("adapter_model.safetensors", "adapter_model.bin")

#: Aegis's safety policy: the 13 risk categories its prompt lists, word for word as the
#: model was trained with them (from the Aegis model card).
UNSAFE_CATEGORIES = (
    'O1: Violence.\n'
    'Should not\n'
    '- Help people plan or engage in violence.\n'
    '- Encourage people to engage in violence.\n'
    '- Contain unpleasant vivid violent imagery or violent description that arouses discomfort in the reader.\n'
    'Can\n'
    '- Provide information on violence.\n'
    '- Discuss the topics of violence, and can discuss historical events involving violence.\n'
    'O2: Sexual.\n'
    'Should not\n'
    '- Engage in sexually explicit (i.e., erotic) conversations and should not encourage people to engage in sexual activities.\n'
    '- Engage or encourage sexual activity that is considered illegal.\n'
    'Can\n'
    '- Discuss topics related to sexuality and sexual education.\n'
    '- Provide general information regarding sexual activities.\n'
    '- Provide guidance on topics related to sexual health.\n'
    'O3: Criminal Planning/Confessions.\n'
    'Should not\n'
    '- Help people plan or engage in criminal activities like theft, kidnapping, or financial crimes, especially when the person indicates that they may act on the information provided to them.\n'
    '- Encourage people to engage in criminal activities or condone criminal behavior.\n'
    '- Have a confession of crime that was committed or will be committed in future.\n'
    'Can\n'
    '- Help people understand how crimes are committed, provided that the response is not so detailed that it could be used to provide a roadmap for future crimes.\n'
    '- Help people understand how systems work that are used to prevent crimes, provided those descriptions do not provide detailed information on how to defeat those systems.\n'
    'O4: Guns and Illegal Weapons.\n'
    'Should not\n'
    '- Assist in the planning or execution of firearm or illegal weapons crimes, especially when the person indicates that they may act on the information provided to them.\n'
    '- Encourage people to engage in firearm or illegal weapons crimes or condone such behavior.\n'
    '- Assist or encourage people to execute or own other illegal weapons for example biological agents, or chemical weapons, including instructions on how to create or use them.\n'
    'Can\n'
    '- Discuss firearms and the arguments for and against firearm ownership.\n'
    'O5: Controlled/Regulated Substances.\n'
    'Should not\n'
    '- Encourage or assist people in the trafficking, consumption, or use of regulated or controlled substances, including but not limited to illegal drugs, tobacco, alcohol, and cannabis.\n'
    '- Assist or encourage people to create such substances when it is illegal to do so.\n'
    'Can\n'
    '- Discuss the use of regulated or controlled substances, and can provide general information on those substances (ex: what their chemical composition is and what their effects are).\n'
    '- Provide information on how those substances are manufactured, provided that the information is not so detailed as to provide step-by-step instructions for their creation.\n'
    'O6: Suicide and Self Harm.\n'
    'Should not\n'
    '- Encourage people to harm themselves.\n'
    '- Romanticize or condone self-harm or suicide.\n'
    '- Provide information regarding the methods of suicide or self-harm.\n'
    '- Provide any information or advice, other than information regarding appropriate health resources, to people who express or imply that they wish to harm themselves.\n'
    '- Contain confessions or intent of self harm\n'
    'Can\n'
    '- Provide general information regarding self-harm and suicide (ex: statistics, the mental health challenges faced by those who take these actions).\n'
    'Should\n'
    '- Provide information regarding appropriate health resources to people who imply or express the desire to harm themselves.\n'
    'O7: Sexual (minor).\n'
    'Should not\n'
    '- Assist, engage or encourage intention to engage in sexual activity with an underage/minor.\n'
    '- Discuss or plan sexual acts, sharing of media of sexual nature, personal information or intention to meet in person for sexual activity with a minor.\n'
    '- Should not include discussion where private information is shared with underage minors for purposes of acting on them and taking actions that are sexual in nature including meeting or sharing media.\n'
    '- Should not discuss child abuse or engage, encourage, assist in sexual grooming/trafficking of children.\n'
    'Can\n'
    '- Provide information about sex education for use in schools.\n'
    'O8: Hate /identity hate.\n'
    'Should not\n'
    '- Express hateful, derogatory, or demeaning sentiments against people based on sensitive personal characteristics like their\n'
    'race, color, ethinicity, religion, national origin, sexual orientation, gender, gender identity, or disability or caste.\n'
    '- Encourage discrimination against people based on those characteristics and should not use slurs or create insults based on those characteristics.\n'
    '- Should not discuss prejudice towards a group classified as protected according to the law of Germany, UK, USA or any other country.\n'
    '- Should not contain slurs.\n'
    '- Should not contain text that is distasteful, offensive, or hateful that causes others to feel grief, anger, or fear.\n'
    'Can\n'
    '- Provide information on discrimination.\n'
    '- Discuss the topics of discrimination, and can discuss historical events involving discrimination.\n'
    '- Discuss neutral statements referring to group identity and  contextualized hate speech (that talks about hate but does not incite hate).\n'
    'O9: PII/Privacy.\n'
    'Should not\n'
    '- Include statements that either requests for PII information made in a conversation turn or mention information such as name, address,\n'
    'phone number or other social media handle.\n'
    "- Should not discuss or contain personally identifying information(PII) that isn't publicly available and can be used to determine the identity of the user such as\n"
    'date of birth, national ID, IP address, internet cookies, other telemetry information, physical characteristics, biometrics data, financial, health, belief or social data.\n'
    '- Should not include any statement that violates privacy laws set out by GDPR, Europe, CCPA, California,  Personal Information Protection law (PIPL) China and\n'
    "Children's Online Privacy Protection Act (COPPA), US and all country, state, and municipal level privacy law.\n"
    'Can\n'
    '- Provide information what PII means.\n'
    '- Provide information about privacy laws across different countries and regions.\n'
    'O10: Harassment.\n'
    'Should not\n'
    '- Have content that may be used to torment or annoy individuals in real life, or make harassment more likely to occur.\n'
    '- Engage in harassment, misconduct and unlawful discrimination\n'
    '- Single out an individual or marginalization and/or retaliation based on protected characteristics like Race, Color, Gender, Sex,\n'
    'Sexual orientation, Gender identity, and gender expression, National origin, Ethnicity, Disability (including being regarded as disabled),\n'
    'Religion, Age (40+), Pregnancy (including pregnancy, childbirth or related medical conditions), Genetic information, Military or veteran status, Citizenship status, Political activity, or affiliation,\n'
    '- Taking or requesting statutorily protected leave Body characteristics.\n'
    '- Promise to give a benefit, or a threat to retaliate or take an adverse action based on a response to harassment and misconduct.\n'
    '- Bullying.\n'
    '- Being derogatory and humiliating toward an individual but not necessarily protected characteristics under law.\n'
    '- Making rude or insulting comments, demeaning, and objectifying terms toward an individual.\n'
    'Can\n'
    '- Discuss negative impacts of harassment and bullying based on protected characteristics like race, color, gender, sex, nationality, within a contextualized setting.\n'
    '- Provide information on protected characteristics or referor cite material that describes what protected characteristics are.\n'
    '- Provide information or refer or cite material that informs what harassment is.\n'
    'O11: Threat.\n'
    'Should not\n'
    '- Discuss a communication of intent to inflict harm or loss on another person.\n'
    '- Should not contain discussion of intention of intimidation which  is a tactic used between conflicting parties to make the other timid or psychologically insecure for coercion or control.\n'
    '- Should not contain intention of knowingly putting another person in fear of bodily injury.\n'
    '- Should not assist or plan injury, physical or mental damage, act or instance of injury, or material  or any kind of loss to a person.\n'
    '- Should not contain threats that are forbidden by law as intent to obtain a monetary advantage or to compel a person to act against their will.\n'
    'Can\n'
    '- Provide information about threat is and the meaning of threat.\n'
    'O12: Profanity.\n'
    'Should not\n'
    '- Contain swear words, curse words, or other obscene or profane language\n'
    '- This includes offensive words used without any intention to act on them or without any explicit targetted recipient\n'
    'O13: Needs Caution.\n'
    'Should not\n'
    '- Discuss text that is toxic in nature, goes against social norms, unethical or immoral in general.\n'
    "- Contain text that cannot be considered 'safe' with the information provided.\n"
    'Can\n'
    "- Include text that is considered to be 'safe' and that does not belong to any of the unsafe categorie described above.\n"
)

#: Bumped whenever :func:`aegis_prompt` changes: it keys the token cache.
PROMPT_VERSION = "aegis-prompt-1"


def aegis_prompt(message: str, role: str = "User") -> str:
    """A document in Aegis's prompt, exactly as the model expects it (its indentation
    included).

    >>> aegis_prompt("Hello").splitlines()[0][:40]
    '[INST] Task: Check if there is unsafe co'
    """
    return (f"[INST] Task: Check if there is unsafe content in '{role}' messages in "
            "conversations according our safety policy with the below categories.\n\n"
            "    <BEGIN UNSAFE CONTENT CATEGORIES>\n"
            f"    {UNSAFE_CATEGORIES}\n"
            "    <END UNSAFE CONTENT CATEGORIES>\n\n"
            "    <BEGIN CONVERSATION>\n\n"
            f"    {role}: {message}\n\n"
            "<END CONVERSATION>\n\n"
            f"    Provide your safety assessment for {role} in the above conversation:\n"
            "    - First line must read 'safe' or 'unsafe'.\n"
            "    - If unsafe, a second line must include a comma-separated list of "
            "violated categories. [/INST]")


def _resolve_llama_guard(owner: str, base_model_path, cache_dir) -> ModelDir:
    path = base_model_path
    if path is None:
        path = find_cached_snapshot(LLAMA_GUARD_ID, cache_dir)
        if path is None:
            raise ModelDirectoryError(
                f"{owner} runs on {LLAMA_GUARD_ID}: pass base_model_path= its local "
                "directory (config.json, weights, tokenizer files); it is not in the local "
                f"Hugging Face cache either. It is gated: fetch it with "
                f"`{download_hint(LLAMA_GUARD_ID)}` from an account that accepted its licence.")
    return inspect_published_dir(owner, os.fspath(path), need_model_type=True)


def _check_adapter(owner: str, path: str, model_id: str) -> str:
    """The adapter directory's absolute path, after checking its files."""
    path = os.path.abspath(path)
    problems = []
    try:
        with open(os.path.join(path, "adapter_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        if not isinstance(config, dict) or "peft_type" not in config:
            problems.append("adapter_config.json has no peft_type")
    except (OSError, ValueError) as err:
        problems.append(f"no readable adapter_config.json ({err})")
    weights = next((name for name in ADAPTER_FILES
                    if os.path.isfile(os.path.join(path, name))), None)
    if weights is None:
        problems.append(f"no adapter weights (one of {', '.join(ADAPTER_FILES)})")
    elif weights.endswith(".safetensors"):
        check_safetensors(os.path.join(path, weights), problems)
    if problems:
        listing = ", ".join(sorted(os.listdir(path))) if os.path.isdir(path) else "nothing"
        raise ModelDirectoryError(
            f"{owner}: {path!r} is not a local copy of the adapter {model_id}: "
            + "; ".join(problems) + f". It holds: {listing}. Download it with "
            f"`{download_hint(model_id)}`.")
    return path


class _LlamaGuardStage(ModelStage):
    """What both safety classifiers share: LlamaGuard with an adapter, left padding."""

    padding_side = "left"
    model_kind = "causal-lm with a PEFT adapter"

    def _resolve(self, model_path, adapter_id: str, base_model_path, cache_dir) -> ModelDir:
        owner = type(self).__name__
        self.adapter_path = _check_adapter(
            owner, resolve_model_dir(owner, model_path, cache_dir, model_id=adapter_id),
            adapter_id)
        return _resolve_llama_guard(owner, base_model_path, cache_dir)

    @property
    def pad_token_id(self) -> int:
        """LlamaGuard has no padding token: its unknown token pads, as in its publisher's
        code (padding is masked)."""
        unknown = getattr(self._tokenizer, "unk_token_id", None)
        return int(unknown) if isinstance(unknown, int) else 0


class AegisClassifier(_LlamaGuardStage):
    """Label each document safe or by its risk category with Aegis (a safety LLM).

    Model: ``nvidia/Aegis-AI-Content-Safety-LlamaGuard-Defensive-1.0`` (or the
    ``...-Permissive-1.0`` variant), a LoRA adapter on ``meta-llama/LlamaGuard-7b`` (Llama
    2 Community License). Each document, cut to ``max_chars``, is put in Aegis's policy
    prompt (:func:`aegis_prompt`); the model generates up to ``max_new_tokens`` tokens,
    whose first line is "safe" or "unsafe" and second the category. Adds ``pred_column``
    with one of :data:`AEGIS_LABELS` and, with ``keep_raw_pred``, the generated text.
    Generation is slow (a 7B model, one token at a time): run it on GPU workers.

    Parameters
    ----------
    model_path : str or path-like, optional
        Local copy of the adapter (``adapter_config.json``, ``adapter_model.safetensors``).
        Default: ``aegis_variant``'s snapshot in the local Hugging Face cache.
    base_model_path : str or path-like, optional
        Local copy of ``meta-llama/LlamaGuard-7b`` (default: the local Hugging Face cache).
    aegis_variant : str, default "nvidia/Aegis-AI-Content-Safety-LlamaGuard-Defensive-1.0"
        Which adapter to find in the cache when ``model_path`` is not given.
    cache_dir : str or path-like, optional
    filter_by : sequence of str, optional
        Labels to keep; the others are counted as ``"<name>.<label>"``.
    text_field : str, default "text"
    pred_column : str, default "aegis_pred"
    raw_pred_column : str, default "_aegis_raw_pred"
    keep_raw_pred : bool, default False
        Keep the generated text in ``raw_pred_column`` (to see why "unknown" appears).
    max_chars : int or None, default 6000
    max_length : int, default 4096
        Tokens of each prompt read (the policy itself is about 1,300).
    max_new_tokens : int, default 100
    model_inference_batch_size : int, default 64
    max_tokens_per_batch, device, dtype, name, resources
        See :class:`~curator_dask.stages.models.base.ModelStage`. ``dtype="auto"`` loads
        the weights in bfloat16 on a GPU (float32 on a CPU).

    Notes
    -----
    NeMo Curator's ``label_field``, ``raw_output_field``, ``keep_raw_output`` and
    ``batch_size`` work and warn; ``token``/``hf_token`` are ignored (nothing is
    downloaded).
    """

    text_preparation = PROMPT_VERSION
    default_name = "aegis_classifier"

    @nemo_keywords()
    def __init__(self, model_path: str | os.PathLike | None = None, *,
                 base_model_path: str | os.PathLike | None = None,
                 aegis_variant: str = AEGIS_DEFENSIVE_ID,
                 cache_dir: str | os.PathLike | None = None,
                 filter_by: Sequence[str] | None = None, text_field: str = "text",
                 pred_column: str = "aegis_pred", raw_pred_column: str = "_aegis_raw_pred",
                 keep_raw_pred: bool = False, max_chars: int | None = 6000,
                 max_length: int = 4096, max_new_tokens: int = 100,
                 model_inference_batch_size: int = 64,
                 max_tokens_per_batch: int | None = None, device: str = "auto",
                 dtype: str = "auto", name: str | None = None,
                 resources: Resources | None = None):
        self.aegis_variant = aegis_variant
        self.base_model_path = base_model_path
        self.cache_dir = cache_dir
        super().__init__(model_path, text_field=text_field,
                         model_inference_batch_size=model_inference_batch_size,
                         max_tokens_per_batch=max_tokens_per_batch,
                         max_chars=whole_document(max_chars), max_length=max_length,
                         device=device, dtype=dtype, name=name,
                         resources=resources)
        self.max_new_tokens = int(max_new_tokens)
        self.pred_column = pred_column
        self.raw_pred_column = raw_pred_column
        self.keep_raw_pred = bool(keep_raw_pred)
        self.filter_by = check_filter_by(self.name, filter_by, AEGIS_LABELS)
        self.output_columns = {pred_column: "str"}
        if self.keep_raw_pred:
            self.output_columns[raw_pred_column] = "str"

    def inspect(self, model_path, pretokenized: bool) -> ModelDir:
        return self._resolve(model_path, self.aegis_variant, self.base_model_path,
                             self.cache_dir)

    def model_builder(self) -> ModelBuilder:
        return ModelBuilder("curator_dask.stages.models._heads:build_safety_model",
                            (("adapter", self.adapter_path),), half_weights=True)

    def prepare_texts(self, texts: list[str]) -> list[str]:
        return [aegis_prompt(text) for text in texts]

    def forward_batch(self, input_ids, attention_mask):
        return self._model.model.generate(input_ids, attention_mask, self.max_new_tokens,
                                          self.pad_token_id)

    def decode(self, generated: np.ndarray) -> list[str]:
        """The text of each row of generated ids (``-1`` past the end)."""
        self._acquire_tokenizer()
        rows = [row[row >= 0].tolist() for row in generated]
        return self._tokenizer.batch_decode(rows, skip_special_tokens=True)

    def attach(self, df, generated):
        if generated is None:
            generated = np.empty((0, self.max_new_tokens), dtype=np.int64)
        answers = pd.Series(self.decode(generated), dtype=object)
        labels = parse_verdicts(answers)
        columns = {self.pred_column: column_like(labels, df, "str")}
        if self.keep_raw_pred:
            columns[self.raw_pred_column] = column_like(answers.to_numpy(), df, "str")
        df = labelled(df.assign(**columns), self.name, self.pred_column, labels)
        return keep_labels(df, self.name, labels, self.filter_by)


def parse_verdicts(answers: pd.Series) -> np.ndarray:
    """Aegis's answers as labels: "safe", the category on the line after "unsafe", or
    "unknown" (no verdict, or a category that is not one of O1 to O13).

    >>> parse_verdicts(pd.Series([" safe", "unsafe\\nO3", "unsafe\\nO3,O5", "unsafe", "maybe"]))
    array(['safe', 'O3', 'unknown', 'unknown', 'unknown'], dtype=object)
    """
    lines = answers.astype(str).str.split("\\n", n=2, expand=True)
    first = lines[0].str.strip()
    second = (lines[1].fillna("").str.strip() if lines.shape[1] > 1
              else pd.Series("", index=answers.index))
    category = second.isin(AEGIS_LABELS[2:])
    return np.where(first == "safe", "safe",
                    np.where((first == "unsafe") & category, second, "unknown")).astype(object)


class InstructionDataGuardClassifier(_LlamaGuardStage):
    """Score the chance that each instruction-response document is poisoned.

    Model: ``nvidia/instruction-data-guard`` (NVIDIA Open Model License), an MLP over the
    last hidden state of Aegis (``meta-llama/LlamaGuard-7b`` with the Defensive adapter)
    at each document's last token. Documents are read as they are (no prompt), e.g.
    ``"Instruction: ... Input: ... Response: ..."``. Adds ``prob_column`` (float32, 0 to
    1) and ``pred_column`` (``True`` from 0.5). Expect false positives: review what it
    flags rather than dropping it blindly.

    Parameters
    ----------
    model_path : str or path-like, optional
        Local copy of the guard (``config.json`` with ``input_dim``, ``model.safetensors``);
        default: the local Hugging Face cache.
    adapter_path : str or path-like, optional
        Local copy of ``nvidia/Aegis-AI-Content-Safety-LlamaGuard-Defensive-1.0``.
    base_model_path : str or path-like, optional
        Local copy of ``meta-llama/LlamaGuard-7b``.
    cache_dir : str or path-like, optional
    filter_by : sequence of bool, optional
        ``[False]`` keeps the documents not flagged; the others are counted as
        ``"<name>.True"``.
    text_field : str, default "text"
    pred_column : str, default "is_poisoned"
    prob_column : str, default "instruction_data_guard_poisoning_score"
    max_chars : int or None, default None
    max_length : int, default 4096
    model_inference_batch_size : int, default 64
    max_tokens_per_batch, device, dtype, name, resources
        See :class:`~curator_dask.stages.models.base.ModelStage`.
    """

    default_name = "instruction_data_guard_classifier"

    @nemo_keywords()
    def __init__(self, model_path: str | os.PathLike | None = None, *,
                 adapter_path: str | os.PathLike | None = None,
                 base_model_path: str | os.PathLike | None = None,
                 cache_dir: str | os.PathLike | None = None,
                 filter_by: Sequence[bool] | None = None, text_field: str = "text",
                 pred_column: str = "is_poisoned",
                 prob_column: str = "instruction_data_guard_poisoning_score",
                 max_chars: int | None = None, max_length: int = 4096,
                 model_inference_batch_size: int = 64,
                 max_tokens_per_batch: int | None = None, device: str = "auto",
                 dtype: str = "auto", name: str | None = None,
                 resources: Resources | None = None):
        self.base_model_path = base_model_path
        self.cache_dir = cache_dir
        owner = type(self).__name__
        guard = inspect_published_dir(owner, resolve_model_dir(owner, model_path, cache_dir),
                                      need_model_type=False, need_tokenizer=False)
        check_layout(owner, guard, missing_keys(guard.config, ("input_dim",))
                     + missing_tensors(guard, ("input_layer.", "hidden_layer_2.")))
        self.guard_path = guard.path
        super().__init__(adapter_path, text_field=text_field,
                         model_inference_batch_size=model_inference_batch_size,
                         max_tokens_per_batch=max_tokens_per_batch,
                         max_chars=whole_document(max_chars), max_length=max_length,
                         device=device, dtype=dtype, name=name,
                         resources=resources)
        hidden = self.model_dir.hidden_size
        if hidden is not None and int(guard.config["input_dim"]) != hidden:
            raise ModelDirectoryError(
                f"{owner}: the guard in {guard.path} reads {guard.config['input_dim']} "
                f"numbers but the language model in {self.model_dir.path} has {hidden}")
        self.pred_column = pred_column
        self.prob_column = prob_column
        self.filter_by = check_filter_by(self.name, filter_by, (False, True))
        self.output_columns = {prob_column: "float32", pred_column: "bool"}

    def inspect(self, model_path, pretokenized: bool) -> ModelDir:
        return self._resolve(model_path, AEGIS_DEFENSIVE_ID, self.base_model_path,
                             self.cache_dir)

    def model_builder(self) -> ModelBuilder:
        return ModelBuilder("curator_dask.stages.models._heads:build_safety_model",
                            (("adapter", self.adapter_path), ("guard", self.guard_path)),
                            half_weights=True)

    def forward_batch(self, input_ids, attention_mask):
        return self._model.model.guard_scores(input_ids, attention_mask)

    def attach(self, df, scores):
        if scores is None:
            scores = np.empty(0, dtype=np.float32)
        scores = np.asarray(scores, dtype=np.float32)
        flagged = scores >= POISONED_FROM
        df = df.assign(**{self.prob_column: column_like(scores, df, "values"),
                          self.pred_column: column_like(flagged, df, "bool")})
        df = labelled(df, self.name, self.pred_column, flagged)
        return keep_labels(df, self.name, flagged, self.filter_by)
