"""Entry point of the ``curator-dask`` command.

Commands: ``demo``, ``run PIPELINE.yaml``, ``dedup exact|fuzzy|semantic|index|lines``, ``stages``,
``migrate SCRIPT.py``. Exit codes: 0 success, 1 failure, 2 usage error (a bad argument or
pipeline file, or a path to write that is, contains or lies inside an input or another
output of the command, refused before anything runs); messages go to stderr, results to
stdout.

curator-dask logs at INFO (progress lines every 10 s when stderr is not a terminal, a
progress bar when it is); Dask's own loggers only at WARNING and above, its worker
restarts and P2P shuffle notes not at all (``-v`` shows everything at DEBUG).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import logging
import os
import re
import sys
import textwrap
import typing
import warnings
from collections.abc import Callable

import yaml

from curator_dask.cli import dedup_index
from curator_dask.cli.arguments import positive_int
from curator_dask.cli.migrate import add_migrate_parser, run_migrate
from curator_dask.cli.outputs import pipeline_outputs, workflow_outputs
from curator_dask.errors import CuratorError
from curator_dask.io.errors import OutputOverlapsInputError

__all__ = ["main"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
#: The shell's code for a command ended by Ctrl-C (128 + SIGINT).
EXIT_INTERRUPTED = 130


class UsageError(CuratorError):
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
    demo.add_argument("--workers", type=positive_int, default=2,
                      help="local worker processes (default: %(default)s)")
    demo.add_argument("--limit", type=positive_int, default=None,
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
    run.add_argument("--force", action="store_true",
                     help="take over the lease of the output (or cache) directory when the "
                          "run that held it stopped heart-beating; a directory another live "
                          "run writes is always refused")

    dedup = commands.add_parser(
        "dedup", help="remove exact or near duplicates from files",
        description="Deduplicate a corpus on disk with a resumable workflow: the cache "
                    "keeps each phase's result, so a rerun continues where a failed one "
                    "stopped.",
    )
    methods = dedup.add_subparsers(dest="method", required=True, metavar="METHOD")
    for method, (workflow, text) in _workflows().items():
        keeps = ("keep the document ranked first in its cluster by --which-to-keep"
                 if method == "semantic" else "keep the lowest id of each group")
        sub = methods.add_parser(method, help=f"remove {text}",
                                 description=f"Remove {text}; {keeps}. Options are the "
                                             f"parameters of {workflow.__name__}.")
        _add_workflow_arguments(sub, workflow)
        _add_cluster_arguments(sub)
    dedup_index.add_commands(methods, _add_cluster_arguments)

    stages = commands.add_parser(
        "stages", help="list the stages a pipeline file can use",
        description="List the stages a pipeline file can name, with their parameters and "
                    "defaults; with a NAME, show that stage in full.",
    )
    stages.add_argument("name", nargs="?", help="a stage name (e.g. WordCountFilter)")
    stages.add_argument("--kind", choices=("filter", "modifier", "stage", "dedup"),
                        help="only stages of this kind")
    add_migrate_parser(commands)
    return parser


def _workflows() -> dict:
    from curator_dask.dedup import (
        ExactDeduplicationWorkflow,
        FuzzyDeduplicationWorkflow,
        SemanticDeduplicationWorkflow,
    )

    return {
        "exact": (ExactDeduplicationWorkflow, "documents with identical text (hash + shuffle)"),
        "fuzzy": (FuzzyDeduplicationWorkflow,
                  "near duplicates (MinHash, LSH, connected components)"),
        "semantic": (SemanticDeduplicationWorkflow,
                     "semantic duplicates (embeddings, k-means, cosine within clusters)"),
    }


def _yaml_value(text: str):
    """An option value as YAML reads it: ``64MiB`` stays text, ``5`` is 5, ``{a: 1}`` a dict."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _yaml_text(value) -> str:
    """``value`` as one would type it: ``(0.01, 0.001)`` as ``[0.01, 0.001]``."""
    return yaml.safe_dump(list(value) if isinstance(value, tuple) else value,
                          default_flow_style=True).strip()


_PATH_ARGUMENTS = {"input_path": "--input", "output_path": "--output", "cache_path": "--cache"}


#: What some choices mean, before the list of allowed values.
_CHOICE_HELP = {
    "output_mode": "when --output holds files: 'error' refuses; 'overwrite' replaces what "
                   "curator-dask wrote there and refuses if anything else is there; "
                   "'overwrite_all' deletes everything in the directory first. ",
    "on_bad_lines": "a malformed JSONL line: 'error' stops naming the file and line; 'skip' "
                    "leaves it out and counts it; 'warn' also logs it. ",
}
#: Help for options whose default is None (otherwise shown as "default: none").
_NONE_HELP = {
    "input_blocksize": "bytes per partition (e.g. 64MiB); default: chosen from the data and "
                       "the cluster, two partitions per worker thread, at most 64MiB and "
                       "within the workers' memory",
    "config": "the algorithm's parameters as one YAML mapping (ExactDedupConfig / "
              "FuzzyDedupConfig / SemanticDedupConfig fields), instead of one option each",
}


def _choices(hint) -> tuple | None:
    """The values of a ``Literal`` hint (also inside ``X | None``), else None."""
    if typing.get_origin(hint) is typing.Literal:
        return typing.get_args(hint)
    for arg in typing.get_args(hint):
        if typing.get_origin(arg) is typing.Literal:
            return typing.get_args(arg)
    return None


def _option(name: str) -> str:
    return _PATH_ARGUMENTS.get(name, "--" + name.replace("_", "-"))


def _add_workflow_arguments(parser: argparse.ArgumentParser, workflow) -> None:
    """One option per parameter of the workflow's constructor, typed by its default;
    parameters with a fixed set of values (``Literal`` hints) list them."""
    from curator_dask.cli.registry import parameters_of

    hints = {p.name: p.hint for p in parameters_of(workflow)}
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
        flag = _option(p.name)
        default = p.default
        choices = _choices(hints.get(p.name))
        if isinstance(default, bool):
            parser.add_argument(flag, dest=p.name, action=argparse.BooleanOptionalAction,
                                default=None if p.name == "perform_removal" else default,
                                help="default: on when --output is given"
                                if p.name == "perform_removal" else f"default: {default}")
        elif choices is not None:
            parser.add_argument(flag, dest=p.name, default=default, choices=choices,
                                metavar="{" + ",".join(map(str, choices)) + "}",
                                help=_CHOICE_HELP.get(p.name, "")
                                + ("One" if p.name in _CHOICE_HELP else "one") + " of: "
                                + ", ".join(map(str, choices)) + " (default: %(default)s)")
        elif isinstance(default, int | float) and not isinstance(default, bool):
            parser.add_argument(flag, dest=p.name, type=type(default), default=default,
                                metavar=type(default).__name__.upper(),
                                help="default: %(default)s")
        elif isinstance(default, str):
            parser.add_argument(flag, dest=p.name, default=default, metavar="TEXT",
                                help="default: %(default)s")
        else:  # a value as YAML reads it (a size, a number, a list, a mapping)
            parser.add_argument(flag, dest=p.name, type=_yaml_value, default=default,
                                metavar="VALUE", help=_NONE_HELP.get(p.name, "default: none")
                                if default is None else f"default: {_yaml_text(default)}")


def _add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("cluster")
    group.add_argument("--workers", type=positive_int, default=None,
                       help="local worker processes to start (default: one per core)")
    group.add_argument("--scheduler-address",
                       help="connect to this scheduler (tcp://host:8786) instead of starting "
                            "a local cluster")


# -- commands ----------------------------------------------------------------------------------

def _configure_logging(verbose: bool) -> None:
    """curator-dask at INFO (its progress lines), Dask quiet; everything at DEBUG with -v."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    if verbose:
        return
    logging.getLogger("curator_dask").setLevel(logging.INFO)
    _quiet_distributed()
    # The CLI prints the dashboard's address, wherever distributed put it.
    warnings.filterwarnings("ignore", message="Port .* is already in use", category=UserWarning)


#: Options the CLI gives the clusters it starts: their worker processes log only errors
#: (not each P2P shuffle, nor "killing" a slow worker at shutdown).
_QUIET_CLUSTER = {"silence_logs": logging.ERROR}


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
                    model=not args.no_model, echo=echo,
                    cluster_options=_local_options({}, args.verbose))
    echo("")
    echo(format_stage_table(demo.rows))
    echo("")
    from curator_dask.observe.tables import text_table

    echo("What is left of what was planted:")
    echo(text_table(("", "left", "planted"),
                    [(kind, f"{left:,}", f"{planted:,}")
                     for kind, (left, planted) in demo.planted_left.items()], indent="  "))
    echo("")
    result = demo.result
    echo(f"{result.rows:,} documents written to {demo.output} in {result.wall_seconds:.1f} s")
    echo(f"Report: {demo.report}")
    return EXIT_OK


def _cmd_run(args, echo: Callable[[str], None]) -> int:
    from curator_dask.cli.config import ConfigError, load_config

    try:
        config = load_config(args.pipeline)
        config.check_inputs()
    except ConfigError as err:
        raise UsageError(str(err)) from None
    pipeline = config.pipeline
    echo(pipeline.describe())
    report = args.report or config.report
    try:
        guard = pipeline_outputs(config, report, force=args.force)
    except OutputOverlapsInputError as err:  # a path of the file: refused before running
        raise UsageError(str(err)) from None
    if args.dry_run:
        echo(f"\n{args.pipeline}: valid ({config.executor_type} executor)")
        return EXIT_OK
    _model_environment()
    cluster_options = dict(config.cluster_options)
    if args.scheduler_address:
        cluster_options = {"scheduler_address": args.scheduler_address}
    with guard:  # one writer per output: this command holds the leases until it ends
        if config.executor_type == "local":
            result = _run_pipeline(pipeline, config.executor(), config.performance_report)
        else:
            from curator_dask.cluster import dashboard_link, get_client
            from curator_dask.precompile import precompile_in_background

            # Kernels compile (or load) here while the cluster starts, into the cache its
            # workers load from: no stage's time is a compile.
            compiling = precompile_in_background()
            with get_client(**_local_options(cluster_options, args.verbose)) as client:
                link = dashboard_link(client)
                if link:
                    echo(f"Dask dashboard: {link}")
                compiling.join()
                result = _run_pipeline(pipeline, config.executor(client),
                                       config.performance_report)
        _print_result(pipeline, result, report, echo)
    return EXIT_OK


def _local_options(options: dict, verbose: bool) -> dict:
    """``get_client`` options, quiet workers added when it starts a local cluster."""
    connects = options.get("scheduler_address") or options.get("scheduler_file")
    if verbose or connects:
        return dict(options)
    return {**_QUIET_CLUSTER, **options}


class CommandError(CuratorError):
    """A command that failed (exit code 1), its message in the CLI's spelling."""


#: Python keywords in error messages, as a pipeline file spells them.
_RUN_SPELLINGS = {"mode": lambda value: f"'mode: {value}' in the writer section",
                  "resume": lambda value: f"'resume: {value.lower()}' in the executor section"}


def _flag_spelling(name: str) -> Callable[[str], str]:
    flag = _option(name)

    def spell(value: str) -> str:
        if value in ("True", "False"):  # argparse's BooleanOptionalAction
            return flag if value == "True" else "--no-" + flag[2:]
        return f"{flag} {value}"

    return spell


def _cli_spelling(message: str, spellings: dict[str, Callable[[str], str]]) -> str:
    """``message`` with ``name='value'`` keywords respelled as the command takes them.

    Examples
    --------
    >>> spellings = {"output_mode": _flag_spelling("output_mode")}
    >>> _cli_spelling("pass output_mode='overwrite' to replace", spellings)
    'pass --output-mode overwrite to replace'
    """
    def respell(match: re.Match) -> str:
        name, value = match.group(1), match.group(3)
        return spellings[name](value) if name in spellings else match.group(0)

    return re.sub(r"\b([a-z_]+)=(['\"]?)([\w.]+)\2", respell, message)


def _run_pipeline(pipeline, executor, performance_report):
    try:
        pipeline.run(executor, report=performance_report)
    except Exception as err:
        raise CommandError(_cli_spelling(str(err), _RUN_SPELLINGS)) from err
    return pipeline.last_result


def _print_result(pipeline, result, report: str | None, echo) -> None:
    from curator_dask.observe.report import format_stage_table, stage_rows, write_report
    from curator_dask.observe.run_result import describe_lost_workers

    echo("")
    echo(format_stage_table(stage_rows(result, pipeline.stages)))
    echo("")
    lost = describe_lost_workers(result.lost_workers)
    if lost:
        echo(lost)
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

    cluster = ({"scheduler_address": args.scheduler_address} if args.scheduler_address
               else {"n_workers": args.workers})
    if args.method in dedup_index.COMMANDS:
        return dedup_index.run(args, echo, _local_options(cluster, args.verbose))
    workflow_cls = _workflows()[args.method][0]
    spellings = {name: _flag_spelling(name) for name in inspect.signature(workflow_cls).parameters}
    try:
        workflow = workflow_cls(**_workflow_options(args, workflow_cls))
    except (TypeError, ValueError) as err:
        raise UsageError(_cli_spelling(str(err), spellings)) from None
    try:
        guard = workflow_outputs(workflow)
    except OutputOverlapsInputError as err:  # --output or --cache: refused before running
        raise UsageError(str(err)) from None
    with guard, get_client(**_local_options(cluster, args.verbose)) as client:
        link = dashboard_link(client)
        if link:
            echo(f"Dask dashboard: {link}")
        try:
            result = workflow.run()
        except Exception as err:
            raise CommandError(_cli_spelling(str(err), spellings)) from err
    echo("")
    echo(_dedup_table(result))
    if result.output is not None:
        echo(f"\n{result.output.rows:,} documents written to {result.output.path} "
             f"({len(result.output.files):,} files)")
    return EXIT_OK


def _dedup_table(result) -> str:
    """A dedup workflow's result: the documents, then each phase's seconds."""
    from dataclasses import fields

    from curator_dask.observe.tables import text_table

    counts, phases = [], []
    values = {f.name: getattr(result, f.name) for f in fields(result)}
    for name, value in values.items():
        if name in ("output", "phase_seconds", "phases_from_cache", "groups_path",
                    "pairs_path", "identify_from_cache") or name.endswith("_seconds"):
            continue
        if isinstance(value, dict):  # semantic: duplicates at each threshold
            counts.extend((f"{name.replace('_', ' ')} {key}", f"{count:,}")
                          for key, count in value.items())
            continue
        shown = ("-" if value is None else ("yes" if value else "no")
                 if isinstance(value, bool) else f"{value:,}")
        counts.append((name.replace("_", " "), shown))
    if "phase_seconds" in values:  # fuzzy: every phase run or read back
        cached = set(values["phases_from_cache"])
        phases = [(name, f"{seconds:.2f}", "yes" if name in cached else "no")
                  for name, seconds in values["phase_seconds"].items()]
    else:  # exact: finding the duplicates, then removing them and writing the rest
        phases = [("identify", f"{values['identify_seconds']:.2f}",
                   "yes" if values["identify_from_cache"] else "no"),
                  ("remove and write", f"{values['remove_seconds']:.2f}", "no")]
    out = text_table(("", "documents"), counts) + "\n\n" + \
        text_table(("phase", "seconds", "from cache"), phases)
    if values.get("groups_path"):
        out += f"\n\ngroups (id, group): {values['groups_path']}"
    if values.get("pairs_path"):
        out += f"\n\npairs (id, duplicate_of, cosine_similarity, cluster): {values['pairs_path']}"
    return out


def _format_default(value) -> str:
    if isinstance(value, float) and value == float("inf"):
        return "inf"
    if isinstance(value, str) and value.startswith("(the "):  # "(the stage's)"
        return value
    return repr(value)


def _cmd_stages(args, echo: Callable[[str], None]) -> int:
    from curator_dask._docstrings import plain
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
        from curator_dask.observe.tables import text_table

        echo(f"{spec.name}  ({spec.kind}, {spec.module})")
        echo("")
        echo(textwrap.indent(plain(spec.description), "  "))
        echo("")
        rows = [(p.name, p.annotation or "any",
                 "required" if p.required else _format_default(p.default))
                for p in spec.parameters]
        echo(text_table(("parameter", "type", "default"), rows, indent="  "))
        if spec.options:
            echo("")
            echo(text_table(("option", "type", "default"),
                            [(p.name, p.annotation or "any", _format_default(p.default))
                             for p in spec.options], indent="  "))
        required = {p.name: "..." for p in spec.parameters if p.required}
        example = yaml.safe_dump({"stages": [{spec.name: required} if required else spec.name]},
                                 sort_keys=False).rstrip()
        echo("\n  in a pipeline file:\n" + textwrap.indent(example, "    "))
        return EXIT_OK
    headers = {
        "filter": "Filters: ScoreFilter(<filter>); each also takes text_field, score_field, "
                  "score_type, invert, name, resources, batch_size",
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
        echo(f"      {plain(spec.summary)}")
    return EXIT_OK


COMMANDS = {"demo": _cmd_demo, "run": _cmd_run, "dedup": _cmd_dedup, "stages": _cmd_stages,
            "migrate": run_migrate}


def _log_beside_bars():
    """On a terminal, log lines go through tqdm, so they do not break a progress bar."""
    if not sys.stderr.isatty():
        return contextlib.nullcontext()
    from tqdm.contrib.logging import logging_redirect_tqdm

    return logging_redirect_tqdm()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # a usage error exits with 2 here
    _configure_logging(args.verbose)
    command = args.command + (f" {args.method}" if args.command == "dedup" else "") + (
        f" {args.action}" if getattr(args, "action", None) else "")
    try:
        with _log_beside_bars():
            return COMMANDS[args.command](args, echo=print)
    except (UsageError, dedup_index.RequestError) as err:
        print(f"curator-dask {command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"curator-dask {command}: interrupted; the parts finished so far are kept "
              "(a pipeline file with 'resume: true' in its executor section goes on from "
              "them)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `curator-dask stages | head`: the reader has what it wants
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as err:  # the CLI's job: one clear line on stderr, exit code 1
        logging.getLogger("curator_dask").debug("failure", exc_info=True)
        print(f"curator-dask {command}: error: {err}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
