"""Downstream-task decontamination: cut evaluation-set n-grams out of a training corpus.

Usage::

    from curator_dask.stages.decontamination import EvalTask, TaskDecontamination
    stage = TaskDecontamination([EvalTask("evals/squad.jsonl", fields=["question", "answers.text"]),
                                 EvalTask("evals/trivia.parquet", fields=["question", "answer"])])
    ds = stage(ds)
    ds.dropped_counts(), ds.counters()

Layout: :mod:`.tasks` (evaluation sets from local files), :mod:`.index` (normalised
words and the task n-gram index), :mod:`.stage` (the ``TaskDecontamination`` barrier).
"""

from curator_dask.stages.decontamination.index import TaskNgramIndex, build_index
from curator_dask.stages.decontamination.stage import DecontaminationStats, TaskDecontamination
from curator_dask.stages.decontamination.tasks import EvalTask, TaskFileError, load_task_texts

__all__ = ["DecontaminationStats", "EvalTask", "TaskDecontamination", "TaskFileError",
           "TaskNgramIndex", "build_index", "load_task_texts"]
