"""The tokenizing writer: documents to Megatron-LM token files, and shards merged from them.

:class:`MegatronWriter` is a pipeline writer like ``ParquetWriter``: one task per part,
each tokenizing its whole partition in one batched call on a CPU worker and writing a
``part-00042.bin`` + ``part-00042.idx`` pair (:mod:`curator_dask.io.megatron`) under a
temporary name, renamed when complete, with a completion marker; so resume, the output
checks and the manifest work as for every writer. Once the run's parts are all written
the manifest records the tokenizer and the tokens, in total and per source, and, when
asked, the parts are concatenated into a chosen number of shards (:func:`merge_megatron`).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterable

from fsspec.core import url_to_fs

from curator_dask.bounds import PositiveInt
from curator_dask.compat import nemo_keywords
from curator_dask.errors import InvalidArgumentError
from curator_dask.io import guard
from curator_dask.io.megatron import dataset_prefixes, merge_datasets
from curator_dask.io.output_state import read_manifest, record_in_manifest
from curator_dask.io.overlap import InputPaths, input_paths
from curator_dask.io.rollover import FileSize, TargetFileSize
from curator_dask.io.tokens import MegatronEncoder, TokenizerSpec
from curator_dask.io.writers import WriteMode, prepare_output
from curator_dask.stages.io_stages import PreparedOutput, WriterStage

__all__ = ["MegatronWriter", "merge_megatron"]

logger = logging.getLogger(__name__)

#: What the guard calls the directory the parts are merged into.
MERGE_DIRECTORY = "merge directory"


class MegatronWriter(WriterStage):
    """Tokenize every document and write Megatron-LM token files (``.bin`` + ``.idx``).

    One pair per part, ``part-00042.bin`` and ``part-00042.idx``, that megatron-core's
    ``IndexedDataset("out/part-00042")`` reads (and ``--data-path`` takes); each document
    is one sequence. Tokenizing runs on CPU workers (no GPU is needed), one batched call
    of the Rust ``tokenizers`` library per partition.

    Parameters
    ----------
    path : str
        Output directory.
    tokenizer : str
        A local directory holding a Hugging Face fast tokenizer (``tokenizer.json``, as
        ``save_pretrained`` writes it); never fetched from a hub.
    text_field : str, default "text"
    bos, eos : bool or str, default False
        Put the tokenizer's BOS (EOS) token before (after) every document (``True``), or
        the token with the given text (``"<|endoftext|>"``). NeMo Curator's
        ``append_eod=True`` is ``eos=True``.
    add_special_tokens : bool, default False
        Apply the tokenizer's post-processor (``[CLS] ... [SEP]`` of a BERT tokenizer).
    source_field : str, optional
        Count tokens per value of this column too (the ``source`` column of a
        :class:`~curator_dask.training.BlendReader`, or ``file_name``).
    target_file_size : int or str, optional
        Cut each part into pairs of at most this size: ``"50M tokens"``, ``"100000
        documents"``, or bytes of the ``.bin`` (``"1GiB"``).
    merge_path : str, optional
        Once every part is written, concatenate them, in order, into shards in this
        directory (:func:`merge_megatron`): ``num_shards`` of them balanced by tokens, or
        shards of ``merge_file_size``. The directory is rewritten on every run (only
        curator-dask's own files there are replaced).
    num_shards : int, optional
    merge_file_size : int or str, optional
    mode : {"error", "overwrite", "overwrite_all", "append"}, default "error"
    storage_options : dict, optional

    Notes
    -----
    Counters (``RunResult.counters``): ``write_megatron.tokens``, and
    ``write_megatron.tokens.<source>`` with ``source_field``. A document the tokenizer
    makes no token of (an empty text, without BOS or EOS) is not written: it is counted
    under the drop reason ``write_megatron.no_tokens``.

    Examples
    --------
    >>> import tempfile
    >>> from curator_dask.testing.tokenizer import save_bpe_tokenizer
    >>> MegatronWriter("out/", tokenizer=save_bpe_tokenizer(tempfile.mkdtemp()), eos=True)
    <MegatronWriter 'out/' (CPU=1)>
    """

    name = "write_megatron"
    fmt = "encoded"

    @nemo_keywords()
    def __init__(self, path: str, *, tokenizer: str, text_field: str = "text",
                 bos: bool | str = False, eos: bool | str = False,
                 add_special_tokens: bool = False, source_field: str | None = None,
                 target_file_size: TargetFileSize | None = None, merge_path: str | None = None,
                 num_shards: PositiveInt | None = None,
                 merge_file_size: TargetFileSize | None = None,
                 mode: WriteMode = "error", storage_options: dict | None = None):
        self.tokenizer = TokenizerSpec(tokenizer, bos=bos, eos=eos,
                                       add_special_tokens=add_special_tokens)
        self.text_field, self.source_field = text_field, source_field
        if merge_path is None and (num_shards is not None or merge_file_size is not None):
            raise InvalidArgumentError("num_shards and merge_file_size say how to merge the parts: "
                                       "give merge_path, the directory of the shards, too")
        if merge_path is not None and (num_shards is None) == (merge_file_size is None):
            raise InvalidArgumentError("merge_path: give num_shards or merge_file_size (not both)")
        if num_shards is not None and (isinstance(num_shards, bool) or num_shards < 1):
            raise InvalidArgumentError(f"num_shards must be a positive integer, got {num_shards!r}")
        self.merge_path, self.num_shards = merge_path, num_shards
        self.merge_file_size = FileSize.parse(merge_file_size)
        super().__init__(path, mode=mode, target_file_size=target_file_size,
                         storage_options=storage_options)

    def encoder(self) -> MegatronEncoder:
        return MegatronEncoder(self.tokenizer, text_field=self.text_field,
                               source_field=self.source_field, stage=self.name)

    @property
    def input_columns(self) -> list[str]:
        """The text column (and the source column when tokens are counted by source)."""
        return [self.text_field, *([self.source_field] if self.source_field else [])]

    def outputs(self) -> list[tuple[str, str]]:
        """The parts' directory, and the merge directory when the parts are merged."""
        merged = [(self.merge_path, MERGE_DIRECTORY)] if self.merge_path is not None else []
        return [*super().outputs(), *merged]

    def prepare(self, identity: dict, resume: bool = False, *,
                pipeline: list[dict] | None = None, inputs: Iterable[InputPaths] = (),
                restart_on_mismatch: bool = False) -> PreparedOutput:
        """As :meth:`WriterStage.prepare`; the merge directory is claimed from the run's
        guard too, before anything is written: clear of the inputs, the parts' directory
        and every other output of the run, and leased."""
        inputs = list(inputs)
        if self.merge_path is not None:
            guard.claim(self.merge_path, MERGE_DIRECTORY, storage_options=self.storage_options,
                        inputs=inputs)
        return super().prepare(identity, resume, pipeline=pipeline, inputs=inputs,
                               restart_on_mismatch=restart_on_mismatch)

    def finish(self, output: PreparedOutput, stats: list[dict]) -> None:
        """Record the tokenizer and the tokens in the manifest; then merge, when asked."""
        super().finish(output, stats)
        if self.merge_path is not None:
            merge_megatron(output.spec.path, self.merge_path, num_shards=self.num_shards,
                           target_file_size=self.merge_file_size, mode="overwrite",
                           storage_options=self.storage_options)


def merge_megatron(path: str, output: str, *, num_shards: PositiveInt | None = None,
                   target_file_size: TargetFileSize | None = None, mode: WriteMode = "error",
                   storage_options: dict | None = None) -> list[dict]:
    """Concatenate the Megatron token files of ``path`` (in name order) into shards in
    ``output``: ``part-00000.bin``/``.idx``, ...

    Give ``num_shards`` (balanced by tokens, each document in the shard its first token
    falls in) or ``target_file_size`` (shards filled in order: tokens, documents, or
    ``.bin`` bytes). Documents keep their order and their tokens; a shard is renamed
    into place when complete. ``output`` follows the output contract (``mode``, a
    manifest, never on top of ``path``); its manifest records what ``path``'s recorded
    about the tokenizer, with the shards' tokens.

    Returns one dict per shard: ``files``, ``documents``, ``tokens``, ``bytes``.

    Examples
    --------
    >>> import pandas as pd, tempfile
    >>> from curator_dask import DocumentDataset
    >>> from curator_dask.testing.tokenizer import save_bpe_tokenizer
    >>> parts, shards = tempfile.mkdtemp(), tempfile.mkdtemp()
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a b c d"] * 10}), npartitions=5)
    >>> _ = ds.to_megatron(parts, save_bpe_tokenizer(tempfile.mkdtemp()), mode="overwrite")
    >>> [s["documents"] for s in merge_megatron(parts, shards, num_shards=2, mode="overwrite")]
    [5, 5]
    """
    fs, root = url_to_fs(path, **(storage_options or {}))
    root = root.rstrip("/") or root
    with guard.guarded(output, MERGE_DIRECTORY, storage_options=storage_options,
                       inputs=[input_paths(path, storage_options, label="merged directory")]
                       ) as out:
        prepare_output(out, mode, fingerprint={"merged_from": root})
        prefixes = dataset_prefixes(fs, root)
        shards = merge_datasets(fs, prefixes, out.path, num_shards=num_shards,
                                target_file_size=target_file_size, output_fs=out.fs)
        source = (read_manifest(fs, root) or {}).get("encoded") or {}
        record_in_manifest(out.fs, out.path, "encoded", {
            **source, "parts": len(shards), "merged_from": root,
            "documents": sum(s["documents"] for s in shards),
            "tokens": sum(s["tokens"] for s in shards),
            "shards": [{"prefix": posixpath.basename(s["files"][0])[:-4],
                        "documents": s["documents"], "tokens": s["tokens"]} for s in shards]})
    logger.info("merged %d Megatron datasets of %s into %d shards in %s", len(prefixes), root,
                len(shards), out.path)
    return shards
