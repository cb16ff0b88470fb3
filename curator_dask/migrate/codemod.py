"""Rewrite a NeMo Curator script for curator-dask, on LibCST's concrete syntax tree.

:func:`migrate_source` reads :mod:`curator_dask.migrate.mapping` and rewrites, keeping
every comment and line it does not change:

- imports: each NeMo Curator name from where curator-dask has it (``from
  nemo_curator.modules import ExactDuplicates`` -> ``from curator_dask.dedup import
  ExactDuplicates``), a renamed one renamed wherever the script uses it (``RayClient`` ->
  ``ClusterSession``), and ``nc.ScoreFilter`` under ``import nemo_curator as nc``;
- keywords of every call it can resolve (constructors, functions, and methods of
  variables assigned from them): renamed, or dropped where they tune what curator-dask
  does not have; NeMo Curator's method names (``read_json`` -> ``read_jsonl``);
- hub models: a class whose models NeMo Curator downloads gets each one's directory
  (``model_path=``, ``base_model_path=``, ...) from ``models``, keyed by the NeMo
  Curator name or the hub id (``--model QualityClassifier=DIR --model
  microsoft/deberta-v3-base=DIR``), and the keywords that keep the defaults of the NeMo
  Curator version it was imported from (a 1.x prediction column's name);
- ``Modify(PiiModifier(...))`` -> ``PiiRedactor(...)``, a stage of its own here;
- ``from loguru import logger`` -> the standard library's ``logging``;
- a script that starts a cluster at module level gets ``if __name__ == "__main__":``
  around its statements (worker processes import the script; without the guard each
  would start a cluster of its own);
- with ``cpu=True``, NeMo Curator's GPU-only choices where curator-dask runs on CPU too:
  ``backend="cudf"`` -> ``"pandas"``, ``cluster_type="gpu"`` and a classifier's
  ``device_type="cuda"`` -> ``"cpu"``, checks that stop a script unless ``--device
  gpu``, and ``client.run`` of a function that only imports GPU libraries.

What it cannot rewrite is listed in :attr:`MigrationReport.todo` with its line and what
to do: a NeMo name without counterpart, a refused keyword, a hub model without a
directory, a ``nemo_curator`` reference left.

Examples
--------
>>> report = migrate_source("from nemo_curator.modules import ExactDuplicates\\n"
...                         "dups = ExactDuplicates(cache_dir='c', logger='./')\\n")
>>> print(report.code, end="")
from curator_dask.dedup import ExactDuplicates
dups = ExactDuplicates(cache_path='c')
>>> report.todo
[]
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import MetadataWrapper, PositionProvider

from curator_dask.migrate.mapping import (
    COMPANIONS,
    METHODS,
    NEMO_PACKAGE,
    Counterpart,
    Ignored,
    Refused,
    Renamed,
)
from curator_dask.migrate.syntax import (
    UNKNOWN,
    Aliases,
    Leftovers,
    code_of,
    ends_in_raise,
    is_definition,
    is_main_guard,
    keyword_arg,
    literal,
    merged_imports,
    quoted,
    string_value,
    tidy,
    unindented,
)
from curator_dask.migrate.targets import counterpart, keyword_rules_of, resolve, returns

__all__ = ["MigrationReport", "Note", "migrate_source", "unified_diff"]


@dataclass(frozen=True)
class Note:
    """One line of the report: where, and what was done or is left to do."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass
class MigrationReport:
    """The rewritten source, what changed and what is left to do by hand."""

    source: str
    code: str
    changes: list[Note] = field(default_factory=list)
    todo: list[Note] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.code != self.source


def unified_diff(report: MigrationReport, path: str) -> str:
    """The change as a unified diff of ``path`` (empty when nothing changed)."""
    return "".join(difflib.unified_diff(
        report.source.splitlines(keepends=True), report.code.splitlines(keepends=True),
        fromfile=f"a/{path.lstrip('/')}", tofile=f"b/{path.lstrip('/')}"))


class _Migrator(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, aliases: Aliases, models: Mapping[str, str], cpu: bool):
        super().__init__()
        self.aliases, self.cpu = aliases, cpu
        # --model NAME=DIR: NAME is a NeMo class name or a hub id (case as the hub
        # ignores it: microsoft/DeBERTa-v3-base is microsoft/deberta-v3-base)
        self.models = {name.casefold(): directory for name, directory in models.items()}
        self.changes: list[Note] = []
        self.todo: list[Note] = []
        self.renames: dict[str, str] = {}  # local name in the script -> curator-dask's
        self.objects: dict[str, object] = {}  # local name -> curator-dask object
        # local name -> (NeMo name, its counterpart, the NeMo module it came from)
        self.counterparts: dict[str, tuple[str, Counterpart, str]] = {}
        self.types: dict[str, type] = {}  # variable -> the curator-dask class it holds
        self.emitted: set[str] = set()
        self.depth = 0  # inside a function or class: not module level
        self.branches = 0  # inside an if: code that may not run here
        self.starts_cluster_at_top = False
        self._returned = None  # the class the last call left returns (for assignments)

    # -- reporting ------------------------------------------------------------------------------
    def _line(self, node) -> int:
        try:
            return self.get_metadata(PositionProvider, node).start.line
        except KeyError:
            return 0

    def _changed(self, node, message: str) -> None:
        self.changes.append(Note(self._line(node), message))

    def _todo(self, node, message: str) -> None:
        self.todo.append(Note(self._line(node), message))

    # -- imports --------------------------------------------------------------------------------
    def _import_line(self, cp: Counterpart, local: str) -> str | None:
        line = f"from {cp.module} import {cp.name}" + (f" as {local}" if local != cp.name
                                                        else "")
        if line in self.emitted:
            return None
        self.emitted.add(line)
        return line

    def _bind(self, local: str, nemo_name: str, cp: Counterpart, nemo_module: str) -> None:
        with contextlib.suppress(ImportError, AttributeError):
            self.objects[local] = resolve(cp.ours)
        self.counterparts[local] = (nemo_name, cp, nemo_module)

    def _from_import(self, node: cst.ImportFrom) -> list[str] | None:
        if node.relative or node.module is None:
            return None
        module = get_full_name_for_node(node.module)
        if module in COMPANIONS:
            return self._companion(node, module)
        if module != NEMO_PACKAGE and not module.startswith(NEMO_PACKAGE + "."):
            return None
        if isinstance(node.names, cst.ImportStar):
            self._todo(node, f"`from {module} import *`: import the names you use; "
                             "`curator-dask migrate` maps each")
            return []
        lines = []
        for alias in node.names:
            name = get_full_name_for_node(alias.name)
            asname = alias.asname.name.value if alias.asname else None
            cp = counterpart(name, module)
            if cp is None or cp.ours is None:
                why = cp.note if cp is not None else "curator-dask has no counterpart"
                self._todo(node, f"{module}.{name}: {why}")
                continue
            local = asname or cp.name
            if asname is None and name != cp.name:
                self.renames[name] = cp.name
                self._changed(node, f"{name} is {cp.name} in curator-dask")
            self._bind(local, name, cp, module)
            line = self._import_line(cp, local)
            if line:
                lines.append(line)
        self._changed(node, f"imports from {module} -> curator-dask")
        return lines

    def _companion(self, node: cst.ImportFrom, module: str) -> list[str]:
        if module == "loguru":
            self._changed(node, f"loguru -> {COMPANIONS['loguru']}")
            return ["import logging", "", "logger = logging.getLogger(__name__)"]
        return []

    def _import(self, node: cst.Import) -> list[str] | None:
        lines, nemo = [], False
        for alias in node.names:
            dotted = get_full_name_for_node(alias.name)
            if dotted != NEMO_PACKAGE and not dotted.startswith(NEMO_PACKAGE + "."):
                lines.append(f"import {dotted}"
                             + (f" as {alias.asname.name.value}" if alias.asname else ""))
                continue
            nemo = True
            local = alias.asname.name.value if alias.asname else dotted
            for name in sorted(self.aliases.used.get(local, ())):
                cp = counterpart(name, dotted)
                if cp is None or cp.ours is None:
                    why = cp.note if cp is not None else "curator-dask has no counterpart"
                    self._todo(node, f"{local}.{name}: {why}")
                    continue
                self._bind(cp.name, name, cp, dotted)
                line = self._import_line(cp, cp.name)
                if line:
                    lines.append(line)
            self._changed(node, f"import {dotted}: the names used from it, from curator-dask")
        return lines if nemo else None

    def leave_SimpleStatementLine(self, original, updated):
        replacement: list[str] = []
        touched = False
        for before, small in zip(original.body, updated.body, strict=True):
            out = None  # imports are read as written: names renamed so far are not theirs
            if isinstance(before, cst.ImportFrom):
                out = self._from_import(before)
            elif isinstance(before, cst.Import):
                out = self._import(before)
            if out is None:
                replacement.append(code_of(small))
            else:
                touched = True
                replacement.extend(out)
        if self.cpu and self.branches == 0 and self._is_gpu_warmup(updated):
            self._changed(original, "removed: runs a GPU-only import on every worker")
            return cst.RemoveFromParent()
        if not touched:
            return updated
        if not replacement:
            return cst.RemoveFromParent()
        statements = [cst.parse_statement(line) for line in "\n".join(replacement).split("\n")
                      if line.strip()]
        statements[0] = statements[0].with_changes(leading_lines=updated.leading_lines)
        return cst.FlattenSentinel(statements)

    def _is_gpu_warmup(self, line: cst.SimpleStatementLine) -> bool:
        """``client.run(pre_imports)`` where ``pre_imports`` only imports GPU modules."""
        if len(line.body) != 1 or not isinstance(line.body[0], cst.Expr):
            return False
        call = line.body[0].value
        return (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                and call.func.attr.value == "run" and len(call.args) == 1
                and get_full_name_for_node(call.args[0].value) in self.aliases.gpu_warmups)

    # -- names ----------------------------------------------------------------------------------
    def leave_Name(self, original, updated):
        new = self.renames.get(updated.value)
        return updated.with_changes(value=new) if new else updated

    def leave_Attribute(self, original, updated):
        if updated.attr.value != original.attr.value:  # an attribute is not the import
            updated = updated.with_changes(attr=original.attr)
        root = get_full_name_for_node(original.value)
        if root in self.aliases.modules:
            name = original.attr.value
            cp = counterpart(name, self.aliases.modules[root])
            if cp is not None and cp.ours is not None:
                return cst.Name(cp.name)
            return updated
        return updated

    def leave_Arg(self, original, updated):
        if original.keyword is not None and updated.keyword is not None \
                and updated.keyword.value != original.keyword.value:
            updated = updated.with_changes(keyword=original.keyword)
        if self.cpu and updated.keyword is not None:
            updated = self._cpu_value(updated, updated.keyword.value, original)
        return updated

    def leave_Param(self, original, updated):
        return updated.with_changes(name=original.name)

    def visit_FunctionDef(self, node) -> None:
        self.depth += 1

    def leave_FunctionDef(self, original, updated):
        self.depth -= 1
        return updated.with_changes(name=original.name)

    def visit_ClassDef(self, node) -> None:
        self.depth += 1

    def leave_ClassDef(self, original, updated):
        self.depth -= 1
        return updated.with_changes(name=original.name)

    # -- calls ----------------------------------------------------------------------------------
    def _target(self, func) -> tuple[object, str | None, str | None] | None:
        """(curator-dask object, method or None, local name) a call's ``func`` resolves to."""
        if isinstance(func, cst.Name):
            if func.value in self.objects:
                obj = self.objects[func.value]
                return obj, "__init__" if isinstance(obj, type) else None, func.value
            if func.value in self.types:
                return self.types[func.value], "__call__", None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            owner = self.objects.get(func.value.value) or self.types.get(func.value.value)
            if isinstance(owner, type):
                return owner, func.attr.value, None
        return None

    def leave_Call(self, original, updated):
        target = self._target(updated.func)
        self._returned = None
        if target is None:
            return updated
        obj, method, local = target
        if method in METHODS and hasattr(obj, METHODS[method]):
            ours = METHODS[method]
            updated = updated.with_changes(func=updated.func.with_changes(attr=cst.Name(ours)))
            self._changed(original, f".{method}() is .{ours}() in curator-dask")
            method = ours
        updated = self._keywords(original, updated, keyword_rules_of(obj, method))
        if local in self.counterparts and method == "__init__":
            updated = self._constructor(original, updated, *self.counterparts[local])
            unwrapped = self._unwrap(original, updated, local)
            if unwrapped is not None:
                return unwrapped
        if self.depth == 0 and self._starts_cluster(obj, method):
            self.starts_cluster_at_top = True
        self._returned = returns(obj, method)
        return updated

    def _starts_cluster(self, obj, method) -> bool:
        name = getattr(obj, "__name__", "")
        return (name == "get_client" and method is None) or \
            (name == "ClusterSession" and method == "start")

    def _keywords(self, original, call: cst.Call, rules: dict) -> cst.Call:
        if not rules:
            return call
        given = {a.keyword.value for a in call.args if a.keyword is not None}
        args = []
        for arg in call.args:
            rule = rules.get(arg.keyword.value) if arg.keyword is not None else None
            if isinstance(rule, Renamed) and rule.ours not in given:
                arg = self._renamed(original, arg, rule)
            elif isinstance(rule, Ignored):
                value = literal(arg.value)
                if rule.refuse_if is not None and value is UNKNOWN:
                    args.append(arg)  # its value decides, when the script runs
                    continue
                if rule.refuse_if is not None and rule.refuse_if(value):
                    self._todo(original, f"{arg.keyword.value}=: {rule.refusal}")
                    args.append(arg)
                    continue
                self._changed(original, f"removed {arg.keyword.value}=: {rule.reason}")
                continue
            elif isinstance(rule, Refused):
                self._todo(original, f"{arg.keyword.value}= has no counterpart: {rule.fix}")
            args.append(arg)
        return call.with_changes(args=tidy(args))

    def _renamed(self, original, arg: cst.Arg, rule: Renamed) -> cst.Arg:
        """``arg`` under curator-dask's keyword, its value converted where the rule says
        so (a value known only when the script runs stays NeMo's: the call converts it,
        and warns)."""
        nemo = arg.keyword.value
        if rule.convert is None:
            self._changed(original, f"{nemo}= is {rule.ours}= in curator-dask")
            return arg.with_changes(keyword=cst.Name(rule.ours))
        value = literal(arg.value)
        if value is UNKNOWN:
            self._changed(original, f"{nemo}= left as it is: curator-dask's {rule.ours}= "
                                    "depends on its value, converted when the script runs")
            return arg
        ours = rule.convert(value)
        self._changed(original, f"{nemo}={value!r} is {rule.ours}={ours!r} in curator-dask")
        value_node = quoted(ours) if isinstance(ours, str) else cst.parse_expression(repr(ours))
        return arg.with_changes(keyword=cst.Name(rule.ours), value=value_node)

    def _constructor(self, original, call: cst.Call, nemo_name: str, cp: Counterpart,
                     nemo_module: str):
        given = {a.keyword.value for a in call.args if a.keyword is not None}
        extra = [keyword_arg(k, cst.parse_expression(v))
                 for k, v in cp.defaults_for(nemo_module) if k not in given]
        if extra:
            self._changed(original, f"{nemo_name}: " + ", ".join(
                f"{a.keyword.value}={code_of(a.value)}" for a in extra)
                + f" as NeMo Curator's {nemo_module} has it")
        models = self._model_directories(original, nemo_name, cp, given)
        if not extra and not models:
            return call
        positional = [a for a in call.args if a.keyword is None and a.star == ""]
        keywords = [a for a in call.args if a not in positional]
        return call.with_changes(args=tidy([*positional, *models, *keywords, *extra]))

    def _model_directories(self, original, nemo_name: str, cp: Counterpart,
                           given: set[str]) -> list[cst.Arg]:
        """The keywords giving the local directory of each hub model the class reads,
        from ``--model`` (its own under the NeMo name or its hub id, the others under
        their hub id); those without one are left to do, in one note."""
        found, missing = [], []
        for position, (keyword, hub_model) in enumerate(cp.models()):
            if keyword in given:
                continue
            names = (nemo_name, hub_model) if position == 0 else (hub_model,)
            directory = next((self.models[n.casefold()] for n in names
                              if n.casefold() in self.models), None)
            if directory is None:
                missing.append((keyword, names[0]))
                continue
            found.append(keyword_arg(keyword, quoted(directory)))
            self._changed(original, f"{nemo_name}: {keyword}={directory!r} (instead of "
                                    f"{hub_model} from the hub)")
        if missing:
            hubs = [hub for _, hub in cp.models()]
            models = ", ".join(hubs[:-1]) + " and " + hubs[-1] if len(hubs) > 1 else hubs[0]
            self._todo(original, f"{nemo_name} loads {models} from the Hugging Face hub; "
                                 "save each to a directory and run migrate with "
                                 + " ".join(f"--model {name}=DIR" for _, name in missing)
                                 + " (or pass " + ", ".join(f"{k}=DIR" for k, _ in missing)
                                 + ")" + (", or keep them in the local Hugging Face cache, "
                                          "where curator-dask looks for them"
                                          if cp.finds_cached else ""))
        return found

    def _unwrap(self, original, call: cst.Call, local: str) -> cst.Call | None:
        """``Modify(PiiModifier(...))`` -> ``PiiRedactor(...)``."""
        nemo_name = self.counterparts[local][0]
        if len(call.args) != 1 or not isinstance(call.args[0].value, cst.Call):
            return None
        inner = call.args[0].value
        inner_local = get_full_name_for_node(inner.func)
        inner_cp = self.counterparts.get(inner_local, (None, None))[1]
        if inner_cp is not None and inner_cp.unwraps == nemo_name:
            self._changed(original, f"{nemo_name}({inner_cp.name}(...)) -> "
                                    f"{inner_cp.name}(...): a stage of its own here")
            return inner
        return None

    # -- variables and statements -----------------------------------------------------------
    def visit_Assign(self, node) -> None:
        self._returned = None

    def leave_Assign(self, original, updated):
        returned, self._returned = self._returned, None
        if not isinstance(updated.value, cst.Call):
            returned = None
        for target in updated.targets:
            if isinstance(target.target, cst.Name):
                if returned is not None:
                    self.types[target.target.value] = returned
                else:
                    self.types.pop(target.target.value, None)
        if self.cpu:
            updated = self._cpu_assign(updated)
        return updated

    def _cpu_value(self, node, name: str, original=None):
        """``backend="cudf"`` -> ``"pandas"``; ``cluster_type="gpu"`` and a classifier's
        ``device_type="cuda"`` -> ``"cpu"``. ``original``: the node as the script wrote
        it, for the line reported (``node`` itself, when it is)."""
        swap = {"backend": ("cudf", "pandas"), "cluster_type": ("gpu", "cpu"),
                "dataframe.backend": ("cudf", "pandas"),
                "device_type": ("cuda", "cpu")}.get(name)
        if swap and string_value(node.value) == swap[0]:
            self._changed(original or node,
                          f"{name}={swap[0]!r} -> {swap[1]!r} (runs on CPU workers)")
            return node.with_changes(value=quoted(swap[1]))
        return node

    def _cpu_assign(self, node: cst.Assign) -> cst.Assign:
        for target in node.targets:
            target = target.target
            if isinstance(target, cst.Name):
                return self._cpu_value(node, target.value)
            if isinstance(target, cst.Subscript) and len(target.slice) == 1:
                key = target.slice[0].slice
                if isinstance(key, cst.Index) and string_value(key.value):
                    return self._cpu_value(node, string_value(key.value))
        return node

    def leave_DictElement(self, original, updated):
        if self.cpu and string_value(updated.key):
            return self._cpu_value(updated, string_value(updated.key), original)
        return updated

    def _requires_gpu(self, test) -> bool:
        """``args.device != "gpu"`` (an If that raises) or ``args.device == "gpu"``."""
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return False
        left = get_full_name_for_node(test.left) or ""
        return left.endswith("device") and string_value(test.comparisons[0].comparator) == "gpu"

    def visit_If(self, node) -> None:
        self.branches += 1

    def leave_If(self, original, updated):
        self.branches -= 1
        if self.cpu and self._requires_gpu(updated.test) and \
                isinstance(updated.test.comparisons[0].operator, cst.NotEqual) and \
                updated.orelse is None and ends_in_raise(updated.body):
            self._changed(original, "removed the check that stops the script unless "
                                    "--device gpu (curator-dask runs it on CPU workers)")
            return cst.RemoveFromParent()
        return updated

    def leave_Assert(self, original, updated):
        if self.cpu and self._requires_gpu(updated.test):
            self._changed(original, "removed the assertion of --device gpu (curator-dask "
                                    "runs it on CPU workers)")
            return cst.RemoveFromParent()
        return updated

    # -- the module -----------------------------------------------------------------------------
    def leave_Module(self, original, updated):
        updated = updated.with_changes(body=merged_imports(updated.body, self.emitted))
        if not self.starts_cluster_at_top or any(is_main_guard(s) for s in updated.body):
            return updated
        body = list(updated.body)
        first = next((i for i, s in enumerate(body) if not is_definition(s)), len(body))
        guarded = body[first:]
        if not guarded:
            return updated
        guard = cst.If(
            test=cst.parse_expression('__name__ == "__main__"'),
            body=cst.IndentedBlock(body=[
                s.with_changes(leading_lines=[] if i == 0 else unindented(s.leading_lines))
                for i, s in enumerate(guarded)]),
            leading_lines=guarded[0].leading_lines)
        self.changes.append(Note(0, 'the statements after the imports and definitions run '
                                    'under `if __name__ == "__main__":` (worker processes '
                                    'import the script; each would start a cluster)'))
        return updated.with_changes(body=[*body[:first], guard])













def migrate_source(source: str, *, models: Mapping[str, str] | None = None,
                   cpu: bool = False) -> MigrationReport:
    """Rewrite one script's source for curator-dask (see the module docstring).

    Parameters
    ----------
    source : str
        The script.
    models : mapping, optional
        A NeMo Curator class name or a hub id -> the local directory of that model
        (``{"QualityClassifier": "/models/quality-deberta", "microsoft/deberta-v3-base":
        "/models/deberta-v3-base"}``).
    cpu : bool, default False
        Also rewrite NeMo Curator's GPU-only choices for CPU workers.

    Raises
    ------
    libcst.ParserSyntaxError
        ``source`` is not valid Python.
    """
    module = cst.parse_module(source)
    aliases = Aliases()
    module.visit(aliases)
    migrator = _Migrator(aliases, models or {}, cpu)
    # The trees are not used again: no defensive copy (LibCST copies a whole tree by default).
    rewritten = MetadataWrapper(module, unsafe_skip_copy=True).visit(migrator)
    leftovers = Leftovers()
    MetadataWrapper(rewritten, unsafe_skip_copy=True).visit(leftovers)
    todo = migrator.todo + [Note(line, "still names nemo_curator: replace it with the "
                                       "curator-dask module of what it uses")
                            for line in sorted(set(leftovers.lines))]
    return MigrationReport(source=source, code=rewritten.code,
                           changes=sorted(migrator.changes, key=lambda n: n.line),
                           todo=sorted(todo, key=lambda n: n.line))
