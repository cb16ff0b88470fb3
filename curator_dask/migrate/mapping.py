"""Where NeMo Curator's module paths, names and keywords live in curator-dask: one table.

The codemod (``curator-dask migrate``), the errors for NeMo-shaped module paths under
``curator_dask`` and the keyword handling of every public constructor read this module;
the table of module paths in ``docs/migrating.md`` is :func:`module_table` (a test
compares them). It covers the paths and names of NeMo Curator 0.x (the Dask era:
``nemo_curator.modules``, ``.filters``, ``.utils.distributed_utils``, ...) and 1.x (the
Ray era: ``nemo_curator.stages.text...``, ``nemo_curator.core.client``, ...).

Three tables:

- :data:`MODULES`: a NeMo Curator module path -> the curator-dask module that holds most
  of it, and the names users import from it;
- :data:`NAMES`: a NeMo Curator name -> its :class:`Counterpart` here (a dotted path),
  or the reason there is none and what to write;
- :data:`KEYWORDS`: a curator-dask callable (dotted path, ``.__init__`` for a
  constructor) -> NeMo Curator keyword -> :class:`Renamed`, :class:`Ignored` or
  :class:`Refused`.

What an entry says is :mod:`curator_dask.migrate.rules`; the named classifiers' entries
are kept in :mod:`curator_dask.migrate.classifiers` and merged in here.

Examples
--------
>>> NAMES["ExactDuplicates"].ours
'curator_dask.dedup.ExactDuplicates'
>>> MODULES["nemo_curator.modules"].ours
'curator_dask.dedup'
>>> KEYWORDS["curator_dask.stages.io_stages.JsonlReader.__init__"]["file_paths"]
Renamed(ours='path')
>>> nemo_module_for("curator_dask.stages.text.io.reader")
'nemo_curator.stages.text.io.reader'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from curator_dask.migrate.classifiers import CLASSIFIER_KEYWORDS, CLASSIFIER_NAMES, CLASSIFIERS
from curator_dask.migrate.rules import (
    Counterpart,
    Ignored,
    ModulePath,
    Refused,
    Renamed,
    Rule,
)

__all__ = [
    "COMPANIONS",
    "KEYWORDS",
    "METHODS",
    "MODULES",
    "NAMES",
    "NEMO_PACKAGE",
    "Counterpart",
    "Ignored",
    "ModulePath",
    "Refused",
    "Renamed",
    "import_lines",
    "keyword_rules",
    "module_table",
    "nemo_module_for",
    "nemo_modules_under",
    "where",
]

NEMO_PACKAGE = "nemo_curator"


# -- names -------------------------------------------------------------------------------------

_FILTERS = "curator_dask.stages.filters"
_MODIFIERS = "curator_dask.stages.modifiers"
_DEDUP = "curator_dask.dedup"
_HEURISTIC_FILTERS = (
    "AlphaFilter", "BoilerPlateStringFilter", "BulletsFilter", "CommonEnglishWordsFilter",
    "EllipsisFilter", "LongWordFilter", "MeanWordLengthFilter", "NonAlphaNumericFilter",
    "NumbersFilter", "ParenthesesFilter", "PornographicUrlsFilter", "PunctuationFilter",
    "RepeatedLinesByCharFilter", "RepeatedLinesFilter", "RepeatedParagraphsByCharFilter",
    "RepeatedParagraphsFilter", "RepeatingDuplicateNGramsFilter", "RepeatingTopNGramsFilter",
    "SubstringFilter", "SymbolsToWordsFilter", "TokenCountFilter", "UrlsFilter",
    "WhiteSpaceFilter", "WordCountFilter", "WordsWithoutAlphabetsFilter", "XMLHeaderFilter",
    "NumberOfLinesOfCodeFilter",
)
_MODIFIER_NAMES = ("UnicodeReformatter", "UrlRemover", "NewlineNormalizer")


_RAY_FREE = ("curator-dask runs on Dask: start a cluster with get_client() or "
             "ClusterSession().start()")

NAMES: dict[str, Counterpart] = {
    # datasets and the basic modules
    "DocumentDataset": Counterpart("curator_dask.DocumentDataset"),
    "AddId": Counterpart("curator_dask.AddId"),
    "Sequential": Counterpart("curator_dask.Sequential",
                              note="takes stages and functions of a dataset, as NeMo's"),
    "ScoreFilter": Counterpart(f"{_FILTERS}.ScoreFilter"),
    "Score": Counterpart(f"{_FILTERS}.Score"),
    "Filter": Counterpart(f"{_FILTERS}.Filter"),
    "DocumentFilter": Counterpart(f"{_FILTERS}.DocumentFilter",
                                  note="score_document/keep_document still work (a loop); "
                                       "score/keep over a Series are vectorised"),
    "Modify": Counterpart(f"{_MODIFIERS}.Modify"),
    "DocumentModifier": Counterpart(f"{_MODIFIERS}.DocumentModifier"),
    **{name: Counterpart(f"{_FILTERS}.{name}") for name in _HEURISTIC_FILTERS},
    **{name: Counterpart(f"{_MODIFIERS}.{name}") for name in _MODIFIER_NAMES},
    "PiiModifier": Counterpart(
        "curator_dask.stages.pii.PiiRedactor", unwraps="Modify", model_keyword="nlp_model_dir",
        hub_model="en_core_web_lg",
        note="a stage of its own (no Modify around it); patterned entities need no model, "
             "names and places a spaCy pipeline directory (nlp_model_dir=)"),
    "FastTextLangId": Counterpart("curator_dask.stages.langid.FastTextLangId",
                                  note="scores [probability, language] as NeMo's; "
                                       "LanguageIdFilter keeps them in two columns"),
    # deduplication
    "ExactDuplicates": Counterpart(f"{_DEDUP}.ExactDuplicates"),
    "FuzzyDuplicates": Counterpart(f"{_DEDUP}.FuzzyDuplicates"),
    "FuzzyDuplicatesConfig": Counterpart(f"{_DEDUP}.FuzzyDuplicatesConfig",
                                         note="FuzzyDuplicates takes the parameters directly"),
    "MinHash": Counterpart(f"{_DEDUP}.MinHash"),
    "LSH": Counterpart(f"{_DEDUP}.LSH"),
    "SemDedup": Counterpart(f"{_DEDUP}.SemanticDeduplicationWorkflow"),
    "ExactDeduplicationWorkflow": Counterpart(f"{_DEDUP}.ExactDeduplicationWorkflow"),
    "FuzzyDeduplicationWorkflow": Counterpart(f"{_DEDUP}.FuzzyDeduplicationWorkflow"),
    "SemanticDeduplicationWorkflow": Counterpart(f"{_DEDUP}.SemanticDeduplicationWorkflow"),
    "TextDuplicatesRemovalWorkflow": Counterpart(f"{_DEDUP}.TextDuplicatesRemovalWorkflow"),
    "TaskDecontamination": Counterpart("curator_dask.stages.decontamination.TaskDecontamination"),
    # classifiers: the publishers' models from local directories
    **CLASSIFIER_NAMES,
    # pipelines, executors, clusters
    "Pipeline": Counterpart("curator_dask.Pipeline",
                            note="run() returns a RunResult; iterating it gives the output "
                                 "tasks as NeMo Curator's run() did"),
    "JsonlReader": Counterpart("curator_dask.JsonlReader"),
    "ParquetReader": Counterpart("curator_dask.ParquetReader"),
    "JsonlWriter": Counterpart("curator_dask.JsonlWriter"),
    "ParquetWriter": Counterpart("curator_dask.ParquetWriter"),
    "MegatronTokenizerWriter": Counterpart(
        "curator_dask.training.MegatronWriter",
        note="tokenizer= a local directory holding a fast tokenizer (model_identifier; "
             "nothing is downloaded); append_eod=True is eos=True; a .bin/.idx pair per "
             "part, tokenized on CPU workers"),
    "ProcessingStage": Counterpart("curator_dask.ProcessingStage",
                                   note="process() takes one partition (a pandas or cuDF "
                                        "frame), not a task"),
    "Resources": Counterpart("curator_dask.Resources"),
    "XennaExecutor": Counterpart("curator_dask.StreamingExecutor"),
    "RayDataExecutor": Counterpart("curator_dask.BatchExecutor"),
    "RayActorPoolExecutor": Counterpart("curator_dask.StreamingExecutor"),
    "RayClient": Counterpart("curator_dask.ClusterSession",
                             note="start() starts a local Dask cluster (or connects to "
                                  "scheduler_address=), stop() closes it"),
    "get_client": Counterpart("curator_dask.get_client"),
    "ArgumentHelper": Counterpart("curator_dask.cli.script_args.ArgumentHelper",
                                  note="the cluster options of NeMo Curator's scripts"),
    # file helpers
    **{name: Counterpart(f"curator_dask.nemo_files.{name}") for name in (
        "read_data", "get_all_files_paths_under", "separate_by_metadata")},
    "write_to_disk": Counterpart(
        None, note="write with ds.to_jsonl(path) or ds.to_parquet(path) (atomic parts, "
                   "a manifest)"),
    # download and extract
    **{name: Counterpart(f"curator_dask.download.{name}") for name in (
        "DocumentDownloader", "DocumentIterator", "DocumentExtractor", "URLGenerator")},
    "DocumentDownloadExtractStage": Counterpart(
        "curator_dask.download.DocumentDownloadExtractStage",
        note="a reader stage: one partition per URL"),
    "download_and_extract": Counterpart(
        None, note="build a DocumentDownloadExtractStage(url_generator, downloader, "
                   "iterator, extractor) and make it the first stage of a Pipeline"),
    # without a counterpart
    "DocumentBatch": Counterpart(None, note="stages take and return one partition (a pandas "
                                            "or cuDF frame); there is no task object"),
    "FileGroupTask": Counterpart(None, note="a reader stage plans the partitions; there is "
                                            "no task object"),
    "blend_datasets": Counterpart(
        "curator_dask.training.blend_datasets",
        note="exact and deterministic: each source gives its share of target_size, chosen "
             "by a seeded key (seed=); sampling_weights is weights"),
    "Shuffle": Counterpart(
        "curator_dask.training.Shuffle",
        note="a seeded global shuffle (seed=, default 0): the same order on any cluster"),
    "ParallelDataset": Counterpart(None, note="read the two sides as DocumentDatasets"),
}

# -- module paths ------------------------------------------------------------------------------

_DEDUP_NAMES = ("ExactDuplicates", "FuzzyDuplicates", "FuzzyDuplicatesConfig", "MinHash", "LSH",
                "SemDedup")
_MODULE_NAMES = ("ScoreFilter", "Score", "Filter", "Modify", "AddId", "Sequential",
                 *_DEDUP_NAMES, "TaskDecontamination", "blend_datasets", "Shuffle")
_DOWNLOAD = ("DocumentDownloader", "DocumentIterator", "DocumentExtractor",
             "download_and_extract")
_FILTER_MODULE = ("DocumentFilter", "ScoreFilter", "Score", "Filter", "FastTextLangId",
                  *_HEURISTIC_FILTERS)

MODULES: dict[str, ModulePath] = {
    # NeMo Curator 0.x (Dask)
    "nemo_curator": ModulePath("curator_dask", ("DocumentDataset", *_MODULE_NAMES,
                                                "get_client", *CLASSIFIERS)),
    "nemo_curator.datasets": ModulePath("curator_dask", ("DocumentDataset", "ParallelDataset")),
    "nemo_curator.modules": ModulePath(_DEDUP, _MODULE_NAMES),
    "nemo_curator.modules.add_id": ModulePath("curator_dask", ("AddId",)),
    "nemo_curator.modules.meta": ModulePath("curator_dask", ("Sequential",)),
    "nemo_curator.modules.filter": ModulePath(_FILTERS, ("ScoreFilter", "Score", "Filter")),
    "nemo_curator.modules.modify": ModulePath(_MODIFIERS, ("Modify",)),
    "nemo_curator.modules.exact_dedup": ModulePath(_DEDUP, ("ExactDuplicates",)),
    "nemo_curator.modules.fuzzy_dedup": ModulePath(_DEDUP, ("FuzzyDuplicates", "MinHash", "LSH")),
    "nemo_curator.modules.config": ModulePath(_DEDUP, ("FuzzyDuplicatesConfig",)),
    "nemo_curator.modules.semantic_dedup": ModulePath(_DEDUP, ("SemDedup",)),
    "nemo_curator.modules.dataset_ops": ModulePath("curator_dask.training",
                                                   ("blend_datasets", "Shuffle")),
    "nemo_curator.filters": ModulePath(_FILTERS, _FILTER_MODULE),
    "nemo_curator.filters.doc_filter": ModulePath(_FILTERS, ("DocumentFilter",)),
    "nemo_curator.filters.heuristic_filter": ModulePath(_FILTERS, _HEURISTIC_FILTERS),
    "nemo_curator.filters.classifier_filter": ModulePath("curator_dask.stages.langid",
                                                         ("FastTextLangId",)),
    "nemo_curator.modifiers": ModulePath(_MODIFIERS, ("DocumentModifier", *_MODIFIER_NAMES,
                                                      "PiiModifier")),
    "nemo_curator.modifiers.doc_modifier": ModulePath(_MODIFIERS, ("DocumentModifier",)),
    "nemo_curator.modifiers.unicode_reformatter": ModulePath(_MODIFIERS, ("UnicodeReformatter",)),
    "nemo_curator.modifiers.url_remover": ModulePath(_MODIFIERS, ("UrlRemover",)),
    "nemo_curator.modifiers.pii_modifier": ModulePath("curator_dask.stages.pii", ("PiiModifier",)),
    "nemo_curator.classifiers": ModulePath("curator_dask", CLASSIFIERS),
    "nemo_curator.utils.distributed_utils": ModulePath("curator_dask", ("get_client",
                                                                        "read_data",
                                                                        "write_to_disk")),
    "nemo_curator.utils.file_utils": ModulePath("curator_dask.nemo_files", (
        "get_all_files_paths_under", "separate_by_metadata")),
    "nemo_curator.utils.script_utils": ModulePath("curator_dask.cli.script_args",
                                                  ("ArgumentHelper",)),
    "nemo_curator.download": ModulePath("curator_dask.download", _DOWNLOAD),
    "nemo_curator.download.doc_builder": ModulePath("curator_dask.download", _DOWNLOAD),
    # NeMo Curator 1.x (Ray)
    "nemo_curator.pipeline": ModulePath("curator_dask", ("Pipeline",)),
    "nemo_curator.core.client": ModulePath("curator_dask", ("RayClient",)),
    "nemo_curator.backends.xenna": ModulePath("curator_dask.executors", ("XennaExecutor",)),
    "nemo_curator.backends.experimental.ray_data": ModulePath("curator_dask.executors",
                                                              ("RayDataExecutor",)),
    "nemo_curator.stages.base": ModulePath("curator_dask.stages", ("ProcessingStage",)),
    "nemo_curator.stages.resources": ModulePath("curator_dask", ("Resources",)),
    "nemo_curator.tasks": ModulePath(None, ("DocumentBatch", "FileGroupTask"),
                                     note="stages take and return partitions, not tasks"),
    "nemo_curator.stages.text.io.reader": ModulePath("curator_dask", ("JsonlReader",
                                                                      "ParquetReader")),
    "nemo_curator.stages.text.io.writer": ModulePath("curator_dask", ("JsonlWriter",
                                                                      "ParquetWriter",
                                                                      "MegatronTokenizerWriter")),
    "nemo_curator.stages.text.io.writer.megatron_tokenizer": ModulePath(
        "curator_dask.training", ("MegatronTokenizerWriter",)),
    "nemo_curator.stages.text.filters": ModulePath(_FILTERS, _FILTER_MODULE),
    "nemo_curator.stages.text.filters.heuristic": ModulePath(_FILTERS, _HEURISTIC_FILTERS),
    "nemo_curator.stages.text.filters.heuristic.string": ModulePath(_FILTERS, _HEURISTIC_FILTERS),
    "nemo_curator.stages.text.filters.heuristic.repetition": ModulePath(
        _FILTERS, ("RepeatingTopNGramsFilter", "RepeatingDuplicateNGramsFilter",
                   "RepeatedLinesFilter", "RepeatedParagraphsFilter")),
    "nemo_curator.stages.text.filters.score_filter": ModulePath(_FILTERS, ("ScoreFilter",
                                                                           "Score", "Filter")),
    "nemo_curator.stages.text.filters.fasttext": ModulePath("curator_dask.stages.langid",
                                                            ("FastTextLangId",)),
    "nemo_curator.stages.text.modifiers": ModulePath(_MODIFIERS, ("Modify", "DocumentModifier",
                                                                  *_MODIFIER_NAMES)),
    "nemo_curator.stages.text.modules": ModulePath("curator_dask", ("AddId", "Modify",
                                                                    "ScoreFilter")),
    "nemo_curator.stages.text.classifiers": ModulePath("curator_dask", CLASSIFIERS),
    "nemo_curator.stages.text.download": ModulePath("curator_dask.download", (
        "DocumentDownloadExtractStage", "URLGenerator", *_DOWNLOAD[:3])),
    "nemo_curator.stages.text.download.base": ModulePath("curator_dask.download", (
        "DocumentDownloadExtractStage", "URLGenerator", *_DOWNLOAD[:3])),
    "nemo_curator.stages.deduplication.exact.workflow": ModulePath(
        _DEDUP, ("ExactDeduplicationWorkflow",)),
    "nemo_curator.stages.deduplication.fuzzy.workflow": ModulePath(
        _DEDUP, ("FuzzyDeduplicationWorkflow",)),
    "nemo_curator.stages.deduplication.semantic": ModulePath(
        _DEDUP, ("SemanticDeduplicationWorkflow",)),
    "nemo_curator.stages.deduplication.semantic.workflow": ModulePath(
        _DEDUP, ("SemanticDeduplicationWorkflow",)),
    "nemo_curator.stages.text.deduplication.removal_workflow": ModulePath(
        _DEDUP, ("TextDuplicatesRemovalWorkflow",)),
}

# -- keywords ----------------------------------------------------------------------------------

_DATASET = {"dataset": Renamed("ds")}
_STORAGE = Refused("pass storage_options= for fsspec; pandas reading options have no "
                   "counterpart (the reader parses with pyarrow)")
_LOGS = Ignored('curator-dask logs through logging.getLogger("curator_dask")')
_PROFILE = Refused("profile with distributed.performance_report(filename=...)")
_GPU_SHUFFLE = Ignored("it tunes NeMo Curator's GPU shuffle; curator-dask sizes its "
                       "shuffles from the data")


def _other_extensions(filetype_extensions: tuple[str, ...]) -> Callable[[object], bool]:
    def refuse(value) -> bool:
        values = [value] if isinstance(value, str) else list(value or ())
        return any(("." + v.lstrip(".")).lower() not in filetype_extensions for v in values)

    return refuse


_EXTENSIONS = Ignored(
    "curator-dask reads the files of input_filetype's extensions (.jsonl, .json, .ndjson "
    "or .parquet, .pq)",
    refuse_if=_other_extensions((".jsonl", ".json", ".ndjson", ".parquet", ".pq")),
    refusal="pass input_path as the list of files to read")
_WORKFLOW_NEMO = {"input_file_extensions": _EXTENSIONS, "read_kwargs": _STORAGE,
                  "cache_kwargs": _STORAGE, "write_kwargs": _STORAGE,
                  "env_vars": Refused("set environment variables before starting the "
                                      "cluster; worker processes inherit them")}
_READER = {"file_paths": Renamed("path"), "fields": Renamed("columns"),
           "read_kwargs": _STORAGE}
_WRITER = {"write_kwargs": Refused("pass compression= and storage_options="),
           "fields": Refused("keep the columns you want with a stage before the writer"),
           "file_extension": Refused("the writer names its parts part-00000.<format>")}
_LOCAL_TOKENIZER = Refused("pass tokenizer= a local directory holding the tokenizer "
                           "(tokenizer.save_pretrained(directory)); nothing is downloaded")
_TOKENIZER_BATCH = Ignored("a partition is tokenized in batched calls of about a million "
                           "characters")
KEYWORDS: dict[str, dict[str, Rule]] = {
    "curator_dask.dataset.DocumentDataset.read_jsonl": {"input_files": Renamed("path")},
    "curator_dask.dataset.DocumentDataset.read_parquet": {"input_files": Renamed("path")},
    "curator_dask.dataset.DocumentDataset.to_parquet": {"output_path": Renamed("path")},
    "curator_dask.dataset.DocumentDataset.to_jsonl": {"output_path": Renamed("path")},
    "curator_dask.stages.base.ProcessingStage.__call__": _DATASET,
    "curator_dask.stages.base.WholeDatasetStage.__call__": _DATASET,
    "curator_dask.stages.base.Sequential.__call__": _DATASET,
    "curator_dask.stages.io_stages.JsonlReader.__init__": _READER,
    "curator_dask.stages.io_stages.ParquetReader.__init__": _READER,
    "curator_dask.stages.io_stages.WriterStage.__init__": _WRITER,
    "curator_dask.training.writers.MegatronWriter.__init__": {
        **_WRITER, "output_dir": Renamed("path"), "model_identifier": Renamed("tokenizer"),
        "append_eod": Renamed("eos"), "cache_dir": _LOCAL_TOKENIZER,
        "hf_token": _LOCAL_TOKENIZER,
        "local_files_only": Ignored("the tokenizer is always loaded from a local directory"),
        "transformers_init_kwargs": Refused(
            "the tokenizer is loaded from its tokenizer.json: save it with the options you "
            "need (save_pretrained) and pass that directory as tokenizer="),
        "batch_size": _TOKENIZER_BATCH, "tokenization_batch_size": _TOKENIZER_BATCH,
        "max_seq_length": Refused("every document is written whole, as one sequence; cut "
                                  "long texts with a stage before the writer"),
        "unk_token": Ignored("it pads batches for a model; token files hold no padding")},
    "curator_dask.training.blend.blend_datasets": {"sampling_weights": Renamed("weights")},
    "curator_dask.training.shuffle.Shuffle.__init__": {
        "partition_to_filename": Refused("the writer names its parts part-00000.<format>"),
        "filename_col": Refused("the writer names its parts part-00000.<format>; no column "
                                "of file names is made")},
    "curator_dask.stages.modifiers.base.Modify.__init__": {
        "modifier_fn": Renamed("modifier"), "input_fields": Renamed("text_field")},
    **CLASSIFIER_KEYWORDS,
    "curator_dask.stages.pii.redactor.PiiRedactor.__init__": {
        "supported_entities": Renamed("entities"), "anonymize_action": Renamed("action"),
        "batch_size": Renamed("presidio_batch_size"),
        "device": Ignored("the stage runs where its resources place it (GPU workers with "
                          "resources=Resources(gpus=1))")},
    "curator_dask.dedup.exact.ExactDuplicates.__init__": {
        "cache_dir": Renamed("cache_path"), "logger": _LOGS, "profile_dir": _PROFILE},
    "curator_dask.dedup.exact.ExactDuplicates.__call__": _DATASET,
    "curator_dask.dedup.exact.ExactDuplicates.identify": _DATASET,
    "curator_dask.dedup.exact.ExactDuplicates.identify_duplicates": _DATASET,
    "curator_dask.dedup.exact.ExactDuplicates.remove": {
        **_DATASET, "duplicates_to_remove": Renamed("duplicates")},
    "curator_dask.dedup.fuzzy.duplicates.FuzzyDuplicates.__init__": {
        "logger": _LOGS, "profile_dir": _PROFILE},
    "curator_dask.dedup.fuzzy.duplicates.FuzzyDuplicates.__call__": _DATASET,
    "curator_dask.dedup.fuzzy.duplicates.FuzzyDuplicates.identify": _DATASET,
    "curator_dask.dedup.fuzzy.duplicates.FuzzyDuplicates.identify_duplicates": _DATASET,
    "curator_dask.dedup.fuzzy.duplicates.FuzzyDuplicates.remove": {
        **_DATASET, "duplicates_to_remove": Renamed("groups")},
    "curator_dask.dedup.workflow.ExactDeduplicationWorkflow.__init__": {
        **_WORKFLOW_NEMO, "total_nparts": _GPU_SHUFFLE, "identification_batchsize": _GPU_SHUFFLE,
        "rmm_pool_size": _GPU_SHUFFLE, "use_async_memory": _GPU_SHUFFLE,
        "spill_memory_limit": _GPU_SHUFFLE},
    "curator_dask.dedup.fuzzy.workflow.FuzzyDeduplicationWorkflow.__init__": _WORKFLOW_NEMO,
    "curator_dask.dedup.removal_workflow.TextDuplicatesRemovalWorkflow.__init__": {
        "input_kwargs": _STORAGE, "duplicate_id_read_kwargs": _STORAGE,
        "output_kwargs": _STORAGE, "id_generator_storage_options": _STORAGE,
        "input_files_per_partition": Refused("the ids are given over the generator file's "
                                             "plan; pass input_blocksize= without one"),
        "input_task_limit": Refused("pass input_path as the list of files to read"),
        "output_file_extension": Refused("the writer names its parts "
                                         "part-00000.<output_filetype>"),
    },
    "curator_dask.pipeline.Pipeline.run": {
        "initial_tasks": Refused("the pipeline's reader stage is its input; start it with "
                                 "JsonlReader(path) or ParquetReader(path)")},
    "curator_dask.cluster_session.ClusterSession.__init__": {
        "num_cpus": Renamed("n_workers"),
        "num_gpus": Refused("pass cluster_type='gpu' (one worker per GPU) or "
                            "n_gpu_workers= with cluster_type='mixed'"),
        **{name: Ignored("it configures Ray; a Dask cluster needs none") for name in (
            "ray_port", "ray_dashboard_port", "ray_temp_dir", "include_dashboard",
            "ray_metrics_port", "ray_dashboard_host", "enable_object_spilling",
            "ray_stdouterr_capture_file", "metrics_dir")},
    },
    "curator_dask.cluster.client.get_client": {
        "enable_spilling": Renamed("enable_cudf_spill"),
        "nvlink_only": Ignored("pass dask-cuda's options as keywords of get_client, which "
                               "hands them to LocalCUDACluster"),
        "set_torch_to_use_rmm": Ignored("PyTorch allocates its own memory here"),
    },
}


#: NeMo Curator's method names -> curator-dask's, on the classes that have both (the
#: NeMo Curator name runs too, and warns).
METHODS: dict[str, str] = {"read_json": "read_jsonl", "to_json": "to_jsonl",
                           "identify_duplicates": "identify"}

#: Modules NeMo Curator installs that scripts import beside it, and what the codemod
#: writes instead (curator-dask does not depend on them).
COMPANIONS: dict[str, str] = {
    "loguru": "logging: `logger = logging.getLogger(__name__)` (loguru's logger.info(...), "
              "warning(...), error(...) calls work on it)",
}


def keyword_rules(qualified_name: str) -> Mapping[str, Rule]:
    """The NeMo Curator keywords of the curator-dask callable ``qualified_name``
    (``module.Class.method``); empty when it has none."""
    return KEYWORDS.get(qualified_name, {})


# -- lookups -------------------------------------------------------------------------------------

def nemo_module_for(fullname: str) -> str | None:
    """The NeMo Curator module a ``curator_dask.…`` path was written for, if it is one of
    :data:`MODULES` (a submodule of one counts as it): ``curator_dask.modules`` ->
    ``nemo_curator.modules``.

    >>> nemo_module_for("curator_dask.modules.exact_dedup")
    'nemo_curator.modules.exact_dedup'
    >>> nemo_module_for("curator_dask.no_such_thing") is None
    True
    """
    if not fullname.startswith("curator_dask."):
        return None
    nemo = NEMO_PACKAGE + fullname[len("curator_dask"):]
    candidate = nemo
    while candidate != NEMO_PACKAGE:
        if candidate in MODULES:
            return candidate
        candidate = candidate.rpartition(".")[0]
    return None


def nemo_modules_under(fullname: str) -> list[str]:
    """The NeMo Curator modules of :data:`MODULES` under the package a ``curator_dask.…``
    path was written for (``curator_dask.stages.text`` -> ``nemo_curator.stages.text.io.
    reader``, ...): Python imports a path's parents first, so those are what an import of
    ``curator_dask.stages.text.io.reader`` fails on."""
    if not fullname.startswith("curator_dask."):
        return []
    prefix = NEMO_PACKAGE + fullname[len("curator_dask"):] + "."
    return [name for name in MODULES if name.startswith(prefix)]


def where(nemo_module: str) -> list[tuple[str, str | None]]:
    """``(name, curator-dask path or None)`` for the names users import from
    ``nemo_module``."""
    return [(name, NAMES[name].ours) for name in MODULES[nemo_module].names]


def import_lines(nemo_module: str) -> list[str]:
    """How to import here what users import from ``nemo_module``: one ``from ... import``
    line per curator-dask module, and a line per name without a counterpart.

    >>> import_lines("nemo_curator.stages.text.io.reader")
    ['from curator_dask import JsonlReader, ParquetReader']
    """
    groups: dict[str, list[str]] = {}
    missing = []
    for name, ours in where(nemo_module):
        if ours is None:
            missing.append(f"{name}: no counterpart; {NAMES[name].note}")
            continue
        home, _, ours_name = ours.rpartition(".")
        listed = groups.setdefault(home, [])
        if ours_name not in listed:
            listed.append(ours_name)
    return [f"from {home} import {', '.join(names)}" for home, names in groups.items()] + \
        missing


def module_table(shown: int = 6) -> str:
    """The Markdown table of module paths in ``docs/migrating.md``: each NeMo Curator
    module, where most of it is here, and its names grouped by their curator-dask module
    (renamed ones as ``NeMo name → ours``; at most ``shown`` a module, then a count)."""
    lines = ["| NeMo Curator module | curator-dask | where its names are |", "|---|---|---|"]
    for nemo, module in MODULES.items():
        groups: dict[str, list[str]] = {}
        for name, ours in where(nemo):
            if ours is None:
                groups.setdefault("none", []).append(f"`{name}` ({NAMES[name].note})")
                continue
            home, _, ours_name = ours.rpartition(".")
            groups.setdefault(f"`{home}`", []).append(
                f"`{name}`" if ours_name == name else f"`{name}` → `{ours_name}`")
        placed = "; ".join(
            f"{home}: " + ", ".join(names[:shown])
            + (f" and {len(names) - shown} more of the same names" if len(names) > shown else "")
            for home, names in groups.items())
        home = f"`{module.ours}`" if module.ours else f"none ({module.note})"
        lines.append(f"| `{nemo}` | {home} | {placed} |")
    return "\n".join(lines)
