"""NeMo Curator scripts kept as data for the migration tests: never collected (they import
nemo_curator, and some start clusters at import)."""

collect_ignore_glob = ["*.py"]
