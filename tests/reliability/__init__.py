"""The data-safety catalog: nothing lost, nothing duplicated, nothing destroyed.

A package (unlike ``tests/``) so that its ``conftest.py`` is imported as
``reliability.conftest`` and does not take the place of ``tests/conftest.py``, which the
other test modules import as ``conftest``.
"""
