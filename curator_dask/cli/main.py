"""Entry point of the ``curator-dask`` command.

Exit codes: 0 success, 1 failure, 2 usage error; messages go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="curator-dask",
        description="Curate text corpora for language-model training on Dask.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser(
        "demo", help="curate the bundled sample on an embedded local Dask cluster",
        description="Read the bundled sample of real text, assign ids, normalise it and "
                    "write Parquet on a local Dask cluster; print a summary per stage.",
    )
    demo.add_argument("--output", default="demo-output",
                      help="directory for the demo's input shards and output (default: %(default)s)")
    demo.add_argument("--workers", type=int, default=2,
                      help="local worker processes (default: %(default)s)")
    return parser


def _quiet_distributed() -> None:
    """distributed logs every worker start and stop at INFO; the CLI prints its own summary."""
    import distributed  # noqa: F401  (configures its loggers, which we then turn down)

    for name in list(logging.root.manager.loggerDict):
        if name == "distributed" or name.startswith("distributed."):
            logging.getLogger(name).setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        _quiet_distributed()
    try:
        if args.command == "demo":
            from curator_dask.cli.demo import format_summary, run_demo

            summaries = run_demo(args.output, n_workers=args.workers)
            print(format_summary(summaries))
            print(f"\nCurated Parquet written to {args.output}/curated")
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 1
    except Exception as err:  # the CLI's job: one clear line on stderr, exit code 1
        logging.getLogger("curator_dask").debug("failure", exc_info=True)
        print(f"curator-dask {args.command}: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
