"""Every value a user passes through comes out as it went in: read -> write -> read gives
the same table, types and nulls included, for JSONL and Parquet in and out, through
``DocumentDataset`` and through pipelines on a real cluster.

Schemas and rows are generated: integers of every width up to the 64-bit extremes,
floats (NaN and infinities in Parquet), booleans, strings (astral plane, combining
marks, NUL, empty), nested lists and structs (null rows, null fields, empty lists),
maps, timestamps, dates and decimals (Parquet), each with nulls. JSON holds only some
of these: the JSON cases generate what JSON can represent.
"""

from __future__ import annotations

import datetime
import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask import DocumentDataset, processing_stage
from curator_dask.executors import BatchExecutor, LocalExecutor, StreamingExecutor
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, JsonlWriter, ParquetReader, ParquetWriter
from reliability.conftest import assert_exactly_once, snapshot_bytes

INTEGERS = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}
UNSIGNED = {pa.uint8(): 8, pa.uint16(): 16, pa.uint32(): 32, pa.uint64(): 64}
# Text a reader must not touch: astral plane, combining marks, NUL, quotes, escapes.
TEXT = st.lists(st.text(st.characters(codec="utf-8"), max_size=4) | st.sampled_from(
    ["", "\x00", "\U0001F600", "e\u0301", '"', "\\", "\n", "\u2028", "2021-05-01"]),
    max_size=4).map("".join)


def leaf_types(json_only: bool):
    leaves = [pa.int64(), pa.float64(), pa.bool_(), pa.string()]
    if not json_only:
        leaves += [*INTEGERS, *UNSIGNED, pa.large_string(), pa.float32(),
                   pa.timestamp("us"), pa.timestamp("ns", tz="UTC"), pa.date32(),
                   pa.decimal128(20, 4), pa.binary()]
    return st.sampled_from(leaves)


def arrow_types(json_only: bool):
    def nest(children):
        made = [st.builds(pa.list_, children),
                st.lists(st.tuples(st.sampled_from("abcdef"), children), min_size=1,
                         max_size=3, unique_by=lambda f: f[0]).map(pa.struct)]
        if not json_only:
            made.append(st.builds(lambda v: pa.map_(pa.string(), v), children))
        return st.one_of(*made)

    return st.recursive(leaf_types(json_only), nest, max_leaves=4)


def values_of(arrow_type: pa.DataType, json_only: bool):
    """Values of ``arrow_type`` as pyarrow takes them, nulls included."""
    if arrow_type in INTEGERS or arrow_type in UNSIGNED:
        bits = INTEGERS.get(arrow_type) or UNSIGNED[arrow_type]
        lo, hi = ((-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if arrow_type in INTEGERS
                  else (0, (1 << bits) - 1))
        value = st.integers(lo, hi) | st.sampled_from([lo, hi, 2**53 + 1 if hi > 2**53 else hi])
    elif pa.types.is_floating(arrow_type):
        width = 32 if arrow_type == pa.float32() else 64
        value = st.floats(width=width, allow_nan=not json_only, allow_infinity=not json_only)
    elif pa.types.is_boolean(arrow_type):
        value = st.booleans()
    elif pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        value = TEXT
    elif pa.types.is_binary(arrow_type):
        value = st.binary(max_size=8)
    elif pa.types.is_timestamp(arrow_type):
        value = st.datetimes(datetime.datetime(1900, 1, 1), datetime.datetime(2200, 1, 1),
                             timezones=st.just(datetime.UTC)
                             if arrow_type.tz else st.none())
    elif pa.types.is_date32(arrow_type):
        value = st.dates()
    elif pa.types.is_decimal(arrow_type):
        value = st.decimals(min_value=-10**15, max_value=10**15, places=4, allow_nan=False)
    elif pa.types.is_list(arrow_type):
        value = st.lists(values_of(arrow_type.value_type, json_only), max_size=3)
    elif pa.types.is_map(arrow_type):
        value = st.dictionaries(TEXT, values_of(arrow_type.item_type, json_only),
                                max_size=3).map(lambda d: list(d.items()))
    elif pa.types.is_struct(arrow_type):
        value = st.fixed_dictionaries({arrow_type.field(i).name:
                                       values_of(arrow_type.field(i).type, json_only)
                                       for i in range(arrow_type.num_fields)})
    else:
        raise AssertionError(arrow_type)
    return st.none() | value


@st.composite
def tables(draw, json_only: bool = False, max_rows: int = 12) -> pa.Table:
    """A table of unique int64 ids, a text column and up to 4 generated columns."""
    names = draw(st.lists(st.sampled_from(["n", "score", "meta", "tags", "flag", "when"]),
                          max_size=4, unique=True))
    types = {name: draw(arrow_types(json_only)) for name in names}
    n = draw(st.integers(1, max_rows))
    columns = {"id": pa.array(range(n), pa.int64()),
               "text": pa.array(draw(st.lists(TEXT, min_size=n, max_size=n)), pa.string())}
    for name, arrow_type in types.items():
        rows = draw(st.lists(values_of(arrow_type, json_only), min_size=n, max_size=n))
        columns[name] = pa.array(rows, arrow_type)
    return pa.table(columns)


# -- comparing ------------------------------------------------------------------------

def same(a, b) -> bool:
    """Python values equal, types too (an integer is not a float), NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def assert_same_rows(expected: list[dict], got: list[dict]) -> None:
    assert len(expected) == len(got)
    for want, row in zip(expected, got, strict=True):
        assert same(want, row), f"{want!r}\n!=\n{row!r}"


def assert_same_table(expected: pa.Table, got: pa.Table) -> None:
    got = got.replace_schema_metadata(None)
    assert got.schema == expected.schema, f"{expected.schema}\n!=\n{got.schema}"
    assert_same_rows(expected.to_pylist(), got.to_pylist())


# -- files ------------------------------------------------------------------------------

def write_input(directory, table: pa.Table, fmt: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        pq.write_table(table, directory / "in.parquet")
    else:  # as Python's json writes JSON (NaN included), one object per line
        rows = table.to_pylist()
        (directory / "in.jsonl").write_text(
            "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows),
            encoding="utf-8")


def read_output(directory, fmt: str):
    """The output: an Arrow table for Parquet, the parsed rows for JSONL."""
    parts = sorted(p for p in directory.iterdir() if p.name.startswith("part-"))
    if fmt == "parquet":
        return pa.concat_tables([pq.read_table(p) for p in parts])
    # Lines end at "\n" only: U+2028 and the like are text inside a line.
    return [json.loads(line) for p in parts
            for line in p.read_bytes().decode("utf-8").split("\n") if line]


def json_rows(table: pa.Table) -> list[dict]:
    """The rows as JSON holds them (what a JSONL output must parse back to)."""
    def plain(value):
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    return [plain(row) for row in table.to_pylist()]


def read(directory, fmt: str) -> DocumentDataset:
    reader = DocumentDataset.read_parquet if fmt == "parquet" else DocumentDataset.read_jsonl
    return reader(str(directory))


# -- DocumentDataset ----------------------------------------------------------------------

CASES = [("parquet", "parquet"), ("jsonl", "jsonl"), ("jsonl", "parquet"), ("parquet", "jsonl")]


@pytest.mark.slow
@pytest.mark.parametrize("source, target", CASES)
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_read_write_read_gives_the_same_table(tmp_path_factory, source, target, data):
    # JSON holds only JSON's types: a case that writes or reads JSON generates only those.
    table = data.draw(tables(json_only="jsonl" in (source, target)))
    root = tmp_path_factory.mktemp("round")
    write_input(root / "in", table, source)
    before = snapshot_bytes(root / "in")
    ds = read(root / "in", source)
    written = ds.to_parquet(str(root / "out")) if target == "parquet" \
        else ds.to_jsonl(str(root / "out"))
    assert written.rows == table.num_rows
    out = read_output(root / "out", target)
    if target == "parquet" and source == "parquet":
        assert_same_table(table, out)
    elif target == "parquet":
        assert_same_rows(json_rows(table), out.to_pylist())
    else:
        assert_same_rows(json_rows(table), out)
    # And it reads back into a dataset with the same values.
    again = read(root / "out", target).df.compute()
    assert again["id"].tolist() == list(range(table.num_rows))
    assert snapshot_bytes(root / "in") == before


def test_the_examples_of_integers_and_structs_with_nulls(tmp_path):
    rows = [{"id": 0, "text": "a", "n": 2**53 + 1}, {"id": 1, "text": "b", "n": None},
            {"id": 2, "text": "c", "n": 5}]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    DocumentDataset.read_jsonl(str(tmp_path / "in")).to_jsonl(str(tmp_path / "out"))
    assert read_output(tmp_path / "out", "jsonl") == rows  # 5 stays 5, not 5.0
    struct = pa.struct([("n", pa.int64())])
    table = pa.table({"text": ["a", "b"], "s": pa.array([{"n": 2**63 - 1}, None], struct)})
    (tmp_path / "pin").mkdir()
    pq.write_table(table, tmp_path / "pin" / "a.parquet")
    DocumentDataset.read_parquet(str(tmp_path / "pin")).to_parquet(str(tmp_path / "pout"))
    assert_same_table(table, read_output(tmp_path / "pout", "parquet"))


def test_dictionary_encoded_text_is_read_as_text(tmp_path):
    table = pa.table({"text": pa.array(["a", "b", "a", None]).dictionary_encode(),
                      "id": pa.array([0, 1, 2, 3])})
    (tmp_path / "in").mkdir()
    pq.write_table(table, tmp_path / "in" / "a.parquet")
    ds = DocumentDataset.read_parquet(str(tmp_path / "in"))
    ds.to_parquet(str(tmp_path / "out"))
    out = read_output(tmp_path / "out", "parquet")
    assert out.column("text").type == pa.string()
    assert out.column("text").to_pylist() == ["a", "b", "a", None]


# -- pipelines on a real cluster -----------------------------------------------------------

@processing_stage(name="pass_through")
def pass_through(df):
    return df


EXECUTORS = {"streaming": lambda client: StreamingExecutor(client=client, progress=False),
             "batch": lambda client: BatchExecutor(client=client, progress=False),
             "local": lambda client: LocalExecutor(progress=False)}


@pytest.mark.slow
@pytest.mark.parametrize("executor", list(EXECUTORS))
@pytest.mark.parametrize("source, target", CASES)
@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_a_pipeline_with_a_pass_through_stage_keeps_every_value(tmp_path_factory, client,
                                                               executor, source, target,
                                                               data):
    table = data.draw(tables(json_only="jsonl" in (source, target), max_rows=30))
    root = tmp_path_factory.mktemp("pipeline")
    write_input(root / "in", table, source)
    before = snapshot_bytes(root / "in")
    reader = (ParquetReader if source == "parquet" else JsonlReader)(
        str(root / "in"), blocksize=256)
    writer = (ParquetWriter if target == "parquet" else JsonlWriter)(str(root / "out"))
    result = (Pipeline("round-trip").add_stage(reader).add_stage(pass_through)
              .add_stage(writer).run(EXECUTORS[executor](client)))
    out = read_output(root / "out", target)
    got = out.to_pylist() if target == "parquet" else out
    got = sorted(got, key=lambda row: row["id"])
    assert_exactly_once(range(table.num_rows), [row["id"] for row in got], result.dropped)
    if source == target == "parquet":
        assert_same_table(table, pa.Table.from_pylist(got, schema=out.schema))
    else:
        assert_same_rows(json_rows(table), got)
    assert snapshot_bytes(root / "in") == before
