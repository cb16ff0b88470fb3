"""What an entry of the migration table says: the kinds of :mod:`.mapping`'s entries.

A NeMo Curator keyword is :class:`Renamed`, :class:`Ignored` or :class:`Refused`; a
NeMo Curator name has a :class:`Counterpart`; a NeMo Curator module a
:class:`ModulePath`. :func:`is_nemo_1x` tells NeMo Curator 1.x's modules (the Ray era)
from 0.x's (the Dask era), where a name's defaults differ between them.

Examples
--------
>>> is_nemo_1x("nemo_curator.stages.text.classifiers"), is_nemo_1x("nemo_curator.classifiers")
(True, False)
>>> Renamed("path")
Renamed(ours='path')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "NEMO_1X_PACKAGES",
    "Counterpart",
    "Ignored",
    "ModulePath",
    "Refused",
    "Renamed",
    "Rule",
    "is_nemo_1x",
]

#: The packages of NeMo Curator 1.x (on Ray); its other modules are 0.x's (on Dask).
NEMO_1X_PACKAGES = ("nemo_curator.stages", "nemo_curator.pipeline", "nemo_curator.core",
                    "nemo_curator.backends", "nemo_curator.tasks")


def is_nemo_1x(nemo_module: str) -> bool:
    """Whether ``nemo_module`` is one of NeMo Curator 1.x's (or under one)."""
    return any(nemo_module == package or nemo_module.startswith(package + ".")
               for package in NEMO_1X_PACKAGES)


@dataclass(frozen=True)
class Renamed:
    """A NeMo Curator keyword with another name here: passed on under ``ours``, warned;
    ``convert``, if given, turns NeMo Curator's value into curator-dask's."""

    ours: str
    convert: Callable[[object], object] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Ignored:
    """A NeMo Curator keyword that tunes something curator-dask does not have: accepted
    with a warning saying ``reason``, and dropped by the codemod. ``refuse_if``, if
    given, tells the values that would change the result (those are refused with
    ``refusal``)."""

    reason: str
    refuse_if: Callable[[object], bool] | None = field(default=None, repr=False)
    refusal: str = ""


@dataclass(frozen=True)
class Refused:
    """A NeMo Curator keyword without a counterpart: an error saying ``fix``."""

    fix: str


Rule = Renamed | Ignored | Refused


@dataclass(frozen=True)
class Counterpart:
    """Where a NeMo Curator name lives here.

    Attributes
    ----------
    ours : str or None
        Dotted path of the curator-dask object (None: there is none; see ``note``).
    note : str
        What differs, or (without ``ours``) what to write instead.
    model_keyword : str, optional
        NeMo Curator downloads this class's model from the Hugging Face hub; here the
        model is a local directory given by this keyword (``curator-dask migrate
        --model NAME=DIR`` fills it in).
    hub_model : str, optional
        The hub model NeMo Curator loads (save it with ``save_pretrained`` to a directory).
    more_models : tuple of (keyword, hub id)
        Further hub models the class reads, each from a local directory given by its
        keyword (a backbone's ``config.json``, a base model): ``curator-dask migrate
        --model HUB_ID=DIR`` fills it in.
    finds_cached : bool
        Without a directory, the class looks for its models in the local Hugging Face
        cache (where NeMo Curator's downloads went).
    defaults : tuple of (keyword, Python source)
        Keywords the codemod adds unless the call gives them, to keep NeMo Curator 0.x's
        behaviour where curator-dask's defaults differ (a prediction column's name).
    defaults_1x : tuple of (keyword, Python source)
        The same for a name imported from NeMo Curator 1.x's modules.
    unwraps : str, optional
        NeMo Curator wraps this in that class (``Modify(PiiModifier(...))``); here it is
        a stage of its own, so the codemod removes the wrapper.
    """

    ours: str | None
    note: str = ""
    model_keyword: str | None = None
    hub_model: str | None = None
    more_models: tuple[tuple[str, str], ...] = ()
    finds_cached: bool = False
    defaults: tuple[tuple[str, str], ...] = ()
    defaults_1x: tuple[tuple[str, str], ...] = ()
    unwraps: str | None = None

    @property
    def module(self) -> str | None:
        return None if self.ours is None else self.ours.rpartition(".")[0]

    @property
    def name(self) -> str | None:
        return None if self.ours is None else self.ours.rpartition(".")[2]

    def defaults_for(self, nemo_module: str) -> tuple[tuple[str, str], ...]:
        """The keywords to add for this name imported from ``nemo_module``.

        >>> multilingual = Counterpart("x.M", defaults_1x=(("pred_column", '"m_pred"'),))
        >>> multilingual.defaults_for("nemo_curator.stages.text.classifiers")
        (('pred_column', '"m_pred"'),)
        >>> multilingual.defaults_for("nemo_curator.classifiers")
        ()
        """
        return self.defaults_1x if is_nemo_1x(nemo_module) else self.defaults

    def models(self) -> tuple[tuple[str, str], ...]:
        """``(keyword, hub id)`` of each hub model the class reads, its own first."""
        if self.model_keyword is None:
            return ()
        return ((self.model_keyword, str(self.hub_model)), *self.more_models)


@dataclass(frozen=True)
class ModulePath:
    """A NeMo Curator module: the curator-dask module holding most of what users import
    from it, and those names (each resolved through ``mapping.NAMES``)."""

    ours: str | None
    names: tuple[str, ...] = ()
    note: str = ""
