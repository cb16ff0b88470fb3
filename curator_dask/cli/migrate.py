"""``curator-dask migrate PATH...``: rewrite NeMo Curator scripts for curator-dask.

Prints a unified diff of every script it would change (``--write`` applies them) and,
on stderr, what it could not rewrite: file, line and what to do. Directories are
searched for ``*.py`` files. The rewriting is :mod:`curator_dask.migrate.codemod`, driven
by the table in :mod:`curator_dask.migrate.mapping`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from fsspec.implementations.local import LocalFileSystem

from curator_dask.errors import MissingFileError
from curator_dask.io import atomic

__all__ = ["add_migrate_parser", "run_migrate"]


def _model(text: str) -> tuple[str, str]:
    name, sep, directory = text.partition("=")
    if not sep or not name or not directory:
        raise argparse.ArgumentTypeError(f"expected NAME=DIR (QualityClassifier=/models/q), "
                                         f"got {text!r}")
    return name, directory


def add_migrate_parser(commands) -> None:
    """Add the ``migrate`` subcommand to the CLI's subparsers."""
    migrate = commands.add_parser(
        "migrate", help="rewrite NeMo Curator scripts for curator-dask",
        description="Rewrite NeMo Curator 0.x and 1.x scripts for curator-dask: imports, "
                    "names, keywords, hub models, the __main__ guard a script that starts a "
                    "cluster needs. Prints a unified diff (--write applies it) and lists "
                    "what it cannot rewrite, with the line and what to do.",
    )
    migrate.add_argument("paths", nargs="+", metavar="PATH",
                         help="scripts, or directories searched for *.py files")
    migrate.add_argument("--write", action="store_true",
                         help="rewrite the files in place instead of printing a diff")
    migrate.add_argument("--model", action="append", type=_model, default=[],
                         metavar="NAME=DIR",
                         help="the local directory of a model NeMo Curator loads from the "
                              "hub, named by the NeMo Curator class "
                              "(QualityClassifier=/models/quality) or by its hub id "
                              "(microsoft/deberta-v3-base=/models/deberta, a backbone); "
                              "repeatable")
    migrate.add_argument("--cpu", action="store_true",
                         help="also rewrite NeMo Curator's GPU-only choices (backend='cudf', "
                              "cluster_type='gpu', device_type='cuda', --device gpu checks) "
                              "for CPU workers")


def _scripts(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*.py") if p.is_file()))
        elif path.is_file():
            found.append(path)
        else:
            raise MissingFileError(f"{raw}: no such file or directory")
    return found


def _write_in_place(path: Path, code: str) -> None:
    """Replace ``path``'s text atomically (a temporary file beside it, then a rename),
    keeping its permissions."""
    fs = LocalFileSystem()
    with atomic.atomic_open(fs, str(path), keep_mode=True) as out:
        out.write(code.encode("utf-8"))

def run_migrate(args, echo: Callable[[str], None]) -> int:
    """Run the command; 0 when every script was rewritten whole, 1 when something is left
    to do by hand (listed on stderr)."""
    import libcst

    from curator_dask.migrate.codemod import migrate_source, unified_diff

    models = dict(args.model)
    left = 0
    for path in _scripts(args.paths):
        source = path.read_text(encoding="utf-8")
        try:
            report = migrate_source(source, models=models, cpu=args.cpu)
        except libcst.ParserSyntaxError as err:
            print(f"{path}: not valid Python, left as it is ({err.message}, line "
                  f"{err.raw_line})", file=sys.stderr)
            left += 1
            continue
        if report.changed:
            if args.write:
                _write_in_place(path, report.code)
                echo(f"rewrote {path} ({len(report.changes)} changes)")
            else:
                echo(unified_diff(report, str(path)).rstrip("\n"))
        for note in report.todo:
            print(f"{path}:{note.line}: {note.message}", file=sys.stderr)
        left += len(report.todo)
    if left:
        print(f"{left} thing(s) left to do by hand (above)", file=sys.stderr)
    return 1 if left else 0
