"""The catalog of stages a YAML pipeline can name, found from the stage classes themselves.

Every public class under :mod:`curator_dask.stages` and :mod:`curator_dask.dedup` that is a
document filter, a document modifier, a partition stage or a whole-dataset stage is listed
under its class name, with the parameters and defaults of its constructor read by
:mod:`inspect`. Adding a stage class (and exporting it) is all it takes to make it
available to ``curator-dask run`` and ``curator-dask stages``.

How each kind becomes a pipeline stage:

==========  ==================================================  ===========================
kind        class                                               pipeline stage
==========  ==================================================  ===========================
filter      a :class:`~curator_dask.stages.filters.DocumentFilter`   ``ScoreFilter(cls(...))``
modifier    a :class:`~curator_dask.stages.modifiers.DocumentModifier`  ``Modify(cls(...))``
stage       a :class:`~curator_dask.ProcessingStage`            ``cls(...)``
dedup       a :class:`~curator_dask.stages.base.WholeDatasetStage`   ``cls(...)`` (a barrier)
==========  ==================================================  ===========================

A filter also takes ``ScoreFilter``'s options (``text_field``, ``score_field``,
``score_type``, ``invert``) and a modifier ``Modify``'s (``text_field``). Partition stages
of every kind take ``name``, ``resources`` (a mapping: ``{cpus: 1}``, ``{gpus: 0.5}``) and
``batch_size``, applied with :meth:`~curator_dask.ProcessingStage.with_`.

The type hints of those constructors are the types a pipeline file is checked against
(:meth:`Parameter.check`, with pydantic's ``TypeAdapter``): a value of the wrong type is an
error naming the parameter and the type it expects before anything runs.

Examples
--------
>>> catalog = stage_catalog()
>>> spec = catalog["WordCountFilter"]
>>> spec.kind, [(p.name, p.default) for p in spec.parameters]
('filter', [('min_words', 50), ('max_words', 100000), ('lang', 'en')])
>>> stage = spec.build({"min_words": 20, "score_field": "words"})
>>> stage.name, stage.output_columns
('word_count', {'words': 'int64'})
>>> spec.parameter("min_words").check("twenty")
Traceback (most recent call last):
...
curator_dask.cli.registry.ParameterTypeError: min_words expects int, got 'twenty'
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field

from curator_dask.errors import ArgumentTypeError, CuratorError, NameNotFoundError
from curator_dask.resources import Resources
from curator_dask.stages.base import ProcessingStage, WholeDatasetStage
from curator_dask.stages.filters.base import DocumentFilter, ScoreFilter
from curator_dask.stages.modifiers.base import DocumentModifier, Modify

__all__ = [
    "REQUIRED",
    "STAGE_OPTIONS",
    "Parameter",
    "ParameterTypeError",
    "StageSpec",
    "convert_option",
    "parameters_of",
    "stage_catalog",
    "type_text",
]

#: The packages searched for stage classes.
PACKAGES = ("curator_dask.stages", "curator_dask.dedup", "curator_dask.training")

#: Public classes of those packages that are not stages a YAML file can make: the
#: bases, and the wrappers that take a filter, modifier or function object.
NOT_FROM_YAML = frozenset({
    "ProcessingStage", "FunctionStage", "WholeDatasetStage", "DocumentFilter",
    "DocumentModifier", "ModelStage",
    "ScoreFilter", "Score", "Filter", "Modify",   # take a filter or modifier object
    "TokenCountFilter",                          # takes a tokenizer object
})

#: Options every partition stage takes, applied with ``with_()``.
STAGE_OPTIONS = ("name", "resources", "batch_size")

KINDS = ("filter", "modifier", "stage", "dedup")


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of a parameter that has none.
REQUIRED = _Required()


class ParameterTypeError(CuratorError, TypeError):
    """A value whose type the parameter's type hint does not accept."""

    def __init__(self, name: str, expected: str, value, detail: str = ""):
        self.name, self.expected, self.value = name, expected, value
        super().__init__(f"{name} expects {expected}, got {value!r}{detail}")


@dataclass(frozen=True)
class Parameter:
    """A constructor parameter: its name, default (:data:`REQUIRED` if none) and type.

    ``annotation`` is the type as shown to users; ``hint`` the type hint itself (None
    where the signature has none, or names a type that cannot be imported here).
    """

    name: str
    default: object
    annotation: str = ""
    hint: object = field(default=None, compare=False, repr=False)

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def check(self, value):
        """``value`` as the type hint accepts it (``3`` for a float is ``3.0``, a list for
        a tuple a tuple); raises :class:`ParameterTypeError` if it does not.

        Beyond the type: a number must lie in the range the hint's ``Annotated`` bounds
        give (:mod:`curator_dask.bounds`), be finite (no ``.inf``, ``.nan`` or ``1e400``),
        and an integer must fit in 64 bits; ``true``/``false`` is a boolean, never the
        number 1 or 0. A value equal to the default passes as it is (a default of ``None``
        need not be in the hint). Without a hint, anything passes.
        """
        if self.hint is None or (not self.required and value is self.default) \
                or (value is None and self.default is None):
            return value
        adapter = _adapter(self.hint)
        if adapter is None:
            return value
        from pydantic import ValidationError

        try:
            # Strict for a boolean: lax mode would read true as the integer 1.
            checked = adapter.validate_python(value, strict=isinstance(value, bool))
        except ValidationError as err:
            raise ParameterTypeError(self.name, self.annotation, value,
                                     _detail(err)) from None
        too_large = _first_beyond_64_bits(value)
        if too_large is None:
            too_large = _first_beyond_64_bits(checked)
        if too_large is not None:
            raise ParameterTypeError(self.name, self.annotation, value,
                                     f" ({too_large} does not fit in 64 bits)")
        return checked


def _first_beyond_64_bits(value):
    """The first integer in ``value`` (or inside its lists and mappings) that no 64-bit
    integer holds, or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if not -(1 << 63) <= value < (1 << 64) else None
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            found = _first_beyond_64_bits(item)
            if found is not None:
                return found
    return None


def _detail(err) -> str:
    """What the first error says, and where inside a list or mapping it is."""
    for error in err.errors():
        where = [part for part in error["loc"] if isinstance(part, int)]
        if where:
            return f" (item {where[0]}: {error['msg'].lower()})"
    # A union reports one message per member: a bound or a non-finite number is worth
    # showing; that the value is not of another member's type is not.
    telling = [e["msg"] for e in err.errors()
               if e["type"] in ("greater_than", "greater_than_equal", "less_than",
                                "less_than_equal", "finite_number")]
    return f" ({telling[0][0].lower()}{telling[0][1:]})" if telling else ""


@functools.cache
def _adapter_cached(hint):
    return _make_adapter(hint)


def _make_adapter(hint):
    from pydantic import ConfigDict, TypeAdapter

    try:
        return TypeAdapter(hint, config=ConfigDict(arbitrary_types_allowed=True,
                                                   allow_inf_nan=False))
    except Exception:  # a hint pydantic cannot check (a protocol, a bare TypeVar): unchecked
        return None


def _adapter(hint):
    try:
        return _adapter_cached(hint)
    except TypeError:  # an unhashable hint
        return _make_adapter(hint)


def type_text(hint) -> str:
    """A type hint as users read it: ``int | None``, ``one of 'error', 'overwrite'``.

    Examples
    --------
    >>> from typing import Literal, Sequence
    >>> type_text(int | None), type_text(Sequence[str] | None)
    ('int | None', 'Sequence[str] | None')
    >>> type_text(Literal["error", "skip"]), type_text(Literal["a", "b"] | None)
    ("one of 'error', 'skip'", "'a' | 'b' | None")
    """
    if typing.get_origin(hint) is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(hint))
    return _type_text(hint)


# One return per kind of type hint a pipeline file may name.
def _type_text(hint) -> str:  # noqa: PLR0911
    origin = typing.get_origin(hint)
    if hint is type(None) or hint is None:
        return "None"
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(hint))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_text(a) for a in typing.get_args(hint))
    if origin is typing.Annotated:  # a range from curator_dask.bounds: "int >= 1"
        base, *bounds = typing.get_args(hint)
        return " ".join([_type_text(base), *filter(None, map(_bound_text, bounds))])
    if origin is not None:
        name = getattr(origin, "__name__", str(origin).replace("typing.", ""))
        return f"{name}[{', '.join(_type_text(a) for a in typing.get_args(hint))}]"
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "")


_BOUND_SYMBOLS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


def _bound_text(bound) -> str:
    """``>= 1`` for ``annotated_types.Ge(1)``, the first docstring line of a predicate
    (``(a size such as '256MiB')``); empty for other metadata."""
    for attr, symbol in _BOUND_SYMBOLS.items():
        if hasattr(bound, attr):
            value = getattr(bound, attr)
            power = isinstance(value, int) and value >= 1 << 20 and value & (value - 1) == 0
            return f"{symbol} {'2**' + str(value.bit_length() - 1) if power else value}"
    doc = getattr(getattr(bound, "func", None), "__doc__", None)
    if doc:
        sentence = doc.strip().splitlines()[0].rstrip(".")
        return f"({sentence[0].lower()}{sentence[1:]})"
    return ""


def parameters_of(func, skip: tuple[str, ...] = ("self",)) -> tuple[Parameter, ...]:
    """The named parameters of ``func`` (a function or a class), without ``*args``/``**kw``.

    For a class whose constructor passes ``**kwargs`` on to its base class, the base's
    parameters follow its own.
    """
    out: list[Parameter] = []
    seen = set(skip)
    for p, owner in _signature_parameters(func):
        if p.name in seen or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        seen.add(p.name)
        hint = _hint(owner, p)
        if hint is not None:
            annotation = type_text(hint)
        else:
            annotation = p.annotation if p.annotation is not p.empty else ""
            if not isinstance(annotation, str):
                annotation = getattr(annotation, "__name__", str(annotation))
        default = REQUIRED if p.default is p.empty else p.default
        out.append(Parameter(p.name, default, annotation, hint))
    return tuple(out)


def _hint(owner, p: inspect.Parameter):
    """The parameter's type hint, resolved in its function's module (None if none or if
    it names something not importable here, such as an optional package's type)."""
    if p.annotation is p.empty:
        return None
    if not isinstance(p.annotation, str):
        return p.annotation
    namespace = dict(vars(typing))
    namespace.update(getattr(inspect.unwrap(owner), "__globals__", {}))
    try:
        return eval(p.annotation, namespace)  # annotations of our own code
    except Exception:
        return None


def _signature_parameters(func) -> list[tuple[inspect.Parameter, object]]:
    if not inspect.isclass(func):
        return [(p, func) for p in inspect.signature(func).parameters.values()]
    out: list[tuple[inspect.Parameter, object]] = []
    for cls in func.__mro__:
        if "__init__" not in vars(cls) or cls is object:
            continue
        params = list(inspect.signature(cls.__init__).parameters.values())
        out.extend((p, cls.__init__) for p in params)
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return out


@dataclass(frozen=True)
class StageSpec:
    """A stage class as a YAML pipeline sees it."""

    name: str
    kind: str
    cls: type
    #: The class's constructor parameters.
    parameters: tuple[Parameter, ...]
    #: Options of the wrapping stage (``ScoreFilter``/``Modify``) and ``with_()``.
    options: tuple[Parameter, ...]

    @property
    def summary(self) -> str:
        """The first line of the class docstring."""
        doc = inspect.getdoc(self.cls) or ""
        return doc.split("\n\n")[0].replace("\n", " ").strip()

    @property
    def module(self) -> str:
        return self.cls.__module__

    def accepted(self) -> list[str]:
        """Every parameter name this stage takes in a YAML file."""
        return [p.name for p in (*self.parameters, *self.options)]

    def parameter(self, name: str) -> Parameter:
        """The parameter or option ``name`` (KeyError if the stage has none)."""
        for p in (*self.parameters, *self.options):
            if p.name == name:
                return p
        raise NameNotFoundError(name)

    @property
    def description(self) -> str:
        """The class docstring up to its first numpydoc section (Parameters, Examples...)."""
        doc = inspect.getdoc(self.cls) or ""
        lines = doc.splitlines()
        for i in range(len(lines) - 1):
            underline = lines[i + 1].strip()
            if lines[i].strip() and underline and set(underline) == {"-"}:
                lines = lines[:i]
                break
        return "\n".join(lines).strip()

    def build(self, params: Mapping):
        """Make the pipeline stage from ``params``; raises ``TypeError`` for unknown or
        missing parameters (naming the valid ones) and whatever the constructor raises."""
        params = dict(params)
        unknown = [k for k in params if k not in self.accepted()]
        if unknown:
            raise ArgumentTypeError(f"{self.name} has no parameter {unknown[0]!r}; its parameters "
                                    f"are: {', '.join(self.accepted())}")
        missing = [p.name for p in self.parameters if p.required and p.name not in params]
        if missing:
            raise ArgumentTypeError(f"{self.name} needs {', '.join(missing)}")
        own = {p.name: p.check(convert_option(p.name, params.pop(p.name)))
               for p in self.parameters if p.name in params}
        obj = self.cls(**own)
        if self.kind == "filter":
            wrapper = [p.name for p in parameters_of(ScoreFilter, skip=("self", "filter_obj"))]
            wrapper_args = {k: self.parameter(k).check(params.pop(k))
                            for k in wrapper if k in params}
            obj = ScoreFilter(obj, **wrapper_args)
        elif self.kind == "modifier":
            obj = Modify(obj, **({"text_field": self.parameter("text_field").check(
                params.pop("text_field"))} if "text_field" in params else {}))
        if params:  # name, resources, batch_size of a partition stage
            obj = obj.with_(**{k: self.parameter(k).check(convert_option(k, v))
                               for k, v in params.items()})
        return obj


def convert_option(name: str, value):
    """A YAML value as the parameter takes it: a ``resources`` mapping becomes a
    :class:`~curator_dask.Resources`; everything else is left as it is."""
    if name == "resources" and isinstance(value, Mapping):
        try:
            return Resources(**value)
        except TypeError as err:
            raise ArgumentTypeError(
                f"resources: {err}; give cpus, gpus and/or gpu_memory_gb") from None
    return value


def _options(kind: str, parameters: tuple[Parameter, ...], cls: type | None = None
             ) -> tuple[Parameter, ...]:
    own = {p.name for p in parameters}
    if kind == "filter":
        # ScoreFilter reads the filter's default_field when not given text_field.
        wrapper = tuple(
            Parameter(p.name, getattr(cls, "default_field", "text"), "str", str)
            if p.name == "text_field" else p
            for p in parameters_of(ScoreFilter, skip=("self", "filter_obj")))
    elif kind == "modifier":
        wrapper = parameters_of(Modify, skip=("self", "modifier"))
    elif kind == "stage":
        wrapper = ()
    else:  # whole-dataset stages are not placed on workers: only their own parameters
        return ()
    with_ = parameters_of(ProcessingStage.with_)
    defaults = {"name": "(the stage's)", "resources": "(the stage's)", "batch_size": 1}
    extra = [*wrapper, *(Parameter(p.name, defaults.get(p.name, p.default), p.annotation,
                                   p.hint) for p in with_ if p.name in STAGE_OPTIONS)]
    return tuple(p for p in extra if p.name not in own)


def _kind(cls: type) -> str | None:
    if issubclass(cls, DocumentFilter):
        return "filter"
    if issubclass(cls, DocumentModifier):
        return "modifier"
    if issubclass(cls, ProcessingStage):
        return "stage"
    if issubclass(cls, WholeDatasetStage):
        return "dedup"
    return None


def _modules(package_name: str):
    package = importlib.import_module(package_name)
    yield package
    for info in pkgutil.walk_packages(package.__path__, prefix=package_name + "."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        yield importlib.import_module(info.name)


@functools.cache
def stage_catalog() -> dict[str, StageSpec]:
    """Every stage a YAML pipeline can name, by class name, sorted by kind then name."""
    found: dict[str, StageSpec] = {}
    for package in PACKAGES:
        for module in _modules(package):
            for attr in getattr(module, "__all__", ()):
                cls = getattr(module, attr, None)
                if (not inspect.isclass(cls) or cls.__name__ in NOT_FROM_YAML
                        or cls.__name__.startswith("_") or cls.__name__ in found):
                    continue
                kind = _kind(cls)
                if kind is None:
                    continue
                parameters = parameters_of(cls)
                found[cls.__name__] = StageSpec(cls.__name__, kind, cls, parameters,
                                                _options(kind, parameters, cls))
    return dict(sorted(found.items(), key=lambda item: (KINDS.index(item[1].kind), item[0])))
