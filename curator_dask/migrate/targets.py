"""What a name or a call in a NeMo Curator script is in curator-dask, for the codemod.

:func:`counterpart` finds a NeMo Curator name's entry in the migration table,
:func:`resolve` the curator-dask object it names, :func:`keyword_rules_of` the NeMo
Curator keywords a call of it takes (as the call reads them when it runs) and
:func:`returns` the class a call gives, so that methods of the variable it is assigned to
resolve too. Nothing here imports LibCST.
"""

from __future__ import annotations

import importlib
import inspect
import typing

from curator_dask.migrate.mapping import KEYWORDS, MODULES, NAMES, Counterpart

__all__ = ["counterpart", "keyword_rules_of", "passes_keywords_on", "resolve", "returns"]


def resolve(dotted: str):
    """The curator-dask object at ``dotted`` (``curator_dask.dedup.ExactDuplicates``)."""
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def counterpart(name: str, nemo_module: str) -> Counterpart | None:
    """``name`` imported from ``nemo_module``: the table's entry, or the same name in the
    module the table maps ``nemo_module`` to, or None."""
    if name in NAMES:
        return NAMES[name]
    module = MODULES.get(nemo_module)
    if module is not None and module.ours:
        try:
            if hasattr(importlib.import_module(module.ours), name):
                return Counterpart(f"{module.ours}.{name}")
        except ImportError:
            return None
    return None


def passes_keywords_on(attribute) -> bool:
    """Whether a method (as a class's ``__dict__`` holds it) takes ``**kwargs``, which
    it hands to the method it overrides."""
    func = inspect.unwrap(getattr(attribute, "__func__", attribute))
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind is p.VAR_KEYWORD for p in parameters)


def keyword_rules_of(obj, method: str | None) -> dict:
    """The NeMo keyword rules of calling ``obj`` (a function) or ``obj.method``.

    As the call reads them when it runs: the rules of the class that defines the method,
    and of the methods it overrides while each hands its ``**kwargs`` on (a subclass's
    rule first). A class whose constructor takes NeMo keywords of its own does not take
    its base class's.
    """
    if method is None:
        return dict(KEYWORDS.get(f"{obj.__module__}.{obj.__qualname__}", {}))
    rules: dict = {}
    for cls in getattr(obj, "__mro__", (type(obj),)):
        if method not in vars(cls):
            continue
        for keyword, rule in KEYWORDS.get(f"{cls.__module__}.{cls.__qualname__}.{method}",
                                          {}).items():
            rules.setdefault(keyword, rule)
        if not passes_keywords_on(vars(cls)[method]):
            break
    return rules


def returns(obj, method: str | None):
    """The class a call returns, from its annotation (None if unknown)."""
    if method == "__init__":
        return obj
    func = obj if method is None else getattr(obj, method, None)
    try:
        hint = typing.get_type_hints(inspect.unwrap(func)).get("return")
    except Exception:  # annotations that do not resolve: the type stays unknown
        return None
    return hint if isinstance(hint, type) else None
