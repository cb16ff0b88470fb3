"""Fuzzy deduplication of a corpus on disk, end to end, resumable phase by phase.

read -> assign ids (if missing) -> MinHash -> LSH (bands_per_iteration bands a shuffle)
-> [false-positive check] -> connected components -> removal -> write Parquet.

Every phase writes its result under ``cache_path/fuzzy/`` and marks it complete last
(``_COMPLETE.json``, the protocol of exact dedup's cache); a rerun reads back each phase
whose marker matches the input files (the identity of each: size, modification time,
checksum, a hash of its first and last blocks) and the parameters, and computes only
what follows. LSH marks each iteration of bands on its own, so a crash in the middle of LSH
redoes only the unfinished bands.

==============  ==========================================  ===============================
phase           result under ``cache_path/fuzzy/``           bytes a document (defaults)
==============  ==========================================  ===============================
minhash         ``minhash/``: ``(id, _minhash_signature)``   ~1,050
lsh             ``lsh/bands-000-005/`` ...: ``(id_x, id_y)``  16 an edge
jaccard         ``jaccard/``: ``(id_x, id_y, jaccard)``       20 a distinct pair (optional)
components      ``components/``: ``(id, group)``              16 a duplicate
removal         ``removal/_COMPLETE.json`` (counts); output    the kept documents
==============  ==========================================  ===============================
"""

from __future__ import annotations

import logging
import posixpath
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from curator_dask.compat import nemo_keywords
from curator_dask.dataset import DocumentDataset, WriteResult
from curator_dask.dedup.cache import (
    OutputMode,
    PhaseResult,
    check_workflow_options,
    mark_complete,
    output_mode_for,
    read_parquet_parts,
    read_phase,
    recorded_blocksize,
    removal_output_intact,
    workflow_run,
    write_phase,
    write_removal,
)
from curator_dask.dedup.config import FuzzyDedupConfig, takes_config
from curator_dask.dedup.duplicate_ids import ASSIGNED_ID_FIELD, IdNumbering, write_duplicate_ids
from curator_dask.dedup.fuzzy.components import GROUP_FIELD
from curator_dask.dedup.fuzzy.duplicates import FUZZY_DUPLICATE_REASON, FUZZY_SCOPE, FuzzyDuplicates
from curator_dask.dedup.fuzzy.jaccard import JACCARD_FIELD
from curator_dask.dedup.fuzzy.lsh import EDGE_FIELDS
from curator_dask.dedup.fuzzy.minhash import SIGNATURE_FIELD, signature_type
from curator_dask.dedup.ids import check_unique_ids, repeated_ids
from curator_dask.dedup.workflow import FileType, check_on_bad_lines, input_files, read_input
from curator_dask.faults import faults_explained
from curator_dask.io.identity import files_identity
from curator_dask.io.jsonl import OnBadLines
from curator_dask.io.planner import AUTO, resolve_blocksize
from curator_dask.io.tables import Backend
from curator_dask.observe.progress import phase, reporting
from curator_dask.stages.ids import AddId
from curator_dask.task_names import scoped

__all__ = ["PHASES", "FuzzyDedupResult", "FuzzyDeduplicationWorkflow"]

logger = logging.getLogger(__name__)

PHASES = ("minhash", "lsh", "jaccard", "components", "removal")


@dataclass
class FuzzyDedupResult:
    """What a run did. ``input_documents == kept_documents + duplicate_documents``."""

    input_documents: int
    #: Documents removed (or, without removal, to remove): all but one of each group.
    duplicate_documents: int
    #: Groups of two or more near-duplicates; one document of each is kept.
    duplicate_groups: int
    kept_documents: int
    #: Candidate edges from LSH (a pair found in several bands counts each time).
    candidate_pairs: int
    #: Distinct candidate pairs whose true similarity is under ``jaccard_threshold``
    #: (None without ``false_positive_check``).
    false_positive_pairs: int | None
    #: The phases read back from ``cache_path`` instead of computed, in order.
    phases_from_cache: list[str] = field(default_factory=list)
    #: Wall-clock seconds of each phase this run computed or read.
    phase_seconds: dict[str, float] = field(default_factory=dict)
    #: Where ``(id, group)`` of every duplicate document is (Parquet).
    groups_path: str = ""
    #: The written output (None when ``perform_removal=False``).
    output: WriteResult | None = None
    #: Input lines skipped as unreadable (``on_bad_lines="skip"``): not documents, so not
    #: in ``input_documents``.
    skipped_lines: int = 0
    #: Without removal, given an ``output_path``: where the ids to remove were written
    #: (``output_path/FuzzyDuplicateIds``; None when there were none).
    duplicate_ids_path: str | None = None


class FuzzyDeduplicationWorkflow:
    """Read a corpus, find near-duplicate groups, and (optionally) keep one of each.

    Runs on the current Dask scheduler: a ``distributed.Client`` if one is active (then
    shuffles are P2P and spill to disk), otherwise local threads.

    Parameters
    ----------
    input_path : str or list of str
        Files or directories (any fsspec URL).
    cache_path : str
        Directory for each phase's result (``fuzzy/...``), kept for reruns; it must not
        be, contain or lie inside an input path.
    output_path : str, optional
        Directory for ``part-*.parquet`` of the kept documents; needed with
        ``perform_removal=True``. It must be empty, unless a rerun that reuses the cache
        finds the output of an interrupted removal of the same input and parameters
        there, or ``output_mode`` says otherwise. It must not be, contain or lie inside
        an input path or ``cache_path``.
    perform_removal : bool, default False
        Remove all but the lowest id of each group and write the rest. Without it, the
        run ends with the groups in ``cache_path/fuzzy/components`` and, given an
        ``output_path``, where NeMo Curator 1.x writes them: the ids to remove in
        ``output_path/FuzzyDuplicateIds/`` (when there are any) and how they were given
        in ``output_path/fuzzy_id_generator.json``, for
        :class:`~curator_dask.dedup.TextDuplicatesRemovalWorkflow` (see
        :mod:`curator_dask.dedup.duplicate_ids`).
    seed, char_ngrams, num_bands, minhashes_per_band, bands_per_iteration,
    use_64_bit_hash, false_positive_check, jaccard_threshold, max_local_edges,
    removal_strategy, broadcast_threshold, device
        As for :class:`~curator_dask.dedup.fuzzy.FuzzyDuplicates`.
    input_filetype : {"jsonl", "parquet"}
    input_blocksize : int or str, optional
        Bytes per partition. Default (or ``"auto"``): chosen from the data and the
        cluster, two partitions per worker thread where the data allows, at most 64 MiB
        and within the workers' memory (see ``docs/io.md``), and recorded in the cache so
        that a rerun reuses it. Peak worker memory follows it. A rerun with another value
        computes every phase again.
    on_bad_lines : {"error", "skip", "warn"}
        As for :class:`~curator_dask.dedup.ExactDeduplicationWorkflow`.
    id_field, text_field : str
        Ids are added with :class:`~curator_dask.AddId` when the input has none. Ids the
        input has must be unique integers: a repeated id raises
        :class:`~curator_dask.dedup.ids.DuplicateIdError` after the MinHash phase,
        before anything is grouped or removed.
    backend : {"pandas", "cudf"}
        Partitions for reading and MinHash: ``"cudf"`` computes signatures on GPUs with
        cuDF. Without cuDF, ``backend="pandas", device="cuda"`` computes them on GPUs
        with torch.
    output_mode : {"error", "overwrite", "overwrite_all"}
        As for :class:`~curator_dask.dedup.ExactDeduplicationWorkflow`.
    storage_options : dict, optional
        For fsspec, used for input, cache and output.
    config : FuzzyDedupConfig, optional
        The algorithm's parameters (``seed`` ... ``broadcast_threshold``, ``id_field``,
        ``text_field``) as one object (then leave them at their defaults), shared with
        :class:`~curator_dask.dedup.FuzzyDuplicates` and the ``FuzzyDedup`` stage.
    force : bool, default False
        As for :class:`~curator_dask.dedup.ExactDeduplicationWorkflow`.

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / "raw").mkdir()
    >>> base = "near duplicates share most of their character shingles " * 3
    >>> rows = [base, base + "!", "a different document altogether, nothing alike"]
    >>> _ = (root / "raw" / "a.jsonl").write_text(
    ...     "".join(json.dumps({"text": t}) + "\\n" for t in rows))
    >>> result = FuzzyDeduplicationWorkflow(
    ...     input_path=str(root / "raw"), cache_path=str(root / "cache"),
    ...     output_path=str(root / "dedup"), char_ngrams=5, perform_removal=True).run()
    >>> result.input_documents, result.duplicate_documents, result.kept_documents
    (3, 1, 2)
    """

    #: What the automatic blocksize fits in the workers' memory: MinHash (the largest task
    #: over text).
    working_set = "minhash"

    @nemo_keywords()
    @takes_config(FuzzyDedupConfig)
    def __init__(self, input_path, cache_path: str, output_path: str | None = None, *,
                 perform_removal: bool = False, input_filetype: FileType = "jsonl",
                 input_blocksize: int | str | None = None, on_bad_lines: OnBadLines = "error",
                 backend: Backend = "pandas", output_mode: OutputMode = "error",
                 storage_options: dict | None = None, config: FuzzyDedupConfig | None = None,
                 force: bool = False):
        check_workflow_options(input_filetype, output_mode, perform_removal=perform_removal,
                               output_path=output_path)
        self.input_path = input_path
        self.cache_path = cache_path
        self.output_path = output_path
        self.perform_removal = perform_removal
        self.input_filetype = input_filetype
        self.input_blocksize = input_blocksize
        self.on_bad_lines = check_on_bad_lines(on_bad_lines, input_filetype)
        self.backend = backend
        self.output_mode = output_mode
        self.storage_options = storage_options
        self.force = force
        self.dedup = FuzzyDuplicates(config=config)

    def __repr__(self) -> str:
        return (f"FuzzyDeduplicationWorkflow(input_path={self.input_path!r}, "
                f"cache_path={self.cache_path!r}, {self.dedup!r})")

    # -- inputs -------------------------------------------------------------------------------
    def _files(self):
        return input_files(self.input_path, self.input_filetype, self.storage_options)

    def identity(self) -> list[list]:
        """The identity of every input file (see :mod:`curator_dask.io.identity`)."""
        fs, files = self._files()
        return files_identity(fs, [f.path for f in files])

    def blocksize(self, identity: list | None = None) -> int:
        """Bytes per partition this run reads with: ``input_blocksize`` as given, or for
        the automatic choice the one an earlier run of the same input recorded in the
        cache (so a rerun on a cluster of another size reuses its phases), or a new
        automatic choice (see ``docs/io.md``). ``identity``: the input's
        (:meth:`identity`; computed unless given)."""
        _, files = self._files()
        if self.input_blocksize not in (None, AUTO):
            return resolve_blocksize(files, blocksize=self.input_blocksize)
        recorded = recorded_blocksize(self._path("minhash"),
                                      identity if identity is not None else self.identity(),
                                      storage_options=self.storage_options)
        return recorded or resolve_blocksize(files, work=self.working_set)

    def read(self, blocksize: int | None = None) -> DocumentDataset:
        """The input with ids, as the run sees it."""
        ds = read_input(self.input_path, self.input_filetype,
                        blocksize if blocksize is not None else self.blocksize(),
                        self.on_bad_lines, text_field=self.dedup.text_field,
                        backend=self.backend, storage_options=self.storage_options)
        if self.dedup.id_field not in ds.df.columns:
            ds = AddId(id_field=self.dedup.id_field)(ds)
        return ds

    def fingerprints(self, blocksize: int | None = None,
                     identity: list | None = None) -> dict[str, dict]:
        """What each phase depends on: the input files (their identities), how they are
        read, the parameters of that phase and of every phase before it. Changing the
        Jaccard threshold redoes components and what follows, not MinHash, LSH or the
        scores of the pairs."""
        identity = identity if identity is not None else self.identity()
        params = self.dedup.parameters()
        minhash = {"files": identity,
                   "input_filetype": self.input_filetype,
                   "input_blocksize": blocksize if blocksize is not None
                   else self.blocksize(identity),
                   **({"on_bad_lines": "skip"} if self.on_bad_lines != "error" else {}),
                   "minhash": params["minhash"]}
        lsh = {**minhash, "lsh": params["lsh"]}
        components = {**lsh, "components": params["components"]}
        # The Jaccard phase scores every candidate pair; the threshold applies after it.
        return {"minhash": minhash, "lsh": lsh, "jaccard": lsh, "components": components,
                "removal": {**components, "output_path": self.output_path}}

    def _path(self, *parts: str) -> str:
        return posixpath.join(self.cache_path.rstrip("/"), "fuzzy", *parts)

    # -- the run --------------------------------------------------------------------------------
    @scoped(FUZZY_SCOPE)
    def run(self) -> FuzzyDedupResult:
        """Deduplicate; resumes after the last phase found complete in ``cache_path``.

        Progress is reported phase by phase: a bar on a terminal, else INFO lines (see
        :mod:`curator_dask.observe.progress`).
        """
        with reporting(), faults_explained(self.blocksize, setting="input_blocksize"):
            return self._run()

    def _run(self) -> FuzzyDedupResult:
        identity = self.identity()
        blocksize = self.blocksize(identity)
        ds = self.read(blocksize)
        with workflow_run(self, ds):
            return self._dedup(ds, blocksize, self.fingerprints(blocksize, identity))

    def _dedup(self, ds: DocumentDataset, blocksize: int, fingerprints: dict
               ) -> FuzzyDedupResult:
        if self.perform_removal:  # an output this run may not replace: refuse before MinHash
            output_mode_for(self.output_path, self.output_mode, resuming=True,
                            fingerprint=fingerprints["removal"],
                            storage_options=self.storage_options)
        from_cache: list[str] = []
        seconds: dict[str, float] = {}

        def run_phase(name: str, compute) -> PhaseResult:
            start = time.perf_counter()
            done = read_phase(self._path(name), fingerprint=fingerprints[name],
                              storage_options=self.storage_options)
            if done is not None and name == "removal" and not self._output_intact(done):
                done = None
            if done is None:
                logger.info("fuzzy dedup: computing %s", name)
                with phase(f"fuzzy dedup: {name}"):
                    done = compute()
            else:
                from_cache.append(name)
            seconds[name] = round(time.perf_counter() - start, 3)
            return done

        signatures = run_phase("minhash", lambda: self._minhash(ds, fingerprints["minhash"]))
        self._check_ids()  # every run: a cached phase may predate the check
        lsh = run_phase("lsh", lambda: self._lsh(fingerprints["lsh"], signatures.rows))
        scored = None
        if self.dedup.false_positive_check:
            scored = run_phase("jaccard",
                               lambda: self._jaccard(ds, lsh, fingerprints["jaccard"]))
        components = run_phase("components",
                               lambda: self._components(lsh, scored, fingerprints["components"],
                                                        documents=signatures.rows))
        duplicates = components.rows - components.stats["groups"]
        result = FuzzyDedupResult(
            input_documents=signatures.rows, duplicate_documents=duplicates,
            duplicate_groups=components.stats["groups"],
            kept_documents=signatures.rows - duplicates, candidate_pairs=lsh.rows,
            false_positive_pairs=components.stats.get("false_positive_pairs"),
            phases_from_cache=from_cache,
            phase_seconds=seconds, groups_path=components.path,
            skipped_lines=_skipped_lines(signatures.stats.get("dropped", {})))
        if self.perform_removal:
            removal = run_phase("removal", lambda: self._removal(ds, fingerprints["removal"],
                                                                 resuming=bool(from_cache)))
            stats = removal.stats
            result.output = WriteResult(path=stats["path"], files=stats["files"],
                                        rows=stats["rows"], bytes=stats["bytes"],
                                        dropped=stats["dropped"])
            removed = stats["dropped"].get(FUZZY_DUPLICATE_REASON, 0)
            if removed != duplicates:
                logger.warning("removal dropped %d documents but the groups have %d "
                               "duplicates: were ids missing from the input?", removed,
                               duplicates)
            result.duplicate_documents = removed
            result.kept_documents = stats["rows"]
        elif self.output_path is not None:
            result.duplicate_ids_path = self._write_duplicate_ids(
                blocksize, fingerprints["minhash"]["files"], duplicates)
        logger.info("fuzzy dedup: %d documents in, %d near-duplicates in %d groups, %d kept "
                    "(phases from cache: %s)", result.input_documents,
                    result.duplicate_documents, result.duplicate_groups,
                    result.kept_documents, from_cache or "none")
        return result

    # -- phases ---------------------------------------------------------------------------------
    def _edges_schema(self, with_jaccard: bool = False) -> pa.Schema:
        fields = [pa.field(EDGE_FIELDS[0], pa.int64()), pa.field(EDGE_FIELDS[1], pa.int64())]
        if with_jaccard:
            fields.append(pa.field(JACCARD_FIELD, pa.float32()))
        return pa.schema(fields)

    def signatures(self):
        """The cached signatures, one partition per file (after the minhash phase)."""
        schema = pa.schema([pa.field(self.dedup.id_field, pa.int64()),
                            pa.field(SIGNATURE_FIELD,
                                     signature_type(self.dedup.minhash.use_64_bit_hash))])
        return read_parquet_parts(self._path("minhash"), schema,
                                  storage_options=self.storage_options)

    def groups(self):
        """The cached ``(id, group)`` of every duplicate document (after components)."""
        schema = pa.schema([pa.field(self.dedup.id_field, pa.int64()),
                            pa.field(GROUP_FIELD, pa.int64())])
        return read_parquet_parts(self._path("components"), schema,
                                  storage_options=self.storage_options)

    def _check_ids(self) -> None:
        """Raise DuplicateIdError if the signatures hold an id twice (one column read)."""
        id_field = self.dedup.id_field
        ids = read_parquet_parts(self._path("minhash"), pa.schema([(id_field, pa.int64())]),
                                 storage_options=self.storage_options)
        check_unique_ids(repeated_ids(ids, id_field), id_field,
                         who="FuzzyDeduplicationWorkflow", fix=(
                             "pass id_field= (--id-field) naming a column of unique ids, or "
                             "a name the input does not have, so that AddId numbers the "
                             "documents (for example id_field='curator_id')"))

    def _minhash(self, ds: DocumentDataset, fingerprint: dict) -> PhaseResult:
        return write_phase(self.dedup.signatures(ds).df, self._path("minhash"),
                           fingerprint=fingerprint, storage_options=self.storage_options)

    def _lsh(self, fingerprint: dict, documents: int) -> PhaseResult:
        signatures = self.signatures()
        lsh = self.dedup.lsh
        rows, parts = 0, []
        for bands in lsh.iterations(documents):
            name = f"bands-{bands.start:03d}-{bands.stop:03d}"
            path = self._path("lsh", name)
            done = read_phase(path, fingerprint=fingerprint, storage_options=self.storage_options)
            if done is None:
                logger.info("fuzzy dedup: LSH bands %d-%d of %d", bands.start, bands.stop - 1,
                            lsh.num_bands)
                with phase(f"bands {bands.start}-{bands.stop - 1} of {lsh.num_bands}"):
                    done = write_phase(lsh.band_edges(signatures, bands), path,
                                       fingerprint=fingerprint,
                                       storage_options=self.storage_options)
            rows += done.rows
            parts.append(name)
        mark_complete(self._path("lsh"), fingerprint=fingerprint, rows=rows, files=0,
                      stats={"iterations": parts}, storage_options=self.storage_options)
        return PhaseResult(self._path("lsh"), rows, 0, False, {"iterations": parts})

    def _candidate_edges(self, lsh: PhaseResult):
        import dask.dataframe as dd

        # The iterations the finished phase recorded (bands_per_iteration may differ now).
        iterations = [read_parquet_parts(self._path("lsh", name), self._edges_schema(),
                                         storage_options=self.storage_options)
                      for name in lsh.stats["iterations"]]
        return iterations[0] if len(iterations) == 1 else dd.concat(iterations)

    def _scored_pairs(self):
        return read_parquet_parts(self._path("jaccard"), self._edges_schema(True),
                                  storage_options=self.storage_options)

    def _jaccard(self, ds: DocumentDataset, lsh: PhaseResult, fingerprint: dict) -> PhaseResult:
        scored = self.dedup.pair_similarities(self._candidate_edges(lsh), ds, num_edges=lsh.rows)
        return write_phase(scored, self._path("jaccard"), fingerprint=fingerprint,
                           storage_options=self.storage_options)

    def _components(self, lsh: PhaseResult, scored: PhaseResult | None,
                    fingerprint: dict, documents: int) -> PhaseResult:
        stats: dict = {}
        if scored is None:
            edges, num_edges = self._candidate_edges(lsh), lsh.rows
        else:
            pairs = self._scored_pairs()
            similar = pairs[JACCARD_FIELD] >= np.float32(self.dedup.jaccard_threshold)
            passed = int(similar.sum().compute())
            stats["false_positive_pairs"] = scored.rows - passed
            edges, num_edges = pairs[similar], passed
        groups = self.dedup.groups(edges[list(EDGE_FIELDS)], num_edges=num_edges,
                                   num_ids=documents)

        def count_groups(_: PhaseResult) -> dict:
            return {**stats, "groups": int(self.groups()[GROUP_FIELD].nunique().compute())}

        return write_phase(groups, self._path("components"), fingerprint=fingerprint,
                           stats=count_groups, storage_options=self.storage_options)

    def _removal(self, ds: DocumentDataset, fingerprint: dict, resuming: bool) -> PhaseResult:
        return write_removal(lambda: self.dedup.remove(ds, self.groups()), self.output_path,
                             self.output_mode, self._path("removal"), fingerprint=fingerprint,
                             resuming=resuming, storage_options=self.storage_options)

    def _write_duplicate_ids(self, blocksize: int, files: list, duplicates: int) -> str | None:
        """The ids to remove, where NeMo Curator 1.x writes them (none: nothing written)."""
        if not duplicates:
            logger.info("fuzzy dedup: no duplicates; nothing written to %s", self.output_path)
            return None
        id_field = self.dedup.id_field
        ids = self.dedup.ids_to_remove(self.groups())
        given = id_field in read_input(self.input_path, self.input_filetype, blocksize,
                                       self.on_bad_lines, text_field=self.dedup.text_field,
                                       storage_options=self.storage_options).df.columns
        column = id_field if given else ASSIGNED_ID_FIELD  # AddId's ids: NeMo's column
        numbering = IdNumbering(self.input_filetype, blocksize, files, column,
                                assigned=not given)
        return write_duplicate_ids(ids.rename(columns={id_field: column}), self.output_path,
                                   "fuzzy", numbering, self.storage_options)

    def _output_intact(self, removal: PhaseResult) -> bool:
        return removal_output_intact(self.output_path, removal, self.storage_options)


def _skipped_lines(dropped: dict) -> int:
    return sum(n for reason, n in dropped.items() if reason.startswith("reader."))
