"""What :mod:`curator_dask.migrate.codemod` reads before and after it rewrites, and small
functions over LibCST nodes: the NeMo Curator module aliases a script uses, ``nemo_curator``
left in the result, literal values, string literals, argument lists, import merging, what
a ``__main__`` guard leaves outside."""

from __future__ import annotations

import ast
import json

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import PositionProvider

from curator_dask.migrate.mapping import NEMO_PACKAGE

__all__ = [
    "GPU_MODULES",
    "UNKNOWN",
    "Aliases",
    "Leftovers",
    "code_of",
    "ends_in_raise",
    "is_definition",
    "is_main_guard",
    "keyword_arg",
    "literal",
    "merged_imports",
    "quoted",
    "string_value",
    "tidy",
    "unindented",
]

#: Libraries only GPU workers have: a function that imports nothing else is a GPU warm-up.
GPU_MODULES = {"cudf", "cupy", "cuml", "dask_cudf", "dask_cuda", "rmm", "cugraph"}

#: What :func:`literal` returns for an expression that is not a literal.
UNKNOWN = object()


def code_of(node) -> str:
    """The source of one node."""
    return cst.Module([]).code_for_node(node)


def is_main_guard(node) -> bool:
    if not isinstance(node, cst.If) or not isinstance(node.test, cst.Comparison):
        return False
    parts = [get_full_name_for_node(node.test.left)] + [
        get_full_name_for_node(c.comparator) or getattr(c.comparator, "value", "")
        for c in node.test.comparisons]
    return "__name__" in parts and any("__main__" in str(p) for p in parts)


def string_value(node) -> str | None:
    return node.evaluated_value if isinstance(node, cst.SimpleString) else None


def quoted(text: str) -> cst.SimpleString:
    """``text`` as a double-quoted Python string literal."""
    return cst.SimpleString(json.dumps(text) if text.isprintable() else repr(text))


def keyword_arg(keyword: str, value: cst.BaseExpression) -> cst.Arg:
    """``keyword=value``, spaced as keyword arguments are."""
    return cst.Arg(keyword=cst.Name(keyword), value=value,
                   equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))


def literal(node):
    """The value of a literal expression (strings, numbers, lists of them), else UNKNOWN."""
    try:
        return ast.literal_eval(code_of(node))
    except (ValueError, SyntaxError):
        return UNKNOWN


def unindented(lines) -> list:
    """Blank lines without the indentation a block would give them."""
    return [line.with_changes(indent=False) if line.comment is None else line
            for line in lines]


def merged_imports(body, emitted: set[str]) -> list:
    """``body`` with the imports the codemod wrote from one module made one statement
    (``from curator_dask import A`` and ``... import B`` -> ``... import A, B``), each
    where the first of them was."""
    names: dict[str, list[str]] = {}
    first: dict[str, int] = {}
    out: list = []
    for statement in body:
        code = code_of(statement).strip()
        if code in emitted and isinstance(statement.body[0], cst.ImportFrom):
            module = get_full_name_for_node(statement.body[0].module)
            listed = code.split(" import ", 1)[1]
            if module in names:
                names[module].append(listed)
                continue
            names[module], first[module] = [listed], len(out)
        out.append(statement)
    for module, listed in names.items():
        if len(listed) > 1:
            line = f"from {module} import {', '.join(listed)}"
            if len(line) > 99:  # one name a line, as formatters write it
                line = f"from {module} import (\n" + "".join(f"    {n},\n" for n in listed) + ")"
            merged = cst.parse_statement(line)
            out[first[module]] = merged.with_changes(
                leading_lines=out[first[module]].leading_lines)
    return out


def tidy(args: list[cst.Arg]) -> list[cst.Arg]:
    """``args`` with a comma after each but the last (keeping the last one's own)."""
    out = []
    for i, arg in enumerate(args):
        last = i == len(args) - 1
        if not last and arg.comma is cst.MaybeSentinel.DEFAULT:
            arg = arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        out.append(arg)
    if out and len(args) and out[-1].comma is not cst.MaybeSentinel.DEFAULT:
        trailing = out[-1].comma
        if isinstance(trailing, cst.Comma) and "\n" not in code_of(
                trailing) and not _multiline(args):
            out[-1] = out[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return out


def _multiline(args: list[cst.Arg]) -> bool:
    return any("\n" in code_of(a.comma) for a in args
               if isinstance(a.comma, cst.Comma))


def ends_in_raise(block) -> bool:
    last = block.body[-1] if block.body else None
    return isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], cst.Raise)


def is_definition(statement) -> bool:
    """Imports, functions, classes, the docstring: what stays outside a __main__ guard."""
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return True
    if isinstance(statement, cst.SimpleStatementLine):
        return all(isinstance(s, (cst.Import, cst.ImportFrom)) or (
            isinstance(s, cst.Expr) and isinstance(s.value, (cst.SimpleString,
                                                             cst.ConcatenatedString)))
            for s in statement.body)
    return False

class Aliases(cst.CSTVisitor):
    """First pass: which local names are NeMo Curator modules (``import nemo_curator as
    nc``), and which attributes of them the script uses (``nc.ScoreFilter``)."""

    def __init__(self):
        self.modules: dict[str, str] = {}
        self.used: dict[str, set[str]] = {}
        self.gpu_warmups: set[str] = set()

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            dotted = get_full_name_for_node(alias.name)
            if dotted == NEMO_PACKAGE or dotted.startswith(NEMO_PACKAGE + "."):
                local = alias.asname.name.value if alias.asname else dotted
                self.modules[local] = dotted

    def visit_Attribute(self, node: cst.Attribute) -> None:
        dotted = get_full_name_for_node(node.value)
        if dotted in self.modules:
            self.used.setdefault(dotted, set()).add(node.attr.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        imported: set[str] = set()
        for statement in node.body.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                return
            for small in statement.body:
                if isinstance(small, cst.Import):
                    imported |= {get_full_name_for_node(a.name).split(".")[0]
                                 for a in small.names}
                elif not isinstance(small, (cst.Expr, cst.Pass)):
                    return
        if imported and imported <= GPU_MODULES:
            self.gpu_warmups.add(node.name.value)


class Leftovers(cst.CSTVisitor):
    """``nemo_curator`` still named in the rewritten code."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self):
        self.lines: list[int] = []

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == NEMO_PACKAGE:
            self.lines.append(self.get_metadata(PositionProvider, node).start.line)
