"""Helpers for tests, examples and benchmarks: generated data with known answers.

They ship with the package so that a user can try a pipeline, or test a stage of their
own, without a crawl, a model hub or a labelled corpus. Nothing in a pipeline depends on
them. Each module imports its optional dependencies only when called.

- :mod:`curator_dask.testing.models`: tiny random BERT classifiers and encoders saved to a
  local directory, and the path of the real all-MiniLM-L6-v2 when it is installed.
- :mod:`curator_dask.testing.fuzzy`: a corpus with planted near-duplicates, and exact
  Jaccard similarities to check fuzzy deduplication against.
- :mod:`curator_dask.testing.web`: web-like pages and WARC files written from them.
- :mod:`curator_dask.testing.pii`: documents with planted PII and where each entity is.
- :mod:`curator_dask.testing.tokenizer`: a small BPE tokenizer trained on the bundled
  sample, saved to a directory.
"""

__all__ = ["fuzzy", "models", "pii", "tokenizer", "web"]
