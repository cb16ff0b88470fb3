"""Arrow tables as JSON lines, every value as it was read.

The JSONL writers encode rows here rather than with ``pandas.DataFrame.to_json``, which
rounds floats to 10 significant digits and writes nullable integers as floats. Here:

- integers keep every digit (``2**53 + 1``, ``-2**63``, ``2**64 - 1``);
- floats are written in their shortest form that reads back to the same double, and
  NaN and infinities as ``NaN``, ``Infinity`` and ``-Infinity`` (how Python's ``json``
  module writes them, and what the JSONL reader reads back);
- nulls are ``null``, structs and maps are objects, lists are arrays;
- timestamps, dates and times are ISO 8601 strings, durations are strings such as
  ``"1 day, 0:00:01"``, decimals are strings of their exact digits (JSON has none of these
  types: they read back as strings);
- text is written as UTF-8 (not escaped to ``\\uXXXX``).

Examples
--------
>>> table = pa.table({"n": pa.array([2**53 + 1, None]), "x": [0.1, float("nan")]})
>>> b"".join(json_lines(table)).decode()
'{"n":9007199254740993,"x":0.1}\\n{"n":null,"x":NaN}\\n'
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import Iterator

import pyarrow as pa

from curator_dask.errors import CuratorError

__all__ = ["ROWS_PER_CHUNK", "JsonValueError", "json_lines"]

#: Rows encoded at a time: the Python objects of one chunk are all that is held.
ROWS_PER_CHUNK = 8192

class JsonValueError(CuratorError, TypeError):
    """A value JSON cannot hold (bytes that are not UTF-8)."""


def _json_default(value):
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, datetime.timedelta)):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise JsonValueError(
                "a bytes value that is not UTF-8 cannot be written as JSON; write Parquet, "
                "or decode the column to text first") from None
    if hasattr(value, "isoformat"):  # pandas Timestamp (nanoseconds)
        return value.isoformat()
    raise JsonValueError(f"cannot write a {type(value).__name__} value as JSON: {value!r}")


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=True,
                            check_circular=False, default=_json_default)


def json_lines(table: pa.Table) -> Iterator[bytes]:
    """The rows of ``table`` as UTF-8 JSON lines, each ending in a newline, in chunks of
    up to :data:`ROWS_PER_CHUNK` rows."""
    encode = _ENCODER.encode
    for batch in table.to_batches(max_chunksize=ROWS_PER_CHUNK):
        rows = batch.to_pylist(maps_as_pydicts="strict")
        if rows:
            yield ("\n".join(map(encode, rows)) + "\n").encode("utf-8")
