"""``curator-dask dedup index build|query|append`` and ``curator-dask dedup lines``.

Deduplication that remembers: build an index from a corpus (or a finished fuzzy run's
cache), compare new batches with it, and append what they keep; and line, paragraph or
sentence-span dedup of files. :mod:`curator_dask.cli.main` registers the commands under
``dedup`` and runs them on the cluster it starts or connects to.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from curator_dask.cli.arguments import positive_int
from curator_dask.errors import CuratorError

__all__ = ["COMMANDS", "RequestError", "add_commands", "run"]

#: The ``dedup`` methods this module adds.
COMMANDS = ("index", "lines")


class RequestError(CuratorError, ValueError):
    """Options that cannot run as given (the command's usage error)."""


def _input_arguments(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--input", dest="input_path", required=required, metavar="PATH",
                        help="input files or directory (any fsspec URL)")
    parser.add_argument("--input-filetype", choices=("jsonl", "parquet"), default="jsonl",
                        help="default: %(default)s")
    parser.add_argument("--input-blocksize", default=None, metavar="SIZE",
                        help="bytes per partition (e.g. 64MiB); default: chosen from the "
                             "data and the cluster")
    parser.add_argument("--on-bad-lines", choices=("error", "skip", "warn"), default="error",
                        help="a malformed JSONL line: stop naming it, or skip and count it "
                             "(default: %(default)s)")
    parser.add_argument("--text-field", default="text", help="default: %(default)s")


def _output_arguments(parser: argparse.ArgumentParser, required: bool) -> None:
    parser.add_argument("--output", dest="output_path", required=required, metavar="PATH",
                        help="directory for the kept documents (Parquet)")
    parser.add_argument("--output-mode", choices=("error", "overwrite", "overwrite_all"),
                        default="error",
                        help="when --output holds files: 'error' refuses; 'overwrite' "
                             "replaces what curator-dask wrote there; 'overwrite_all' "
                             "deletes everything in it first (default: %(default)s)")


def _index_arguments(parser: argparse.ArgumentParser, *, build: bool) -> None:
    parser.add_argument("--index", dest="index_path", required=True, metavar="PATH",
                        help="the index directory (any fsspec URL)")
    parser.add_argument("--id-field", default="id",
                        help="document ids; added with AddId when the input has none "
                             "(default: %(default)s)")
    parser.add_argument("--config", default=None, metavar="YAML",
                        help="ExactDedupConfig / FuzzyDedupConfig fields as one YAML mapping, "
                             "e.g. '{char_ngrams: 24, num_bands: 20}'; default: the index's "
                             "own parameters" + (" (NeMo Curator's for a new one)" if build
                                                 else ""))
    if build:
        parser.add_argument("--kind", choices=("exact", "fuzzy"), default="exact",
                            help="exact (text hashes) or fuzzy (LSH buckets) "
                                 "(default: %(default)s)")
        parser.add_argument("--partitions", type=positive_int, default=None,
                            help="index partitions (fixed when it is created): default, the "
                                 "input's partition count")


def add_commands(methods, cluster_arguments: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``index`` (with ``build``, ``query``, ``append``) and ``lines`` to the
    ``dedup`` subcommands; ``cluster_arguments`` adds ``--workers`` and
    ``--scheduler-address`` to each."""
    index = methods.add_parser(
        "index", help="deduplicate new batches against an index of earlier ones",
        description="A dedup index remembers the documents of earlier batches (exact: text "
                    "hashes; fuzzy: LSH buckets), so a new batch is deduplicated against "
                    "them without computing them again.")
    actions = index.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = actions.add_parser(
        "build", help="add a corpus to an index (creating it)",
        description="Add a corpus to an index, creating it: its documents' keys become one "
                    "generation. With --from-cache, a finished fuzzy dedup run's signatures "
                    "instead (nothing is hashed again).")
    query = actions.add_parser(
        "query", help="remove what the index holds from a batch; the index stays as it is",
        description="Write the batch without the documents the index holds and without "
                    "its own duplicates; the index is not changed.")
    append = actions.add_parser(
        "append", help="query a batch, write what it keeps, then add it to the index",
        description="Write the batch without the documents the index holds and its own "
                    "duplicates, then add it to the index as a new generation. A rerun of "
                    "the same batch keeps the same documents and appends nothing.")
    for parser, build_ in ((build, True), (query, False), (append, False)):
        _index_arguments(parser, build=build_)
        _input_arguments(parser, required=not build_)
        _output_arguments(parser, required=not build_)
        if build_:
            parser.add_argument("--from-cache", dest="cache_path", metavar="PATH",
                                help="a finished 'dedup fuzzy' run's --cache, instead of "
                                     "--input")
        cluster_arguments(parser)

    lines = methods.add_parser(
        "lines", help="remove lines, paragraphs or sentence spans repeated across a corpus",
        description="Count every normalised line (or paragraph, or span of sentences) "
                    "across the corpus and remove those seen more than --max-occurrences "
                    "times, keeping the first (or none); documents left empty are dropped.")
    _input_arguments(lines)
    _output_arguments(lines, required=True)
    lines.add_argument("--unit", choices=("line", "paragraph", "sentence"), default="line",
                       help="default: %(default)s")
    lines.add_argument("--span", type=positive_int, default=None,
                       help="segments in a span (default: 3 sentences, 1 line or paragraph)")
    lines.add_argument("--max-occurrences", type=positive_int, default=1,
                       help="remove spans seen more often than this (default: %(default)s)")
    lines.add_argument("--keep", choices=("first", "none"), default="first",
                       help="keep a repeated span's first occurrence, or none "
                            "(default: %(default)s)")
    lines.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=True,
                       help="compare spans case-insensitively (default: on)")
    lines.add_argument("--min-chars", type=positive_int, default=1,
                       help="shorter segments are never counted or removed (default: "
                            "%(default)s)")
    cluster_arguments(lines)


# -- running -----------------------------------------------------------------------------------

def _read(args, *, with_ids: bool = True):
    from curator_dask.dedup.workflow import check_on_bad_lines, read_input
    from curator_dask.stages.ids import AddId

    check_on_bad_lines(args.on_bad_lines, args.input_filetype)
    ds = read_input(args.input_path, args.input_filetype, args.input_blocksize,
                    args.on_bad_lines, text_field=args.text_field)
    id_field = getattr(args, "id_field", "id")
    if with_ids and id_field not in ds.df.columns:
        ds = AddId(id_field=id_field)(ds)
    return ds


def _index(args):
    import yaml

    from curator_dask.dedup.index import ExactDedupIndex, FuzzyDedupIndex
    from curator_dask.dedup.index.store import index_kind

    kind = index_kind(args.index_path) or (args.kind if args.action == "build" else None)
    if kind is None:
        raise RequestError(f"there is no dedup index at {args.index_path}: build one first "
                           "(curator-dask dedup index build)")
    config = yaml.safe_load(args.config) if args.config else {}
    if not isinstance(config, dict):
        raise RequestError(f"--config must be a YAML mapping, got {args.config!r}")
    # The rest of the parameters: the index's own where it has them.
    config = {**config, "id_field": args.id_field, "text_field": args.text_field}
    cls = ExactDedupIndex if kind == "exact" else FuzzyDedupIndex
    return cls(args.index_path, config=config, partitions=getattr(args, "partitions", None))


def run(args, echo: Callable[[str], None], client_options: dict) -> int:
    """Run ``dedup index ...`` or ``dedup lines`` on a cluster from ``client_options``."""
    from curator_dask.cluster import dashboard_link, get_client
    from curator_dask.io.errors import OutputOverlapsInputError

    try:
        if args.method == "lines":
            prepared, guard = _prepare_lines(args)
        else:
            prepared, guard = _prepare_index(args)
    except (TypeError, ValueError, OutputOverlapsInputError) as err:
        raise RequestError(str(err)) from None
    with guard, get_client(**client_options) as client:
        link = dashboard_link(client)
        if link:
            echo(f"Dask dashboard: {link}")
        rows = prepared()
    from curator_dask.observe.tables import text_table

    echo("")
    echo(text_table(("", "value"), rows))
    return 0


def _prepare_lines(args):
    from curator_dask.dataset import DocumentDataset
    from curator_dask.dedup.lines import LineDedup
    from curator_dask.io.guard import OutputGuard

    stage = LineDedup(unit=args.unit, span=args.span, max_occurrences=args.max_occurrences,
                      keep=args.keep, lowercase=args.lowercase, min_chars=args.min_chars,
                      text_field=args.text_field)

    ds = _read(args, with_ids=False)
    guard = OutputGuard([ds.sources])  # refused here, before the cluster starts
    guard.register(args.output_path, "output directory")

    def go():
        deduplicated: DocumentDataset = stage(ds)
        written = deduplicated.to_parquet(args.output_path, mode=args.output_mode)
        stats = stage.last_run
        return [("documents in", f"{written.rows + sum(written.dropped.values()):,}"),
                ("spans counted", f"{stats.spans:,}"),
                ("repeated spans", f"{stats.repeated_spans:,}"),
                (f"{args.unit}s removed", f"{written.counters.get(stage.counter, 0):,}"),
                ("documents emptied", f"{written.dropped.get(stage.reason, 0):,}"),
                ("documents written", f"{written.rows:,}"),
                ("output", written.path)]

    return go, guard


def _prepare_index(args):
    from curator_dask.dataset import DocumentDataset
    from curator_dask.dedup.index import FuzzyDedupIndex
    from curator_dask.io.guard import OutputGuard

    if args.action == "build" and (args.input_path is None) == (args.cache_path is None):
        raise RequestError("give the corpus with --input, or a finished fuzzy run's cache "
                           "with --from-cache (one of them)")
    if args.action == "build" and args.cache_path is not None:
        guard = OutputGuard()
        guard.register(args.cache_path, "fuzzy dedup cache", lease=False)
        guard.register(args.index_path, "dedup index")

        def from_cache():
            index = FuzzyDedupIndex.from_fuzzy_cache(args.index_path, args.cache_path,
                                                     partitions=args.partitions)
            return [("index", repr(index))]

        return from_cache, guard
    index = _index(args)
    ds = _read(args)
    # Refused here, before the cluster starts: the index and the output may not touch the
    # input or each other.
    guard = OutputGuard([ds.sources])
    guard.register(args.index_path, "dedup index")
    if args.output_path is not None:
        guard.register(args.output_path, "output directory")

    def go():
        query = index.query(ds)
        rows = [("documents", f"{query.documents:,}"),
                *((f"removed: {reason}", f"{count:,}") for reason, count in query.removed.items()),
                ("compared with generation", str(query.base_generation))]
        if args.output_path is not None:
            kept: DocumentDataset = query.kept
            written = kept.to_parquet(args.output_path, mode=args.output_mode)
            rows.append(("documents written", f"{written.rows:,}"))
            rows.append(("output", written.path))
        if args.action in ("build", "append"):
            rerun = query.appended_as is not None
            rows.append(("keys added", "0 (a rerun)" if rerun else f"{query.new_keys:,}"))
            rows.append(("generation", str(query.append())))
        return rows

    return go, guard
