"""A Griffe extension for the API reference: constructors that take a config show its fields.

A dedup entry point declares only its own parameters and ``config``; the decorator
``takes_config(SomeConfig, positional=...)`` adds every field of ``SomeConfig`` to the
signature it has at run time (``inspect.signature``, ``help()``). Griffe reads the source,
not the running code, so this extension gives the documented signature the same
parameters: the page shows them, and the docstring's Parameters section may describe
them. Loaded by mkdocstrings (``mkdocs.yml``).
"""

from __future__ import annotations

import ast

import griffe

DECORATOR = "takes_config"


class ConfigKeywords(griffe.Extension):
    """Give every ``@takes_config(...)`` function the fields of its config as parameters."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs) -> None:
        for func in _functions(pkg):
            for decorator in func.decorators:
                call = _takes_config_call(str(decorator.value))
                if call is not None:
                    _add_fields(func, call, loader)


def _functions(obj: griffe.Object):
    for member in obj.members.values():
        if member.is_alias:
            continue
        if member.is_function:
            yield member
        elif member.is_class or member.is_module:
            yield from _functions(member)


def _takes_config_call(source: str) -> ast.Call | None:
    try:
        node = ast.parse(source, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call) or not node.args:
        return None
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    return node if name == DECORATOR and isinstance(node.args[0], ast.Name) else None


def _add_fields(func: griffe.Function, call: ast.Call, loader: griffe.GriffeLoader) -> None:
    config = _config_class(func, call.args[0].id, loader)
    if config is None:
        return
    fields = _fields(config)
    positional = _positional(call, [p.name for p in fields])
    own = list(func.parameters)
    by_name = {p.name: p for p in [*own, *fields]}
    keyword = griffe.ParameterKind.keyword_only
    ordered = [own[0], *(_as(by_name[n], griffe.ParameterKind.positional_or_keyword)
                         for n in positional if n in by_name)]
    rest = [p for p in own[1:] if p.name not in positional and p.name != "config"]
    ordered += [p for p in rest if p.kind is not keyword] + [p for p in rest if p.kind is keyword]
    ordered += [_as(p, keyword) for p in fields if p.name not in positional]
    ordered += [_as(p, keyword) for p in own if p.name == "config"]
    func.parameters = griffe.Parameters(*ordered)


def _config_class(func: griffe.Function, name: str, loader: griffe.GriffeLoader):
    member = func.module.members.get(name)
    try:
        target = loader.modules_collection[member.target_path] if member.is_alias else member
    except (AttributeError, KeyError):
        return None
    return target if target is not None and target.is_class else None


def _fields(config: griffe.Class) -> list[griffe.Parameter]:
    """A dataclass's fields, in order, as keyword parameters: its annotated class
    attributes (read here, whatever the order in which extensions run)."""
    attributes = sorted((m for m in config.members.values()
                         if not m.is_alias and m.is_attribute and m.annotation is not None
                         and "ClassVar" not in str(m.annotation)),
                        key=lambda m: m.lineno)
    return [griffe.Parameter(m.name, annotation=m.annotation, default=m.value,
                             kind=griffe.ParameterKind.keyword_only) for m in attributes]


def _positional(call: ast.Call, fields: list[str]) -> list[str]:
    """The names ``positional=`` gives (``*field_names(...)`` stands for every field)."""
    for keyword in call.keywords:
        if keyword.arg == "positional" and isinstance(keyword.value, ast.Tuple):
            names: list[str] = []
            for item in keyword.value.elts:
                if isinstance(item, ast.Starred):
                    names.extend(fields)
                elif isinstance(item, ast.Constant) and isinstance(item.value, str):
                    names.append(item.value)
            return names
    return []


def _as(parameter: griffe.Parameter, kind: griffe.ParameterKind) -> griffe.Parameter:
    return griffe.Parameter(parameter.name, annotation=parameter.annotation, kind=kind,
                            default=parameter.default, docstring=parameter.docstring)
