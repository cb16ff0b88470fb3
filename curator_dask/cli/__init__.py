"""The ``curator-dask`` command."""
