"""PII: find personal information in documents and redact it, hash it or drop the document.

Usage::

    from curator_dask.stages.pii import PiiRedactor
    ds = PiiRedactor(action="replace")(ds)
    ds.counters()   # {"pii_redactor.EMAIL_ADDRESS": ..., ...}

Layout: :mod:`.patterns` (the patterned entity types, searched over whole partitions, with
their checksums), :mod:`.presidio` (model-found entities through Presidio and a local
spaCy pipeline), :mod:`.redactor` (the ``PiiRedactor`` stage and its actions).
"""

from curator_dask.stages.pii.patterns import PATTERN_ENTITIES
from curator_dask.stages.pii.presidio import PRESIDIO_ENTITIES
from curator_dask.stages.pii.redactor import ACTIONS, PiiRedactor

__all__ = ["ACTIONS", "PATTERN_ENTITIES", "PRESIDIO_ENTITIES", "PiiRedactor"]
