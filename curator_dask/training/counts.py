"""Token counts: per document as a column, per stage and per source as counters.

:class:`CountTokens` tokenizes each partition in one batched call (on a CPU worker) and
records, beside the documents, the counters ``<stage>.tokens`` and, per value of a
source column, ``<stage>.tokens.<source>``: they reach ``RunResult.counters``, the
table ``curator-dask run`` prints and the HTML report, under the stage's row. Put it
where a count is wanted (after the reader, before the writer); two of them in a
pipeline count apart (``count_tokens``, ``count_tokens_2``). The tokenizing writer
(:class:`~curator_dask.training.MegatronWriter`) counts what it writes the same way.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from curator_dask.backends import to_host
from curator_dask.dropped import record_counter
from curator_dask.io.tokens import TokenizerSpec, token_lengths
from curator_dask.resources import Resources
from curator_dask.stages.base import ProcessingStage

__all__ = ["CountTokens", "record_token_counters"]


def record_token_counters(df, name: str, lengths: np.ndarray, sources=None):
    """Record ``name`` (the sum of ``lengths``) and, given each document's source,
    ``<name>.<source>`` as counters on ``df``; returns ``df``."""
    record_counter(df, name, int(lengths.sum()))
    if sources is not None and len(lengths):
        names, codes = np.unique(np.asarray(sources, dtype=object).astype(str),
                                 return_inverse=True)
        for source, tokens in zip(names.tolist(),
                                  np.bincount(codes, weights=lengths).tolist(), strict=True):
            record_counter(df, f"{name}.{source}", int(tokens))
    return df


class CountTokens(ProcessingStage):
    """Count each document's tokens with a tokenizer from a local directory.

    Parameters
    ----------
    tokenizer : str
        A directory with a Hugging Face fast tokenizer (``tokenizer.json``).
    text_field : str, default "text"
    token_field : str or None, default "token_count"
        The column of each document's count (int64); None records only the counters.
    source_field : str, optional
        Count tokens per value of this column too (``source`` of a blend, ``file_name``).
    bos, eos, add_special_tokens
        Count as the tokenizing writer will write: with a BOS/EOS token per document,
        with the tokenizer's special tokens.

    Examples
    --------
    >>> import tempfile
    >>> from curator_dask import DocumentDataset
    >>> from curator_dask.testing.tokenizer import save_bpe_tokenizer
    >>> count = CountTokens(save_bpe_tokenizer(tempfile.mkdtemp()))
    >>> ds = count(DocumentDataset.from_pandas(pd.DataFrame({"text": ["a cat", ""]})))
    >>> ds.df.compute()["token_count"].tolist(), ds.counters()
    ([3, 0], {'count_tokens.tokens': 3})
    """

    name = "count_tokens"
    resources = Resources(cpus=1)

    def __init__(self, tokenizer: str, *, text_field: str = "text",
                 token_field: str | None = "token_count", source_field: str | None = None,
                 bos: bool | str = False, eos: bool | str = False,
                 add_special_tokens: bool = False):
        self.tokenizer = TokenizerSpec(tokenizer, bos=bos, eos=eos,
                                       add_special_tokens=add_special_tokens)
        self.text_field, self.token_field, self.source_field = text_field, token_field, \
            source_field
        self.input_columns = [text_field, *([source_field] if source_field else [])]
        self.output_columns = {token_field: "int64"} if token_field else {}

    def setup(self) -> None:
        self.tokenizer.load()

    def process(self, df):
        lengths = token_lengths(self.tokenizer.load(), to_host(df[self.text_field]).tolist())
        out = df.assign(**{self.token_field: pd.Series(lengths, index=df.index)}) \
            if self.token_field else df.copy(deep=False)
        sources = to_host(df[self.source_field]).to_numpy() if self.source_field else None
        return record_token_counters(out, f"{self.name}.tokens", lengths, sources)
