"""Entry point of the ``curator-dask`` command.

Commands: ``demo``, ``run PIPELINE.yaml``, ``dedup exact|fuzzy``, ``stages``. Exit codes:
0 success, 1 failure, 2 usage error (a bad argument or pipeline file); messages go to
stderr, results to stdout.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import os
import sys
import textwrap
from collections.abc import Callable

import yaml

__all__ = ["main"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A request that cannot be run as given: exit code 2."""


# -- the parser ------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="curator-dask",
        description="Curate text corpora for language-model training on Dask.",
        epilog="Exit codes: 0 success, 1 failure, 2 usage error. "
               "'curator-dask COMMAND --help' describes each command.",
    )
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log at DEBUG level (distributed's logs included)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo", help="curate the bundled sample on an embedded local Dask cluster",
        description="Curate the bundled sample of real text, with planted duplicates, near "
                    "duplicates and junk, on a local Dask cluster: read, language id, "
                    "heuristic filters, exact and fuzzy dedup, embeddings, Parquet. Prints "
                    "the dashboard link and a table per stage, and writes an HTML report.",
    )
    demo.add_argument("--output", default="demo-output",
                      help="directory for the input shards, the curated Parquet, the cache "
                           "and report.html (default: %(default)s)")
    demo.add_argument("--workers", type=_positive_int, default=2,
                      help="local worker processes (default: %(default)s)")
    demo.add_argument("--limit", type=_positive_int, default=None,
                      help="use only the first N documents of the sample (a quicker run)")
    demo.add_argument("--no-model", action="store_true",
                      help="leave out the embedding stage")

    run = commands.add_parser(
        "run", help="run a pipeline described in a YAML file",
        description="Run a pipeline from a YAML file: reader, stages by name with their "
                    "parameters, writer, executor, cluster options or a scheduler address. "
                    "'curator-dask stages' lists the stages.",
    )
    run.add_argument("pipeline", help="the pipeline file (YAML)")
    run.add_argument("--dry-run", action="store_true",
                     help="check the file and show the pipeline, without running it")
    run.add_argument("--report", help="write the curation report (HTML) here; overrides "
                                      "the file's 'report:'")
    run.add_argument("--scheduler-address",
                     help="run on this scheduler (tcp://host:8786) instead of the file's "
                          "cluster")

    dedup = commands.add_parser(
        "dedup", help="remove exact or near duplicates from files",
        description="Deduplicate a corpus on disk with a resumable workflow: the cache "
                    "keeps each phase's result, so a rerun continues where a failed one "
                    "stopped.",
    )
    methods = dedup.add_subparsers(dest="method", required=True, metavar="METHOD")
    from curator_dask.dedup import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow

    for method, workflow, text in (
        ("exact", ExactDeduplicationWorkflow, "documents with identical text (hash + shuffle)"),
        ("fuzzy", FuzzyDeduplicationWorkflow,
         "near duplicates (MinHash, LSH, connected components)"),
    ):
        sub = methods.add_parser(method, help=f"remove {text}",
                                 description=f"Remove {text}; keep the lowest id of each "
                                             "group. Options are the parameters of "
                                             f"{workflow.__name__}.")
        _add_workflow_arguments(sub, workflow)
        _add_cluster_arguments(sub)

    stages = commands.add_parser(
        "stages", help="list the stages a pipeline file can use",
        description="List the stages a pipeline file can name, with their parameters and "
                    "defaults; with a NAME, show that stage in full.",
    )
    stages.add_argument("name", nargs="?", help="a stage name (e.g. WordCountFilter)")
    stages.add_argument("--kind", choices=("filter", "modifier", "stage", "dedup"),
                        help="only stages of this kind")
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _yaml_value(text: str):
    """An option value as YAML reads it: ``64MiB`` stays text, ``5`` is 5, ``{a: 1}`` a dict."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


_PATH_ARGUMENTS = {"input_path": "--input", "output_path": "--output", "cache_path": "--cache"}


def _output_modes() -> tuple[str, ...]:
    from curator_dask.dedup.cache import OUTPUT_MODES

    return OUTPUT_MODES


#: Options with a fixed set of values, offered as choices.
_CHOICES = {"output_mode": _output_modes(), "input_filetype": ("jsonl", "parquet")}
_CHOICE_HELP = {
    "output_mode": "when --output holds files: 'error' refuses; 'overwrite' replaces what "
                   "curator-dask wrote there and refuses if anything else is there; "
                   "'overwrite_all' deletes everything in the directory first. ",
}
#: Help for options whose default is None (otherwise shown as "default: none").
_NONE_HELP = {
    "input_blocksize": "bytes per partition (e.g. 64MiB); default: chosen from the data and "
                       "the cluster, two partitions per worker thread, at most 256MiB",
    "config": "the algorithm's parameters as one YAML mapping (ExactDedupConfig / "
              "FuzzyDedupConfig fields), instead of one option each",
}


def _add_workflow_arguments(parser: argparse.ArgumentParser, workflow) -> None:
    """One option per parameter of the workflow's constructor, typed by its default."""
    for p in inspect.signature(workflow).parameters.values():
        if p.name in _PATH_ARGUMENTS:
            required = p.name != "output_path" or p.default is p.empty
            parser.add_argument(_PATH_ARGUMENTS[p.name], dest=p.name, required=required,
                                metavar="PATH",
                                help={"input_path": "input files or directory (any fsspec URL)",
                                      "output_path": "directory for the kept documents "
                                                     "(Parquet)",
                                      "cache_path": "directory for the resumable cache"}[p.name])
            continue
        flag = "--" + p.name.replace("_", "-")
        default = p.default
        if isinstance(default, bool):
            parser.add_argument(flag, dest=p.name, action=argparse.BooleanOptionalAction,
                                default=None if p.name == "perform_removal" else default,
                                help="default: on when --output is given"
                                if p.name == "perform_removal" else f"default: {default}")
        elif isinstance(default, int | float) and not isinstance(default, bool):
            parser.add_argument(flag, dest=p.name, type=type(default), default=default,
                                metavar=type(default).__name__.upper(),
                                help="default: %(default)s")
        elif p.name in _CHOICES:
            parser.add_argument(flag, dest=p.name, default=default, choices=_CHOICES[p.name],
                                help=_CHOICE_HELP.get(p.name, "") + "default: %(default)s")
        elif isinstance(default, str):
            parser.add_argument(flag, dest=p.name, default=default, metavar="TEXT",
                                help="default: %(default)s")
        else:  # None default: a value as YAML reads it (a size, a number, a mapping)
            parser.add_argument(flag, dest=p.name, type=_yaml_value, default=default,
                                metavar="VALUE", help=_NONE_HELP.get(p.name, "default: none"))


def _add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("cluster")
    group.add_argument("--workers", type=_positive_int, default=None,
                       help="local worker processes to start (default: one per core)")
    group.add_argument("--scheduler-address",
                       help="connect to this scheduler (tcp://host:8786) instead of starting "
                            "a local cluster")


# -- commands ----------------------------------------------------------------------------------

def _quiet_distributed() -> None:
    """distributed logs every worker start and stop at INFO, and each P2P shuffle and slow
    worker shutdown at WARNING; the CLI prints its own progress and summary."""
    import distributed  # noqa: F401  (configures its loggers, which we then turn down)

    def level(name: str) -> int:
        if name.startswith("distributed.nanny.memory"):  # a worker restarted for memory
            return logging.WARNING
        if name.startswith(("distributed.shuffle", "distributed.nanny")):
            return logging.ERROR
        return logging.WARNING

    for name in ["distributed", "distributed.shuffle", "distributed.nanny",
                 *logging.root.manager.loggerDict]:
        if name == "distributed" or name.startswith("distributed."):
            logging.getLogger(name).setLevel(level(name))


def _model_environment() -> None:
    """Worker processes inherit this: models load from local directories, quietly."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def _cmd_demo(args, echo: Callable[[str], None]) -> int:
    from curator_dask.cli.demo import run_demo
    from curator_dask.observe.report import format_stage_table

    _model_environment()
    demo = run_demo(args.output, n_workers=args.workers, limit=args.limit,
                    model=not args.no_model, echo=echo)
    echo("")
    echo(format_stage_table(demo.rows))
    echo("")
    echo("What is left of what was planted:")
    for kind, (left, planted) in demo.planted_left.items():
        echo(f"  {kind:<15} {left:>6,} of {planted:,}")
    echo("")
    result = demo.result
    echo(f"{result.rows:,} documents written to {demo.output} in {result.wall_seconds:.1f} s")
    echo(f"Report: {demo.report}")
    return EXIT_OK


def _cmd_run(args, echo: Callable[[str], None]) -> int:
    from curator_dask.cli.config import ConfigError, load_config

    try:
        config = load_config(args.pipeline)
    except ConfigError as err:
        raise UsageError(str(err)) from None
    pipeline = config.pipeline
    echo(pipeline.describe())
    if args.dry_run:
        echo(f"\n{args.pipeline}: valid ({config.executor_type} executor)")
        return EXIT_OK
    report = args.report or config.report
    _model_environment()
    cluster_options = dict(config.cluster_options)
    if args.scheduler_address:
        cluster_options = {"scheduler_address": args.scheduler_address}
    if config.executor_type == "local":
        result = _run_pipeline(pipeline, config.executor(), config.performance_report)
    else:
        from curator_dask.cluster import dashboard_link, get_client

        with get_client(**cluster_options) as client:
            link = dashboard_link(client)
            if link:
                echo(f"Dask dashboard: {link}")
            result = _run_pipeline(pipeline, config.executor(client),
                                   config.performance_report)
    _print_result(pipeline, result, report, echo)
    return EXIT_OK


def _run_pipeline(pipeline, executor, performance_report):
    pipeline.run(executor, report=performance_report)
    return pipeline.last_result


def _print_result(pipeline, result, report: str | None, echo) -> None:
    from curator_dask.observe.report import format_stage_table, stage_rows, write_report

    echo("")
    echo(format_stage_table(stage_rows(result, pipeline.stages)))
    echo("")
    if result.output_path:
        echo(f"{result.rows:,} documents written to {result.output_path} "
             f"({len(result.files):,} files) in {result.wall_seconds:.1f} s")
    else:
        echo(f"done in {result.wall_seconds:.1f} s (the pipeline has no writer)")
    if report:
        echo(f"Report: {write_report(result, report, stages=pipeline.stages)}")


def _workflow_options(args, workflow) -> dict:
    names = [p for p in inspect.signature(workflow).parameters]
    options = {name: getattr(args, name) for name in names if hasattr(args, name)}
    if "perform_removal" in options and options["perform_removal"] is None:
        options["perform_removal"] = options.get("output_path") is not None
    return options


def _cmd_dedup(args, echo: Callable[[str], None]) -> int:
    from curator_dask.cluster import dashboard_link, get_client
    from curator_dask.dedup import ExactDeduplicationWorkflow, FuzzyDeduplicationWorkflow

    workflow_cls = (ExactDeduplicationWorkflow if args.method == "exact"
                    else FuzzyDeduplicationWorkflow)
    try:
        workflow = workflow_cls(**_workflow_options(args, workflow_cls))
    except (TypeError, ValueError) as err:
        raise UsageError(str(err)) from None
    cluster = ({"scheduler_address": args.scheduler_address} if args.scheduler_address
               else {"n_workers": args.workers})
    with get_client(**cluster) as client:
        link = dashboard_link(client)
        if link:
            echo(f"Dask dashboard: {link}")
        result = workflow.run()
    echo("")
    fields = {k: v for k, v in vars(result).items() if k not in ("output",)}
    width = max(len(k) for k in fields)
    for key, value in fields.items():
        shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value
        echo(f"{key.ljust(width)}  {shown}")
    if result.output is not None:
        echo(f"\n{result.output.rows:,} documents written to {result.output.path} "
             f"({len(result.output.files):,} files)")
    return EXIT_OK


def _format_default(value) -> str:
    if isinstance(value, float) and value == float("inf"):
        return "inf"
    if isinstance(value, str) and value.startswith("(the "):  # "(the stage's)"
        return value
    return repr(value)


def _cmd_stages(args, echo: Callable[[str], None]) -> int:
    from curator_dask.cli.registry import stage_catalog

    catalog = stage_catalog()
    if args.name:
        spec = catalog.get(args.name)
        if spec is None:
            import difflib

            close = difflib.get_close_matches(args.name, list(catalog), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"unknown stage {args.name!r}{hint}; valid stages: "
                             f"{', '.join(catalog)}")
        echo(f"{spec.name}  ({spec.kind}, {spec.module})")
        echo(f"  {spec.summary}")
        echo("  parameters:")
        for p in spec.parameters:
            default = "required" if p.required else f"default {_format_default(p.default)}"
            echo(f"    {p.name}: {p.annotation or 'any'}, {default}")
        if spec.options:
            echo("  options:")
            for p in spec.options:
                echo(f"    {p.name}: {p.annotation or 'any'}, default "
                     f"{_format_default(p.default)}")
        required = {p.name: "..." for p in spec.parameters if p.required}
        example = yaml.safe_dump({"stages": [{spec.name: required} if required else spec.name]},
                                 sort_keys=False).rstrip()
        echo("  in a pipeline file:\n" + "\n".join("    " + line for line in example.splitlines()))
        return EXIT_OK
    headers = {
        "filter": "Filters: ScoreFilter(<filter>); each also takes text_field, score_field, "
                  "invert, name, resources, batch_size",
        "modifier": "Modifiers: Modify(<modifier>); each also takes text_field, name, "
                    "resources, batch_size",
        "stage": "Partition stages: each also takes name, resources, batch_size",
        "dedup": "Whole-dataset stages (barriers)",
    }
    kind = None
    for spec in catalog.values():
        if args.kind and spec.kind != args.kind:
            continue
        if spec.kind != kind:
            kind = spec.kind
            echo(("" if kind == (args.kind or "filter") else "\n") + headers[kind])
        params = ", ".join(p.name if p.required else f"{p.name}={_format_default(p.default)}"
                           for p in spec.parameters)
        echo(textwrap.fill(f"{spec.name}({params})", width=100, initial_indent="  ",
                           subsequent_indent="      ", break_on_hyphens=False))
        echo(f"      {spec.summary}")
    return EXIT_OK


COMMANDS = {"demo": _cmd_demo, "run": _cmd_run, "dedup": _cmd_dedup, "stages": _cmd_stages}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # a usage error exits with 2 here
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        _quiet_distributed()
    command = args.command + (f" {args.method}" if args.command == "dedup" else "")
    try:
        return COMMANDS[args.command](args, echo=print)
    except UsageError as err:
        print(f"curator-dask {command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as err:  # the CLI's job: one clear line on stderr, exit code 1
        logging.getLogger("curator_dask").debug("failure", exc_info=True)
        print(f"curator-dask {command}: error: {err}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
